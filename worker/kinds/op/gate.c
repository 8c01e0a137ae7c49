/* The op kind in agent mode (op.h): its failure signature key, the gate and
 * minimization of a kept failure, and the replay of a suite case. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "minimize.h"
#include "op.h"

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* Op signature (docs/ARTIFACTS.md "Signature"): dtype, out_dtype, class. */
void nvw_op_failure_key(const json_t *m, char *key, size_t len)
{
    snprintf(key, len, "op/%s/%s/%s", str(m, "dtype"), str(m, "out_dtype"),
             str(m, "failure_class"));
}

void nvw_op_gate(const nvw_gate_env *env, const nvw_gate_case *k)
{
    nv_artifact *a = NULL;
    nvw_repro *rc = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(k->buf, k->len, &a, &err);
    if (r == 0)
        r = nvw_repro_from_artifact(a, &rc, &err);
    nv_artifact_free(a);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its artifact: %s", env->job_id, k->case_index,
                    err ? err : strerror(-r));
        free(err);
        return;
    }
    snprintf(rc->sha, sizeof rc->sha, "%s", k->sha);
    nvw_probe_env pe = {.rc = rc,
                        .table = nvw_backend_table(env->b),
                        .options = nvw_backend_options(env->b),
                        .timeout_ms = 60000,
                        .isolate = true};
    nvw_min_opts mo = {.budget = env->budget,
                       .deadline_s = k->deadline_s,
                       .progress = stderr,
                       .cancel = env->cancel};
    nvw_min_result m;
    r = nvw_minimize(&pe, &mo, &m);
    if (r < 0) {
        nv_log_warn("job %s case %d: minimization failed: %s", env->job_id, k->case_index,
                    strerror(-r));
        nvw_repro_free(rc);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (nvw_minimized_artifact(rc, &m, &buf, &len, sha) < 0 ||
            env->store(env->ud, buf, len, sha) < 0)
            sha[0] = 0;
        free(buf);
    }
    json_t *c = k->c;
    nvw_gate_annotate(c, nvw_repro_signature(rc, NULL), m.gate_runs, m.gate_failed, m.gate_bits,
                      m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "total", (json_int_t)m.numel_after, "non_neutral",
                                      (json_int_t)m.nonneutral_after));
    }
    nv_log_info("job %s case %d: gate %d/%d%s%s%s", env->job_id, k->case_index, m.gate_failed,
                m.gate_runs, m.flaky ? ", flaky" : "", sha[0] ? ", minimized artifact " : "", sha);
    nvw_min_result_done(&m);
    nvw_repro_free(rc);
}

/* An op case: the probe of repro.h on the stored inputs. */
void nvw_op_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c)
{
    (void)sha;
    nvw_repro *rc = NULL;
    char *err = NULL;
    int r = nvw_repro_from_artifact(a, &rc, &err);
    if (r < 0) {
        nvw_replay_error(c, err ? err : "the artifact could not be rebuilt");
        free(err);
        return;
    }
    nvw_probe_env pe = {.rc = rc,
                        .table = nvw_backend_table(env->b),
                        .options = nvw_backend_options(env->b),
                        .timeout_ms = 60000,
                        .isolate = true};
    nvw_probe_out p;
    r = nvw_probe(&pe, rc->in, &p);
    if (r < 0) {
        nvw_replay_error(c, "could not start a probe");
    } else {
        json_object_set_new(c, "verdict", json_string(p.cls[0] ? "failed" : "passed"));
        json_object_set_new(c, "op", json_string(rc->js->op->name));
        json_object_set_new(c, "dtype", json_string(nv_dtype_name(rc->dtype)));
        json_object_set(c, "shape", json_object_get(rc->manifest, "shape"));
        json_object_set_new(c, "stored_class", json_string(rc->failure_class));
        if (p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "max_ulp", json_real(p.max_ulp));
        json_object_set_new(c, "mismatches", json_integer(p.mismatches));
        json_object_set_new(c, "bit_identical", json_boolean(nvw_probe_same_output(rc, &p)));
        nvw_probe_out_done(&p);
    }
    nvw_repro_free(rc);
}
