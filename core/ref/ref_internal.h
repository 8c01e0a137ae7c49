/* Internal interface of core/ref: the per-family references behind
 * nv_op_reference (reference.c), the line view of the reductions and the
 * exact-arithmetic helpers they share. Only files in core/ref include this. */
#ifndef NUMVAL_REF_INTERNAL_H
#define NUMVAL_REF_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpfr.h>

#include "core/ops/opmeta.h"
#include "ddsum.h"     /* nv_mag */
#include "reference.h" /* nv_ref_out */

/* References, one per op family (ref_elementwise.c, ref_reduce.c, ref_matmul.c);
 * same contract as nv_op_reference_ex (reference.h). The elementwise family has
 * no accumulation: abs_sum is |exact| and the caller fills peak. */
int nvo_ref_elementwise(int id, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                        nv_tensor *out_hi, nv_tensor *out_lo, nv_tensor *abs_sum);
int nvo_ref_reduce(int id, const nv_op_attrs *a, int n_in, const nv_tensor *const *in,
                   const nv_ref_out *o);
/* nv_op_reference_lines' per-line part (ref_reduce.c): every line of x read
 * through read, into o; nothing rounded to the output dtype yet. */
int nvo_ref_reduce_lines(const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *x,
                         nv_ref_read_fn read, void *ud, int64_t chunk, const nv_ref_out *o);
int nvo_ref_matmul(const nv_op_attrs *a, int n_in, const nv_tensor *const *in, const nv_ref_out *o);
/* conv2d and avg_pool2d (ref_conv.c, id their nvo_id), same contract. */
int nvo_ref_conv(int id, const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o);

/* argmax and sample (ref_select.c): hi the exact index per row, lo the index a
 * correct device may return instead (sample's boundary rule; hi for argmax),
 * abs_sum |hi|, abs_exp and peak 0. */
int nvo_ref_select(int id, const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o);

/* rotary_embedding (ref_rotary.c): hi + lo of the exact rotation, abs_sum the
 * default tolerance's weight, peak 0. */
int nvo_ref_rotary(const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o);

/* abs_sum (and abs_exp) at offset off of o's tensors, in the encoding of
 * nv_ref_out: the value itself while it fits fp64, else its mantissa with the
 * exponent in abs_exp (+Inf when there is no abs_exp tensor). No-op without
 * abs_sum. */
void nvo_put_abs(const nv_ref_out *o, int64_t off_abs, int64_t off_exp, nv_mag v);
/* peak at offset off (a double, +Inf beyond fp64's range). No-op without peak. */
void nvo_put_peak(const nv_ref_out *o, int64_t off, nv_mag v);

/* The lines of a reduction: every 1-D slice of x along axis ax, in row-major
 * order of the other dims (ref_reduce.c). */
typedef struct nvo_lines {
    const nv_tensor *x;
    int ax;
    int64_t len, n_lines;
} nvo_lines;

/* Multi-index of element k of line l. */
void nvo_line_index(const nvo_lines *L, int64_t l, int64_t k, int64_t *idx);
/* Copy line l into buf (len doubles). */
void nvo_line_gather(const nvo_lines *L, int64_t l, double *buf);
/* Offset in t of output element k of line l (removes: the axis is gone, k unused). */
int64_t nvo_line_out_off(const nvo_lines *L, const nv_tensor *t, bool removes, int64_t l,
                         int64_t k);

/* abs_sum / abs_exp and peak of output k of line l (nvo_put_abs, nvo_put_peak). */
void nvo_line_put_mags(const nv_ref_out *o, const nvo_lines *L, bool removes, int64_t l, int64_t k,
                       nv_mag abs, nv_mag peak);

/* logsumexp, softmax, log_softmax, cross_entropy, layer_norm, rms_norm over all
 * lines (ref_composed.c). */
int nvo_ref_composed(int id, const nv_op_attrs *a, const nvo_lines *L, const nv_tensor *const *in,
                     const nv_ref_out *o);

/* One line of a reduction read in pieces of at most chunk values (the streamed
 * reference of nv_op_reference_lines, or a line in memory): the line's passes
 * (norm2 and var make several) read [k0, k0 + m) in increasing k0. */
typedef struct nvo_rd {
    nv_ref_read_fn read;
    void *ud;
    int64_t line, len, chunk;
    double *buf; /* chunk doubles for read to fill (NULL where read never copies) */
} nvo_rd;

/* The piece of rd at k0: *ret_m = min(chunk, len - k0) values, NULL when read
 * fails. */
static inline const double *nvo_rd_piece(const nvo_rd *rd, int64_t k0, int64_t *ret_m)
{
    int64_t m = rd->len - k0 < rd->chunk ? rd->len - k0 : rd->chunk;
    *ret_m = m;
    return rd->read(rd->ud, rd->line, k0, m, rd->buf);
}

/* A reader of v[0..n) in one piece (line 0). */
void nvo_rd_array(nvo_rd *rd, const double *v, int64_t n);

/* The reductions that remove their axis, over one line (ref_reduce_line.c):
 * sum, mean, max, norm2 and var with a's correction. hi + lo, abs_sum and peak as
 * nv_ref_out defines them. Returns 0 or NV_E_INVALID (a read failed). */
int nvo_reduce_line(int id, const nv_op_attrs *a, const nvo_rd *rd, double *ret_hi,
                    double *ret_lo, nv_mag *ret_abs, nv_mag *ret_peak);

/* Exact sum of v[0..n) as hi + lo with |hi + lo - sum| <= 2^-105 |sum|, whatever
 * the cancellation and the magnitudes (nv_dd_sum, ddsum.h). *ret_abs (may be NULL)
 * gets sum |v_i| over the finite terms. Returns 0. */
