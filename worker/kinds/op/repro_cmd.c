/* `numval-worker repro` and `numval-worker minimize` (repro.h, minimize.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minimize.h"
#include "worker/kinds/fused/repro_fused.h"
#include "worker/kinds/gradient/repro_grad.h"

#define EXIT_PASSES 0
#define EXIT_FAILS 1
#define EXIT_ERROR 2

typedef struct cmd_opts {
    const char *artifact, *backend, *output;
    long runs, budget, timeout_ms;
    double deadline;
    bool plain, quiet;
} cmd_opts;

static int num_arg(const char *opt, const char *v, double lo, double hi, double *ret)
{
    char *end;
    double d = strtod(v, &end);
    if (*end || end == v || d < lo || d > hi) {
        fprintf(stderr, "numval-worker: %s '%s' is not a number in %g..%g\n", opt, v, lo, hi);
        return -EINVAL;
    }
    *ret = d;
    return 0;
}

static int parse(int argc, char **argv, cmd_opts *o)
{
    memset(o, 0, sizeof *o);
    o->runs = 5;
    o->timeout_ms = 60000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool val = !strcmp(a, "--backend") || !strcmp(a, "-o") || !strcmp(a, "--output") ||
                   !strcmp(a, "--runs") || !strcmp(a, "--budget") || !strcmp(a, "--deadline") ||
                   !strcmp(a, "--probe-timeout");
        if (val && i + 1 >= argc) {
            fprintf(stderr, "numval-worker: '%s' needs a value\n", a);
            return -EINVAL;
        }
        double d;
        if (!strcmp(a, "--backend")) {
            o->backend = argv[++i];
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            o->output = argv[++i];
        } else if (!strcmp(a, "--runs")) {
            if (num_arg(a, argv[++i], 1, 1000, &d) < 0)
                return -EINVAL;
            o->runs = (long)d;
        } else if (!strcmp(a, "--budget")) {
            if (num_arg(a, argv[++i], 1, 1e7, &d) < 0)
                return -EINVAL;
            o->budget = (long)d;
        } else if (!strcmp(a, "--deadline")) {
            if (num_arg(a, argv[++i], 0.001, 1e6, &o->deadline) < 0)
                return -EINVAL;
        } else if (!strcmp(a, "--probe-timeout")) {
            if (num_arg(a, argv[++i], 0.001, 3600, &d) < 0)
                return -EINVAL;
            o->timeout_ms = (long)(d * 1000);
        } else if (!strcmp(a, "--plain-ddmin")) {
            o->plain = true;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "numval-worker: unknown option '%s' (see --help)\n", a);
            return -EINVAL;
        } else if (!o->artifact) {
            o->artifact = a;
        } else {
            fprintf(stderr, "numval-worker: unexpected argument '%s'\n", a);
            return -EINVAL;
        }
    }
    if (!o->artifact) {
        fprintf(stderr, "numval-worker: needs ARTIFACT.nvart (see --help)\n");
        return -EINVAL;
    }
    return 0;
}

/* A fused artifact goes to worker/kinds/fused/repro_cmd.c: 1 when it was one (*ret_status set),
 * 0 when the artifact is not of a fused job. */
static int fused(const cmd_opts *o, bool minimize, int *ret_status)
{
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_load(o->artifact, &fr, &err);
    if (r == -ENOTSUP)
        return 0;
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        *ret_status = EXIT_ERROR;
        return 1;
    }
    nvw_fmin_opts mo = {.budget = (int)o->budget,
                        .deadline_s = o->deadline,
                        .gate_runs = (int)o->runs,
                        .timeout_ms = (int)o->timeout_ms,
                        .progress = o->quiet ? NULL : stderr};
    *ret_status = minimize ? nvw_fminimize_cmd(fr, o->backend, &mo, o->output)
                           : nvw_frepro_cmd(fr, o->backend, (int)o->runs, (int)o->timeout_ms);
    nvw_frepro_free(fr);
    return 1;
}

/* A gradient artifact goes to worker/kinds/gradient/repro_cmd.c: 1 when it was one (*ret_status
 * set), 0 when the artifact is not of a gradient job. */
static int gradient(const cmd_opts *o, bool minimize, int *ret_status)
{
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_load(o->artifact, &gr, &err);
    if (r == -ENOTSUP)
        return 0;
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        *ret_status = EXIT_ERROR;
        return 1;
    }
    nvw_min_opts mo = {.budget = (int)o->budget,
                       .deadline_s = o->deadline,
                       .gate_runs = (int)o->runs,
                       .plain_ddmin = o->plain,
                       .progress = o->quiet ? NULL : stderr};
    *ret_status = minimize ? nvw_gminimize_cmd(gr, o->backend, &mo, (int)o->timeout_ms, o->output)
                           : nvw_grepro_cmd(gr, o->backend, (int)o->runs, (int)o->timeout_ms);
    nvw_grepro_free(gr);
    return 1;
}

