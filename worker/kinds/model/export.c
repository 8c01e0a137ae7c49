/* numval-worker export-weights (model.h): the seeded init of a model job's
 * weights (case.c model_seeded_input, the values a seeded run uses) written
 * as a safetensors checkpoint, one tensor per weight under the name the job
 * would read it from ("weights.names", else the parameter's expanded name).
 * Fixed tables ("fill") and data inputs are not weights and are not written.
 * Prints {"path", "sha256", "tensors", "dtype", "sample"} on stdout. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "common/sha256.h"
#include "model_internal.h"
#include "worker/runner/graph_exec.h"

#define EXIT_ERROR 2

static int usage_err(const char *msg, const char *arg)
{
    fprintf(stderr, "numval-worker export-weights: %s%s%s (see --help)\n", msg, arg ? ": " : "",
            arg ? arg : "");
    return EXIT_ERROR;
}

/* The seeded weights of (dt, sample) as tensors (bytes malloc'd in t[].data). */
static int make_tensors(const nv_modelspec *s, const nv_graph *g, int sample, nv_st_tensor *t,
                        size_t *n, char *err, size_t errlen)
{
    *n = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        if (!nv_model_input_is_weight(&s->inputs[i]))
            continue;
        const nv_graph_input *gi = &g->inputs[i];
        int st;
        if (model_st_of_dtype(gi->dtype, &st) < 0) {
            snprintf(err, errlen, "parameter '%s' is %s: the safetensors format has no such dtype",
                     gi->name, nv_dtype_name(gi->dtype));
            return -EINVAL;
        }
        nv_tensor *v = NULL;
        if (model_seeded_input(s, g, i, sample, &v) < 0)
            return -ENOMEM;
        nv_st_tensor *o = &t[(*n)++];
        memset(o, 0, sizeof *o);
        o->name = s->weights.tensor[i];
        o->dtype = (nv_st_dtype)st;
        o->ndim = gi->ndim;
        memcpy(o->shape, gi->shape, sizeof(int64_t) * (size_t)gi->ndim);
        size_t sz = nv_st_dtype_size(o->dtype);
        o->nbytes = (size_t)v->numel * sz;
        uint8_t *bytes = malloc(o->nbytes ? o->nbytes : 1);
        if (!bytes) {
            nv_tensor_free(v);
            return -ENOMEM;
        }
        for (int64_t k = 0; k < v->numel; k++) {
            uint64_t bits = nv_dtype_encode(gi->dtype, v->data[k], &NV_ROUND_DEFAULT, 0);
            for (size_t b = 0; b < sz; b++)
                bytes[(size_t)k * sz + b] = (uint8_t)(bits >> (8 * b));
        }
        o->data = bytes;
        nv_tensor_free(v);
    }
    return 0;
}

/* Write buf to path through a temporary file and rename: a reader never sees
 * half a checkpoint. */
static int write_file(const char *path, const uint8_t *buf, size_t len)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return -ENOMEM;
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int r = f ? 0 : -errno;
    if (f && fwrite(buf, 1, len, f) != len)
        r = -EIO;
    if (f && fclose(f) != 0 && r == 0)
        r = -EIO;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    free(tmp);
    return r;
}

static int export(const nv_modelspec *s, nv_dtype dt, int sample, const char *out)
{
    nv_graph g;
    memset(&g, 0, sizeof g);
    if (nvw_case_graph(s->graph, dt, &g) < 0) {
        free(g.nodes);
        fprintf(stderr, "numval-worker export-weights: the model does not infer for dtype '%s'\n",
                nv_dtype_name(dt));
        return EXIT_ERROR;
    }
    nv_st_tensor *t = calloc(NV_GRAPH_MAX_INPUTS, sizeof *t);
    size_t n = 0;
    char err[512] = "out of memory";
    int r = t ? make_tensors(s, &g, sample, t, &n, err, sizeof err) : -ENOMEM;
    char seed[32], smp[16], hash[65];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    snprintf(smp, sizeof smp, "%d", sample);
    nv_sha256_hex(s->graph_text, strlen(s->graph_text), hash);
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s}", "format", "numval", "numval_seed", seed,
                             "numval_sample", smp, "numval_dtype", nv_dtype_name(dt),
                             "numval_graph_hash", hash);
    uint8_t *buf = NULL;
    size_t len = 0;
    char *eerr = NULL;
    if (r == 0)
        r = meta ? nv_st_encode(t, n, meta, &buf, &len, &eerr) : -ENOMEM;
    if (r == 0 && (r = write_file(out, buf, len)) < 0)
        snprintf(err, sizeof err, "cannot write '%s': %s", out, strerror(-r));
    int status = 0;
    if (r < 0) {
        fprintf(stderr, "numval-worker export-weights: %s\n", eerr ? eerr : err);
        status = EXIT_ERROR;
    } else {
        char sha[65];
        nv_sha256_hex(buf, len, sha);
        json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:i, s:I}", "path", out, "sha256", sha,
                              "tensors", (json_int_t)n, "dtype", nv_dtype_name(dt), "sample",
                              sample, "bytes", (json_int_t)len);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(o);
    }
    for (size_t i = 0; t && i < n; i++)
        free((void *)t[i].data);
    free(t);
    free(buf);
    free(eerr);
    json_decref(meta);
    free(g.nodes);
    return status;
}

int nvw_model_export_main(int argc, char **argv)
{
    const char *file = NULL, *out = NULL, *dtn = NULL;
    long sample = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool valued = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--dtype") ||
                      !strcmp(a, "--sample");
        if (valued && i + 1 >= argc)
            return usage_err("an option needs a value", a);
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            out = argv[++i];
        } else if (!strcmp(a, "--dtype")) {
            dtn = argv[++i];
        } else if (!strcmp(a, "--sample")) {
            char *end;
            sample = strtol(argv[++i], &end, 10);
            if (*end || sample < 0 || sample > 99)
                return usage_err("--sample is an integer in 0..99", argv[i]);
        } else if (a[0] == '-' && a[1]) {
            return usage_err("unknown option", a);
        } else if (!file) {
            file = a;
        } else {
            return usage_err("unexpected argument", a);
        }
    }
    if (!file || !out)
        return usage_err("needs MODEL_JOB.json and -o OUT.safetensors", NULL);
    json_error_t je;
    json_t *spec = json_load_file(file, 0, &je);
    if (!spec) {
        fprintf(stderr, "numval-worker: cannot read '%s': %s (line %d)\n", file, je.text, je.line);
        return EXIT_ERROR;
    }
    nv_modelspec *s = NULL;
    char *ptr = NULL, *msg = NULL;
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    int r = !kind || strcmp(kind, "model") ? -EINVAL : nv_modelspec_parse(spec, &s, &ptr, &msg);
    json_decref(spec);
    if (r < 0) {
        fprintf(stderr, "numval-worker export-weights: %s: %s%s%s\n", file, ptr ? ptr : "",
                ptr && *ptr ? ": " : "", msg ? msg : "not a model job (\"kind\": \"model\")");
        free(ptr);
        free(msg);
        return EXIT_ERROR;
    }
    nv_dtype dt = s->dtypes[0];
    int status;
    if (dtn && nv_dtype_from_name(dtn, &dt) < 0)
        status = usage_err("unknown dtype", dtn);
    else
        status = export(s, dt, (int)sample, out);
    nv_modelspec_free(s);
    return status;
}
