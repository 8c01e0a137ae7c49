/* The binades of a sweep or exhaustive case (binades.h). An element's error
 * and mismatch come from nv_compare_elem, nv_compare's own per-element rules,
 * so a binade's max_ulp is the case's max_ulp over the elements it holds and
 * the binades' mismatches add up to the case's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops/catalog.h"
#include "core/numerics/inputs.h"
#include "binades.h"

enum { B_ZERO = 0, B_SUB = 1, B_EXP0 = 2, B_INF = NVW_BIN_EXPS + 2, B_NAN = NVW_BIN_EXPS + 3 };
#define EXP_LO (-126)

bool nvw_binades_wanted(int op_kind, int n_in, int cls, nv_dtype in_dt)
{
    const nv_dtype_info *di = nv_dtype_get(in_dt);
    return op_kind == NV_OPK_UNARY && n_in == 1 && (cls == NV_IN_SWEEP || cls == NV_IN_EXHAUSTIVE) &&
           di && di->is_float && di->is_signed && di->emin >= EXP_LO && di->emax <= 127;
}

void nvw_binades_init(nvw_binades *b, nv_dtype in_dt)
{
    memset(b, 0, sizeof *b);
    b->in_dt = in_dt;
}

/* The total order of elements: larger error first, then encoding, then index. */
static bool worse(double ue, uint64_t enc, int64_t i, const nvw_worst *w)
{
    if (ue != w->ulp_err)
        return ue > w->ulp_err;
    if (enc != w->enc)
        return enc < w->enc;
    return i < w->index;
}

/* The list is a heap whose root worst[0] is its least bad entry (each entry
 * is worse than its parent): a worse element replaces the root and sinks, so
 * a sweep whose errors grow element by element costs log2(16) steps each, not
 * a shift of the list. The 16 worst under a total order are one set whatever
 * the order they come in; nvw_binades_json sorts them. */
static bool heap_worse(const nvw_worst *a, const nvw_worst *b)
{
    return worse(a->ulp_err, a->enc, a->index, b);
}

static void worst_insert(nvw_binades *b, const nvw_worst *e)
{
    nvw_worst *h = b->worst;
    int k;
    if (b->n_worst < NVW_WORST) {
        for (k = b->n_worst++; k > 0 && heap_worse(&h[(k - 1) / 2], e); k = (k - 1) / 2)
            h[k] = h[(k - 1) / 2];
        h[k] = *e;
        return;
    }
    if (!heap_worse(e, &h[0]))
        return;
    for (k = 0;;) {
        int c = 2 * k + 1;
        if (c >= NVW_WORST)
            break;
        if (c + 1 < NVW_WORST && heap_worse(&h[c], &h[c + 1]))
            c++; /* the less bad child */
        if (!heap_worse(e, &h[c]))
            break;
        h[k] = h[c];
        k = c;
    }
    h[k] = *e;
}

static void bin_worst(nvw_bin *bn, double ue, uint64_t enc, int64_t i)
{
    nvw_worst cur = {.enc = bn->worst_enc, .index = bn->worst_index, .ulp_err = bn->max_ulp};
    if (!bn->has_worst || worse(ue, enc, i, &cur)) {
        bn->has_worst = true;
        bn->max_ulp = ue;
        bn->worst_enc = enc;
        bn->worst_index = i;
    }
}

/* bin_of from the bits, for a value x of the dtype: its double exponent field
 * f is below 1023 + emin exactly when |x| < min_normal = 2^emin. */
static inline int bin_of_bits(uint64_t u, int field_min)
{
    int f = (int)((u >> 52) & 0x7ff);
    if (f == 0x7ff)
        return u << 12 ? B_NAN : B_INF;
    if ((u << 1) == 0)
        return B_ZERO;
    if (f < field_min)
        return B_SUB;
    return B_EXP0 + f - 1023 - EXP_LO;
}

