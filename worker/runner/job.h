/* The job skeleton every kind's runner shares (op, gradient, fused, longrun):
 * parse the spec, load the backend, read describe() once on one context, let the
 * kind set itself up, run the cases on the case pool (one backend context per
 * thread, each case placed by its index, so the result does not depend on the
 * thread count) or the kind's own tasks, build the result, and turn every failure
 * into one message for users. A kind describes its steps in an nvw_runner; its job
 * state embeds an nvw_job_base, filled in by the skeleton. */
#ifndef NUMVAL_WORKER_RUNNER_JOB_H
#define NUMVAL_WORKER_RUNNER_JOB_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "numval/backend.h"
#include "run.h"

/* What every job holds while it runs: read-only while cases run, except the
 * case slots (each written by one thread) and the lock. */
typedef struct nvw_job_base {
    const json_t *spec_json;  /* the job spec (borrowed) */
    const char *backend_spec; /* the backend as given (named in errors and results) */
    const nvw_run_opts *opts; /* threads, progress, on_failure, cancel; may be NULL */
    const nv_backend *table;  /* the loaded backend's functions */
    const char *options;      /* the text passed to table->open */
    json_t *describe;         /* the backend's describe(), a JSON object (owned) */
    int64_t n_cases;          /* cases of the pool: set by the kind's setup */
    json_t **cases;           /* n_cases slots: case i in cases[i], whichever thread ran it */
    pthread_mutex_t lock;     /* serializes opts->on_failure */
    /* The spec's "deterministic": true on a kind that configures: det_answer is
     * what configure answered on a first context (an NVW_DET_* code,
     * runner/determinism.h), det_why the message when not honoured. */
    bool det_demanded;
    int det_answer;
    char det_why[768];
} nvw_job_base;

/* A kind's steps. job is the kind's state (which embeds the nvw_job_base given
 * to nvw_runner_run); step functions return 0 or a negative errno with a
 * message in *ret_err. */
typedef struct nvw_runner {
    const char *what;     /* a case, as named in "out of memory while running a WHAT" */
    const char *invalid;  /* the message of a refused spec whose parser gave none */
    bool backend_unnamed; /* describe() errors name "backend", not "backend 'SPEC'" */
    /* The spec's top-level "deterministic": true reaches every backend context
     * through configure (runner/determinism.h); op, gradient and fused. */
    bool configures;
    /* Parse base->spec_json into the kind's spec: as nv_jobspec_parse (-EINVAL
     * with the JSON pointer and message, both malloc'd, or -ENOMEM). */
    int (*parse)(void *job, char **ret_ptr, char **ret_msg);
    /* After the backend is loaded, before it is opened: refuse a backend without
     * an entry the kind needs (-ENOTSUP). May be NULL. */
    int (*check)(void *job, char **ret_err);
    /* After describe(): refusals and the kind's own state; a case-pool kind sets
     * base->n_cases. May be NULL. */
    int (*setup)(void *job, char **ret_err);
    /* Case i on the thread's backend context: the case JSON (new reference), NULL
     * on ENOMEM. NULL: the kind runs its own tasks with run. */
    json_t *(*run_case)(void *job, void *ctx, int64_t i);
    int (*run)(void *job, char **ret_err);
    /* The whole result (new reference), NULL on ENOMEM. */
    json_t *(*result)(void *job);
    /* Free what parse and setup made (called whatever happened; may be NULL). */
    void (*done)(void *job);
} nvw_runner;

/* Run a job of kind k with state job (zeroed by the caller) embedding base.
 * Same contract as nvw_run_job (worker/kinds/kinds.h): 0 with *ret_result (a new
 * reference); -EINVAL for a bad spec (*ret_err names the JSON pointer); -ENODEV
 * when the backend cannot be loaded or opened, -EPROTO for an invalid describe(),
 * the kind's own refusals, -ECANCELED, -ENOMEM (*ret_err set, malloc'd). */
int nvw_runner_run(const nvw_runner *k, nvw_job_base *base, void *job, const json_t *spec,
                   const char *backend_spec, const nvw_run_opts *opts, json_t **ret_result,
                   char **ret_err);

/* describe() of a backend on a context of its own, opened and closed here: the
 * parsed JSON object in *ret (new reference; a backend without describe gives {}).
 * -ENODEV when the context does not open ("WHO failed to open: DETAIL"), -EPROTO
 * when describe() is not a JSON object ("WHO returned an invalid describe()
 * JSON"); who names the backend ("backend 'emu'"). */
int nvw_read_describe(const nv_backend *table, const char *options, const char *who, json_t **ret,
                      char **ret_err);

/* Over base->cases: the verdict ("failed" when a case failed, else "error"
 * when one erred or has no verdict, else "passed"); the summary {"cases",
 * "passed", "failed", "errors"} (new reference); the cases as an array (each
 * a new reference). The JSON ones are NULL on ENOMEM. */
const char *nvw_result_verdict(const nvw_job_base *base);
json_t *nvw_result_summary(const nvw_job_base *base);
json_t *nvw_result_cases(const nvw_job_base *base);

/* The head of a kind's result (fused, model, rng), its keys in this order:
 * "verdict" (nvw_result_verdict), "kind" and "op" (both kind), "graph_hash"
 * (left out when graph_hash is NULL), "backend", describe()'s "device",
 * "mode", "contract" and "build" (as "backend_build"), "build" (the spec's,
 * else describe()'s) and "seed". The kind adds its own keys, then
 * nvw_result_close. New reference, NULL on ENOMEM. */
json_t *nvw_result_open(const nvw_job_base *base, const char *kind, const char *graph_hash,
                        uint64_t seed);
/* Append "summary" (nvw_result_summary), "cases" (nvw_result_cases) and the
 * spec's "name" where it has one to r (stolen): r, or NULL on ENOMEM (r
 * freed). */
json_t *nvw_result_close(const nvw_job_base *base, json_t *r);
/* nvw_result_open with key: value where graph_hash goes (the job's subject: a
 * serving job's "check"). */
json_t *nvw_result_open_keyed(const nvw_job_base *base, const char *kind, const char *key,
                              const char *value, uint64_t seed);

/* Hand a failed case to base->opts->on_failure (serially, under base->lock):
 * the failure record of case case_index (case_json, manifest, the n tensors
 * and their names). When it stored an artifact, its id is set as
 * case_json's "artifact" and 1 is returned; 0 when nothing was stored (no
 * on_failure, or it failed); -ENOMEM. */
int nvw_store_failure(nvw_job_base *base, json_t *case_json, int case_index,
                      const json_t *manifest, int n, const char *const *names,
                      const nv_tensor *const *tensors);

/* A double as JSON: a number when finite, else "nan", "inf" or "-inf" (JSON has
 * no non-finite numbers). */
json_t *nvw_json_num(double x);

#endif
