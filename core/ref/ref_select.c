/* Exact references of the selections (core/ops/select.c has the definition):
 * argmax is an index, exact by construction; sample's probabilities, top-p
 * cut and cumulative sums are computed in MPFR at REF_SEL_PREC bits, so a
 * decision (u < C_j, c_j >= P) differs from exact real arithmetic only where u
 * or P lies within about V 2^-190 of a boundary, which a 53-bit u reaches with
 * probability below V 2^-137 per row.
 *
 * The output's lo tensor holds the token a correct device may return instead
 * (docs/TOLERANCES.md "Selections"): a device computes the CDF in floating
 * point, within delta = 2 (V + 3 + 2 max|z|) u_c of the exact one (u_c = 2^-24,
 * the fp32 compute of every dtype but fp64, 2^-53 for fp64: the first-order
 * error of x / T, exp(z - z_max) and a sum of V terms, Higham 2002 §3.1 and
 * §4.2, doubled), so where u lies within delta of a boundary of the exact CDF,
 * or P within delta of a cumulative sum at the top-p cut, the token across
 * that boundary (or under the other cut) is as right as the exact one. lo is
 * the exact token itself where no boundary is that close. */
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "ref_internal.h"

#define REF_SEL_PREC 192

typedef struct row {
    int64_t m;         /* kept by top-k */
    int64_t *order;    /* [m] */
    mpfr_t *pre;       /* [m] prefix sums of exp(z - z_max) over the order */
    double max_abs_z;
} row;

static void row_done(row *w)
{
    for (int64_t j = 0; w->pre && j < w->m; j++)
        mpfr_clear(w->pre[j]);
    free(w->pre);
    free(w->order);
    w->pre = NULL;
    w->order = NULL;
}

/* Steps 1-3 of the definition: the order, top-k and the prefix sums. 0, -1
 * (no distribution) or NV_E_NOMEM. */
static int row_init(row *w, const double *x, int64_t V, const nv_op_attrs *a)
{
    memset(w, 0, sizeof *w);
    w->order = malloc((size_t)V * sizeof *w->order);
    if (!w->order)
        return NV_E_NOMEM;
    int64_t m = nv_sample_order(x, V, a->top_k, w->order);
    if (m == -2)
        return NV_E_NOMEM;
    if (m < 0)
        return -1;
    w->pre = malloc((size_t)m * sizeof *w->pre);
    if (!w->pre)
        return NV_E_NOMEM;
    w->m = m;
    mpfr_t zmax, z;
    mpfr_inits2(REF_SEL_PREC, zmax, z, (mpfr_ptr)0);
    mpfr_set_d(zmax, x[w->order[0]], MPFR_RNDN);
    mpfr_div_d(zmax, zmax, a->temperature, MPFR_RNDN);
    for (int64_t j = 0; j < m; j++) {
        mpfr_init2(w->pre[j], REF_SEL_PREC);
        double xj = x[w->order[j]];
        if (xj == -INFINITY) {
            mpfr_set_zero(z, 1);
        } else {
            mpfr_set_d(z, xj, MPFR_RNDN);
            mpfr_div_d(z, z, a->temperature, MPFR_RNDN);
            double az = fabs(mpfr_get_d(z, MPFR_RNDN));
            w->max_abs_z = az > w->max_abs_z ? az : w->max_abs_z;
            mpfr_sub(z, z, zmax, MPFR_RNDN);
            mpfr_exp(z, z, MPFR_RNDN);
        }
        if (j == 0)
            mpfr_set(w->pre[j], z, MPFR_RNDN);
        else
            mpfr_add(w->pre[j], w->pre[j - 1], z, MPFR_RNDN);
    }
    mpfr_clears(zmax, z, (mpfr_ptr)0);
    return 0;
}

/* Step 4: the nucleus size for top_p, 1..m (c_j = pre[j - 1] / pre[m - 1]). */
static int64_t nucleus(const row *w, double top_p)
{
    if (top_p >= 1)
        return w->m;
    mpfr_t t;
    mpfr_init2(t, REF_SEL_PREC);
    int64_t n = w->m;
    for (int64_t j = 0; j < w->m; j++) {
        mpfr_div(t, w->pre[j], w->pre[w->m - 1], MPFR_RNDN);
        if (mpfr_cmp_d(t, top_p) >= 0) {
            n = j + 1;
            break;
        }
    }
    mpfr_clear(t);
    return n;
}

/* Steps 5-6 within a nucleus of n: the position j of the token, u < C_j. */
static int64_t draw(const row *w, int64_t n, double u)
{
    mpfr_t t;
    mpfr_init2(t, REF_SEL_PREC);
    mpfr_mul_d(t, w->pre[n - 1], u, MPFR_RNDN); /* u C_j < ... as u E_n < E_j */
    int64_t j = 0;
    while (j + 1 < n && mpfr_cmp(t, w->pre[j]) >= 0)
        j++;
    mpfr_clear(t);
    return j;
}

