/* Fused job validation (fusedspec.h, docs/JOBS.md "Fused jobs"): the graph
 * (graph.c) plus the case axes, seed and tolerances. Every error names the
 * field by JSON pointer and the value in quotes (field checkers and the error
 * record: core/spec/spec_internal.h; the graph's own errors, graph.h, enter the
 * record through nv_spec_fail_from). */
#include "fusedspec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"
#include "spec_internal.h"

static const char *const fused_keys[] = {"kind",
                                         "graph",
                                         "dtypes",
                                         "inputs",
                                         "samples",
                                         "seed",
                                         "build",
                                         "name",
                                         "device",
                                         "priority",
                                         "description",
                                         "tolerance",
                                         "node_tolerances",
                                         "intermediate_dtype",
                                         "tolerance_by_dtype",
                                         "composition",
                                         "deterministic",
                                         NULL};

bool nv_fusedspec_is(const json_t *spec)
{
    return nv_spec_kind_of(spec) == NV_SPEC_KIND_FUSED;
}

static int check_keys(const json_t *spec, nv_spec_err *e)
{
    const char *key = nv_spec_unknown_key(spec, fused_keys);
    if (key) {
        char ptr[300];
        nv_spec_pointer(ptr, sizeof ptr, "", key);
        return nv_spec_fail(e, ptr,
                            "unknown key '%s' for a fused job (docs/JOBS.md \"Fused jobs\")", key);
    }
    return 0;
}

/* "dtypes" (names into dts) or "inputs" (class names into cls). */
static int parse_list(const json_t *spec, const char *key, int *out, int max, int *ret_n,
                      nv_spec_err *e)
{
    const json_t *arr = json_object_get(spec, key);
    char ptr[64];
    snprintf(ptr, sizeof ptr, "/%s", key);
    *ret_n = 0;
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return nv_spec_fail_value(e, ptr, arr, "must be a non-empty array of names");
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v)
    {
        snprintf(ptr, sizeof ptr, "/%s/%zu", key, i);
        const char *s = json_string_value(v);
        int id = -1, r;
        if (strcmp(key, "dtypes") == 0) {
            nv_dtype dt = NV_DT_FP32; /* id counts only when r >= 0 */
            r = s ? nv_dtype_from_name(s, &dt) : -EINVAL;
            id = (int)dt;
        } else {
            nv_input_class c = NV_IN_NORMAL;
            r = s ? nv_input_class_from_name(s, &c) : -EINVAL;
            id = (int)c;
        }
        if (r < 0)
            return nv_spec_fail(e, ptr, "unknown %s '%s'", key[0] == 'd' ? "dtype" : "input class",
                                s ? s : "(not a string)");
        for (int k = 0; k < *ret_n; k++)
            if (out[k] == id)
                return nv_spec_fail(e, ptr, "duplicate name '%s'", s);
        if (*ret_n == max)
            return nv_spec_fail(e, ptr, "too many names in \"%s\"", key);
        out[(*ret_n)++] = id;
    }
    return 0;
}

static int parse_tol(const json_t *obj, const char *ptr, nv_tolerance *ret, nv_spec_err *e)
{
    char *field = NULL, *msg = NULL;
    int r = nv_tolerance_from_json(obj, ret, &field, &msg);
    if (r < 0) {
        char p[300];
        snprintf(p, sizeof p, "%s%s", ptr, field ? field : "");
        r = nv_spec_fail(e, p, "%s", msg ? msg : "invalid tolerance");
        free(field);
        free(msg);
        return r;
    }
    snprintf(ret->source, sizeof ret->source, "job");
    return 0;
}

static int parse_tolerances(const json_t *spec, nv_fusedspec *s, nv_spec_err *e)
{
    const json_t *t = json_object_get(spec, "tolerance");
    if (t) {
        int r = parse_tol(t, "/tolerance", &s->tolerance, e);
        if (r < 0)
            return r;
        s->has_tolerance = true;
    }
    const json_t *nt = json_object_get(spec, "node_tolerances");
    if (!nt)
        return 0;
    if (!json_is_object(nt))
        return nv_spec_fail_value(e, "/node_tolerances", nt,
                                  "must be an object keyed by node name");
    s->node_tols = calloc(json_object_size(nt) + 1, sizeof *s->node_tols);
    if (!s->node_tols)
        return -ENOMEM;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)nt, key, v)
    {
        char ptr[300];
        nv_spec_pointer(ptr, sizeof ptr, "/node_tolerances", key);
        int id = nv_graph_lookup(s->graph, key);
        if (id < 0)
            return nv_spec_fail(e, ptr, "'%s' is not a node of the graph", key);
        nv_fused_node_tol *nt1 = &s->node_tols[s->n_node_tols];
        snprintf(nt1->name, sizeof nt1->name, "%s", key);
        int r = parse_tol(v, ptr, &nt1->tol, e);
        if (r < 0)
            return r;
        s->n_node_tols++;
    }
    return 0;
}

