/* `numval-worker repro` and `numval-worker minimize` on a gradient artifact
 * (repro_grad.h): the stored case's device check re-run on the stored inputs
 * and cotangent, and the minimized case written as an artifact of its own. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repro_grad.h"

#define EXIT_PASSES 0
#define EXIT_FAILS 1
#define EXIT_ERROR 2

static int load_backend(const nvw_grepro *gr, const char *backend, nvw_backend **ret,
                        const char **ret_spec)
{
    const char *spec =
        backend ? backend : json_string_value(json_object_get(gr->manifest, "backend"));
    if (!spec) {
        fprintf(stderr, "numval-worker: the artifact names no backend; give --backend SPEC\n");
        return -EINVAL;
    }
    char err[512] = "";
    int r = nvw_backend_load(spec, ret, err, sizeof err);
    if (r < 0)
        fprintf(stderr, "numval-worker: %s\n", err[0] ? err : "cannot load the backend");
    *ret_spec = spec;
    return r;
}

static void print_json(json_t *j)
{
    if (j) {
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', stdout);
        fflush(stdout);
    }
    json_decref(j);
}

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_string(x > 0 ? "inf" : "nan");
}

int nvw_grepro_cmd(nvw_grepro *gr, const char *backend, int runs, int timeout_ms)
{
    nvw_backend *b = NULL;
    const char *spec = NULL;
    if (load_backend(gr, backend, &b, &spec) < 0)
        return EXIT_ERROR;
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = spec, .timeout_ms = timeout_ms};
    int failed = 0, bits = 0;
    nvw_gprobe_out first = {0};
    int r = nvw_grepro_gate(&env, runs, &failed, &bits, &first);
    nvw_backend_free(b);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        return EXIT_ERROR;
    }
    bool still = failed > 0;
    const char *op = gr->gs->base->op->name;
    fprintf(stderr,
            "gradient case %s '%s' check '%s' %s: failed as '%s' in %d of %d runs; device "
            "gradients bit-identical to the stored ones in %d of %d runs%s%s\n",
            op, nv_dtype_name(gr->dtype), gr->check,
            still ? "STILL FAILS" : "no longer fails as stored", gr->cls, failed, runs, bits, runs,
            first.cls[0] ? "; first run: " : "", first.cls[0] ? first.cls : "");
    print_json(json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:b, s:s, s:s, s:s, "
        "s:s, s:o, s:I, s:o}",
        "artifact", gr->sha, "kind", "gradient", "op", op, "dtype", nv_dtype_name(gr->dtype),
        "stored_class", gr->cls, "stored_check", gr->check, "runs", runs, "failed", failed,
        "bit_identical", bits, "still_fails", still, "verdict", first.verdict, "class", first.cls,
        "check", first.check, "message", first.msg, "headroom", num(first.headroom), "mismatches",
        (json_int_t)first.mismatches, "signature", nvw_grepro_signature(gr, NULL)));
    nvw_gprobe_out_done(&first);
    return still ? EXIT_FAILS : EXIT_PASSES;
}

static int write_file(const char *path, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "numval-worker: cannot write '%s': %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -EIO;
    }
    return 0;
}

static json_t *shapes(const nvw_gmin_result *m)
{
    json_t *a = json_array();
    for (int i = 0; a && i < m->n; i++) {
        json_t *s = json_array();
        for (int d = 0; s && d < m->t[i]->ndim; d++)
            json_array_append_new(s, json_integer(m->t[i]->shape[d]));
        json_array_append_new(a, s);
    }
    return a;
}

int nvw_gminimize_cmd(nvw_grepro *gr, const char *backend, const nvw_min_opts *o, int timeout_ms,
                      const char *output)
{
    nvw_backend *b = NULL;
    const char *spec = NULL;
    if (load_backend(gr, backend, &b, &spec) < 0)
        return EXIT_ERROR;
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = spec, .timeout_ms = timeout_ms};
    nvw_gmin_result m;
    int status = EXIT_ERROR;
    int r = nvw_gminimize(&env, o, &m);
    if (r < 0) {
        fprintf(stderr, "numval-worker: minimization stopped: %s\n", strerror(-r));
        goto out;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        uint8_t *buf = NULL;
        size_t len = 0;
        r = nvw_gminimized_artifact(gr, &m, NULL, &buf, &len, sha);
        if (r == 0 && output)
            r = write_file(output, buf, len);
        free(buf);
        if (r < 0) {
            fprintf(stderr, "numval-worker: cannot build the minimized artifact: %s\n",
                    strerror(-r));
            nvw_gmin_result_done(&m);
            goto out;
        }
    }
    print_json(json_pack(
        "{s:s, s:s?, s:s, s:o, s:{s:i, s:i, s:i}, s:b, s:b, s:i, s:f, s:s, s:I, s:I, s:I, s:I, "
        "s:o, s:s, s:s}",
        "artifact", gr->sha, "minimized_artifact", sha[0] ? sha : NULL, "kind", "gradient",
        "signature", nvw_grepro_signature(gr, NULL), "repro_rate", "runs", m.gate_runs, "failed",
        m.gate_failed, "bit_identical", m.gate_bits, "flaky", m.flaky, "verified", m.verified,
        "probes", m.probes, "seconds", m.seconds, "stop", m.stop, "elements_before",
        (json_int_t)m.numel_before, "elements_after", (json_int_t)m.numel_after,
        "non_neutral_before", (json_int_t)m.nonneutral_before, "non_neutral_after",
        (json_int_t)m.nonneutral_after, "shapes", shapes(&m), "class", m.last.cls, "check",
        m.last.check));
    status = !m.flaky && m.verified ? EXIT_FAILS : EXIT_PASSES;
    nvw_gmin_result_done(&m);
out:
    nvw_backend_free(b);
    return status;
}
