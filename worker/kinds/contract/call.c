/* Device calls and encodings shared by the contract probes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract_internal.h"
#include "core/ref/refmath.h"

bool ct_refused(int r)
{
    return r == NV_E_DTYPE || r == NV_E_UNSUPPORTED || r == NV_E_INVALID || r == NV_E_SHAPE;
}

uint64_t ct_enc(nv_dtype dt, double x)
{
    return nv_dtype_encode(dt, x, &NV_ROUND_DEFAULT, 0);
}

double ct_dec(nv_dtype dt, uint64_t bits)
{
    return nv_dtype_decode(dt, bits, false);
}

const char *ct_rounding_name(nv_rounding r)
{
    static const char *const names[] = {"rne", "rtz", "up", "down", "stochastic"};
    return (unsigned)r < 5 ? names[r] : "?";
}

json_t *ct_num_json(double x)
{
    if (isnan(x))
        return json_string("nan");
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    return json_real(x);
}

json_t *ct_real_json(double x)
{
    char buf[64];
    if (isnan(x))
        return json_string("nan");
    if (isinf(x))
        return json_string(x > 0 ? "inf" : "-inf");
    snprintf(buf, sizeof buf, "%a", x);
    return json_string(buf);
}

json_t *ct_bits_json(nv_dtype dt, uint64_t bits)
{
    const nv_dtype_info *i = nv_dtype_get(dt);
    char buf[40];
    snprintf(buf, sizeof buf, "0x%0*llx", (i->bits + 3) / 4, (unsigned long long)bits);
    return json_pack("{s:s, s:s, s:o}", "dtype", i->name, "bits", buf, "value",
                     ct_real_json(ct_dec(dt, bits)));
}

static void view(nv_tensor_view *v, nv_dtype dt, int64_t rows, int64_t cols, void *data)
{
    memset(v, 0, sizeof *v);
    v->dtype = (int32_t)dt;
    v->data = data;
    if (rows == 0) {
        v->ndim = 1;
        v->shape[0] = cols;
        v->strides[0] = 1;
    } else {
        v->ndim = 2;
        v->shape[0] = rows;
        v->shape[1] = cols;
        v->strides[0] = cols;
        v->strides[1] = 1;
    }
}

/* The offset of logical element k of a view the backend allocated. */
static int64_t offset_of(const nv_tensor_view *v, int64_t k)
{
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (k % v->shape[d]) * v->strides[d];
        k /= v->shape[d];
    }
    return off;
}

int ct_call(ct_dev *d, const char *op, const char *attrs, int n_in, const nv_dtype *in_dt,
            const uint64_t *const *in, int64_t rows, int64_t cols, nv_dtype out_dt, int64_t out_n,
            uint64_t *out)
{
    int64_t shapes[8];
    for (int k = 0; k < n_in && k < 4; k++)
        shapes[2 * k] = rows, shapes[2 * k + 1] = cols;
    return ct_call_shaped(d, op, attrs, n_in, in_dt, in, shapes, out_dt, out_n, out);
}

int ct_call_shaped(ct_dev *d, const char *op, const char *attrs, int n_in, const nv_dtype *in_dt,
                   const uint64_t *const *in, const int64_t *shapes, nv_dtype out_dt,
                   int64_t out_n, uint64_t *out)
{
    nv_tensor_view views[4];
    void *bufs[4] = {0};
    if (n_in > 4)
        return NV_E_INVALID;
    int r = NV_OK;
    for (int k = 0; k < n_in; k++) {
        const nv_dtype_info *info = nv_dtype_get(in_dt[k]);
        int64_t rows = shapes[2 * k], cols = shapes[2 * k + 1];
        int64_t n = (rows ? rows : 1) * cols;
        bufs[k] = malloc((size_t)(n > 0 ? n : 1) * (size_t)info->storage_bytes);
        if (!bufs[k]) {
            r = NV_E_NOMEM;
            snprintf(d->err, sizeof d->err, "out of memory");
            goto out;
        }
        for (int64_t i = 0; i < n; i++)
            nv_dtype_store_bits(in_dt[k], bufs[k], i, in[k][i]);
        view(&views[k], in_dt[k], rows, cols, bufs[k]);
    }
    nv_tensor_view o;
    memset(&o, 0, sizeof o);
    nv_op_call call = {.op = op,
                       .attrs_json = attrs ? attrs : "{}",
                       .out_dtype = (int32_t)out_dt,
                       .n_inputs = n_in,
                       .inputs = views,
                       .n_outputs = 1,
                       .outputs = &o};
    d->err[0] = 0;
    r = d->t->forward(d->ctx, &call, d->err, sizeof d->err);
    if (r != NV_OK)
        goto out;
    int64_t got = 1;
    for (int k = 0; k < o.ndim; k++)
        got *= o.shape[k];
    if (o.dtype != (int32_t)out_dt || got != out_n || !o.data) {
        snprintf(d->err, sizeof d->err,
                 "op '%s' returned %lld elements of dtype code %d, asked for %lld of '%s'", op,
                 (long long)got, (int)o.dtype, (long long)out_n, nv_dtype_name(out_dt));
        r = NV_E_DEVICE;
    } else {
        for (int64_t i = 0; i < out_n; i++)
            out[i] = nv_dtype_load_bits(out_dt, o.data, offset_of(&o, i));
    }
    if (d->t->release_tensor)
        d->t->release_tensor(d->ctx, &o);
out:
    for (int k = 0; k < n_in; k++)
        free(bufs[k]);
    return r;
}

static inline void two_sum(double a, double b, double *s, double *e)
{
    double x = a + b;
    double bv = x - a;
    double av = x - bv;
    *s = x;
    *e = (a - av) + (b - bv);
}

double ct_add(nv_dtype dt, double a, double b, const nv_round_mode *m)
{
    double s, e;
    two_sum(a, b, &s, &e);
    if (s == 0 && e == 0) {
        /* IEEE 754-2019 §6.3: an exact zero sum is +0 except when rounding down
         * or when both operands are -0. */
        if (a == 0 && b == 0 && signbit(a) && signbit(b))
            return -0.0;
        return m->rounding == NV_ROUND_DOWN ? -0.0 : 0.0;
    }
    if (!isfinite(s) || e == 0)
        return nv_dtype_round(dt, s, m, 0);
    if (dt == NV_DT_FP64) {
        double r = nv_ref_round_pair(s, e, NV_DT_FP64, m->rounding);
        return nv_dtype_round(dt, r, m, 0);
    }
    /* Round to odd (Boldo & Melquiond, IEEE TC 2008): of s and its neighbour
     * toward e, the one with an odd last bit lies strictly inside the same gap
     * between dt's boundaries (dt has at most 51 bits) and rounds like s + e. */
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    double odd = (u & 1) ? s : nextafter(s, e > 0 ? INFINITY : -INFINITY);
    return nv_dtype_round(dt, odd, m, 0);
}
