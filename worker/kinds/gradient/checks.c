/* The fp64 checks of gradient jobs (worker/kinds/gradient/gradient.h): the formula check by
 * central differences over the declared Jacobian structure, its fast form
 * (v^T J u, PyTorch's fast gradcheck), structure probes, and second order.
 *
 * Central differences: (f(x + h) - f(x - h)) / 2h has truncation error
 * h^2 |f'''| / 6 and rounding error ~ u |f| / h (u = 2^-53); a Jacobian element
 * passes when |analytic - numeric| <= atol + rtol |numeric| (the allclose rule of
 * torch.autograd.gradcheck). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "numval/backend.h"
#include "core/ref/backward.h"
#include "gradient.h"

#define N_PROBES 4

typedef struct scratch {
    int64_t n_out;
    double *fp, *fm, *gx, *gy1;
    nv_ref_cache *rc; /* the reference's line cache (may be NULL) */
} scratch;

static int64_t out_count(const nvw_grad_problem *p)
{
    int nd;
    int64_t sh[NV_MAX_DIMS];
    char err[256];
    if (nv_op_infer(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, &nd, sh, err,
                    sizeof err) < 0)
        return -1;
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= sh[d];
    return n;
}

/* The forward and VJP through rc (may be NULL): the cache reuses the
 * reference's line work bit for bit, so the checks see the same values. */
static int fwd(const nvw_grad_problem *p, nv_ref_cache *rc, double *out, nvw_grad_report *r)
{
    r->forward_calls++;
    return nv_op_forward_f64_cached(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, out,
                                    rc);
}

/* VJP of input i only into gx. */
static int vjp(const nvw_grad_problem *p, nv_ref_cache *rc, int i, const double *gy, double *gx,
               nvw_grad_report *r)
{
    double *g[NV_OP_MAX_INPUTS] = {0};
    g[i] = gx;
    r->vjp_calls++;
    return nv_op_vjp_cached(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, gy, g, NULL,
                            rc);
}

/* One element: counted, and false when it passes; when it fails, the
 * failure is counted and the caller records it. */
static inline bool judge_el(const nvw_grad_problem *p, nvw_grad_report *r, double a, double n)
{
    double err = fabs(a - n), allowed = p->atol + p->rtol * fabs(n);
    r->checked++;
    if (err > r->max_abs_err || isnan(err))
        r->max_abs_err = isnan(err) ? INFINITY : err;
    /* The quotient below matters only where it could raise worst_ratio or
     * exceed 1. Below t (1 - 2^-20), t = allowed min(worst_ratio, 1) a normal
     * number (each product within 2^-53 of exact), the exact quotient is below
     * min(worst_ratio, 1), and so is its correct rounding: skipping it changes
     * nothing (a NaN err fails the test and goes on). */
    double t = allowed * (r->worst_ratio < 1 ? r->worst_ratio : 1); /* never NaN */
    if (t >= 0x1p-1000 && err < t * (1 - 0x1p-20))
        return false;
    double ratio = isnan(err) ? INFINITY : err / allowed;
    if (ratio > r->worst_ratio)
        r->worst_ratio = ratio;
    if (ratio <= 1)
        return false;
    r->passed = false;
    r->mismatches++;
    return true;
}

static nvw_grad_bad bad_el(const nvw_grad_problem *p, int64_t o, int64_t e, double a, double n)
{
    return (nvw_grad_bad){o, e, a, n, p->atol + p->rtol * fabs(n)};
}

static void judge(const nvw_grad_problem *p, nvw_grad_report *r, int64_t o, int64_t e, double a,
                  double n)
{
    if (judge_el(p, r, a, n) && r->n_bad < NVW_GRAD_MAX_BAD)
        r->bad[r->n_bad++] = bad_el(p, o, e, a, n);
}

/* Record failure b of order key among the first NVW_GRAD_MAX_BAD failures by
 * key (keys[] holds those of r->bad). */
static void keep_first(nvw_grad_report *r, int64_t *keys, int64_t key, nvw_grad_bad b)
{
    int k = r->n_bad;
    if (k == NVW_GRAD_MAX_BAD && key > keys[k - 1])
        return;
    if (k < NVW_GRAD_MAX_BAD)
        r->n_bad++;
    else
        k--; /* the last one drops out */
    for (; k > 0 && keys[k - 1] > key; k--) {
        keys[k] = keys[k - 1];
        r->bad[k] = r->bad[k - 1];
    }
    keys[k] = key;
    r->bad[k] = b;
}

