/* RNG job spec validation (docs/JOBS.md "RNG jobs"). Every error names the JSON
 * pointer and the offending value (spec_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rngspec.h"
#include "spec_internal.h"

static const char *const check_names[NV_RNGC_COUNT] = {
    [NV_RNGC_SEEDING] = "seeding", [NV_RNGC_STATE] = "state",         [NV_RNGC_STREAMS] = "streams",
    [NV_RNGC_DROPOUT] = "dropout", [NV_RNGC_RECOMPUTE] = "recompute",
};

const char *nv_rng_check_name(nv_rng_check c)
{
    return c < NV_RNGC_COUNT ? check_names[c] : "?";
}

static const char *const top_keys[] = {"kind",   "name",    "description", "device",  "priority",
                                       "build",  "seed",    "n",           "streams", "window",
                                       "checks", "dropout", NULL};
static const char *const dropout_keys[] = {"p", "n", "offset", "alpha", NULL};

static int parse_dropout(nv_spec_err *e, const json_t *spec, nv_rngspec *s)
{
    const json_t *d = json_object_get(spec, "dropout");
    if (d && !json_is_object(d))
        return nv_spec_fail_value(e, "/dropout", d, "must be an object");
    int r = nv_spec_no_unknown(e, d, dropout_keys, "/dropout", false, "in dropout");
    /* 2^16 elements: at alpha 1e-6 the keep-rate test detects a keep rate off
     * by 0.013 (p = 0.5) or 0.0077 (p = 0.1) with power 0.95 (docs/JOBS.md
     * "RNG jobs"); 2^22 bounds a mask's memory at 16 MiB. */
    r = r ? r : nv_spec_int(e, d, "/dropout", "n", 65536, 1024, 1 << 22, &s->dropout_n);
    r = r ? r : nv_spec_int(e, d, "/dropout", "offset", 1000, 0, 1 << 24, &s->offset);
    /* alpha: the probability that a correct generator fails the keep-rate
     * test; 0.05 is the loosest a check that runs nightly should have. */
    r = r ? r : nv_spec_number(e, d, "/dropout", "alpha", 1e-6, 1e-12, 0.05, &s->alpha);
    if (r)
        return r;
    const json_t *a = json_object_get(d, "p");
    if (!a) {
        s->n_p = 2;
        s->p[0] = 0.1;
        s->p[1] = 0.5;
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > NV_RNG_MAX_P)
        return nv_spec_fail_value(e, "/dropout/p", a,
                                  "must be an array of 1 to 8 drop probabilities");
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/dropout/p/%zu", i);
        double p = json_number_value(v);
        if (!json_is_number(v) || !(p > 0 && p < 1))
            return nv_spec_fail_value(e, ptr, v, "must be a drop probability in (0, 1)");
        /* The keep-rate test is a normal approximation to the binomial: with
         * n p (1 - p) >= 100 its tail error (Berry-Esseen) stays below 0.05
         * of the tail itself at the test's z. */
        if ((double)s->dropout_n * p * (1 - p) < 100)
            return nv_spec_fail(e, ptr,
                                "p = %g with dropout.n = %lld gives n p (1-p) = %.1f < 100: the "
                                "keep-rate test needs more elements",
                                p, (long long)s->dropout_n, (double)s->dropout_n * p * (1 - p));
        s->p[s->n_p++] = p;
    }
    return 0;
}

static int parse_all(const json_t *spec, void *ret, nv_spec_err *e)
{
    nv_rngspec *s = ret;
    if (nv_spec_kind_of(spec) != NV_SPEC_KIND_RNG)
        return nv_spec_fail(e, "/kind", "an RNG spec has \"kind\": \"rng\"");
    int64_t seed;
    int r = nv_spec_no_unknown(e, spec, top_keys, "", false, "in an RNG spec");
    /* seed < 2^53 so every seed (and seed + streams) is exact in JSON and in
     * a harness's double. */
    r = r ? r : nv_spec_int(e, spec, "", "seed", 1, 0, (1ll << 53) - 64, &seed);
    /* n >= 64 so a draw holds windows enough to show an overlap; 2^20 bounds it. */
    r = r ? r : nv_spec_int(e, spec, "", "n", 4096, 64, 1 << 20, &s->n);
    r = r ? r : nv_spec_int32(e, spec, "", "streams", 8, 2, 64, &s->streams);
    /* window 2..8: a shorter window shares by chance, a longer one misses
     * short overlaps (docs/JOBS.md "RNG jobs", the streams check). */
    r = r ? r : nv_spec_int32(e, spec, "", "window", 3, 2, 8, &s->window);
    r = r ? r : nv_spec_names(e, spec, "checks", check_names, NV_RNGC_COUNT, "check", s->check);
    r = r ? r : parse_dropout(e, spec, s);
    if (r)
        return r;
    s->seed = (uint64_t)seed;
    if (s->check[NV_RNGC_STREAMS] && 2 * s->streams * s->n > NV_RNG_MAX_WINDOWS)
        return nv_spec_fail(e, "/streams",
                            "streams x 2 x n = %lld windows is more than the overlap test sorts "
                            "(%d): fewer streams or a smaller n",
                            (long long)(2 * s->streams * s->n), NV_RNG_MAX_WINDOWS);
    s->n_cases = s->check[NV_RNGC_SEEDING] + s->check[NV_RNGC_STATE] + s->check[NV_RNGC_STREAMS] +
                 (int64_t)s->n_p * (s->check[NV_RNGC_DROPOUT] + s->check[NV_RNGC_RECOMPUTE]);
    if (s->n_cases == 0)
        return nv_spec_fail(e, "/checks", "the job has no case");
    return 0;
}

void nv_rngspec_case(const nv_rngspec *s, int64_t i, nv_rng_check *ret_check, int *ret_p)
{
    for (int c = NV_RNGC_SEEDING; c <= NV_RNGC_STREAMS; c++)
        if (s->check[c] && i-- == 0) {
            *ret_check = (nv_rng_check)c;
            *ret_p = -1;
            return;
        }
    int per = s->check[NV_RNGC_DROPOUT] + s->check[NV_RNGC_RECOMPUTE];
    *ret_p = per ? (int)(i / per) : 0;
    *ret_check = s->check[NV_RNGC_DROPOUT] && i % per == 0 ? NV_RNGC_DROPOUT : NV_RNGC_RECOMPUTE;
}

int nv_rngspec_parse(const json_t *spec, nv_rngspec **ret, char **ret_pointer, char **ret_msg)
{
    void *s = NULL;
    int r = nv_spec_parse_new(spec, sizeof(nv_rngspec), parse_all, &s, ret_pointer, ret_msg);
    if (r == 0)
        *ret = s;
    return r;
}

int nv_rngspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_rngspec *s = NULL;
    int r = nv_rngspec_parse(spec, &s, ret_pointer, ret_msg);
    free(s);
    return r;
}