static int parse_misc(const json_t *spec, nv_fusedspec *s, nv_spec_err *e)
{
    int64_t samples = 1, seed = 0;
    int r = nv_spec_int(e, spec, "", "samples", 1, 1, 1000, &samples);
    r = r ? r : nv_spec_int(e, spec, "", "seed", 0, 0, INT64_MAX, &seed);
    r = r ? r : nv_spec_bool(e, spec, "", "deterministic", false, &s->deterministic);
    if (r < 0)
        return r;
    s->samples = (int)samples;
    s->seed = (uint64_t)seed;
    const json_t *v = json_object_get(spec, "intermediate_dtype");
    s->intermediate = NV_DT_FP32;
    if (v) {
        const char *n = json_string_value(v);
        const nv_dtype_info *di = NULL;
        if (n && nv_dtype_from_name(n, &s->intermediate) == 0)
            di = nv_dtype_get(s->intermediate);
        if (!di || !di->is_float || s->intermediate == NV_DT_E8M0)
            return nv_spec_fail(e, "/intermediate_dtype",
                                "'%s' is not a float dtype (fp32, bf16 ...)",
                                n ? n : "(not a string)");
    }
    return 0;
}

static const char *const composition_keys[] = {"execution", "band_factor", NULL};

/* "composition": {"execution": "unfused" | "fused", "band_factor"?}: the
 * graph outputs judged by the model's band (docs/JOBS.md "Fused jobs"). */
static int parse_composition(const json_t *spec, nv_fusedspec *s, nv_spec_err *e)
{
    const json_t *o = json_object_get(spec, "composition");
    s->band_factor = 4.0;
    if (!o)
        return 0;
    if (!json_is_object(o))
        return nv_spec_fail(e, "/composition",
                            "must be an object {\"execution\": \"unfused\" or \"fused\", "
                            "\"band_factor\"?}");
    const char *key = nv_spec_unknown_key(o, composition_keys);
    if (key)
        return nv_spec_fail(e, "/composition", "unknown key '%s' (execution, band_factor)", key);
    const char *ex = json_string_value(json_object_get(o, "execution"));
    if (!ex || (strcmp(ex, "unfused") && strcmp(ex, "fused")))
        return nv_spec_fail(e, "/composition/execution",
                            "'%s' must be \"unfused\" (node by node through the op entry) or "
                            "\"fused\" (the graph entry)",
                            ex ? ex : "(missing or not a string)");
    s->composition = true;
    s->composition_fused = !strcmp(ex, "fused");
    return nv_spec_number(e, o, "/composition", "band_factor", 4.0, 1.0, 1e6, &s->band_factor);
}

/* A graph error (graph.h hands out pointer and message) into the record. */
static int graph_fail(nv_spec_err *e, int r, char *ptr, char *msg)
{
    r = nv_spec_fail_from(e, r, ptr, msg);
    free(ptr);
    free(msg);
    return r;
}