static void report_init(nvw_grad_report *r, const char *what)
{
    memset(r, 0, sizeof *r);
    r->passed = true;
    r->what = what;
}

/* Perturb every element of input i at position pos by d (x is restored by the
 * caller with the same call and -d). */
static void shift(const nv_jac_map *m, nv_tensor *x, int64_t pos, double d)
{
    for (int64_t g = 0; g < m->n_groups; g++) {
        int64_t e = m->slot[g * m->n_pos + pos];
        if (e >= 0)
            x->data[e] += d;
    }
}

/* Analytic Jacobian by colored VJPs: outputs ranked within their group; one
 * VJP per rank with a 1 on every output of that rank. */
static int analytic(const nvw_grad_problem *p, int i, const nv_jac_map *m, double *ana, scratch *s,
                    nvw_grad_report *r)
{
    /* rank, then the outputs ordered by rank (ord), where each rank starts in
     * it (start, max_rank + 1 entries) and a fill cursor per rank; the counts
     * per group */
    size_t no = (size_t)m->n_out + 1, ng = (size_t)m->n_groups + 1;
    int64_t *rank = calloc(4 * no + 1, sizeof *rank);
    int64_t *cnt = calloc(ng, sizeof *cnt);
    int rc = 0;
    if (!rank || !cnt) {
        rc = -ENOMEM;
        goto out;
    }
    int64_t *ord = rank + no, *start = ord + no, *at = start + no + 1, max_rank = 0;
    for (int64_t o = 0; o < m->n_out; o++) {
        rank[o] = cnt[m->out_group[o]]++;
        if (rank[o] + 1 > max_rank)
            max_rank = rank[o] + 1;
    }
    for (int64_t o = 0; o < m->n_out; o++)
        start[rank[o] + 1]++;
    for (int64_t k = 0; k < max_rank; k++)
        start[k + 1] += start[k];
    for (int64_t o = 0; o < m->n_out; o++)
        ord[start[rank[o]] + at[rank[o]]++] = o;
    for (int64_t o = 0; o < m->n_out; o++)
        s->gy1[o] = 0;
    for (int64_t k = 0; k < max_rank && rc == 0; k++) {
        for (int64_t t = start[k]; t < start[k + 1]; t++)
            s->gy1[ord[t]] = 1;
        rc = vjp(p, s->rc, i, s->gy1, s->gx, r);
        for (int64_t t = start[k]; t < start[k + 1]; t++) {
            int64_t o = ord[t];
            s->gy1[o] = 0;
            for (int64_t q = 0; rc == 0 && q < m->n_pos; q++) {
                int64_t e = m->slot[m->out_group[o] * m->n_pos + q];
                ana[o * m->n_pos + q] = e >= 0 ? s->gx[e] : 0;
            }
        }
    }
out:
    free(rank);
    free(cnt);
    return rc;
}

/* Positions whose numeric columns are judged together: the analytic side is
 * stored by output (one VJP writes an output's positions together), so a
 * block of columns reads each of its cache lines once. */
#define FD_BLOCK 8
/* Outputs judged together: a tile's analytic lines and numeric values (2
 * FD_TILE FD_BLOCK doubles) stay in the L1 cache across the block's positions. */
#define FD_TILE 128

/* Judge the numeric columns q0 .. q1 - 1 (num[(q - q0) ld + o]) against ana,
 * tile by tile of outputs. The report is the one a visit by position, then
 * output would give: its counts and maxima do not depend on the order, and
 * the failures kept are the first by position, then output. */
static void judge_block(const nvw_grad_problem *p, const nv_jac_map *m, const double *ana,
                        const double *num, int64_t ld, int64_t q0, int64_t q1, int64_t *keys,
                        nvw_grad_report *r)
{
    const int64_t *slots[FD_TILE]; /* each output's slot row */
    for (int64_t o0 = 0; o0 < m->n_out; o0 += FD_TILE) {
        int64_t o1 = o0 + FD_TILE < m->n_out ? o0 + FD_TILE : m->n_out;
        for (int64_t o = o0; o < o1; o++)
            slots[o - o0] = m->slot + m->out_group[o] * m->n_pos;
        for (int64_t q = q0; q < q1; q++) {
            const double *col = num + (q - q0) * ld;
            for (int64_t o = o0; o < o1; o++) {
                int64_t e = slots[o - o0][q];
                double a = ana[o * m->n_pos + q];
                if (e >= 0 && judge_el(p, r, a, col[o]))
                    keep_first(r, keys, q * m->n_out + o, bad_el(p, o, e, a, col[o]));
            }
        }
    }
}