/* |pre[j] / pre[n - 1] - v| < delta */
static bool near(const row *w, int64_t j, int64_t n, double v, double delta)
{
    mpfr_t t;
    mpfr_init2(t, REF_SEL_PREC);
    mpfr_div(t, w->pre[j], w->pre[n - 1], MPFR_RNDN);
    mpfr_sub_d(t, t, v, MPFR_RNDN);
    bool r = fabs(mpfr_get_d(t, MPFR_RNDN)) < delta;
    mpfr_clear(t);
    return r;
}

static double delta_of(const row *w, int64_t V, nv_dtype dt)
{
    double uc = dt == NV_DT_FP64 ? 0x1p-53 : 0x1p-24;
    return 2 * ((double)V + 3 + 2 * w->max_abs_z) * uc;
}

/* The exact token of one row and the one a correct device may return instead. */
static int sample_row(const double *x, int64_t V, const nv_op_attrs *a, nv_dtype dt, uint64_t n_ctr,
                      int64_t *ret_tok, int64_t *ret_alt)
{
    row w;
    int r = row_init(&w, x, V, a);
    if (r != 0) {
        row_done(&w);
        *ret_tok = *ret_alt = -1;
        return r == -1 ? 0 : r;
    }
    double u = nv_sample_uniform(a->seed, n_ctr), d = delta_of(&w, V, dt);
    int64_t n = nucleus(&w, a->top_p), j = draw(&w, n, u);
    *ret_tok = *ret_alt = w.order[j];
    int64_t n_alt = n;
    if (a->top_p < 1 && n < w.m && near(&w, n - 1, w.m, a->top_p, d))
        n_alt = n + 1;
    else if (a->top_p < 1 && n > 1 && near(&w, n - 2, w.m, a->top_p, d))
        n_alt = n - 1;
    if (n_alt != n)
        *ret_alt = w.order[draw(&w, n_alt, u)];
    else if (j > 0 && near(&w, j - 1, n, u, d))
        *ret_alt = w.order[j - 1];
    else if (j + 1 < n && near(&w, j, n, u, d) && x[w.order[j + 1]] != -INFINITY)
        *ret_alt = w.order[j + 1];
    row_done(&w);
    return 0;
}

int nv_ref_sample_probs(const double *x, int64_t V, const nv_op_attrs *a, double *p)
{
    for (int64_t i = 0; i < V; i++)
        p[i] = 0;
    row w;
    int r = row_init(&w, x, V, a);
    if (r == 0) {
        int64_t n = nucleus(&w, a->top_p);
        mpfr_t t, prev;
        mpfr_inits2(REF_SEL_PREC, t, prev, (mpfr_ptr)0);
        mpfr_set_zero(prev, 1);
        for (int64_t j = 0; j < n; j++) {
            mpfr_sub(t, w.pre[j], prev, MPFR_RNDN);
            mpfr_div(t, t, w.pre[n - 1], MPFR_RNDN);
            p[w.order[j]] = mpfr_get_d(t, MPFR_RNDN);
            mpfr_set(prev, w.pre[j], MPFR_RNDN);
        }
        mpfr_clears(t, prev, (mpfr_ptr)0);
    }
    row_done(&w);
    return r;
}

int nvo_ref_select(int id, const nv_op_attrs *a, const nv_tensor *const *in, const nv_ref_out *o)
{
    const nv_tensor *x = in[0];
    int64_t V = x->shape[x->ndim - 1], rows = V > 0 ? x->numel / V : 0;
    double *buf = malloc((size_t)(V > 0 ? V : 1) * sizeof *buf);
    if (!buf)
        return NV_E_NOMEM;
    int r = 0;
    for (int64_t q = 0; r == 0 && q < rows; q++) {
        for (int64_t i = 0; i < V; i++)
            buf[i] = x->data[nv_tensor_offset_linear(x, q * V + i)];
        int64_t tok, alt;
        if (id == NVO_ARGMAX)
            tok = alt = nv_argmax_row(buf, V);
        else
            r = sample_row(buf, V, a, x->dtype, a->offset + (uint64_t)q, &tok, &alt);
        nv_tensor *outs[5] = {o->hi, o->lo, o->abs_sum, o->abs_exp, o->peak};
        double vals[5] = {(double)tok, (double)alt, fabs((double)tok), 0, 0};
        for (int k = 0; r == 0 && k < 5; k++)
            if (outs[k])
                outs[k]->data[nv_tensor_offset_linear(outs[k], q)] = vals[k];
    }
    free(buf);
    return r;
}

int64_t nv_select_justify(double *got, const double *hi, const double *lo, int64_t n)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != hi[i] && got[i] == lo[i]) {
            got[i] = hi[i];
            k++;
        }
    return k;
}
