/* The delta-debugging engine (ddmin.h). */
#include "ddmin.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/numerics/dtype.h"

#define DEFAULT_BUDGET 2000
#define DEFAULT_DEADLINE 300.0
#define MAX_VALUE_ELEMS 64

/* The engine's state (nvw_dd_minimize). */
typedef struct mstate {
    const nvw_dd_problem *p;
    const nvw_min_opts *o;
    double start;
    int budget;
    double deadline;
    int probes;
    const char *stop;
    nv_tensor *cur[NVW_DD_MAX_TENSORS];
    int n_in;
} mstate;

/* Returned by a test when the budget or deadline is spent. */
#define STOP 2

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool nvw_dd_is_neutral(double v, double nv)
{
    return v == nv && (v != 0 || signbit(v) == signbit(nv));
}

void nvw_dd_free_set(nv_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        nv_tensor_free(t[i]);
        t[i] = NULL;
    }
}

int nvw_dd_copy_set(nv_tensor *const *src, int n, nv_tensor **dst)
{
    for (int i = 0; i < n; i++) {
        dst[i] = nv_tensor_contiguous(src[i]);
        if (!dst[i]) {
            nvw_dd_free_set(dst, i);
            return -ENOMEM;
        }
    }
    return 0;
}

/* Run a probe on cand: 1 when it fails with the stored signature, 0 when not
 * (or the problem rejects it without a probe), STOP when the budget or deadline
 * is spent or the run is cancelled, negative errno on infrastructure error. */
static int test(mstate *s, nv_tensor *const *cand)
{
    if (s->p->valid && !s->p->valid(s->p->ud, cand))
        return 0;
    if (s->probes >= s->budget) {
        s->stop = "budget";
        return STOP;
    }
    if (now_s() - s->start >= s->deadline) {
        s->stop = "deadline";
        return STOP;
    }
    if (s->o->cancel && atomic_load(s->o->cancel)) {

        s->stop = "cancelled";
        return STOP;
    }
    int r = s->p->test(s->p->ud, cand);
    if (r < 0)
        return r;
    s->probes++;
    if (s->o->progress && s->probes % 50 == 0)
        fprintf(s->o->progress, "minimize: %d probes, %.1f s\n", s->probes, now_s() - s->start);
    return r == 1;
}

static double neutral(const mstate *s, int i)
{
    return s->p->neutral ? s->p->neutral(s->p->ud, i) : NAN;
}

/* ddmin keeping a subset of units (Zeller's ddmin2 on the "keep" side): a test
 * of a subset returns 1 when the failure persists with only that subset. Reduces
 * u[0..*nu) in place to a 1-minimal subset (or what the budget allows). */
typedef int (*unit_test)(mstate *s, const int64_t *u, int64_t n, void *ud);