static int full_check(const nvw_grad_problem *p, int i, const nv_jac_map *m, scratch *s,
                      nvw_grad_report *r)
{
    /* the columns' stride is padded by a cache line: at a power of two they
     * would share the L1 sets the judge reads them through */
    int64_t ld = m->n_out + 8;
    size_t na = (size_t)(m->n_out * m->n_pos + 1), nb = (size_t)(FD_BLOCK * ld);
    double *ana = malloc(sizeof(double) * (na + nb));
    if (!ana)
        return -ENOMEM;
    double *num = ana + na, h2 = 2 * p->eps;
    int64_t keys[NVW_GRAD_MAX_BAD];
    int rc = analytic(p, i, m, ana, s, r);
    nv_tensor *x = p->in[i];
    for (int64_t q0 = 0; rc == 0 && q0 < m->n_pos; q0 += FD_BLOCK) {
        int64_t q1 = q0 + FD_BLOCK < m->n_pos ? q0 + FD_BLOCK : m->n_pos;
        for (int64_t q = q0; rc == 0 && q < q1; q++) {
            shift(m, x, q, p->eps);
            rc = fwd(p, s->rc, s->fp, r);
            shift(m, x, q, -2 * p->eps);
            rc = rc ? rc : fwd(p, s->rc, s->fm, r);
            shift(m, x, q, p->eps);
            double *col = num + (q - q0) * ld;
            for (int64_t o = 0; o < m->n_out; o++)
                col[o] = (s->fp[o] - s->fm[o]) / h2;
        }
        if (rc == 0)
            judge_block(p, m, ana, num, ld, q0, q1, keys, r);
    }
    free(ana);
    return rc;
}

/* A random unit vector of n entries from the case's Philox stream: each byte of
 * a 32-bit draw gives one entry, a random sign times 0.5 + k/256 (k < 128),
 * then the vector is normalised. Every entry is non-zero with a random sign and
 * magnitude, which is all a projection check needs (an error in J[a, b] shows
 * in v_a u_b, and errors of several elements cannot cancel but by chance),
 * at a quarter of a draw per entry. */
/* Every entry is +-(128 + k) / 256, exactly, and its square (128 + k)^2 / 2^16
 * with a 16-bit numerator: the fp64 running sum of the squares is a multiple
 * of 2^-16 below n, exact while n < 2^37 (53 bits), so it equals the integer
 * sum of the numerators scaled by 2^-16, which is what is computed (no
 * rounding either way, in any order). */
#define UNIT_EXACT_MAX ((int64_t)1 << 36)

static void unit(nv_rng *g, double *v, int64_t n)
{
    double s = 0;
    uint64_t sq = 0;
    for (int64_t k = 0; k < n; k += 16) {
        uint32_t w[4];
        nv_philox4x32_10(g->ctr, g->key, w); /* 16 entries per block */
        if (++g->ctr[0] == 0)
            g->ctr[1]++;
        int64_t m = n - k < 16 ? n - k : 16;
        for (int64_t j = 0; j < m; j++) {
            unsigned b = (w[j >> 2] >> (8 * (j & 3))) & 0xff, q = 128 + (b >> 1);
            v[k + j] = (b & 1 ? -(double)q : (double)q) * 0x1p-8;
            sq += (uint64_t)(q * q);
        }
    }
    if (n < UNIT_EXACT_MAX)
        s = (double)sq * 0x1p-16;
    for (int64_t k = 0; n >= UNIT_EXACT_MAX && k < n; k++)
        s += v[k] * v[k];
    g->avail = 0;
    s = s > 0 ? 1 / sqrt(s) : 1;
    for (int64_t k = 0; k < n; k++)
        v[k] *= s;
}

static int fast_check(const nvw_grad_problem *p, int i, const nv_jac_map *m, scratch *s,
                      nvw_grad_report *r)
{
    nv_tensor *x = p->in[i];
    double *u = malloc(sizeof(double) * (size_t)(x->numel + 1));
    if (!u)
        return -ENOMEM;
    nv_rng g;
    nv_rng_init(&g, p->seed, p->case_index, 0x100u + (uint32_t)i);
    unit(&g, u, x->numel);
    unit(&g, s->gy1, m->n_out);
    int rc = vjp(p, NULL, i, s->gy1, s->gx, r);
    double a = 0, n = 0;
    for (int64_t e = 0; e < x->numel; e++)
        a += s->gx[e] * u[e];
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] += p->eps * u[e];
    rc = rc ? rc : fwd(p, NULL, s->fp, r);
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] -= 2 * p->eps * u[e];
    rc = rc ? rc : fwd(p, NULL, s->fm, r);
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] += p->eps * u[e];
    for (int64_t o = 0; o < m->n_out; o++)
        n += s->gy1[o] * (s->fp[o] - s->fm[o]) / (2 * p->eps);
    if (rc == 0)
        judge(p, r, -1, -1, a, n);
    free(u);
    return rc;
}

