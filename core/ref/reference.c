/* The reference dispatch (reference.h): shape checks through the catalog, the
 * per-family exact references, then the overflow and gradual-underflow rules
 * every family shares. */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

#include "numval/backend.h"
#include "ref_internal.h"

/* Whether the exact value v = hi + lo overflows dt under round to nearest: |v|
 * beyond T = max_finite + ulp(max_finite) / 2 (IEEE 754-2019 §7.4), or at T when
 * the dtype's own tie rule rounds T away from max_finite (IEEE formats: to
 * 2^(emax+1), which overflows; fp8 e4m3fn ties to its even max 448, OFP8 §4).
 * hi = RN(v) and T is a double, so hi and the sign of lo decide. fp64: refmath
 * marks an overflowing value as DBL_MAX with lo >= 2^970 (T is not a double). */
/* T of dt (0 where overflows does not use it), computed once per tensor. */
static double overflow_threshold(nv_dtype dt, const nv_dtype_info *di)
{
    if (!di || !di->is_float || dt == NV_DT_FP64)
        return 0;
    return di->max_finite + nv_dtype_ulp(dt, di->max_finite) / 2;
}

/* di = nv_dtype_get(dt), t = overflow_threshold(dt, di). */
static bool overflows(nv_dtype dt, const nv_dtype_info *di, double t, double hi, double lo)
{
    if (!di || !di->is_float || !isfinite(hi))
        return false;
    bool outward = lo != 0 && signbit(lo) == signbit(hi);
    if (dt == NV_DT_FP64)
        return fabs(hi) == DBL_MAX && outward && fabs(lo) >= 0x1p970;
    if (fabs(hi) != t)
        return fabs(hi) > t;
    if (lo != 0)
        return outward;
    return !isfinite(nv_dtype_round(dt, hi, &NV_ROUND_DEFAULT, 0));
}

/* An infinity or NaN in a format that has none becomes what the format's
 * conversion rule gives (e4m3fn: NaN for +-Inf; MX formats: +-max_finite for
 * +-Inf, and what dtype.c encodes for NaN). An exact value beyond the overflow
 * threshold becomes the value a correctly rounding device returns for it: +-Inf, or NaN for fp8
 * e4m3fn (OFP8 §4: no infinities, overflow is NaN when not saturating), or +-max_finite for the MX
 * element formats, which always saturate (MX v1.0 §5.3). Comparison then asks
 * the device for exactly that (infinities must match in sign). */
/* Whether overflow_to_dtype leaves all of a chunk's hi as they are (each
 * finite and below the threshold: no overflow whatever lo is, nothing
 * unrepresentable); then it clears the chunk's sticky lo (|lo| <= 2^-1074,
 * -0 included) as the per-element steps below do. Both loops are free of
 * branches, so that gcc vectorises them: a tanh or exp case's far pairs
 * carry such a lo in billions of elements. */
#define SCAN_CHUNK 64
static bool chunk_below(const double *h, double *l, double thr)
{
    int keep = 1;
    for (int k = 0; k < SCAN_CHUNK; k++)
        keep &= fabs(h[k]) < thr;
    if (!keep)
        return false;
    if (l)
        for (int k = 0; k < SCAN_CHUNK; k++)
            l[k] = fabs(l[k]) <= 0x1p-1074 ? 0 : l[k];
    return true;
}

