/* The shared fixtures of the compare-in-parts tests (compare_fixture.h). */
#include "compare_fixture.h"

#include <string.h>

uint64_t cf_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

bool cf_same(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

bool cf_same_result(const nv_compare_result *a, const nv_compare_result *b)
{
    bool ok = a->compared == b->compared && a->mismatches == b->mismatches &&
              a->nan_mismatches == b->nan_mismatches && a->inf_mismatches == b->inf_mismatches &&
              a->zero_sign_mismatches == b->zero_sign_mismatches &&
              cf_same(a->max_ulp, b->max_ulp) && cf_same(a->mean_ulp, b->mean_ulp) &&
              cf_same(a->p99_ulp, b->p99_ulp) && cf_same(a->max_abs, b->max_abs) &&
              cf_same(a->max_rel, b->max_rel) && cf_same(a->max_allowed, b->max_allowed) &&
              cf_same(a->headroom, b->headroom) && a->failure == b->failure &&
              a->n_first == b->n_first && cf_same(a->lambda, b->lambda) &&
              cf_same(a->p_fail, b->p_fail) &&
              cf_same(a->headroom_worst_case, b->headroom_worst_case) &&
              a->intermediate_overflows == b->intermediate_overflows &&
              a->first_overflow.index == b->first_overflow.index &&
              cf_same(a->first_overflow_peak, b->first_overflow_peak) &&
              a->has_ulp_hist == b->has_ulp_hist && a->nonfinite == b->nonfinite &&
              memcmp(a->ulp_hist, b->ulp_hist, sizeof a->ulp_hist) == 0;
    for (int k = 0; ok && k < a->n_first; k++)
        ok = a->first[k].index == b->first[k].index && cf_same(a->first[k].got, b->first[k].got) &&
             cf_same(a->first[k].ulp_err, b->first[k].ulp_err) &&
             a->first[k].kind == b->first[k].kind;
    return ok;
}

nv_tolerance cf_tol(nv_tol_metric m, double rtol)
{
    nv_tolerance t;
    memset(&t, 0, sizeof t);
    t.metric = m;
    t.max_ulp = 2;
    t.rtol = rtol;
    t.atol = 1e-30;
    t.reason_code = NV_REASON_APPROXIMATION_ERROR;
    strcpy(t.reason, "test");
    return t;
}

/* p + off, or NULL for NULL (no arithmetic on a null pointer). */
static const double *at(const double *p, int64_t off)
{
    return p ? p + off : NULL;
}

int cf_in_parts(const nv_compare_input *whole, const nv_tolerance *t, int64_t blk, double *ue,
                nv_compare_result *ret)
{
    static nv_compare_part acc, p;
    nv_compare_part_init(&acc, NULL);
    for (int64_t base = 0; base < whole->n; base += blk) {
        nv_compare_input in = *whole;
        in.n = whole->n - base < blk ? whole->n - base : blk;
        in.got = at(whole->got, base);
        in.exact = at(whole->exact, base);
        in.exact_lo = at(whole->exact_lo, base);
        in.abs_sum = at(whole->abs_sum, base);
        in.abs_exp = at(whole->abs_exp, base);
        in.peak = at(whole->peak, base);
        nv_compare_part_init(&p, ue);
        if (nv_compare_part_run(&in, base, whole->n, t, &p) < 0)
            return -1;
        nv_compare_part_merge(&acc, &p);
    }
    nv_compare_part_finish(&acc, whole->n, t, ret);
    return 0;
}