int nvo_sum_exact(const double *v, int64_t n, double *ret_hi, double *ret_lo, nv_mag *ret_abs);

/* The exact mean sum v / n as hi + lo (within 2^-104 of it), without any
 * intermediate range limit; *ret_abs = sum |v_i| / n, *ret_peak = sum |v_i| (either
 * may be NULL). */
void nvo_mean_exact(const double *v, int64_t n, double *ret_hi, double *ret_lo, nv_mag *ret_abs,
                    nv_mag *ret_peak);
/* The same with the sum divided by d >= 1 instead of n (avg_pool2d's divisor,
 * which need not be the count of terms). */
void nvo_mean_exact_div(const double *v, int64_t n, int64_t d, double *ret_hi, double *ret_lo,
                        nv_mag *ret_abs, nv_mag *ret_peak);

/* S = sum x_i and Q = sum x_i^2 exactly in MPFR (ref_sum.c): S and Q must be
 * initialised; their precisions are set so that every operation is exact. */
void nvo_mp_moments(const double *x, int64_t n, mpfr_ptr S, mpfr_ptr Q);
/* The same over a line reader (two passes). Returns 0 or NV_E_INVALID. */
int nvo_mp_moments_rd(const nvo_rd *rd, mpfr_ptr S, mpfr_ptr Q);
/* nvo_mean_exact over a line reader. Returns 0 or NV_E_INVALID. */
int nvo_mean_exact_rd(const nvo_rd *rd, double *ret_hi, double *ret_lo, nv_mag *ret_abs,
                      nv_mag *ret_peak);
/* nvo_sum_exact over a line reader: the same hi, lo and abs (one pass, two when
 * sum |v_i| leaves fp64's range). Returns 0 or NV_E_INVALID. */
int nvo_sum_exact_rd(const nvo_rd *rd, double *ret_hi, double *ret_lo, nv_mag *ret_abs);

/* hi = RN(v), lo = RN(v - hi) (lo = 0 when hi is not finite); tmp is scratch. */
void nvo_mp_split(mpfr_srcptr v, mpfr_ptr tmp, double *hi, double *lo);

/* ---- Error-free transformations (Knuth TwoSum, Dekker/fma TwoProd; Higham
 * "Accuracy and Stability of Numerical Algorithms" 2nd ed., §4.3 and §27.8;
 * Muller et al., "Handbook of Floating-Point Arithmetic", §4.3-4.4). Exact for
 * finite operands when no overflow occurs; two_prod's error term is exact unless
 * it underflows (|a b| < 2^-969). ---- */

static inline void two_sum(double a, double b, double *s, double *e)
{
    double x = a + b;
    double bv = x - a;
    double av = x - bv;
    *s = x;
    *e = (a - av) + (b - bv);
}

static inline void fast_two_sum(double a, double b, double *s, double *e)
{
    double x = a + b; /* requires |a| >= |b| or a == 0 */
    *s = x;
    *e = b - (x - a);
}

static inline void two_prod(double a, double b, double *p, double *e)
{
    double x = a * b;
    *p = x;
    *e = fma(a, b, -x);
}

/* Double-double addition (QD's "sloppy-free" ieee_add: two TwoSums), relative
 * error <= 2^-104 of |result| plus cancellation in the low parts. */
static inline void dd_add(double ah, double al, double bh, double bl, double *rh, double *rl)
{
    double s, e, t, f;
    two_sum(ah, bh, &s, &e);
    two_sum(al, bl, &t, &f);
    e += t;
    fast_two_sum(s, e, &s, &e);
    e += f;
    fast_two_sum(s, e, rh, rl);
}

/* Double-double times double. */
static inline void dd_mul_d(double ah, double al, double b, double *rh, double *rl)
{
    double p, e;
    two_prod(ah, b, &p, &e);
    e += al * b;
    fast_two_sum(p, e, rh, rl);
}

/* Double-double division by a double: q = a / b with the remainder correction
 * r = a - q b computed exactly by fma (Muller et al. §4.4), ~2^-104 relative. */
static inline void dd_div_d(double ah, double al, double b, double *rh, double *rl)
{
    double q = ah / b;
    if (!isfinite(q) || q == 0) {
        *rh = q;
        *rl = 0;
        return;
    }
    double p, e;
    two_prod(q, b, &p, &e);
    double r = ((ah - p) - e + al) / b;
    fast_two_sum(q, r, rh, rl);
}

/* Double-double division (a / b), ~2^-103 relative. */
static inline void dd_div(double ah, double al, double bh, double bl, double *rh, double *rl)
{
    double q1 = ah / bh;
    if (!isfinite(q1) || q1 == 0) {
        *rh = q1;
        *rl = 0;
        return;
    }
    double ph, pl, rh1, rl1;
    dd_mul_d(bh, bl, q1, &ph, &pl);
    dd_add(ah, al, -ph, -pl, &rh1, &rl1);
    double q2 = rh1 / bh;
    fast_two_sum(q1, q2, rh, rl);
}

/* Double-double square root (one Newton correction of the double root). */
static inline void dd_sqrt(double ah, double al, double *rh, double *rl)
{
    if (!(ah > 0) || !isfinite(ah)) {
        *rh = sqrt(ah);
        *rl = 0;
        return;
    }
    double s = sqrt(ah);
    double p, e;
    two_prod(s, s, &p, &e);
    double c = ((ah - p) - e + al) / (2 * s);
    fast_two_sum(s, c, rh, rl);
}

#endif