static void overflow_to_dtype(nv_tensor *hi, nv_tensor *lo)
{
    bool dhi = nv_tensor_dense(hi), dlo = lo && nv_tensor_dense(lo);
    const nv_dtype_info *di = nv_dtype_get(hi->dtype);
    double thr = overflow_threshold(hi->dtype, di);
    /* Dense fp32-like outputs: skip, without the per-element steps below, the
     * elements whose hi they leave as it is (finite, below the threshold) and
     * whose lo is +0 or above the sticky bit's 2^-1074 (a -0 lo becomes +0
     * below); whole chunks of such hi with their sticky lo cleared. */
    bool scan = dhi && (!lo || dlo) && thr > 0;
    const double *hd = hi->data + hi->offset;
    double *ld = lo ? lo->data + lo->offset : NULL;
    /* What an overflowing element becomes, by sign (exhaustive and sweep cases
     * hold billions of them). */
    double over[2] = {INFINITY, -INFINITY};
    if (hi->dtype != NV_DT_FP64)
        for (int s = 0; s < 2; s++)
            over[s] = nv_dtype_round(hi->dtype, s ? -DBL_MAX : DBL_MAX, &NV_ROUND_DEFAULT, 0);
    for (int64_t i = 0; i < hi->numel; i++) {
        if (scan && i % SCAN_CHUNK == 0 && hi->numel - i >= SCAN_CHUNK &&
            chunk_below(hd + i, ld ? ld + i : NULL, thr)) {
            i += SCAN_CHUNK - 1;
            continue;
        }
        if (scan && fabs(hd[i]) < thr &&
            (!ld || !(fabs(ld[i]) <= 0x1p-1074) || (ld[i] == 0 && !signbit(ld[i]))))
            continue; /* NaN fails fabs(h) < thr */
        if (scan && fabs(hd[i]) > thr && fabs(hd[i]) <= DBL_MAX) {
            /* finite beyond T: overflows whatever lo is (the steps below) */
            hi->data[hi->offset + i] = over[signbit(hd[i]) != 0];
            if (lo)
                lo->data[lo->offset + i] = 0;
            continue;
        }
        int64_t o = nv_tensor_offset_lin(hi, dhi, i);
        int64_t ol = lo ? nv_tensor_offset_lin(lo, dlo, i) : 0;
        double h = hi->data[o], l = lo ? lo->data[ol] : 0;
        /* A low part of one fp64 subnormal ulp is only a sticky bit (the true
         * remainder of an fp64 subnormal result is below 2^-1075, which fp64
         * cannot hold); as a value it would make a correctly rounded subnormal
         * result look 1 ulp off, so it is dropped (error <= 0.5 ulp of 2^-1074
         * in the reference, only there). */
        if (lo && fabs(l) <= 0x1p-1074)
            lo->data[ol] = l = 0;
        bool unrepresentable =
            di && di->is_float && ((isinf(h) && !di->has_inf) || (isnan(h) && !di->has_nan));
        if (unrepresentable) { /* the dtype's own rule (dtype.h: OFP8 §4, MX §5.3) */
            hi->data[o] = nv_dtype_round(hi->dtype, h, &NV_ROUND_DEFAULT, 0);
            if (lo)
                lo->data[ol] = 0;
            continue;
        }
        if (!overflows(hi->dtype, di, thr, h, l))
            continue;
        hi->data[o] = over[signbit(h) != 0];
        if (lo)
            lo->data[ol] = 0;
    }
}

/* Gradual underflow: each rounding in the accumulation dtype may add an absolute
 * error eta = min_subnormal / 2 beyond the relative one (Higham §2.1, model
 * (2.8)). eta / u is that dtype's min_normal, so adding min_normal to abs_sum
 * makes the bound c g(n) u abs_sum cover g(n) such errors. The accumulation
 * dtype is the one the default tolerance assumes (tolerances.c): the matmul's
 * acc dtype, else fp64 for fp64 outputs and fp32 otherwise. Negligible unless
 * the terms themselves are near the subnormal range. */
static void add_underflow_term(const nv_op_def *op, const nv_op_attrs *a, const nv_ref_out *o,
                               nv_dtype out)
{
    nv_dtype acc = op->kind == NV_OPK_MATMUL ? a->acc_dtype
                   : out == NV_DT_FP64       ? NV_DT_FP64
                                             : NV_DT_FP32;
    double mn = nv_dtype_get(acc)->min_normal;
    for (int64_t i = 0; i < o->abs_sum->numel; i++) {
        int64_t off = nv_tensor_offset_linear(o->abs_sum, i);
        int64_t oe = o->abs_exp ? nv_tensor_offset_linear(o->abs_exp, i) : 0;
        if (!o->abs_exp || o->abs_exp->data[oe] == 0)
            o->abs_sum->data[off] += mn;
        /* else: beyond fp64's range, where min_normal is far below its last bit */
    }
}

void nvo_put_abs(const nv_ref_out *o, int64_t off_abs, int64_t off_exp, nv_mag v)
{
    if (!o->abs_sum)
        return;
    double d = nv_mag_to_d(v);
    if (isfinite(d) || !isfinite(v.m) || !o->abs_exp) {
        o->abs_sum->data[off_abs] = d;
        if (o->abs_exp)
            o->abs_exp->data[off_exp] = 0;
        return;
    }
    o->abs_sum->data[off_abs] = v.m;
    o->abs_exp->data[off_exp] = (double)v.e;
}

void nvo_put_peak(const nv_ref_out *o, int64_t off, nv_mag v)
{
    if (o->peak)
        o->peak->data[off] = nv_mag_to_d(v);
}

static bool same_shape(const nv_tensor *t, int nd, const int64_t *shape)
{
    return t->ndim == nd && memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd) == 0;
}