static inline uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The end of the run of elements from j0 in one binade: the same sign and
 * double exponent (a normal input's binade), or j0 + 1 at a zero, subnormal,
 * infinity or NaN (their field holds more than one bin). */
static int64_t run_end(const double *x, int64_t j0, int64_t m)
{
    uint64_t top = bits_of(x[j0]) >> 52, f = top & 0x7ff;
    int64_t j = j0 + 1;
    if (f == 0 || f == 0x7ff)
        return j;
    while (j < m && bits_of(x[j]) >> 52 == top)
        j++;
    return j;
}

/* The list's entry threshold: an element enters it when its error is at
 * least this (any error while the list is not full). */
static double list_threshold(const nvw_binades *b)
{
    return b->n_worst < NVW_WORST ? -INFINITY : b->worst[0].ulp_err;
}

/* A candidate of a chunk for the list: j its place in the chunk. */
typedef struct cand {
    double ue;
    uint64_t enc;
    int j;
} cand;

static bool cand_worse(const cand *a, const cand *b)
{
    if (a->ue != b->ue)
        return a->ue > b->ue;
    if (a->enc != b->enc)
        return a->enc < b->enc;
    return a->j < b->j; /* the index order, base + j */
}

/* Reorders v[0 .. n) (k < n) so that v[0 .. k) are its k worst: quickselect,
 * the middle element as pivot (the chunks' runs are often sorted). */
static void select_worst(cand *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, st = lo;
        cand t = v[mid];
        v[mid] = v[hi];
        v[hi] = t;
        for (int i = lo; i < hi; i++)
            if (cand_worse(&v[i], &v[hi])) {
                t = v[i];
                v[i] = v[st];
                v[st++] = t;
            }
        t = v[st];
        v[st] = v[hi];
        v[hi] = t;
        if (st == k)
            return;
        if (k < st)
            hi = st - 1;
        else
            lo = st + 1;
    }
}

static uint64_t encoding(nv_dtype dt, bool fp32, double x)
{
    if (fp32) {
        float f = (float)x;
        uint32_t e32;
        memcpy(&e32, &f, sizeof e32);
        return e32;
    }
    nv_round_mode rne = {0};
    return nv_dtype_encode(dt, x, &rne, 0); /* x is of the dtype: exact */
}

int nvw_binades_add(nvw_binades *b, const nv_compare_input *ci, const nv_tolerance *tol,
                    const nv_compare_elem_out *elems, const double *in, int64_t base)
{
    const nv_dtype_info *di = nv_dtype_get(b->in_dt);
    bool fp32 = b->in_dt == NV_DT_FP32;
    int field_min = 1023 + di->emin;
    enum { CHUNK = 1024 };
    nv_compare_elem_out outs[CHUNK];
    cand cs[CHUNK];
    for (int64_t k0 = 0; k0 < ci->n; k0 += CHUNK) {
        int64_t m = ci->n - k0 < CHUNK ? ci->n - k0 : CHUNK;
        const nv_compare_elem_out *os = elems ? elems + k0 : outs;
        if (!elems) {
            int r = nv_compare_elems(ci, k0, m, tol, outs);
            if (r < 0)
                return r;
        }
        /* The list's candidates are collected first and only the chunk's 16
         * worst of them offered: in an exhaustive case's ascending encodings
         * each element is often worse than the last (e^x - 1 grows with |x|
         * near 0; equal errors rank by encoding). */
        double thr = list_threshold(b);
        const nvw_worst *root = b->n_worst < NVW_WORST ? NULL : &b->worst[0];
        int nc = 0;
        for (int64_t j0 = 0, j1; j0 < m; j0 = j1) {
            j1 = run_end(in + k0, j0, m);
            uint64_t u = bits_of(in[k0 + j0]);
            nvw_bin *bn = &b->bin[u >> 63][bin_of_bits(u, field_min)];
            int64_t mis = 0;
            double mx = -INFINITY; /* the run's largest error of a finite element */
            for (int64_t j = j0; j < j1; j++) {
                mis += os[j].mismatch;
                mx = os[j].finite && os[j].ulp_err > mx ? os[j].ulp_err : mx;
            }
            bn->count += j1 - j0;
            bn->mismatches += mis;
            /* Most runs are better than their binade's worst and the list's
             * last: those need no encoding. An equal error needs it (the
             * order's next key): a run of equal errors (exact results, a
             * saturated tail) ranks by encoding. */
            if (mx == -INFINITY)
                continue;
            if (!bn->has_worst || mx >= bn->max_ulp) {
                /* The run's worst: error mx, then the least encoding (then
                 * the least index); the only one of the run the bin keeps. */
                int64_t bj = -1;
                uint64_t be = 0;
                for (int64_t j = j0; j < j1; j++)
                    if (os[j].finite && os[j].ulp_err == mx) {
                        uint64_t enc = encoding(b->in_dt, fp32, in[k0 + j]);
                        if (bj < 0 || enc < be)
                            bj = j, be = enc;
                    }
                bin_worst(bn, mx, be, base + k0 + bj);
            }
            if (mx >= thr)
                for (int64_t j = j0; j < j1; j++) {
                    double ue = os[j].ulp_err;
                    if (!os[j].finite || !(ue >= thr))
                        continue;
                    uint64_t enc = encoding(b->in_dt, fp32, in[k0 + j]);
                    if (!root || ue > thr || worse(ue, enc, base + k0 + j, root))
                        cs[nc++] = (cand){.ue = ue, .enc = enc, .j = (int)j};
                }
        }
        if (nc > NVW_WORST) {
            select_worst(cs, nc, NVW_WORST);
            nc = NVW_WORST;
        }
        for (int c = 0; c < nc; c++) {
            int64_t k = k0 + cs[c].j;
            const nv_compare_elem_out *o = &os[cs[c].j];
            nvw_worst w = {.enc = cs[c].enc, .index = base + k, .in = in[k], .got = ci->got[k],
                           .exact = o->exact_lo != 0 ? o->exact + o->exact_lo : o->exact,
                           .ulp_err = cs[c].ue};
            worst_insert(b, &w);
        }
    }
    return 0;
}

