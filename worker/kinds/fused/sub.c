/* One fused case on given inputs (worker/kinds/fused/sub.h), through the fused runner's
 * own case code (nvw_fused_case with fjob.given). */
#include "sub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "fused_internal.h"
#include "worker/runner/err.h"

/* The given inputs must match the graph's inputs for the case dtype. */
static int check_given(const nv_fusedspec *s, nv_tensor *const *given, int n, char **ret_err)
{
    const nv_graph *g = s->graph;
    if (n != g->n_inputs)
        return nvw_set_err(ret_err, -EINVAL, "%d input tensors given, the graph has %d inputs", n,
                           g->n_inputs);
    for (int i = 0; i < n; i++) {
        const nv_graph_input *gi = &g->inputs[i];
        const nv_tensor *t = given[i];
        bool fits = t && t->ndim == gi->ndim && t->offset == 0;
        for (int d = 0; fits && d < gi->ndim; d++)
            fits = t->shape[d] == gi->shape[d];
        if (fits && gi->dtype_set)
            fits = t->dtype == gi->dtype;
        if (fits && !gi->dtype_set)
            fits = s->n_dtypes == 1 && t->dtype == s->dtypes[0];
        if (!fits)
            return nvw_set_err(ret_err, -EINVAL,
                               "input tensor '%s' does not fit the graph input (dtype or shape)",
                               gi->name);
    }
    return 0;
}

static int describe(fjob *j, json_t **ret_mode, char **ret_err)
{
    char who[600];
    snprintf(who, sizeof who, "backend '%s'", j->b.backend_spec);
    int r = nvw_read_describe(j->b.table, j->b.options, who, &j->b.describe, ret_err);
    if (r < 0)
        return r == -EPROTO ? -EINVAL : r;
    if (ret_mode)

        *ret_mode = json_incref(json_object_get(j->b.describe, "mode"));
    return 0;
}

int nvw_fused_run_given(const json_t *spec, const char *backend_spec, const nv_backend *table,
                        const char *options, nv_tensor *const *given, int n_given,
                        nvw_failure_fn on_failure, void *ud, json_t **ret_case, json_t **ret_mode,
                        char **ret_err)
{
    if (!table->graph)
        return nvw_set_err(ret_err, -ENOTSUP, "backend '%s' has no graph entry", backend_spec);
    fjob j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.b.lock, NULL);
    nvw_run_opts opts = {.threads = 1, .on_failure = on_failure, .ud = ud};
    j.b.spec_json = spec;
    j.b.backend_spec = backend_spec;
    j.b.table = table;
    j.b.options = options;
    j.b.opts = &opts;
    j.given = given;
    char *ptr = NULL, *msg = NULL;
    json_t *mode = NULL;
    void *ctx = NULL;
    int r = nv_fusedspec_parse(spec, &j.s, &ptr, &msg);
    if (r < 0) {
        nvw_set_err(ret_err, r, "the fused spec is refused: %s: %s", ptr ? ptr : "",
                    msg ? msg : "out of memory");
        goto out;
    }
    if (j.s->n_cases != 1) {
        r = nvw_set_err(ret_err, -EINVAL, "the spec has %lld cases, one is needed",
                        (long long)j.s->n_cases);
        goto out;
    }
    nv_sha256_hex(j.s->graph_text, strlen(j.s->graph_text), j.graph_hash);
    if ((r = check_given(j.s, given, n_given, ret_err)) < 0 ||
        (r = describe(&j, ret_mode ? &mode : NULL, ret_err)) < 0)
        goto out;
    char err[512] = "";
    if (table->open(options, &ctx, err, sizeof err) != NV_OK) {
        r = nvw_set_err(ret_err, -ENODEV, "backend '%s' failed to open: %s", backend_spec, err);
        goto out;
    }
    json_t *c = nvw_fused_case(&j, ctx, 0);
    table->close(ctx);
    if (!c) {
        r = -ENOMEM;
        goto out;
    }
    *ret_case = c;
    if (ret_mode) {
        *ret_mode = mode;
        mode = NULL;
    }
out:
    json_decref(mode);
    json_decref(j.b.describe);
    nv_fusedspec_free(j.s);
    free(ptr);
    free(msg);
    pthread_mutex_destroy(&j.b.lock);
    return r;
}
