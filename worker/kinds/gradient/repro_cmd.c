/* `numval-worker repro` and `numval-worker minimize` on a gradient artifact
 * (gradient.h, worker/repro/cmd.h): the stored case's device check re-run on the
 * stored inputs and cotangent, and the minimized case written as an artifact of
 * its own. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradient.h"
#include "repro_grad.h"

/* Rebuild the gradient case and load the backend (the manifest's own spec
 * unless --backend). */
static int setup(const nvw_cmd *c, nvw_grepro **ret_gr, nvw_backend **ret_b, const char **ret_spec)
{
    char *e = NULL;
    int r = nvw_grepro_from_artifact(c->a, ret_gr, &e);
    if (r < 0) {
        if (r == -EINVAL)
            fprintf(stderr, "numval-worker: '%s': %s\n", c->path, e ? e : "invalid artifact");
        else
            fprintf(stderr, "numval-worker: %s\n", strerror(-r));
        free(e);
        return r;
    }
    snprintf((*ret_gr)->sha, sizeof(*ret_gr)->sha, "%s", c->sha);
    return nvw_cmd_backend(c, (*ret_gr)->manifest, ret_b, ret_spec);
}

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_string(x > 0 ? "inf" : "nan");
}

int nvw_grad_repro_main(const nvw_cmd *c)
{
    nvw_grepro *gr = NULL;
    nvw_backend *b = NULL;
    const char *spec = NULL;
    if (setup(c, &gr, &b, &spec) < 0) {
        nvw_grepro_free(gr);
        return NVW_EXIT_ERROR;
    }
    int runs = (int)c->runs, timeout_ms = (int)c->timeout_ms;
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = spec, .timeout_ms = timeout_ms};
    int failed = 0, bits = 0;
    nvw_gprobe_out first = {0};
    int r = nvw_grepro_gate(&env, runs, &failed, &bits, &first);
    nvw_backend_free(b);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        nvw_grepro_free(gr);
        return NVW_EXIT_ERROR;
    }
    bool still = failed > 0;
    const char *op = gr->gs->base->op->name;
    fprintf(stderr,
            "gradient case %s '%s' check '%s' %s: failed as '%s' in %d of %d runs; device "
            "gradients bit-identical to the stored ones in %d of %d runs%s%s\n",
            op, nv_dtype_name(gr->dtype), gr->check,
            still ? "STILL FAILS" : "no longer fails as stored", gr->cls, failed, runs, bits, runs,
            first.cls[0] ? "; first run: " : "", first.cls[0] ? first.cls : "");
    nvw_cmd_print_json(json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:b, s:s, s:s, s:s, "
        "s:s, s:o, s:I, s:o}",
        "artifact", gr->sha, "kind", "gradient", "op", op, "dtype", nv_dtype_name(gr->dtype),
        "stored_class", gr->cls, "stored_check", gr->check, "runs", runs, "failed", failed,
        "bit_identical", bits, "still_fails", still, "verdict", first.verdict, "class", first.cls,
        "check", first.check, "message", first.msg, "headroom", num(first.headroom), "mismatches",
        (json_int_t)first.mismatches, "signature", nvw_grepro_signature(gr, NULL)));
    nvw_gprobe_out_done(&first);
    nvw_grepro_free(gr);
    return still ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
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

int nvw_grad_minimize_main(const nvw_cmd *c)
{
    nvw_grepro *gr = NULL;
    nvw_backend *b = NULL;
    const char *spec = NULL;
    nvw_gmin_result m;
    int status = NVW_EXIT_ERROR;
    if (setup(c, &gr, &b, &spec) < 0)
        goto out;
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = spec, .timeout_ms = (int)c->timeout_ms};
    nvw_min_opts mo = {.budget = (int)c->budget,
                       .deadline_s = c->deadline,
                       .gate_runs = (int)c->runs,
                       .plain_ddmin = c->plain,
                       .progress = c->quiet ? NULL : stderr};
    const char *output = c->output;
    int r = nvw_gminimize(&env, &mo, &m);
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
            r = nvw_cmd_write_file(output, buf, len);
        free(buf);
        if (r < 0) {
            fprintf(stderr, "numval-worker: cannot build the minimized artifact: %s\n",
                    strerror(-r));
            nvw_gmin_result_done(&m);
            goto out;
        }
    }
    nvw_cmd_print_json(json_pack(
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
    status = !m.flaky && m.verified ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
    nvw_gmin_result_done(&m);
out:
    nvw_backend_free(b);
    nvw_grepro_free(gr);
    return status;
}