void nvw_binades_merge(nvw_binades *acc, const nvw_binades *p)
{
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < NVW_BIN_PER_SIGN; k++) {
            const nvw_bin *q = &p->bin[s][k];
            nvw_bin *a = &acc->bin[s][k];
            a->count += q->count;
            a->mismatches += q->mismatches;
            if (q->has_worst)
                bin_worst(a, q->max_ulp, q->worst_enc, q->worst_index);
        }
    for (int k = 0; k < p->n_worst; k++)
        worst_insert(acc, &p->worst[k]);
}

static json_t *hex(const nv_dtype_info *di, uint64_t enc)
{
    char s[24];
    snprintf(s, sizeof s, "0x%0*llx", (di->bits + 3) / 4, (unsigned long long)enc);
    return json_string(s);
}

/* A double as JSON: a number when finite, else "inf", "-inf" or "nan". */
static json_t *num(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static json_t *bin_json(const nv_dtype_info *di, int s, int k, const nvw_bin *bn)
{
    json_t *o = json_object();
    const char *cls = k == B_ZERO ? "zero" : k == B_SUB ? "subnormal" : k == B_INF ? "infinity"
                      : k == B_NAN ? "nan" : NULL;
    int bad = !o;
    if (cls)
        bad |= json_object_set_new(o, "class", json_string(cls));
    bad |= json_object_set_new(o, "sign", json_string(s ? "-" : "+"));
    if (!cls)
        bad |= json_object_set_new(o, "exponent", json_integer(k - B_EXP0 + EXP_LO));
    bad |= json_object_set_new(o, "count", json_integer(bn->count));
    bad |= json_object_set_new(o, "max_ulp", bn->has_worst ? json_real(bn->max_ulp) : json_null());
    bad |= json_object_set_new(o, "mismatches", json_integer(bn->mismatches));
    bad |= json_object_set_new(o, "worst_input", bn->has_worst ? hex(di, bn->worst_enc) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int worst_first(const void *pa, const void *pb)
{
    const nvw_worst *a = pa, *b = pb;
    return heap_worse(a, b) ? -1 : heap_worse(b, a) ? 1 : 0;
}

/* Binades in value order: -NaN, -inf, the negative exponents high to low,
 * -subnormal, -0, +0, +subnormal, the positive exponents, +inf, +NaN. */
int nvw_binades_json(const nvw_binades *b, json_t *cj)
{
    const nv_dtype_info *di = nv_dtype_get(b->in_dt);
    json_t *bins = json_array(), *worst = json_array();
    int bad = !bins || !worst;
    for (int k = NVW_BIN_PER_SIGN - 1; !bad && k >= 0; k--)
        if (b->bin[1][k].count)
            bad |= json_array_append_new(bins, bin_json(di, 1, k, &b->bin[1][k]));
    for (int k = 0; !bad && k < NVW_BIN_PER_SIGN; k++)
        if (b->bin[0][k].count)
            bad |= json_array_append_new(bins, bin_json(di, 0, k, &b->bin[0][k]));
    nvw_worst list[NVW_WORST];
    memcpy(list, b->worst, sizeof list);
    qsort(list, (size_t)b->n_worst, sizeof list[0], worst_first);
    for (int k = 0; !bad && k < b->n_worst; k++) {
        const nvw_worst *w = &list[k];
        json_t *o = json_object();
        bad |= !o || json_object_set_new(o, "index", json_integer(w->index)) ||
               json_object_set_new(o, "input", hex(di, w->enc)) ||
               json_object_set_new(o, "input_value", num(w->in)) ||
               json_object_set_new(o, "got", num(w->got)) ||
               json_object_set_new(o, "exact", num(w->exact)) ||
               json_object_set_new(o, "ulp_error", json_real(w->ulp_err));
        bad |= json_array_append_new(worst, o);
    }
    if (bad) {
        json_decref(bins);
        json_decref(worst);
        return -ENOMEM;
    }
    return json_object_set_new(cj, "binades", bins) || json_object_set_new(cj, "worst", worst)
               ? -ENOMEM
               : 0;
}