static int ddmin(mstate *s, int64_t *u, int64_t *nu, unit_test t, void *ud)
{
    int64_t len = *nu, gran = 2;
    int64_t *buf = malloc((size_t)(len > 0 ? len : 1) * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    int r = 0;
    while (len >= 2) {
        bool moved = false;
        for (int64_t i = 0; i < gran && !moved; i++) {
            int64_t lo = len * i / gran, hi = len * (i + 1) / gran;
            if ((r = t(s, u + lo, hi - lo, ud)) < 0 || r == STOP)
                goto out;
            if (r == 1) {
                memmove(u, u + lo, (size_t)(hi - lo) * sizeof *u);
                len = hi - lo;
                gran = 2;
                moved = true;
            }
        }
        for (int64_t i = 0; i < gran && !moved && gran > 2; i++) {
            int64_t lo = len * i / gran, hi = len * (i + 1) / gran;
            memcpy(buf, u, (size_t)lo * sizeof *u);
            memcpy(buf + lo, u + hi, (size_t)(len - hi) * sizeof *u);
            if ((r = t(s, buf, len - (hi - lo), ud)) < 0 || r == STOP)
                goto out;
            if (r == 1) {
                len -= hi - lo;
                memcpy(u, buf, (size_t)len * sizeof *u);
                gran = gran - 1 > 2 ? gran - 1 : 2;
                moved = true;
            }
        }
        if (!moved) {
            if (gran >= len)
                break;
            gran = gran * 2 < len ? gran * 2 : len;
        }
    }
    r = 0;
out:
    *nu = len;
    free(buf);
    return r < 0 ? r : 0;
}

/* ---- phase 1: slices along one dim ---------------------------------------- */

/* Whether every input has input 0's shape (elementwise ops, most reductions). */
static bool uniform_shape(const mstate *s)
{
    for (int i = 1; i < s->n_in; i++) {
        if (s->cur[i]->ndim != s->cur[0]->ndim)
            return false;
        for (int d = 0; d < s->cur[0]->ndim; d++)
            if (s->cur[i]->shape[d] != s->cur[0]->shape[d])
                return false;
    }
    return s->cur[0]->ndim > 0;
}

int nvw_dd_slice_tensor(const nv_tensor *src, int d, const int64_t *idx, int64_t n, nv_tensor **ret)
{
    int64_t sh[NV_MAX_DIMS];
    memcpy(sh, src->shape, sizeof sh);
    sh[d] = n;
    nv_tensor *t = nv_tensor_new(src->dtype, src->ndim, sh);
    if (!t)
        return -ENOMEM;
    int64_t inner = 1, outer = 1;
    for (int k = d + 1; k < src->ndim; k++)
        inner *= src->shape[k];
    for (int k = 0; k < d; k++)
        outer *= src->shape[k];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < n; j++)
            memcpy(t->data + (o * n + j) * inner, src->data + (o * src->shape[d] + idx[j]) * inner,
                   (size_t)inner * sizeof(double));
    *ret = t;
    return 0;
}

/* Inputs restricted to the indices idx[0..n) along dim d: the problem's own
 * slice, or every tensor sliced along d when all share one shape. */
static int slice(mstate *s, int d, const int64_t *idx, int64_t n, nv_tensor **out)
{
    if (s->p->slice)
        return s->p->slice(s->p->ud, s->cur, d, idx, n, out);
    if (!uniform_shape(s))
        return -EINVAL;
    for (int i = 0; i < s->n_in; i++) {
        int r = nvw_dd_slice_tensor(s->cur[i], d, idx, n, &out[i]);
        if (r < 0) {
            nvw_dd_free_set(out, i);
            return r;
        }
    }
    return 0;
}

typedef struct slice_ud {
    int d;
} slice_ud;

static int slice_test(mstate *s, const int64_t *u, int64_t n, void *ud)
{
    nv_tensor *cand[NVW_DD_MAX_TENSORS];
    int r = slice(s, ((slice_ud *)ud)->d, u, n, cand);
    if (r == -EINVAL) /* no such candidate: not failing */
        return 0;
    if (r < 0)
        return r;
    r = test(s, cand);
    nvw_dd_free_set(cand, s->n_in);
    return r;
}

static int adopt_slice(mstate *s, int d, const int64_t *u, int64_t n)
{
    nv_tensor *cand[NVW_DD_MAX_TENSORS];
    int r = slice(s, d, u, n, cand);
    if (r < 0)
        return r;
    nvw_dd_free_set(s->cur, s->n_in);
    memcpy(s->cur, cand, sizeof(cand[0]) * (size_t)s->n_in);
    return 0;
}

/* Bisection for the shortest failing prefix, then the shortest failing suffix of
 * it: O(log n) probes for the contiguous window that holds the failure. Positions
 * are kept relative to the window's start, which is what a length- or position-
 * dependent fault needs; the element phase does the fine-grained removal. */
static int shrink_window(mstate *s, int d)
{
    int64_t len = s->cur[0]->shape[d];
    int64_t *u = malloc((size_t)len * sizeof *u);
    if (!u)
        return -ENOMEM;
    for (int64_t k = 0; k < len; k++)
        u[k] = k;
    slice_ud ud = {d};
    int64_t lo = 0, hi = len; /* [0, hi) fails */
    int r = 0;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((r = slice_test(s, u, mid, &ud)) < 0 || r == STOP)
            break;
        if (r == 1)
            hi = mid;
        else
            lo = mid;
    }
    int64_t a = 0, b = hi - 1; /* [a, hi) fails; find the largest such a */
    while (r >= 0 && r != STOP && b > a) {
        int64_t mid = a + (b - a + 1) / 2;
        if ((r = slice_test(s, u + mid, hi - mid, &ud)) < 0 || r == STOP)
            break;
        if (r == 1)
            a = mid;
        else
            b = mid - 1;
    }
    if (r >= 0 && (a > 0 || hi < len))
        r = adopt_slice(s, d, u + a, hi - a);
    free(u);
    return r < 0 ? r : 0;
}

