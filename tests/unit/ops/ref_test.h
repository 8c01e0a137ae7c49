/* Helpers shared by the reference tests: run an op through the catalog and
 * compare a double-double against an MPFR value. */
#ifndef NUMVAL_TEST_OPS_REF_H
#define NUMVAL_TEST_OPS_REF_H

#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#include "numval/backend.h"
#include "tests/unit/tap.h"
#include "core/ops/catalog.h"
#include "core/ref/reference.h"

#define OP 400 /* oracle precision in bits */

typedef struct res {
    nv_tensor *hi, *lo, *abs;
} res;

/* The op's reference result into *r: 0, or the error (r then holds no
 * tensors, so res_free is safe either way). */
static inline int run(const char *op, const char *attrs, int n, nv_tensor **in, nv_dtype out_dt,
                      res *r)
{
    *r = (res){NULL, NULL, NULL};
    nv_op_attrs a;
    char *msg = NULL;
    json_t *j = attrs ? json_loads(attrs, 0, NULL) : NULL;
    int rc = nv_op_parse_attrs(nv_op_find(op), j, &a, &msg);
    json_decref(j);
    free(msg);
    if (rc < 0)
        return rc;
    int nd;
    int64_t sh[NV_MAX_DIMS];
    char err[256];
    rc = nv_op_infer(nv_op_find(op), &a, n, (const nv_tensor *const *)in, &nd, sh, err, sizeof err);
    if (rc < 0) {
        tap_diag("infer %s: %s", op, err);
        return rc;
    }
    r->hi = nv_tensor_new(out_dt, nd, sh);
    r->lo = nv_tensor_new(out_dt, nd, sh);
    r->abs = nv_tensor_new(out_dt, nd, sh);
    return nv_op_reference(nv_op_find(op), &a, n, (const nv_tensor *const *)in, r->hi, r->lo,
                           r->abs);
}

static inline void res_free(res *r)
{
    nv_tensor_free(r->hi);
    nv_tensor_free(r->lo);
    nv_tensor_free(r->abs);
}

static inline nv_tensor *vec(nv_dtype dt, int64_t n, const double *v)
{
    nv_tensor *t = nv_tensor_new(dt, 1, &n);
    memcpy(t->data, v, sizeof(double) * (size_t)n);
    return t;
}

static inline nv_tensor *mat(nv_dtype dt, int64_t r, int64_t c, const double *v)
{
    int64_t s[2] = {r, c};
    nv_tensor *t = nv_tensor_new(dt, 2, s);
    memcpy(t->data, v, sizeof(double) * (size_t)(r * c));
    return t;
}

/* |hi + lo - exact| <= 2^-e |exact| (or == 0 when exact is 0). A double-double
 * holds about 106 bits (lo is rounded to 53 bits below hi), so 2^-104 is the
 * tightest check that a correct pair always passes; looser exponents below are
 * the documented accuracy of the reference (ref_reduce.c). */
static inline bool close_to(double hi, double lo, mpfr_srcptr exact, int e)
{
    mpfr_t d;
    mpfr_init2(d, OP + 64);
    mpfr_set_d(d, hi, MPFR_RNDN);
    mpfr_add_d(d, d, lo, MPFR_RNDN);
    mpfr_sub(d, d, exact, MPFR_RNDN);
    mpfr_abs(d, d, MPFR_RNDN);
    mpfr_t b;
    mpfr_init2(b, OP);
    mpfr_abs(b, exact, MPFR_RNDN);
    mpfr_mul_2si(b, b, -e, MPFR_RNDN);
    bool ok = mpfr_cmp(d, b) <= 0;
    mpfr_clears(d, b, (mpfr_ptr)0);
    return ok;
}

#endif
