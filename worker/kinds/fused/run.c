/* Fused jobs (worker/kinds/fused/fused.h): parse the spec, load the backend, refuse one without
 * a graph entry, run the cases on a pool of threads (one backend context each,
 * results placed by case index so the output does not depend on the thread
 * count) and build the result. The per-case work is in worker/kinds/fused/case.c. */
#include "fused.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/runner/case_pool.h"
#include "common/sha256.h"
#include "worker/repro/repro_util.h"

/* Case i of the pool (case_pool.h), placed by its index so that the result
 * does not depend on the thread count. */
static json_t *pool_case(void *job, void *ctx, int64_t i)
{
    return nvw_fused_case(job, ctx, i);
}

/* Sets *ret to the message (repro_util.h) and returns 0. */
#define set_err(ret, ...) nvw_set_err((ret), 0, __VA_ARGS__)

static int read_describe(fjob *j, char **ret_err)
{
    if (!j->table->graph) {
        set_err(ret_err,
                "backend '%s' has no graph entry (nv_backend.graph is NULL): it cannot "
                "run fused jobs; op jobs still run on it",
                j->backend_spec);
        return -ENOTSUP;
    }
    void *ctx = NULL;
    char err[512] = "";
    if (j->table->open(j->options, &ctx, err, sizeof err) != NV_OK) {
        set_err(ret_err, "backend '%s' failed to open: %s", j->backend_spec, err);
        return -ENODEV;
    }
    const char *text = j->table->describe ? j->table->describe(ctx) : NULL;
    json_error_t jerr;
    j->describe = text ? json_loads(text, 0, &jerr) : json_object();
    j->table->close(ctx);
    if (!json_is_object(j->describe)) {
        set_err(ret_err, "backend '%s' returned an invalid describe() JSON", j->backend_spec);
        return -EPROTO;
    }
    return 0;
}

static json_t *result(const fjob *j)
{
    int64_t n = j->s->n_cases, passed = 0, failed = 0, errors = 0;
    json_t *cases = json_array();
    for (int64_t i = 0; cases && i < n; i++) {
        const char *v = json_string_value(json_object_get(j->cases[i], "verdict"));
        passed += v && !strcmp(v, "passed");
        failed += v && !strcmp(v, "failed");
        errors += !v || !strcmp(v, "error");
        json_array_append(cases, j->cases[i]);
    }
    json_t *build = json_object_get(j->spec_json, "build");
    json_t *r = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:I, s:{s:I, s:I, s:I, s:I}, "
        "s:o}",
        "verdict",
        failed   ? "failed"
        : errors ? "error"
                 : "passed",
        "kind", "fused", "op", "fused", "graph_hash", j->graph_hash, "backend", j->backend_spec,
        "device", json_object_get(j->describe, "device"), "mode",
        json_object_get(j->describe, "mode"), "contract", json_object_get(j->describe, "contract"),
        "backend_build", json_object_get(j->describe, "build"), "build",
        build ? build : json_object_get(j->describe, "build"), "seed", (json_int_t)j->s->seed,
        "summary", "cases", (json_int_t)n, "passed", (json_int_t)passed, "failed",
        (json_int_t)failed, "errors", (json_int_t)errors, "cases", cases);
    const char *name = json_string_value(json_object_get(j->spec_json, "name"));
    if (r && name)
        json_object_set_new(r, "name", json_string(name));
    if (r)
        json_object_set_new(r, "intermediate_dtype",
                            json_string(nv_dtype_name(j->s->intermediate)));
    return r;
}

int nvw_run_fused(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err)
{
    fjob j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.lock, NULL);
    j.spec_json = spec;
    j.backend_spec = backend_spec;
    j.opts = opts;
    nvw_backend *b = NULL;
    char *ptr = NULL, *msg = NULL, *e = NULL;
    int r = nv_fusedspec_parse(spec, &j.s, &ptr, &msg);
    if (r < 0) {
        if (r == -EINVAL)
            set_err(&e, "%s%s%s", ptr ? ptr : "", ptr && *ptr ? ": " : "",
                    msg ? msg : "invalid fused job");
        goto out;
    }
    nv_sha256_hex(j.s->graph_text, strlen(j.s->graph_text), j.graph_hash);
    char err[512] = "";
    r = nvw_backend_load(backend_spec, &b, err, sizeof err);
    if (r < 0) {
        set_err(&e, "%s", err[0] ? err : "could not load the backend");
        r = r == -ENOMEM ? r : -ENODEV;
        goto out;
    }
    j.table = nvw_backend_table(b);
    j.options = nvw_backend_options(b);
    if ((r = read_describe(&j, &e)) < 0)
        goto out;
    j.cases = calloc((size_t)j.s->n_cases + 1, sizeof *j.cases);
    if (!j.cases) {
        r = -ENOMEM;
        goto out;
    }
    nvw_case_pool_job pj = {.opts = opts,
                            .backend = {j.table, j.options, backend_spec},
                            .n = j.s->n_cases,
                            .run = pool_case,
                            .job = &j,
                            .cases = j.cases,
                            .what = "fused case"};
    if ((r = nvw_case_pool_run_job(&pj, &e)) < 0)
        goto out;
    json_t *res = result(&j);
    if (!res) {
        r = -ENOMEM;
        goto out;
    }
    *ret_result = res;
out:
    if (r == -ENOMEM && !e)
        set_err(&e, "out of memory");
    if (r < 0 && ret_err)
        *ret_err = e;
    else
        free(e);
    for (int64_t i = 0; j.cases && i < j.s->n_cases; i++)
        json_decref(j.cases[i]);
    free(j.cases);
    json_decref(j.describe);
    nv_fusedspec_free(j.s);
    nvw_backend_free(b);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&j.lock);
    return r;
}
