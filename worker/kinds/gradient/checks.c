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

/* Second differences of gy . f: rounding error ~ u |f| / h2^2, truncation
 * ~ h2^2 |f''''|: h2 = 1e-4 balances both near 1e-8. */
#define SECOND_STEP 1e-4
#define N_PROBES 4

typedef struct scratch {
    int64_t n_out;
    double *fp, *fm, *gx, *gy1;
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

static int fwd(const nvw_grad_problem *p, double *out, nvw_grad_report *r)
{
    r->forward_calls++;
    return nv_op_forward_f64(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, out);
}

/* VJP of input i only into gx. */
static int vjp(const nvw_grad_problem *p, int i, const double *gy, double *gx, nvw_grad_report *r)
{
    double *g[NV_OP_MAX_INPUTS] = {0};
    g[i] = gx;
    r->vjp_calls++;
    return nv_op_vjp(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, gy, g, NULL);
}

static void judge(const nvw_grad_problem *p, nvw_grad_report *r, int64_t o, int64_t e, double a,
                  double n)
{
    double err = fabs(a - n), allowed = p->atol + p->rtol * fabs(n);
    r->checked++;
    if (err > r->max_abs_err || isnan(err))
        r->max_abs_err = isnan(err) ? INFINITY : err;
    double ratio = isnan(err) ? INFINITY : err / allowed;
    if (ratio > r->worst_ratio)
        r->worst_ratio = ratio;
    if (ratio <= 1)
        return;
    r->passed = false;
    r->mismatches++;
    if (r->n_bad < NVW_GRAD_MAX_BAD)
        r->bad[r->n_bad++] = (nvw_grad_bad){o, e, a, n};
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
    int64_t *rank = calloc((size_t)(m->n_out ? m->n_out : 1), sizeof *rank);
    int64_t *cnt = calloc((size_t)(m->n_groups ? m->n_groups : 1), sizeof *cnt);
    int rc = 0;
    if (!rank || !cnt) {
        rc = -ENOMEM;
        goto out;
    }
    int64_t max_rank = 0;
    for (int64_t o = 0; o < m->n_out; o++) {
        rank[o] = cnt[m->out_group[o]]++;
        if (rank[o] + 1 > max_rank)
            max_rank = rank[o] + 1;
    }
    for (int64_t k = 0; k < max_rank && rc == 0; k++) {
        for (int64_t o = 0; o < m->n_out; o++)
            s->gy1[o] = rank[o] == k;
        rc = vjp(p, i, s->gy1, s->gx, r);
        for (int64_t o = 0; rc == 0 && o < m->n_out; o++) {
            if (rank[o] != k)
                continue;
            for (int64_t q = 0; q < m->n_pos; q++) {
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

static int full_check(const nvw_grad_problem *p, int i, const nv_jac_map *m, scratch *s,
                      nvw_grad_report *r)
{
    double *ana = malloc(sizeof(double) * (size_t)(m->n_out * m->n_pos + 1));
    if (!ana)
        return -ENOMEM;
    int rc = analytic(p, i, m, ana, s, r);
    nv_tensor *x = p->in[i];
    for (int64_t q = 0; rc == 0 && q < m->n_pos; q++) {
        shift(m, x, q, p->eps);
        rc = fwd(p, s->fp, r);
        shift(m, x, q, -2 * p->eps);
        rc = rc ? rc : fwd(p, s->fm, r);
        shift(m, x, q, p->eps);
        for (int64_t o = 0; rc == 0 && o < m->n_out; o++) {
            int64_t e = m->slot[m->out_group[o] * m->n_pos + q];
            if (e >= 0)
                judge(p, r, o, e, ana[o * m->n_pos + q], (s->fp[o] - s->fm[o]) / (2 * p->eps));
        }
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
static void unit(nv_rng *g, double *v, int64_t n)
{
    double s = 0;
    for (int64_t k = 0; k < n; k += 16) {
        uint32_t w[4];
        nv_philox4x32_10(g->ctr, g->key, w); /* 16 entries per block */
        if (++g->ctr[0] == 0)
            g->ctr[1]++;
        for (int64_t j = 0; j < 16 && k + j < n; j++) {
            unsigned b = (w[j >> 2] >> (8 * (j & 3))) & 0xff;
            double x = (1 - 2 * (double)(b & 1)) * (0.5 + (double)(b >> 1) / 256);
            v[k + j] = x;
            s += x * x;
        }
    }
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
    int rc = vjp(p, i, s->gy1, s->gx, r);
    double a = 0, n = 0;
    for (int64_t e = 0; e < x->numel; e++)
        a += s->gx[e] * u[e];
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] += p->eps * u[e];
    rc = rc ? rc : fwd(p, s->fp, r);
    for (int64_t e = 0; e < x->numel; e++)
        x->data[e] -= 2 * p->eps * u[e];
    rc = rc ? rc : fwd(p, s->fm, r);
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
    int rc = fwd(p, s->fm, r);
    for (int k = 0; rc == 0 && k < N_PROBES && x->numel > 0; k++) {
        int64_t e = (int64_t)(nv_rng_uniform(&g) * (double)x->numel);
        double keep = x->data[e];
        x->data[e] = keep + 1e-3 * (1 + fabs(keep));
        rc = fwd(p, s->fp, r);
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
                    r->bad[r->n_bad++] = (nvw_grad_bad){o, e, 0, s->fp[o] - s->fm[o]};
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

int nvw_grad_formula(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret,
                     nvw_grad_report *ret_structure)
{
    nv_jac_map *m = NULL;
    scratch s;
    int rc = scratch_init(&s, p, i);
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

/* ---- second order ---- */

static double phi(const nvw_grad_problem *p, scratch *s, nvw_grad_report *r, int *rc)
{
    *rc = fwd(p, s->fp, r);
    double v = 0;
    for (int64_t o = 0; o < s->n_out; o++)
        v += p->gy[o] * s->fp[o];
    return v;
}

/* u . H w two ways: differences of the VJP along w, and the four-point second
 * difference of phi = gy . f along u and w. */
static int projection(const nvw_grad_problem *p, int i, scratch *s, const double *u,
                      const double *w, double *hw_u, double *fd, nvw_grad_report *r)
{
    nv_tensor *x = p->in[i];
    int64_t n = x->numel;
    double *g2 = malloc(sizeof(double) * (size_t)(n + 1));
    if (!g2)
        return -ENOMEM;
    double h = p->eps, h2 = SECOND_STEP;
    int rc;
    for (int64_t e = 0; e < n; e++)
        x->data[e] += h * w[e];
    rc = vjp(p, i, p->gy, s->gx, r);
    for (int64_t e = 0; e < n; e++)
        x->data[e] -= 2 * h * w[e];
    rc = rc ? rc : vjp(p, i, p->gy, g2, r);
    for (int64_t e = 0; e < n; e++)
        x->data[e] += h * w[e];
    *hw_u = 0;
    for (int64_t e = 0; e < n; e++)
        *hw_u += u[e] * (s->gx[e] - g2[e]) / (2 * h);
    double f[4];
    static const int su[4] = {1, 1, -1, -1}, sw[4] = {1, -1, 1, -1};
    for (int k = 0; rc == 0 && k < 4; k++) {
        for (int64_t e = 0; e < n; e++)
            x->data[e] += h2 * (su[k] * u[e] + sw[k] * w[e]);
        f[k] = phi(p, s, r, &rc);
        for (int64_t e = 0; e < n; e++)
            x->data[e] -= h2 * (su[k] * u[e] + sw[k] * w[e]);
    }
    *fd = (f[0] - f[1] - f[2] + f[3]) / (4 * h2 * h2);
    free(g2);
    return rc;
}

/* Every stored element of H (columns by coloured differences of the VJP)
 * against its transpose. */
static int symmetry(const nvw_grad_problem *p, int i, const nv_jac_map *m, scratch *s,
                    nvw_grad_report *r)
{
    nv_tensor *x = p->in[i];
    int64_t n = x->numel;
    double *H = malloc(sizeof(double) * (size_t)(n * m->n_pos + 1));
    double *g2 = malloc(sizeof(double) * (size_t)(n + 1));
    int rc = H && g2 ? 0 : -ENOMEM;
    for (int64_t q = 0; rc == 0 && q < m->n_pos; q++) {
        shift(m, x, q, p->eps);
        rc = vjp(p, i, p->gy, s->gx, r);
        shift(m, x, q, -2 * p->eps);
        rc = rc ? rc : vjp(p, i, p->gy, g2, r);
        shift(m, x, q, p->eps);
        for (int64_t e = 0; e < n; e++) /* H[e][slot(group(e), q)] */
            H[e * m->n_pos + q] = (s->gx[e] - g2[e]) / (2 * p->eps);
    }
    for (int64_t e = 0; rc == 0 && e < n; e++) {
        for (int64_t q = 0; q < m->n_pos; q++) {
            int64_t f = m->slot[m->in_group[e] * m->n_pos + q];
            if (f < 0 || f <= e)
                continue;
            judge(p, r, e, f, H[e * m->n_pos + q], H[f * m->n_pos + m->in_pos[e]]);
        }
    }
    free(H);
    free(g2);
    return rc;
}

int nvw_grad_second(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret)
{
    nv_jac_map *m = NULL;
    scratch s;
    report_init(ret, "second_order");
    int rc = scratch_init(&s, p, i);
    if (rc == 0)
        rc = nv_jac_map_new(p->op, p->attrs, p->n_in, (const nv_tensor *const *)p->in, i, &m);
    int64_t n = p->in[i]->numel;
    double *u = malloc(sizeof(double) * (size_t)(n + 1));
    double *w = malloc(sizeof(double) * (size_t)(n + 1));
    if (rc == 0 && (!u || !w))
        rc = -ENOMEM;
    if (rc == 0 && !fast)
        rc = symmetry(p, i, m, &s, ret);
    nv_rng g;
    nv_rng_init(&g, p->seed, p->case_index, 0x300u + (uint32_t)i);
    for (int k = 0; rc == 0 && k < (fast ? 1 : N_PROBES); k++) {
        unit(&g, u, n);
        unit(&g, w, n);
        double uhw, whu, fd;
        rc = projection(p, i, &s, u, w, &uhw, &fd, ret);
        if (rc == 0)
            judge(p, ret, -1, -1, uhw, fd);
        if (rc == 0 && fast) { /* symmetry of the projections: u.Hw = w.Hu */
            rc = projection(p, i, &s, w, u, &whu, &fd, ret);
            if (rc == 0)
                judge(p, ret, -2, -2, whu, uhw);
        }
    }
    free(u);
    free(w);
    nv_jac_map_free(m);
    scratch_done(&s);
    return rc;
}

/* Fast mode for every differentiable input: one VJP with v gives J_i^T v for
 * all inputs at once; each input then gets its own projection v^T J_i u_i (two
 * forwards), as torch's fast gradcheck checks each input; an input whose
 * projection fails gets the full check, which names the elements. */
static int fast_all(const nvw_grad_problem *p, nvw_grad_report *rep, nvw_grad_report *st)
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
        rc = fwd(p, fp, &rep[i]);
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] -= 2 * p->eps * u[e];
        rc = rc ? rc : fwd(p, fm, &rep[i]);
        for (int64_t e = 0; e < x->numel; e++)
            x->data[e] += p->eps * u[e];
        for (int64_t o = 0; o < n_out; o++)
            num += v[o] * (fp[o] - fm[o]);
        if (rc == 0)
            judge(p, &rep[i], -1, -1, a, num / (2 * p->eps));
        if (rc == 0 && !rep[i].passed) {
            nvw_grad_report full;
            rc = nvw_grad_formula(p, i, false, &full, &st[i]);
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
    free(w->buf);
    w->buf = NULL;
    w->cap = 0;
}

int nvw_grad_formula_all(const nvw_grad_problem *p, bool fast, nvw_grad_report *rep,
                         nvw_grad_report *st)
{
    if (fast)
        return fast_all(p, rep, st);
    for (int i = 0; i < p->n_in; i++) {
        if (!nv_op_grad_input(p->op, i))
            continue;
        int rc = nvw_grad_formula(p, i, false, &rep[i], &st[i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}