/* The baseline: plain ddmin of the slices along dim d (deletion). */
static int plain_dim(mstate *s, int d)
{
    int64_t len = s->cur[0]->shape[d];
    int64_t *u = malloc((size_t)len * sizeof *u);
    if (!u)
        return -ENOMEM;
    for (int64_t k = 0; k < len; k++)
        u[k] = k;
    slice_ud ud = {d};
    int64_t n = len;
    int r = ddmin(s, u, &n, slice_test, &ud);
    if (r == 0 && n < len)
        r = adopt_slice(s, d, u, n);
    free(u);
    return r;
}

/* ---- phase 2: neutral elements --------------------------------------------- */

/* Units are (input << 48) | element index of the non-neutral elements. */
#define UNIT(i, k) (((int64_t)(i) << 48) | (k))

static int keep_test(mstate *s, const int64_t *u, int64_t n, void *ud)
{
    (void)ud;
    nv_tensor *cand[NVW_DD_MAX_TENSORS];
    int r = nvw_dd_copy_set(s->cur, s->n_in, cand);
    if (r < 0)
        return r;
    for (int i = 0; i < s->n_in; i++) {
        double nv = neutral(s, i);
        if (!isnan(nv))
            for (int64_t k = 0; k < cand[i]->numel; k++)
                cand[i]->data[k] = nv;
    }
    for (int64_t j = 0; j < n; j++) {
        int i = (int)(u[j] >> 48);
        int64_t k = u[j] & ((INT64_C(1) << 48) - 1);
        cand[i]->data[k] = s->cur[i]->data[k];
    }
    r = test(s, cand);
    nvw_dd_free_set(cand, s->n_in);
    return r;
}

static int64_t list_units(mstate *s, int64_t *u)
{
    int64_t n = 0;
    for (int i = 0; i < s->n_in; i++) {
        double nv = neutral(s, i);
        if (isnan(nv))
            continue;
        for (int64_t k = 0; k < s->cur[i]->numel; k++)
            if (!nvw_dd_is_neutral(s->cur[i]->data[k], nv)) {
                if (u)
                    u[n] = UNIT(i, k);
                n++;
            }
    }
    return n;
}

static int neutralize(mstate *s)
{
    int64_t n = list_units(s, NULL);
    if (n == 0)
        return 0;
    int64_t *u = malloc((size_t)n * sizeof *u);
    if (!u)
        return -ENOMEM;
    list_units(s, u);
    int64_t keep = n;
    int r = keep_test(s, u, 0, NULL); /* all neutral: the failure needs no data */
    if (r == 1)
        keep = 0;
    else if (r >= 0 && r != STOP)
        r = ddmin(s, u, &keep, keep_test, NULL);
    if (r >= 0 && keep < n) {
        for (int i = 0; i < s->n_in; i++) {
            double nv = neutral(s, i);
            nv_tensor *t = nv_tensor_contiguous(s->cur[i]);
            if (!t) {
                r = -ENOMEM;
                break;
            }
            if (!isnan(nv))
                for (int64_t k = 0; k < t->numel; k++)
                    t->data[k] = nv;
            for (int64_t j = 0; j < keep; j++)
                if ((int)(u[j] >> 48) == i) {
                    int64_t k = u[j] & ((INT64_C(1) << 48) - 1);
                    t->data[k] = s->cur[i]->data[k];
                }
            nv_tensor_free(s->cur[i]);
            s->cur[i] = t;
        }
    }
    free(u);
    return r < 0 ? r : 0;
}

/* ---- phase 3: simple values ------------------------------------------------ */

static bool representable(nv_dtype dt, double v)
{
    return nv_dtype_round(dt, v, &NV_ROUND_DEFAULT, 0) == v;
}