/* Perturb random inputs; outputs outside their group must keep their bits. */
static int probes(const nvw_grad_problem *p, int i, const nv_jac_map *m, scratch *s,
                  nvw_grad_report *r)
{
    nv_tensor *x = p->in[i];
    nv_rng g;
    nv_rng_init(&g, p->seed, p->case_index, 0x200u + (uint32_t)i);
    int rc = fwd(p, s->rc, s->fm, r);
    for (int k = 0; rc == 0 && k < N_PROBES && x->numel > 0; k++) {
        int64_t e = (int64_t)(nv_rng_uniform(&g) * (double)x->numel);
        double keep = x->data[e];
        x->data[e] = keep + 1e-3 * (1 + fabs(keep));
        rc = fwd(p, s->rc, s->fp, r);
        x->data[e] = keep;
        for (int64_t o = 0; rc == 0 && o < m->n_out; o++) {
            if (m->out_group[o] == m->in_group[e])
                continue;
            r->checked++;
            if (memcmp(&s->fp[o], &s->fm[o], sizeof(double)) != 0 &&
                !(isnan(s->fp[o]) && isnan(s->fm[o]))) {
                r->passed = false;
                r->mismatches++;
                if (r->n_bad < NVW_GRAD_MAX_BAD)
                    r->bad[r->n_bad++] = (nvw_grad_bad){o, e, 0, s->fp[o] - s->fm[o], 0};
            }
        }
    }
    return rc;
}

static int scratch_init(scratch *s, const nvw_grad_problem *p, int i)
{
    memset(s, 0, sizeof *s);
    s->n_out = out_count(p);
    if (s->n_out < 0)
        return NV_E_SHAPE;
    size_t no = (size_t)(s->n_out + 1), ni = (size_t)(p->in[i]->numel + 1);
    s->fp = malloc(no * sizeof(double));
    s->fm = malloc(no * sizeof(double));
    s->gy1 = malloc(no * sizeof(double));
    s->gx = malloc(ni * sizeof(double));
    return s->fp && s->fm && s->gy1 && s->gx ? 0 : -ENOMEM;
}

static void scratch_done(scratch *s)
{
    free(s->fp);
    free(s->fm);
    free(s->gx);
    free(s->gy1);
}

/* The line cache of one check: the work's, emptied (nothing carries over
 * from an earlier check), or a new one into *local; NULL without memory (the
 * uncached calls give the same values). */
static nv_ref_cache *check_cache(const nvw_grad_problem *p, nv_ref_cache **local)
{
    *local = NULL;
    if (!p->work)
        return *local = nv_ref_cache_new();
    if (!p->work->cache)
        p->work->cache = nv_ref_cache_new();
    nv_ref_cache_clear(p->work->cache);
    return p->work->cache;
}

static int formula(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret,
                   nvw_grad_report *ret_structure, nv_ref_cache *cache)
{
    nv_jac_map *m = NULL;
    scratch s;
    int rc = scratch_init(&s, p, i);
    s.rc = cache;
    if (rc == 0)
        rc = nv_jac_map_new(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, i, &m);
    report_init(ret, fast ? "projection" : "jacobian");
    report_init(ret_structure, "structure");
    /* The projection uses whole forwards and the whole VJP: it relies on no
     * structure, so only the full check (which does) runs the probes. */
    if (rc == 0 && fast)
        rc = fast_check(p, i, m, &s, ret);
    if (rc == 0 && (!fast || !ret->passed))
        rc = probes(p, i, m, &s, ret_structure);
    if (rc == 0 && (!fast || !ret->passed)) {
        nvw_grad_report fast_r = *ret;
        report_init(ret, "jacobian");
        rc = full_check(p, i, m, &s, ret);
        ret->forward_calls += fast_r.forward_calls;
        ret->vjp_calls += fast_r.vjp_calls;
        if (fast && rc == 0 && ret->passed) /* the projection failed, no element did */
            *ret = fast_r;
    }
    nv_jac_map_free(m);
    scratch_done(&s);
    return rc;
}

int nvw_grad_formula(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret,
                     nvw_grad_report *ret_structure)
{
    nv_ref_cache *local, *cache = check_cache(p, &local);
    int rc = formula(p, i, fast, ret, ret_structure, cache);
    nv_ref_cache_free(local);
    return rc;
}

