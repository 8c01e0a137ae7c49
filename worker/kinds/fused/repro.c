/* Fused failures rebuilt from their artifact, their signature and subgraphs
 * (repro_fused.h). The artifact is the only source: the graph, the case's dtype
 * and class, every graph input and every node's fused value must be there. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/artifact.h"
#include "common/sha256.h"
#include "core/numerics/dtype.h"
#include "repro_fused.h"
#include "worker/repro/artifact.h"
#include "worker/repro/repro_util.h"

/* An -EINVAL with its message in *ret_err. */
#define fail(ret_err, ...) nvw_set_err((ret_err), -EINVAL, __VA_ARGS__)

void nvw_frepro_free(nvw_frepro *fr)
{
    if (!fr)
        return;
    int ni = fr->g ? fr->g->n_inputs : 0, nn = fr->g ? fr->g->n_nodes : 0;
    for (int i = 0; fr->in && i < ni; i++)
        nv_tensor_free(fr->in[i]);
    for (int k = 0; k < nn; k++) {
        if (fr->fus)
            nv_tensor_free(fr->fus[k]);
        if (fr->ref)
            nv_tensor_free(fr->ref[k]);
    }
    free(fr->in);
    free(fr->fus);
    free(fr->ref);
    nv_graph_free(fr->g);
    json_decref(fr->spec);
    json_decref(fr->manifest);
    free(fr);
}

/* Decode artifact tensor name into a tensor of dtype want and shape (nd, sh). */
static int tensor_of(const nv_artifact *a, const char *name, nv_dtype want, int nd,
                     const int64_t *sh, bool any_dtype, nv_tensor **ret, char **ret_err)
{
    const nv_artifact_tensor *at = nv_artifact_find(a, name);
    if (!at)
        return fail(ret_err, "artifact has no tensor '%s'", name);
    bool fits = at->ndim == nd && (any_dtype ? nv_dtype_get((nv_dtype)at->dtype) != NULL
                                             : at->dtype == (int32_t)want);
    for (int d = 0; fits && d < nd; d++)
        fits = at->shape[d] == sh[d];
    if (!fits)
        return fail(ret_err, "artifact tensor '%s' does not have the graph's dtype and shape",
                    name);
    nv_tensor *t = nvw_artifact_values(at);
    if (!t)
        return -ENOMEM;
    *ret = t;
    return 0;
}

static void copy_str(char *dst, const json_t *v)
{
    snprintf(dst, NVW_FNAME_MAX, "%s", json_string_value(v) ? json_string_value(v) : "");
}

/* The probe spec: the job's, with one dtype and one input class (the case's). */
static int probe_spec(nvw_frepro *fr, const json_t *spec, const json_t *c, char **ret_err)
{
    const char *cls = json_string_value(json_object_get(c, "input"));
    if (!cls)
        return fail(ret_err, "artifact case has no 'input' (the input class)");
    fr->spec = json_deep_copy(spec);
    if (!fr->spec)
        return -ENOMEM;
    json_object_del(fr->spec, "samples");
    json_object_del(fr->spec, "build");
    int e = json_object_set_new(fr->spec, "inputs", json_pack("[s]", cls));
    if (json_object_get(spec, "dtypes"))
        e |= json_object_set_new(fr->spec, "dtypes", json_pack("[s]", nv_dtype_name(fr->dt)));
    return e ? -ENOMEM : 0;
}