/* Load the artifact and the backend (the manifest's own spec unless --backend). */
static int setup(const cmd_opts *o, nvw_repro **ret_rc, nvw_backend **ret_b, nvw_probe_env *env)
{
    char *err = NULL;
    int r = nvw_repro_load(o->artifact, ret_rc, &err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        return r;
    }
    const char *spec = o->backend
                           ? o->backend
                           : json_string_value(json_object_get((*ret_rc)->manifest, "backend"));
    if (!spec) {
        fprintf(stderr, "numval-worker: the artifact names no backend; give --backend SPEC\n");
        return -EINVAL;
    }
    char berr[512] = "";
    r = nvw_backend_load(spec, ret_b, berr, sizeof berr);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", berr[0] ? berr : "cannot load the backend");
        return r;
    }
    *env = (nvw_probe_env){.rc = *ret_rc,
                           .table = nvw_backend_table(*ret_b),
                           .options = nvw_backend_options(*ret_b),
                           .timeout_ms = (int)o->timeout_ms,
                           .isolate = true};
    return 0;
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

int nvw_repro_main(int argc, char **argv)
{
    cmd_opts o;
    if (parse(argc, argv, &o) < 0)
        return EXIT_ERROR;
    nvw_repro *rc = NULL;
    nvw_backend *b = NULL;
    nvw_probe_env env;
    int status = EXIT_ERROR;
    if (fused(&o, false, &status) || gradient(&o, false, &status))
        return status;
    if (setup(&o, &rc, &b, &env) < 0)
        goto out;
    int failed = 0, bits = 0;
    nvw_probe_out first = {0};
    int r = nvw_repro_gate(&env, (int)o.runs, &failed, &bits, &first);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        goto out;
    }
    bool still = failed > 0;
    fprintf(stderr,
            "%s: case %s '%s' %s: failed as '%s' in %d of %ld runs; device output bit-identical "
            "to the stored one in %d of %ld runs%s%s\n",
            o.artifact, rc->js->op->name, nv_dtype_name(rc->dtype),
            still ? "STILL FAILS" : "no longer fails as stored", rc->failure_class, failed, o.runs,
            bits, o.runs, first.cls[0] ? "; first run: " : "", first.cls[0] ? first.cls : "");
    print_json(json_pack(
        "{ss ss ss ss si si si sb ss ss sf sO}", "artifact", rc->sha, "op", rc->js->op->name,
        "dtype", nv_dtype_name(rc->dtype), "stored_class", rc->failure_class, "runs", (int)o.runs,
        "failed", failed, "bit_identical", bits, "still_fails", still, "class", first.cls,
        "message", first.msg, "max_ulp", first.max_ulp, "signature",
        json_object_get(rc->manifest, "signature") ? json_object_get(rc->manifest, "signature")
                                                   : json_null()));
    nvw_probe_out_done(&first);
    status = still ? EXIT_FAILS : EXIT_PASSES;
out:
    nvw_backend_free(b);
    nvw_repro_free(rc);
    return status;
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

static json_t *summary(const nvw_repro *rc, const nvw_min_result *m, const char *sha)
{
    json_t *sig = nvw_repro_signature(rc, m->flaky ? NULL : m->last.cls);
    return json_pack("{ss ss* so* s{si si si} sb sb si sf ss sI sI sI sI}", "artifact", rc->sha,
                     "minimized_artifact", sha, "signature", sig, "repro_rate", "runs",
                     m->gate_runs, "failed", m->gate_failed, "bit_identical", m->gate_bits, "flaky",
                     m->flaky, "verified", m->verified, "probes", m->probes, "seconds", m->seconds,
                     "stop", m->stop, "elements_before", (json_int_t)m->numel_before,
                     "elements_after", (json_int_t)m->numel_after, "non_neutral_before",
                     (json_int_t)m->nonneutral_before, "non_neutral_after",
                     (json_int_t)m->nonneutral_after);
}

int nvw_minimize_main(int argc, char **argv)
{
    cmd_opts o;
    if (parse(argc, argv, &o) < 0)
        return EXIT_ERROR;
    nvw_repro *rc = NULL;
    nvw_backend *b = NULL;
    nvw_probe_env env;
    nvw_min_result m = {0};
    int status = EXIT_ERROR;
    if (fused(&o, true, &status) || gradient(&o, true, &status))
        return status;
    if (setup(&o, &rc, &b, &env) < 0)
        goto out;
    nvw_min_opts mo = {.budget = (int)o.budget,
                       .deadline_s = o.deadline,
                       .gate_runs = (int)o.runs,
                       .plain_ddmin = o.plain,
                       .progress = o.quiet ? NULL : stderr};
    int r = nvw_minimize(&env, &mo, &m);
    if (r < 0) {
        fprintf(stderr, "numval-worker: minimization stopped: %s\n", strerror(-r));
        goto out;
    }
    char sha[65] = "";
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!m.flaky && m.verified) {
        r = nvw_minimized_artifact(rc, &m, &buf, &len, sha);
        if (r < 0) {
            fprintf(stderr, "numval-worker: cannot build the minimized artifact: %s\n",
                    strerror(-r));
            goto out;
        }
        if (o.output && write_file(o.output, buf, len) < 0) {
            free(buf);
            goto out;
        }
        free(buf);
    }
    print_json(summary(rc, &m, sha[0] ? sha : NULL));
    /* 1: a verified minimized reproducer; 0: flaky or not re-verified. */
    status = !m.flaky && m.verified ? EXIT_FAILS : EXIT_PASSES;
out:
    nvw_min_result_done(&m);
    nvw_backend_free(b);
    nvw_repro_free(rc);
    return status;
}
