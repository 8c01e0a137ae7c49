/* RNG jobs (rng.h): the job skeleton of worker/runner/job.h with the RNG
 * kind's steps: parse the spec, refuse a backend without an rng entry, run
 * the cases (one check each) on the case pool, build the result. Each case
 * seeds every generator it uses, so cases sharing a thread's context do not
 * see each other's state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rng_internal.h"
#include "worker/runner/err.h"

static int r_parse(void *job, char **ret_ptr, char **ret_msg)
{
    rjob *j = job;
    return nv_rngspec_parse(j->b.spec_json, &j->s, ret_ptr, ret_msg);
}

static int r_check(void *job, char **ret_err)
{
    const rjob *j = job;
    const nv_backend *t = j->b.table;
    if (t->rng)
        return 0;
    if (t->abi_version < 4)
        return nvw_set_err(ret_err, -ENOTSUP,
                           "not offered: backend '%s' was built for backend ABI version %u, "
                           "which has no rng entry (RNG jobs need version 4): rebuild it "
                           "against this numval's include/numval/backend.h",
                           j->b.backend_spec, (unsigned)t->abi_version);
    return nvw_set_err(ret_err, -ENOTSUP,
                       "not offered: backend '%s' has no rng entry (RNG jobs drive the "
                       "device's generators through it, backend ABI version 4)",
                       j->b.backend_spec);
}

static int r_setup(void *job, char **ret_err)
{
    (void)ret_err;
    rjob *j = job;
    j->b.n_cases = j->s->n_cases;
    return 0;
}

static json_t *r_case(void *job, void *ctx, int64_t i)
{
    rjob *j = job;
    rcase c = {.j = j, .s = j->s, .ctx = ctx};
    nv_rng_check check;
    nv_rngspec_case(j->s, i, &check, &c.pi);
    c.cj = json_pack("{sI ss ss sI}", "index", (json_int_t)i, "op", "rng", "check",
                     nv_rng_check_name(check), "seed", (json_int_t)j->s->seed);
    c.tests = json_array();
    if (!c.cj || !c.tests || json_object_set(c.cj, "tests", c.tests) ||
        (c.pi >= 0 && json_object_set_new(c.cj, "p", json_real(j->s->p[c.pi])))) {
        json_decref(c.cj);
        json_decref(c.tests);
        return NULL;
    }
    json_decref(c.tests); /* cj holds it */
    int r;
    switch (check) {
    case NV_RNGC_SEEDING:
        r = rg_check_seeding(&c);
        break;
    case NV_RNGC_STATE:
        r = rg_check_state(&c);
        break;
    case NV_RNGC_STREAMS:
        r = rg_check_streams(&c);
        break;
    case NV_RNGC_DROPOUT:
        r = rg_check_dropout(&c);
        break;
    default:
        r = rg_check_recompute(&c);
        break;
    }
    if (r == 0 && !json_object_get(c.cj, "verdict") &&
        json_object_set_new(c.cj, "verdict", json_string("passed")))
        r = -ENOMEM;
    if (r < 0) {
        json_decref(c.cj);
        return NULL;
    }
    return c.cj;
}

/* The head and tail of nvw_result_open / nvw_result_close (no graph), the
 * job's settings between them. */
static json_t *r_result(void *job)
{
    const rjob *j = job;
    const nv_rngspec *s = j->s;
    json_t *r = nvw_result_open(&j->b, "rng", NULL, s->seed);
    json_t *ps = json_array();
    for (int i = 0; ps && i < s->n_p; i++)
        if (json_array_append_new(ps, json_real(s->p[i]))) {
            json_decref(ps);
            ps = NULL;
        }
    json_t *settings = json_pack("{s:I, s:i, s:i, s:{s:o, s:I, s:I, s:f}}", "n", (json_int_t)s->n,
                                 "streams", s->streams, "window", s->window, "dropout", "p", ps,
                                 "n", (json_int_t)s->dropout_n, "offset", (json_int_t)s->offset,
                                 "alpha", s->alpha);
    if (r && (!settings || json_object_update(r, settings))) {
        json_decref(r);
        r = NULL;
    }
    json_decref(settings);
    return nvw_result_close(&j->b, r);
}

static void r_done(void *job)
{
    free(((rjob *)job)->s);
}

static const nvw_runner rng_runner = {.what = "RNG case",
                                      .invalid = "invalid RNG job",
                                      .parse = r_parse,
                                      .check = r_check,
                                      .setup = r_setup,
                                      .run_case = r_case,
                                      .result = r_result,
                                      .done = r_done};

int nvw_run_rng(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                json_t **ret_result, char **ret_err)
{
    rjob j;
    memset(&j, 0, sizeof j);
    return nvw_runner_run(&rng_runner, &j.b, &j, spec, backend_spec, opts, ret_result, ret_err);
}