/* Try one element at candidate values, simplest first; keep the first that
 * still fails the same way. */
static int simplify_one(mstate *s, int i, int64_t k)
{
    double v = s->cur[i]->data[k];
    if (!isfinite(v) || v == 0)
        return 0;
    double p2 = copysign(exp2(round(log2(fabs(v)))), v);
    const double cands[] = {1, -1, 2, -2, 0.5, -0.5, p2};
    for (size_t c = 0; c < sizeof cands / sizeof cands[0]; c++) {
        if (cands[c] == v)
            return 0; /* already as simple as this candidate */
        if (!representable(s->cur[i]->dtype, cands[c]))
            continue;
        s->cur[i]->data[k] = cands[c];
        int r = test(s, s->cur);
        if (r == 1)
            return 0;
        s->cur[i]->data[k] = v;
        if (r < 0 || r == STOP)
            return r;
    }
    return 0;
}

static int simplify(mstate *s)
{
    int64_t n = list_units(s, NULL);
    if (n == 0 || n > MAX_VALUE_ELEMS)
        return 0;
    int64_t u[MAX_VALUE_ELEMS];
    list_units(s, u);
    for (int64_t j = 0; j < n; j++) {
        int r = simplify_one(s, (int)(u[j] >> 48), u[j] & ((INT64_C(1) << 48) - 1));
        if (r < 0 || r == STOP)
            return r < 0 ? r : 0;
    }
    return 0;
}

/* ---- the engine -------------------------------------------------------------- */

double nvw_dd_now(void)
{
    return now_s();
}

/* Whether the window phase applies along dim d (a full-range slice exists). */
static bool sliceable(mstate *s, int d)
{
    if (!s->p->slice)
        return uniform_shape(s);
    int64_t len = s->cur[0]->shape[d];
    int64_t *u = malloc((size_t)(len > 0 ? len : 1) * sizeof *u);
    nv_tensor *cand[NVW_DD_MAX_TENSORS];
    if (!u)
        return false;
    for (int64_t k = 0; k < len; k++)
        u[k] = k;
    int r = slice(s, d, u, len, cand);
    free(u);
    if (r == 0)
        nvw_dd_free_set(cand, s->n_in);
    return r == 0;
}

static int run_phases(mstate *s)
{
    int r = 0;
    int nd = s->cur[0]->ndim;
    if (s->o->plain_ddmin) {
        for (int d = 0; r == 0 && d < nd && sliceable(s, d); d++)
            r = plain_dim(s, d);
        return r;
    }
    for (int d = 0; r == 0 && d < nd; d++)
        if (sliceable(s, d))
            r = shrink_window(s, d);
    if (r == 0)
        r = neutralize(s);
    if (r == 0)
        r = simplify(s);
    return r;
}

int nvw_dd_minimize(const nvw_dd_problem *p, const nvw_min_opts *o, nv_tensor **cur, double start,
                    int *ret_probes, const char **ret_stop)
{
    if (p->n < 1 || p->n > NVW_DD_MAX_TENSORS)
        return -EINVAL;
    mstate s = {.p = p, .o = o, .start = start, .n_in = p->n, .stop = "done"};
    s.budget = o->budget > 0 ? o->budget : DEFAULT_BUDGET;
    s.deadline = o->deadline_s > 0 ? o->deadline_s : DEFAULT_DEADLINE;
    memcpy(s.cur, cur, sizeof(cur[0]) * (size_t)p->n);
    int r = run_phases(&s);
    memcpy(cur, s.cur, sizeof(cur[0]) * (size_t)p->n); /* ownership back to the caller */
    *ret_probes = s.probes;
    *ret_stop = s.stop;
    return r;
}

int64_t nvw_dd_nonneutral(const nvw_dd_problem *p, nv_tensor *const *t)
{
    int64_t n = 0;
    for (int i = 0; i < p->n; i++) {
        double nv = p->neutral ? p->neutral(p->ud, i) : NAN;
        for (int64_t k = 0; k < t[i]->numel; k++)
            n += isnan(nv) || !nvw_dd_is_neutral(t[i]->data[k], nv);
    }
    return n;
}