static int from_artifact(nvw_frepro *fr, const nv_artifact *a, char **ret_err)
{
    const json_t *m = fr->manifest, *spec = json_object_get(m, "spec");
    const json_t *c = json_object_get(m, "case"), *fd = json_object_get(m, "first_divergent");
    if (!json_is_object(c) || !json_is_object(json_object_get(spec, "graph")))
        return fail(ret_err, "fused artifact manifest needs 'spec' with 'graph' and 'case'");
    if (!json_is_object(fd) || !json_is_string(json_object_get(m, "failure_class")))
        return fail(ret_err, "fused artifact manifest has no 'first_divergent' node and "
                             "'failure_class' (not a failed case)");
    copy_str(fr->cls, json_object_get(m, "failure_class"));
    copy_str(fr->op, json_object_get(fd, "op"));
    copy_str(fr->judge, json_object_get(fd, "dtype"));
    copy_str(fr->node, json_object_get(fd, "node"));
    const char *dn = json_string_value(json_object_get(c, "dtype"));
    if (!dn || nv_dtype_from_name(dn, &fr->dt) < 0)
        return fail(ret_err, "artifact case dtype '%s' is not a dtype", dn ? dn : "");
    char *ptr = NULL, *msg = NULL;
    int r = nv_graph_parse(json_object_get(spec, "graph"), "/spec/graph", &fr->g, &ptr, &msg);
    if (r == 0)
        r = nv_graph_infer(fr->g, fr->dt, "/spec/graph", &ptr, &msg);
    if (r < 0) {
        fail(ret_err, "artifact graph: %s: %s", ptr ? ptr : "", msg ? msg : "out of memory");
        free(ptr);
        free(msg);
        return r;
    }
    if ((r = probe_spec(fr, spec, c, ret_err)) < 0)
        return r;
    const nv_graph *g = fr->g;
    fr->in = calloc((size_t)g->n_inputs, sizeof *fr->in);
    fr->fus = calloc((size_t)g->n_nodes, sizeof *fr->fus);
    fr->ref = calloc((size_t)g->n_nodes, sizeof *fr->ref);
    if (!fr->in || !fr->fus || !fr->ref)
        return -ENOMEM;
    char name[NV_GRAPH_MAX_NAME + 16];
    for (int i = 0; r == 0 && i < g->n_inputs; i++) {
        const nv_graph_input *gi = &g->inputs[i];
        snprintf(name, sizeof name, "input:%s", gi->name);
        r = tensor_of(a, name, gi->dtype, gi->ndim, gi->shape, false, &fr->in[i], ret_err);
    }
    const char *ex =
        json_string_value(json_object_get(json_object_get(spec, "composition"), "execution"));
    snprintf(fr->stored, sizeof fr->stored, "%s", ex && !strcmp(ex, "unfused") ? "unfused:" : "fused:");
    for (int k = 0; r == 0 && k < g->n_nodes; k++) {
        const nv_graph_node *n = &g->nodes[k];
        snprintf(name, sizeof name, "%s%s", fr->stored, n->name);
        r = tensor_of(a, name, n->dtype, n->ndim, n->shape, true, &fr->fus[k], ret_err);
    }
    return r;
}

int nvw_frepro_from_artifact(const nv_artifact *a, const char *sha, nvw_frepro **ret,
                             char **ret_err)
{
    const char *kind =
        json_string_value(json_object_get(json_object_get(a->manifest, "spec"), "kind"));
    if (!kind || strcmp(kind, "fused"))
        return -ENOTSUP;
    nvw_frepro *fr = calloc(1, sizeof *fr);
    if (!fr)
        return -ENOMEM;
    snprintf(fr->sha, sizeof fr->sha, "%s", sha ? sha : "");
    fr->manifest = json_incref(a->manifest);
    int r = from_artifact(fr, a, ret_err);
    if (r < 0) {
        nvw_frepro_free(fr);
        return r;
    }
    *ret = fr;
    return 0;
}

/* Decode buf (named what in errors) and rebuild it. */
static int from_buffer(const uint8_t *buf, size_t len, const char *what, nvw_frepro **ret,
                       char **ret_err)
{
    char sha[65];
    nv_sha256_hex(buf, len, sha);
    nv_artifact *a = NULL;
    char *derr = NULL;
    int r = nv_artifact_decode(buf, len, &a, &derr);
    if (r < 0) {
        fail(ret_err, "'%s' is not a valid artifact: %s", what, derr ? derr : strerror(-r));
        free(derr);
        return r == -ENOMEM ? r : -EINVAL;
    }
    r = nvw_frepro_from_artifact(a, sha, ret, ret_err);
    nv_artifact_free(a);
    return r;
}

int nvw_frepro_from_buffer(const uint8_t *buf, size_t len, nvw_frepro **ret, char **ret_err)
{
    char what[80];
    snprintf(what, sizeof what, "artifact of %zu bytes", len);
    return from_buffer(buf, len, what, ret, ret_err);
}

int nvw_frepro_load(const char *path, nvw_frepro **ret, char **ret_err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = nvw_read_file(path, &buf, &len);
    if (r < 0) {
        fail(ret_err, "cannot read '%s': %s", path, strerror(-r));
        return r == -ENOMEM ? r : -EINVAL;
    }
    r = from_buffer(buf, len, path, ret, ret_err);
    free(buf);
    return r;
}

json_t *nvw_frepro_signature(const nvw_frepro *fr, const char *op, const char *judge,
                             const char *cls)
{
    const json_t *mode = json_object_get(fr->manifest, "mode");
    json_t *s = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s}", "kind", "fused", "op", op ? op : fr->op,
                          "dtype", judge ? judge : fr->judge, "case_dtype", nv_dtype_name(fr->dt),
                          "mode", mode ? mode : json_null(), "failure_class", cls ? cls : fr->cls);
    char *text = s ? json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char id[65];
    if (!text) {
        json_decref(s);
        return NULL;
    }
    nv_sha256_hex(text, strlen(text), id);
    free(text);
    if (json_object_set_new(s, "id", json_string(id))) {
        json_decref(s);
        return NULL;
    }
    return s;
}
