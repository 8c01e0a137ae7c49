/* `numval-worker repro` and `numval-worker minimize` on an op artifact (op.h,
 * worker/repro/cmd.h): the stored case re-run on the stored inputs, and the
 * minimized case written as an artifact of its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minimize.h"
#include "op.h"

/* Rebuild the case and load the backend (the manifest's own spec unless
 * --backend). */
static int setup(const nvw_cmd *c, nvw_repro **ret_rc, nvw_backend **ret_b, nvw_probe_env *env)
{
    char *err = NULL;
    int r = nvw_repro_from_artifact(c->a, ret_rc, &err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        return r;
    }
    snprintf((*ret_rc)->sha, sizeof(*ret_rc)->sha, "%s", c->sha);
    const char *spec = NULL;
    if ((r = nvw_cmd_backend(c, (*ret_rc)->manifest, ret_b, &spec)) < 0)
        return r;
    *env = (nvw_probe_env){.rc = *ret_rc,
                           .table = nvw_backend_table(*ret_b),
                           .options = nvw_backend_options(*ret_b),
                           .timeout_ms = (int)c->timeout_ms,
                           .isolate = true};
    return 0;
}

int nvw_op_repro_main(const nvw_cmd *c)
{
    nvw_repro *rc = NULL;
    nvw_backend *b = NULL;
    nvw_probe_env env;
    int status = NVW_EXIT_ERROR;
    if (setup(c, &rc, &b, &env) < 0)
        goto out;
    int failed = 0, bits = 0;
    nvw_probe_out first = {0};
    int r = nvw_repro_gate(&env, (int)c->runs, &failed, &bits, &first);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        goto out;
    }
    bool still = failed > 0;
    fprintf(stderr,
            "%s: case %s '%s' %s: failed as '%s' in %d of %ld runs; device output bit-identical "
            "to the stored one in %d of %ld runs%s%s\n",
            c->path, rc->js->op->name, nv_dtype_name(rc->dtype),
            still ? "STILL FAILS" : "no longer fails as stored", rc->failure_class, failed, c->runs,
            bits, c->runs, first.cls[0] ? "; first run: " : "", first.cls[0] ? first.cls : "");
    nvw_cmd_print_json(json_pack(
        "{ss ss ss ss si si si sb ss ss sf sO}", "artifact", rc->sha, "op", rc->js->op->name,
        "dtype", nv_dtype_name(rc->dtype), "stored_class", rc->failure_class, "runs", (int)c->runs,
        "failed", failed, "bit_identical", bits, "still_fails", still, "class", first.cls,
        "message", first.msg, "max_ulp", first.max_ulp, "signature",
        json_object_get(rc->manifest, "signature") ? json_object_get(rc->manifest, "signature")
                                                   : json_null()));
    nvw_probe_out_done(&first);
    status = still ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
out:
    nvw_backend_free(b);
    nvw_repro_free(rc);
    return status;
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

int nvw_op_minimize_main(const nvw_cmd *c)
{
    nvw_repro *rc = NULL;
    nvw_backend *b = NULL;
    nvw_probe_env env;
    nvw_min_result m = {0};
    int status = NVW_EXIT_ERROR;
    if (setup(c, &rc, &b, &env) < 0)
        goto out;
    nvw_min_opts mo = {.budget = (int)c->budget,
                       .deadline_s = c->deadline,
                       .gate_runs = (int)c->runs,
                       .plain_ddmin = c->plain,
                       .progress = c->quiet ? NULL : stderr};
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
        if (c->output && nvw_cmd_write_file(c->output, buf, len) < 0) {
            free(buf);
            goto out;
        }
        free(buf);
    }
    nvw_cmd_print_json(summary(rc, &m, sha[0] ? sha : NULL));
    /* 1: a verified minimized reproducer; 0: flaky or not re-verified. */
    status = !m.flaky && m.verified ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
out:
    nvw_min_result_done(&m);
    nvw_backend_free(b);
    nvw_repro_free(rc);
    return status;
}