/* The data-movement ops: moved input values, exact (lo 0, abs_sum |value|). */
static int ref_layout(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                      const nv_tensor *const *in, const nv_ref_out *o)
{
    nv_tensor *hi = o->hi;
    double *v = malloc((size_t)(hi->numel > 0 ? hi->numel : 1) * sizeof *v);
    if (!v)
        return NV_E_NOMEM;
    char err[160];
    int r = nv_op_layout_eval(op, a, n_in, in, v, err, sizeof err);
    for (int64_t i = 0; r == NV_OK && i < hi->numel; i++) {
        hi->data[nv_tensor_offset_linear(hi, i)] = v[i];
        if (o->lo)
            o->lo->data[nv_tensor_offset_linear(o->lo, i)] = 0;
        if (o->abs_sum)
            o->abs_sum->data[nv_tensor_offset_linear(o->abs_sum, i)] = fabs(v[i]);
        if (o->abs_exp)
            o->abs_exp->data[nv_tensor_offset_linear(o->abs_exp, i)] = 0;
        if (o->peak)
            o->peak->data[nv_tensor_offset_linear(o->peak, i)] = 0;
    }
    free(v);
    return r;
}

int nv_op_reference_ex(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                       const nv_tensor *const *in, const nv_ref_out *o)
{
    assert(n_in >= 0);
    int id = nvo_op_id(op);
    if (id < 0 || !a || !o || !o->hi)
        return NV_E_INVALID;
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    int r = nv_op_infer(op, a, n_in, in, &nd, shape, err, sizeof err);
    if (r < 0)
        return r;
    const nv_tensor *outs[5] = {o->hi, o->lo, o->abs_sum, o->abs_exp, o->peak};
    for (int k = 0; k < 5; k++)
        if (outs[k] && !same_shape(outs[k], nd, shape))
            return NV_E_SHAPE;
    bool accumulates = nv_op_accumulates(op);
    switch (op->kind) {
    case NV_OPK_REDUCE:
        r = nvo_ref_reduce(id, a, n_in, in, o);
        break;
    case NV_OPK_MATMUL:
        r = nvo_ref_matmul(a, n_in, in, o);
        break;
    case NV_OPK_LAYOUT:
        r = ref_layout(op, a, n_in, in, o);
        break;
    case NV_OPK_CONV:
        r = nvo_ref_conv(id, a, in, o);
        break;
    case NV_OPK_SELECT: /* int32 indices: nothing to round, nothing accumulated */
        return nvo_ref_select(id, a, in, o);
    case NV_OPK_ROTARY:
        r = nvo_ref_rotary(a, in, o);
        break;
    default:
        r = nvo_ref_elementwise(id, a, n_in, in, o->hi, o->lo, o->abs_sum);
        if (r == 0 && o->abs_exp) {
            bool d = nv_tensor_dense(o->abs_exp);
            for (int64_t i = 0; i < o->hi->numel; i++)
                o->abs_exp->data[nv_tensor_offset_lin(o->abs_exp, d, i)] = 0;
        }
        if (r == 0 && o->peak) {
            bool d = nv_tensor_dense(o->peak);
            for (int64_t i = 0; i < o->hi->numel; i++)
                o->peak->data[nv_tensor_offset_lin(o->peak, d, i)] = 0;
        }
        break;
    }
    if (r == 0)
        overflow_to_dtype(o->hi, o->lo);
    if (r == 0 && o->abs_sum && accumulates)
        add_underflow_term(op, a, o, o->hi->dtype);
    return r;
}

int nv_op_reference_lines(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                          nv_ref_read_fn read, void *ud, int64_t chunk, const nv_ref_out *o)
{
    if (!nv_op_reference_streams(op) || !a || !o || !o->hi || !x || !read || chunk < 1)
        return NV_E_INVALID;
    int nd;
    int64_t shape[NV_MAX_DIMS];
    char err[256];
    int r = nv_op_infer(op, a, 1, &x, &nd, shape, err, sizeof err);
    if (r < 0)
        return r;
    const nv_tensor *outs[5] = {o->hi, o->lo, o->abs_sum, o->abs_exp, o->peak};
    for (int k = 0; k < 5; k++)
        if (outs[k] && !same_shape(outs[k], nd, shape))
            return NV_E_SHAPE;
    /* the steps of nv_op_reference_ex after its family's reference */
    r = nvo_ref_reduce_lines(op, a, x, read, ud, chunk, o);
    if (r == 0)
        overflow_to_dtype(o->hi, o->lo);
    if (r == 0 && o->abs_sum && nv_op_accumulates(op))
        add_underflow_term(op, a, o, o->hi->dtype);
    return r;
}

void nv_ref_to_dtype(nv_tensor *hi, nv_tensor *lo, nv_dtype dt)
{
    hi->dtype = dt;
    overflow_to_dtype(hi, lo);
}

int nv_op_reference(const nv_op_def *op, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                    nv_tensor *out_hi, nv_tensor *out_lo, nv_tensor *abs_sum)
{
    nv_ref_out o = {.hi = out_hi, .lo = out_lo, .abs_sum = abs_sum};
    return nv_op_reference_ex(op, a, n_in, in, &o);
}