/* ---- second order ----
 *
 * The reference second-order VJP (core/ref/backward.h nv_op_vjp2: (H d)_i for a
 * direction d over all differentiable inputs) against central differences of
 * the reference VJP along d:
 *   N(h) = (g_i(x + h d) - g_i(x - h d)) / 2h = (H d)_i + h^2/6 D^3 g_i[d, d, d] + O(h^4).
 * Error model (Nocedal & Wright, Numerical Optimization, 2nd ed., §8.1: central
 * differences; Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
 * §3.1 and §4.2: rounding of the evaluations), per element e of g_i:
 * - truncation T_e(h) = h^2/6 |D^3 g_e[d, d, d]|. The third derivative is
 *   estimated from the reference VJP alone by the third difference
 *   (g(x+2s d) - 2 g(x+s d) + 2 g(x-s d) - g(x-2s d)) / 2s^3 (step s fixed, within
 *   every op's differentiable-domain margin), plus that estimate's own rounding
 *   bound 3 gamma mag_e / s^3;
 * - rounding R_e(h) = gamma mag_e / h: each fp64 evaluation of g_e errs by at
 *   most gamma_N mag_e (mag: the VJP with |.| on every term, gamma_N = N u /
 *   (1 - N u), u = 2^-53, N = 16 roundings of the chain plus the longest sum of
 *   the evaluation, nv_op_grad_eval_len: the condition grows with the line or
 *   the inner dimension), and the two evaluations are divided by 2h. The
 *   rounding of x + h d itself is removed: the differences use the step that
 *   was actually taken, (fl(x + h d) - fl(x - h d)) / 2h, as the analytic side's
 *   direction;
 * - the analytic side's own rounding gamma mag2_e (mag2 from nv_op_vjp2).
 * A projection u . (H d) (u, d random unit vectors, d over all differentiable
 * inputs so the mixed blocks are checked too) has T = h^2/6 sum |u_e| |D^3 g_e|
 * and R = gamma sum |u_e| mag_e / h. h minimises T + R: h = (3 gamma M / T3)^(1/3)
 * (M and T3 the sums above), clipped to [1e-8, 1e-3], the upper end inside the
 * domain margin. An element or projection passes when
 * |analytic - numeric| <= 2 (T + R) + gamma mag2 (+ the fp64 sums of the
 * projection). Full mode checks every stored element of H_ii (coloured like
 * the Jacobian) and 4 projections; fast mode one projection. */

#define SO_SAFETY 2.0
#define SO_H_MIN 1e-8
#define SO_H_MAX 1e-3
#define SO_S 2e-3   /* third-difference step: 2 SO_S stays inside the 1e-2 margin */
#define SO_CHAIN 16 /* roundings of a VJP element besides its longest sum */
#define SO_ROUND 0x1p-53

typedef struct so_ctx {
    const nvw_grad_problem *p;
    int i;                               /* the input whose gradient is checked */
    int64_t n;                           /* its numel */
    double gamma;                        /* gamma_N of one VJP evaluation */
    double *base[NV_OP_MAX_INPUTS];      /* the unperturbed inputs */
    double *weff[NV_OP_MAX_INPUTS];      /* the direction actually taken */
    const double *dir[NV_OP_MAX_INPUTS]; /* the direction asked for (NULL: 0) */
    double *mag, *gp, *gm, *t3, *hx, *hmag, *tmp;
} so_ctx;

static bool so_input(const nvw_grad_problem *p, int k)
{
    return k < p->op->n_inputs && nv_op_grad_input(p->op, k);
}

/* x = base + t dir on every input with a direction (an exact copy elsewhere). */
static void so_move(so_ctx *c, double t)
{
    for (int k = 0; k < c->p->n_in; k++) {
        nv_tensor *x = c->p->in[k];
        if (!c->base[k])
            continue;
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] = c->dir[k] ? c->base[k][e] + t * c->dir[k][e] : c->base[k][e];
    }
}

/* VJP of input i at base + t dir into out. */
static int so_vjp_at(so_ctx *c, double t, double *out, nvw_grad_report *r)
{
    so_move(c, t);
    int rc = vjp(c->p, NULL, c->i, c->p->gy, out, r);
    so_move(c, 0);
    return rc;
}

