/* The logits criteria of a model case (docs/MODEL.md "Final logits",
 * "Classifier accuracy"): rows of the logits node are samples. KL divergence
 * of the softmaxes against a bound the layer band implies, top-1 flips judged
 * by the fp64 reference's margin, top-5 overlap reported, and the accuracy gap
 * on the seeded synthetic labels with Wilson bounds. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "model_internal.h"

#define TOPK 5

typedef struct lrow {
    const double *r64, *dev, *rdt;
    int64_t n;
} lrow;

static int64_t argmax(const double *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b] || (isnan(x[i]) && !isnan(x[b])))
            b = i;
    return b;
}

/* The reference's margin: top-1 minus top-2 logit (+Inf with one class). */
static double margin(const double *x, int64_t n, int64_t top)
{
    double second = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (i != top && x[i] > second)
            second = x[i];
    return x[top] - second;
}

static double lse(const double *x, int64_t n)
{
    double m = x[argmax(x, n)], s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp(x[i] - m);
    return m + log(s);
}

/* KL(softmax(p) || softmax(q)) in fp64 from log-softmaxes; +Inf when q is not
 * finite. */
static double kl(const double *p, const double *q, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(q[i]))
            return INFINITY;
    double lp = lse(p, n), lq = lse(q, n), s = 0;
    for (int64_t i = 0; i < n; i++)
        s += exp(p[i] - lp) * ((p[i] - lp) - (q[i] - lq));
    return fmax(s, 0);
}

/* |top-k(a) n top-k(b)| / k, k = min(5, n). */
static double topk_overlap(const double *a, const double *b, int64_t n)
{
    int64_t k = n < TOPK ? n : TOPK, ia[TOPK], ib[TOPK];
    for (int64_t t = 0; t < k; t++) {
        ia[t] = ib[t] = -1;
        for (int64_t i = 0; i < n; i++) {
            bool ua = false, ub = false;
            for (int64_t s = 0; s < t; s++)
                ua = ua || ia[s] == i, ub = ub || ib[s] == i;
            if (!ua && (ia[t] < 0 || a[i] > a[ia[t]]))
                ia[t] = i;
            if (!ub && (ib[t] < 0 || b[i] > b[ib[t]]))
                ib[t] = i;
        }
    }
    int64_t common = 0;
    for (int64_t s = 0; s < k; s++)
        for (int64_t t = 0; t < k; t++)
            common += ia[s] == ib[t];
    return (double)common / (double)k;
}

typedef struct lsum {
    double max_abs, max_rel, kl_dev, kl_dt, kl_dev_max, sqnorm;
    int64_t agree_dev, agree_dt, flips, unjustified;
    double top5;
    int64_t b, c, ref_right, dev_right; /* accuracy counts */
} lsum;

/* The label of row i: the fp64 teacher's class, replaced with probability
 * label_noise by a uniformly drawn other class (docs/MODEL.md). */
static int64_t label(const mcase *c, uint64_t i, int64_t teacher, int64_t n_cls)
{
    nv_rng r;
    nv_rng_init(&r, c->j->s->seed ^ 0x6C6162656C73ull, (uint32_t)c->sample, (uint32_t)(i + 1));
    double u = nv_rng_uniform(&r), v = nv_rng_uniform(&r);
    if (n_cls < 2 || u >= c->j->s->label_noise)
        return teacher;
    return (teacher + 1 + (int64_t)(v * (double)(n_cls - 1))) % n_cls;
}

static void one_row(const mcase *c, const lrow *w, int64_t i, double band, bool labels, lsum *s)
{
    double sq = 0;
    for (int64_t q = 0; q < w->n; q++) {
        double d = fabs(w->dev[q] - w->r64[q]);
        s->max_abs = fmax(s->max_abs, d);
        if (w->r64[q] != 0)
            s->max_rel = fmax(s->max_rel, d / fabs(w->r64[q]));
        if (!(d == d))
            s->max_abs = s->max_rel = INFINITY;
        sq += w->r64[q] * w->r64[q];
    }
    s->sqnorm += sq;
    double kd = kl(w->r64, w->dev, w->n);
    s->kl_dev += kd;
    s->kl_dev_max = fmax(s->kl_dev_max, kd);
    s->kl_dt += kl(w->r64, w->rdt, w->n);
    int64_t t64 = argmax(w->r64, w->n), tdev = argmax(w->dev, w->n);
    s->agree_dev += t64 == tdev;
    s->agree_dt += t64 == argmax(w->rdt, w->n);
    if (t64 != tdev) {
        s->flips++;
        /* a flip needs delta_j - delta_i >= margin, and |delta_j - delta_i| <=
         * sqrt(2) ||delta_row||_2, which the band bounds by band ||R64_row|| */
        s->unjustified += margin(w->r64, w->n, t64) > sqrt(2.0) * band * sqrt(sq);
    }
    s->top5 += topk_overlap(w->r64, w->dev, w->n);
    if (!labels)
        return;
    int64_t y = label(c, (uint64_t)i, t64, w->n);
    bool rr = t64 == y, dr = tdev == y;
    s->ref_right += rr;
    s->dev_right += dr;
    s->b += rr && !dr;
    s->c += !rr && dr;
}

static int set_num(json_t *o, const char *k, double v)
{
    return json_object_set_new(o, k, nvw_json_num(v));
}

static json_t *interval(double lo, double hi)
{
    return json_pack("[o, o]", nvw_json_num(lo), nvw_json_num(hi));
}

