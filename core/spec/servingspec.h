/* Serving job specs (docs/JOBS.md "Serving jobs", docs/SERVING.md): a
 * decoder-only LM given by its sizes, served op by op, and one serving check.
 * The decoder is the model kind's "decoder-lm" (suites/model.json) with its
 * parameter names and init rules, so a serving job and a model job of the same
 * sizes and seed hold the same weights. In core/spec so numvald refuses a bad
 * job with the code the worker runs. */
#ifndef NUMVAL_SERVINGSPEC_H
#define NUMVAL_SERVINGSPEC_H

#include <jansson.h>
#include <stdint.h>

#include "core/numerics/dtype.h"

#define NV_SERVING_MAX_CASES 1000
#define NV_SERVING_MAX_OTHERS 8         /* batch: other requests */
#define NV_SERVING_MAX_REQUESTS 64      /* sustained: requests of the schedule */
#define NV_SERVING_MAX_CONTEXT 16384    /* long_context positions */
#define NV_SERVING_MAX_CACHE (1 << 23)  /* layers x context x width: KV-cache values per side */
#define NV_SERVING_MAX_SCORES (1 << 24) /* heads x prompt^2: a prefill's attention scores */
#define NV_SERVING_MAX_DRAWS 1000000    /* sampling: draws of the distribution test */

typedef enum nv_serving_check {
    NV_SERVE_PREFILL_DECODE, /* one prefill vs token by token through the KV cache */
    NV_SERVE_LONG_CONTEXT,   /* decode to a long context against the references */
    NV_SERVE_BATCH,          /* a request alone vs inside batches (padded, packed) */
    NV_SERVE_SUSTAINED,      /* continuous batching over a seeded arrival schedule */
    NV_SERVE_PAGED,          /* a paged KV cache under a page budget: eviction, recomputation */
    NV_SERVE_SAMPLING,       /* repeated seeded sampling: reproducible, and the reference's law */
    NV_SERVE_CHECK_COUNT
} nv_serving_check;

#define NV_SERVING_MAX_PATH 1024 /* bytes of a checkpoint path, its NUL included */

typedef struct nv_servingspec {
    int vocab, width, heads, layers, ffn;
    double rope_base;
    nv_serving_check check;
    int prompt;      /* prefill_decode, batch: the request's prompt length */
    int context;     /* long_context: positions decoded */
    int every;       /* long_context: one reported point per `every` positions */
    int steps;       /* batch: decode steps after the prompts; sustained: the longest generation */
    int requests;    /* sustained: requests of the schedule */
    int page, pages; /* paged: positions per page, the page budget */
    int n_others;
    int others[NV_SERVING_MAX_OTHERS]; /* batch: the other requests' prompt lengths */
    double temperature, top_p;         /* sampling: the sample op's attributes */
    int top_k;
    int draws;                         /* sampling: draws of the distribution test */
    int n_dtypes;
    nv_dtype dtypes[NV_DT_COUNT];
    int samples;
    uint64_t seed;
    int64_t n_cases;
    /* "weights": a safetensors checkpoint under the model kind's parameter
     * names (docs/SERVING.md "Weights"); "" for the seeded init */
    char weights[NV_SERVING_MAX_PATH];
    char weights_sha256[65]; /* "weights.sha256" in lowercase, "" when not given */
} nv_servingspec;

/* The check's name in specs and results ("prefill_decode", ...). */
const char *nv_serving_check_name(nv_serving_check c);

/* Validate and parse; same contract as nv_jobspec_parse (jobspec.h): -EINVAL
 * with the JSON pointer and a message, or -ENOMEM. *ret is the caller's (free). */
int nv_servingspec_parse(const json_t *spec, nv_servingspec **ret, char **ret_pointer,
                         char **ret_msg);
int nv_servingspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

/* The case dtype and sample of case i (dtype-major). */
void nv_servingspec_case(const nv_servingspec *s, int64_t i, nv_dtype *ret_dt, int *ret_sample);

#endif