/* The third-difference estimate of D^3 g_i[dir, dir, dir] into c->t3. */
static int so_third(so_ctx *c, nvw_grad_report *r)
{
    static const double at[4] = {2, 1, -1, -2}, w[4] = {1, -2, 2, -1};
    for (int64_t e = 0; e < c->n; e++)
        c->t3[e] = 0;
    int rc = 0;
    for (int k = 0; rc == 0 && k < 4; k++) {
        rc = so_vjp_at(c, at[k] * SO_S, c->tmp, r);
        for (int64_t e = 0; rc == 0 && e < c->n; e++)
            c->t3[e] += w[k] * c->tmp[e];
    }
    for (int64_t e = 0; e < c->n; e++)
        c->t3[e] /= 2 * SO_S * SO_S * SO_S;
    return rc;
}

/* The step minimising h^2/6 T3 + gamma M / h for weights u (NULL: all 1). */
static double so_step(const so_ctx *c, const double *u)
{
    double T3 = 0, M = 0;
    for (int64_t e = 0; e < c->n; e++) {
        double wu = u ? fabs(u[e]) : 1;
        T3 += wu * (fabs(c->t3[e]) + 3 * c->gamma * c->mag[e] / (SO_S * SO_S * SO_S));
        M += wu * c->mag[e];
    }
    double h = T3 > 0 ? cbrt(3 * c->gamma * M / T3) : SO_H_MAX;
    return isfinite(h) ? fmin(fmax(h, SO_H_MIN), SO_H_MAX) : SO_H_MAX;
}

/* Central difference at step h into gp (numeric (g+ - g-) / 2h), and the
 * analytic H weff into hx, hmag, weff the step actually taken divided by h. */
static int so_diff(so_ctx *c, double h, nvw_grad_report *r)
{
    const nvw_grad_problem *p = c->p;
    int rc = so_vjp_at(c, h, c->gp, r);
    rc = rc ? rc : so_vjp_at(c, -h, c->gm, r);
    for (int64_t e = 0; e < c->n; e++)
        c->gp[e] = (c->gp[e] - c->gm[e]) / (2 * h);
    const double *v[NV_OP_MAX_INPUTS] = {0};
    for (int k = 0; k < p->n_in; k++) {
        if (!c->base[k] || !c->dir[k])
            continue;
        for (int64_t e = 0; e < p->in[k]->numel; e++) {
            double up = c->base[k][e] + h * c->dir[k][e], dn = c->base[k][e] - h * c->dir[k][e];
            c->weff[k][e] = ((up - c->base[k][e]) - (dn - c->base[k][e])) / (2 * h);
        }
        v[k] = c->weff[k];
    }
    double *hx[NV_OP_MAX_INPUTS] = {0}, *hm[NV_OP_MAX_INPUTS] = {0};
    hx[c->i] = c->hx, hm[c->i] = c->hmag;
    r->vjp2_calls++;
    if (rc == 0)
        rc =
            nv_op_vjp2(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, p->gy, v, hx, hm);
    r->step_min = r->step_min > 0 ? fmin(r->step_min, h) : h;
    r->step_max = fmax(r->step_max, h);
    return rc;
}

/* The model's allowance for element e at step h (weight wu = |u_e|). */
static double so_allowed(const so_ctx *c, int64_t e, double h, double wu)
{
    double s3 = SO_S * SO_S * SO_S;
    double trunc = h * h / 6 * (fabs(c->t3[e]) + 3 * c->gamma * c->mag[e] / s3);
    return wu * (SO_SAFETY * (trunc + c->gamma * c->mag[e] / h) + c->gamma * c->hmag[e]);
}

static void judge_allowed(nvw_grad_report *r, int64_t o, int64_t e, double a, double n,
                          double allowed)
{
    double err = fabs(a - n);
    r->checked++;
    if (err > r->max_abs_err || isnan(err))
        r->max_abs_err = isnan(err) ? INFINITY : err;
    double ratio = isnan(err) ? INFINITY : err == 0 ? 0 : err / allowed;
    if (ratio > r->worst_ratio)
        r->worst_ratio = ratio;
    if (ratio <= 1)
        return;
    r->passed = false;
    r->mismatches++;
    if (r->n_bad < NVW_GRAD_MAX_BAD)
        r->bad[r->n_bad++] = (nvw_grad_bad){o, e, a, n, allowed};
}

/* Every stored element of H_ii: column q perturbs every group of input i at
 * position q (the Jacobian's colouring), so (H d)_e = H[e, slot(group(e), q)]. */