static int accuracy_json(const mcase *c, const lsum *s, int64_t n, json_t *crit, bool *ret_ok)
{
    const nv_modelspec *ms = c->j->s;
    double z = model_z_upper(ms->alpha / 2);
    double blo, bhi, clo, chi, rlo, rhi, dlo, dhi;
    /* Each end of a two-sided interval at z(alpha/2) is a one-sided bound at
     * alpha/2; gap_lo = lo(b) - hi(c) then holds with probability >= 1 - alpha
     * (Bonferroni over the two). The accuracies' intervals are two-sided at
     * level 1 - alpha. */
    model_wilson(s->b, n, z, &blo, &bhi);
    model_wilson(s->c, n, z, &clo, &chi);
    model_wilson(s->ref_right, n, z, &rlo, &rhi);
    model_wilson(s->dev_right, n, z, &dlo, &dhi);
    double gap = (double)(s->b - s->c) / (double)n, gap_lo = blo - chi, gap_hi = bhi - clo;
    *ret_ok = gap_lo <= ms->max_gap;
    json_t *o = json_pack(
        "{s:I, s:I, s:I, s:o, s:o, s:o, s:s, s:b, s:s}", "n", (json_int_t)n, "ref_right_dev_wrong",
        (json_int_t)s->b, "ref_wrong_dev_right", (json_int_t)s->c, "acc_ref_ci",
        interval(rlo, rhi), "acc_dev_ci", interval(dlo, dhi), "gap_ci", interval(gap_lo, gap_hi),
        "labels", "fp64 teacher's argmax with seeded label noise", "passed", *ret_ok, "reason",
        "fails when the one-sided lower confidence bound of the accuracy the device loses "
        "(Wilson bounds, Bonferroni over the two discordant counts) exceeds max_gap, a policy "
        "value of the job");
    if (!o)
        return -ENOMEM;
    if (set_num(o, "acc_ref", (double)s->ref_right / (double)n) ||
        set_num(o, "acc_dev", (double)s->dev_right / (double)n) || set_num(o, "gap", gap) ||
        set_num(o, "max_gap", ms->max_gap) || set_num(o, "alpha", ms->alpha) ||
        set_num(o, "label_noise", ms->label_noise)) {
        json_decref(o);
        return -ENOMEM;
    }
    return json_object_set_new(crit, "accuracy", o) ? -ENOMEM : 0;
}

static int logits_json(const lsum *s, int64_t n, double band, json_t *crit, bool *kl_ok,
                       bool *top_ok)
{
    double nn = (double)n, allowed = 0.5 * band * band * s->sqnorm / nn;
    *kl_ok = s->kl_dev / nn <= allowed;
    *top_ok = s->unjustified == 0;
    json_t *lg = json_pack(
        "{s:b, s:s, s:s}", "passed", *kl_ok, "tolerance",
        "mean KL <= 1/2 band^2 mean ||R64_row||^2", "reason",
        "to second order KL <= 1/4 ||delta_row||^2 (the softmax covariance has norm <= 1/2), so "
        "the logits' band implies half the allowance; the factor 2 covers the third-order term");
    json_t *t1 = json_pack(
        "{s:b, s:I, s:I, s:s, s:s}", "passed", *top_ok, "flips", (json_int_t)s->flips,
        "unjustified_flips", (json_int_t)s->unjustified, "tolerance",
        "no flip where the fp64 margin exceeds sqrt(2) band ||R64_row||", "reason",
        "an error within the band cannot move a logit pair further apart than that; top-5 "
        "overlap is reported, not judged");
    int r = lg && t1 ? 0 : -ENOMEM;
    if (r == 0 &&
        (set_num(lg, "max_abs", s->max_abs) || set_num(lg, "max_rel", s->max_rel) ||
         set_num(lg, "kl_mean", s->kl_dev / nn) || set_num(lg, "kl_max", s->kl_dev_max) ||
         set_num(lg, "kl_mean_dtype_ref", s->kl_dt / nn) || set_num(lg, "kl_allowed", allowed) ||
         set_num(t1, "agreement", (double)s->agree_dev / nn) ||
         set_num(t1, "agreement_dtype_ref", (double)s->agree_dt / nn) ||
         set_num(t1, "top5_overlap", s->top5 / nn)))
        r = -ENOMEM;
    if (r < 0) {
        json_decref(lg);
        json_decref(t1);
        return r;
    }
    if (json_object_set_new(crit, "logits", lg)) { /* lg is released either way */
        json_decref(t1);
        return -ENOMEM;
    }
    return json_object_set_new(crit, "top1", t1) ? -ENOMEM : 0;
}

int model_logits_criteria(mcase *c, json_t *crit, const char **fail)
{
    int k = c->j->s->logits;
    const nv_graph_node *n = &c->g.nodes[k];
    int64_t rows = n->shape[0], cls = n->shape[1];
    double band = c->res[k].band;
    lsum s;
    memset(&s, 0, sizeof s);
    bool labels = c->j->s->task == NV_MTASK_CLASSIFIER;
    for (int64_t i = 0; i < rows; i++) {
        lrow w = {.r64 = c->r64[k]->data + i * cls,
                  .dev = c->dev[k]->data + i * cls,
                  .rdt = c->rdt[k]->data + i * cls,
                  .n = cls};
        one_row(c, &w, i, band, labels, &s);
    }
    bool kl_ok, top_ok, acc_ok = true;
    int r = logits_json(&s, rows, band, crit, &kl_ok, &top_ok);
    if (r == 0 && c->j->s->task == NV_MTASK_CLASSIFIER)
        r = accuracy_json(c, &s, rows, crit, &acc_ok);
    if (r < 0)
        return r;
    if (!*fail)
        *fail = !kl_ok ? "kl_exceeded" : !top_ok ? "top1_flip" : !acc_ok ? "accuracy_gap" : NULL;
    return c->j->s->task == NV_MTASK_LM ? model_decode(c, crit, fail) : 0;
}