static int parse_all(const json_t *spec, nv_fusedspec *s, nv_spec_err *e)
{
    if (!json_is_object(spec))
        return nv_spec_fail(e, "", "a job spec must be a JSON object");
    int r = check_keys(spec, e);
    if (r < 0)
        return r;
    const json_t *g = json_object_get(spec, "graph");
    if (!g)
        return nv_spec_fail(e, "/graph",
                            "missing \"graph\" ({\"inputs\", \"nodes\", \"outputs\"})");
    char *ptr = NULL, *msg = NULL;
    r = nv_graph_parse(g, "/graph", &s->graph, &ptr, &msg);
    if (r < 0)
        return graph_fail(e, r, ptr, msg);
    s->graph_text = nv_graph_canonical(g);
    if (!s->graph_text)
        return -ENOMEM;
    int ids[(int)NV_DT_COUNT > (int)NV_IN_COUNT ? (int)NV_DT_COUNT : (int)NV_IN_COUNT];
    if ((r = parse_list(spec, "dtypes", ids, NV_DT_COUNT, &s->n_dtypes, e)) < 0)
        return r;
    for (int i = 0; i < s->n_dtypes; i++)
        s->dtypes[i] = (nv_dtype)ids[i];
    if (s->n_dtypes == 0 && s->graph->any_dtype_unset)
        return nv_spec_fail(e, "/dtypes",
                            "some graph inputs have no \"dtype\": give them one or list "
                            "the case dtypes in \"dtypes\"");
    if (s->n_dtypes > 0 && !s->graph->any_dtype_unset)
        return nv_spec_fail(e, "/dtypes",
                            "every graph input has its own \"dtype\": \"dtypes\" would "
                            "change nothing; remove it");
    if ((r = parse_list(spec, "inputs", ids, NV_IN_COUNT, &s->n_classes, e)) < 0)
        return r;
    for (int i = 0; i < s->n_classes; i++)
        s->classes[i] = (nv_input_class)ids[i];
    if (s->n_classes == 0) {
        s->n_classes = 1;
        s->classes[0] = NV_IN_NORMAL;
    }
    if ((r = parse_misc(spec, s, e)) < 0 || (r = parse_tolerances(spec, s, e)) < 0 ||
        (r = parse_composition(spec, s, e)) < 0)
        return r;
    int nd = s->n_dtypes ? s->n_dtypes : 1;
    for (int d = 0; d < nd; d++) {
        r = nv_graph_infer(s->graph, s->n_dtypes ? s->dtypes[d] : NV_DT_FP32, "/graph", &ptr, &msg);
        if (r < 0)
            return graph_fail(e, r, ptr, msg);
        /* Every class must be able to fill every graph input it feeds, as for
         * op jobs ("exhaustive": dtypes of at most 16 bits, one element per
         * encoding); refused here, not when the case runs. */
        for (int k = 0; k < s->n_classes; k++)
            for (int i = 0; i < s->graph->n_inputs; i++) {
                const nv_graph_input *gi = &s->graph->inputs[i];
                char cmsg[256];
                if (gi->has_value || nv_input_class_check(s->classes[k], gi->dtype, gi->numel,
                                                          cmsg, sizeof cmsg) == 0)
                    continue;
                char p[32];
                snprintf(p, sizeof p, "/inputs/%d", k);
                return nv_spec_fail(e, p, "%s (graph input '%s' in %s)", cmsg, gi->name,
                                    nv_dtype_name(gi->dtype));
            }
    }
    s->n_cases = (int64_t)nd * s->n_classes * s->samples;
    if (s->n_cases > NV_FUSED_MAX_CASES)
        return nv_spec_fail(e, "",
                            "the job expands to %lld cases (dtypes x inputs x samples), more than "
                            "the limit of %d; split it",
                            (long long)s->n_cases, NV_FUSED_MAX_CASES);
    return 0;
}

int nv_fusedspec_parse(const json_t *spec, nv_fusedspec **ret, char **ret_pointer, char **ret_msg)
{
    nv_spec_err e = {0};
    nv_fusedspec *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    int r = nv_spec_err_finish(&e, parse_all(spec, s, &e), ret_pointer, ret_msg);
    if (r < 0) {
        nv_fusedspec_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void nv_fusedspec_free(nv_fusedspec *s)
{
    if (!s)
        return;
    nv_graph_free(s->graph);
    free(s->graph_text);
    free(s->node_tols);
    free(s);
}

int nv_fusedspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_fusedspec *s = NULL;
    int r = nv_fusedspec_parse(spec, &s, ret_pointer, ret_msg);
    nv_fusedspec_free(s);
    return r;
}

void nv_fusedspec_case(const nv_fusedspec *s, int64_t i, nv_dtype *ret_dt, nv_input_class *ret_cls,
                       int *ret_sample)
{
    *ret_sample = (int)(i % s->samples);
    i /= s->samples;
    *ret_cls = s->classes[i % s->n_classes];
    i /= s->n_classes;
    *ret_dt = s->n_dtypes ? s->dtypes[i] : NV_DT_FP32;
}

const nv_tolerance *nv_fusedspec_node_tolerance(const nv_fusedspec *s, int k)
{
    for (int i = 0; i < s->n_node_tols; i++)
        if (strcmp(s->node_tols[i].name, s->graph->nodes[k].name) == 0)
            return &s->node_tols[i].tol;
    return s->has_tolerance ? &s->tolerance : NULL;
}