static int so_hessian(so_ctx *c, const nv_jac_map *m, double *d, nvw_grad_report *r)
{
    int rc = 0;
    for (int k = 0; k < c->p->n_in; k++)
        c->dir[k] = NULL;
    c->dir[c->i] = d;
    for (int64_t q = 0; rc == 0 && q < m->n_pos; q++) {
        memset(d, 0, sizeof(double) * (size_t)c->n);
        for (int64_t g = 0; g < m->n_groups; g++)
            if (m->slot[g * m->n_pos + q] >= 0)
                d[m->slot[g * m->n_pos + q]] = 1;
        rc = so_third(c, r);
        double h = so_step(c, NULL);
        rc = rc ? rc : so_diff(c, h, r);
        for (int64_t e = 0; rc == 0 && e < c->n; e++) {
            int64_t f = m->slot[m->in_group[e] * m->n_pos + q];
            if (f >= 0)
                judge_allowed(r, e, f, c->hx[e], c->gp[e], so_allowed(c, e, h, 1));
        }
    }
    return rc;
}

/* One projection u . (H w)_i, w a unit vector over every differentiable input. */
static int so_projection(so_ctx *c, nv_rng *g, double *u, double *const *w, nvw_grad_report *r)
{
    const nvw_grad_problem *p = c->p;
    int64_t total = 0;
    for (int k = 0; k < p->n_in; k++)
        total += c->base[k] ? p->in[k]->numel : 0;
    for (int k = 0; k < p->n_in; k++) {
        c->dir[k] = c->base[k] ? w[k] : NULL;
        if (c->base[k]) { /* a unit vector over all inputs: each part scaled by its share */
            unit(g, w[k], p->in[k]->numel);
            double sc = sqrt((double)p->in[k]->numel / (double)(total > 0 ? total : 1));
            for (int64_t e = 0; e < p->in[k]->numel; e++)
                w[k][e] *= sc;
        }
    }
    unit(g, u, c->n);
    int rc = so_third(c, r);
    double h = so_step(c, u);
    rc = rc ? rc : so_diff(c, h, r);
    if (rc)
        return rc;
    double a = 0, num = 0, allowed = 0, sums = 0;
    for (int64_t e = 0; e < c->n; e++) {
        a += u[e] * c->hx[e];
        num += u[e] * c->gp[e];
        allowed += so_allowed(c, e, h, fabs(u[e]));
        sums += fabs(u[e]) * (fabs(c->hx[e]) + fabs(c->gp[e]));
    }
    /* the two fp64 dot products of n terms (Higham §3.1: gamma_n sum |terms|) */
    double gn = (double)c->n * SO_ROUND;
    judge_allowed(r, -1, -1, a, num, allowed + gn / (1 - gn) * sums);
    return 0;
}

int nvw_grad_second(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret)
{
    report_init(ret, fast ? "projection" : "hessian");
    so_ctx c = {.p = p, .i = i, .n = p->in[i]->numel};
    int64_t N = SO_CHAIN +
                nv_op_grad_eval_len(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, i);
    c.gamma = (double)N * SO_ROUND / (1 - (double)N * SO_ROUND);
    ret->eval_len = N - SO_CHAIN;
    nv_jac_map *m = NULL;
    double *w[NV_OP_MAX_INPUTS] = {0};
    size_t ni = (size_t)c.n + 1;
    double *buf = malloc(sizeof(double) * ni * 9);
    int rc = buf ? 0 : -ENOMEM;
    if (buf) {
        c.mag = buf, c.gp = buf + ni, c.gm = buf + 2 * ni, c.t3 = buf + 3 * ni;
        c.hx = buf + 4 * ni, c.hmag = buf + 5 * ni, c.tmp = buf + 6 * ni;
    }
    for (int k = 0; rc == 0 && k < p->n_in; k++) {
        if (!so_input(p, k))
            continue;
        size_t nk = (size_t)p->in[k]->numel + 1;
        c.base[k] = malloc(sizeof(double) * nk);
        c.weff[k] = malloc(sizeof(double) * nk);
        w[k] = malloc(sizeof(double) * nk);
        if (!c.base[k] || !c.weff[k] || !w[k])
            rc = -ENOMEM;
        else
            memcpy(c.base[k], p->in[k]->data, sizeof(double) * (nk - 1));
    }
    if (rc == 0) { /* mag of the VJP at x, which every allowance scales with */
        double *gx[NV_OP_MAX_INPUTS] = {0}, *mg[NV_OP_MAX_INPUTS] = {0};
        gx[i] = c.tmp, mg[i] = c.mag;
        ret->vjp_calls++;
        rc = nv_op_vjp(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, p->gy, gx, mg);
    }
    if (rc == 0 && !fast)
        rc = nv_jac_map_new(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, i, &m);
    if (rc == 0 && !fast)
        rc = so_hessian(&c, m, buf + 7 * ni, ret);
    nv_rng g;
    nv_rng_init(&g, p->seed, p->case_index, 0x300u + (uint32_t)i);
    for (int k = 0; rc == 0 && k < (fast ? 1 : N_PROBES); k++)
        rc = so_projection(&c, &g, buf + 8 * ni, w, ret);
    for (int k = 0; k < NV_OP_MAX_INPUTS; k++) {
        free(c.base[k]);
        free(c.weff[k]);
        free(w[k]);
    }
    free(buf);
    nv_jac_map_free(m);
    return rc;
}

/* Fast mode for every differentiable input: one VJP with v gives J_i^T v for
 * all inputs at once; each input then gets its own projection v^T J_i u_i (two
 * forwards), as torch's fast gradcheck checks each input; an input whose
 * projection fails gets the full check, which names the elements. */
static int fast_all(const nvw_grad_problem *p, nvw_grad_report *rep, nvw_grad_report *st,
                    nv_ref_cache *cache)
{
    int64_t n_out = out_count(p), max_in = 1;
    if (n_out < 0)
        return NV_E_SHAPE;
    for (int i = 0; i < p->n_in; i++)
        if (p->in[i]->numel > max_in)
            max_in = p->in[i]->numel;
    size_t need = 3 * (size_t)(n_out + 1) + (size_t)(max_in + 1);
    for (int i = 0; i < p->n_in; i++)
        need += nv_op_grad_input(p->op, i) ? (size_t)(p->in[i]->numel + 1) : 0;
    nvw_grad_work local = {0}, *w = p->work ? p->work : &local;
    if (w->cap < need) {
        free(w->buf);
        w->buf = malloc(sizeof(double) * need);
        w->cap = w->buf ? need : 0;
    }
    int rc = w->buf ? 0 : -ENOMEM;
    double *v = w->buf, *fp = v + n_out + 1, *fm = fp + n_out + 1, *u = fm + n_out + 1;
    double *gx[NV_OP_MAX_INPUTS] = {0}, *next = u + max_in + 1;
    for (int i = 0; rc == 0 && i < p->n_in; i++) {
        if (!nv_op_grad_input(p->op, i))
            continue;
        gx[i] = next;
        next += p->in[i]->numel + 1;
    }
    nv_rng g;
    nv_rng_init(&g, p->seed, p->case_index, 0x100u);
    if (rc == 0) {
        unit(&g, v, n_out);
        rc = nv_op_vjp(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, v, gx, NULL);
    }
    for (int i = 0; rc == 0 && i < p->n_in; i++) {
        if (!gx[i])
            continue;
        nv_tensor *x = p->in[i];
        report_init(&rep[i], "projection");
        report_init(&st[i], "structure");
        rep[i].vjp_calls = i == 0;
        unit(&g, u, x->numel);
        double a = 0, num = 0;
        for (int64_t e = 0; e < x->numel; e++) {
            a += gx[i][e] * u[e];
            x->data[e] += p->eps * u[e];
        }
        rc = fwd(p, NULL, fp, &rep[i]);
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] -= 2 * p->eps * u[e];
        rc = rc ? rc : fwd(p, NULL, fm, &rep[i]);
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] += p->eps * u[e];
        for (int64_t o = 0; o < n_out; o++)
            num += v[o] * (fp[o] - fm[o]);
        if (rc == 0)
            judge(p, &rep[i], -1, -1, a, num / (2 * p->eps));
        if (rc == 0 && !rep[i].passed) {
            nvw_grad_report full;
            rc = formula(p, i, false, &full, &st[i], cache);
            if (rc == 0 && !full.passed)
                rep[i] = full;
        }
    }
    nvw_grad_work_done(&local);
    return rc;
}

void nvw_grad_work_done(nvw_grad_work *w)
{
    if (!w)
        return;
    nv_ref_cache_free(w->cache);
    w->cache = NULL;
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
}

int nvw_grad_formula_all(const nvw_grad_problem *p, bool fast, nvw_grad_report *rep,
                         nvw_grad_report *st)
{
    nv_ref_cache *local, *cache = check_cache(p, &local);
    int rc = 0;
    if (fast)
        rc = fast_all(p, rep, st, cache);
    for (int i = 0; !fast && rc == 0 && i < p->n_in; i++)
        if (nv_op_grad_input(p->op, i))
            rc = formula(p, i, false, &rep[i], &st[i], cache);
    nv_ref_cache_free(local);
    return rc;
}
