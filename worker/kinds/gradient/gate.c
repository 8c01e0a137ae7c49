/* The gradient kind in agent mode (gradient.h): its failure signature key, the
 * gate and minimization of a kept failure (repro_grad.h), and the replay of a
 * suite case. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gradient.h"
#include "repro_grad.h"

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* Gradient signature: dtype, the failing check, class. */
void nvw_grad_failure_key(const json_t *m, char *key, size_t len)
{
    snprintf(key, len, "gradient/%s/%s/%s", str(m, "dtype"), str(m, "check"),
             str(m, "failure_class"));
}

void nvw_grad_gate(const nvw_gate_env *env, const nvw_gate_case *k)
{
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_buffer(k->buf, k->len, &gr, &err);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its gradient artifact: %s", env->job_id,
                    k->case_index, err ? err : strerror(-r));
        free(err);
        return;
    }
    nvw_genv ge = {.gr = gr, .b = env->b, .backend_spec = env->backend_spec, .timeout_ms = 60000};
    nvw_min_opts mo = {.budget = env->budget,
                       .deadline_s = k->deadline_s,
                       .progress = stderr,
                       .cancel = env->cancel};
    nvw_gmin_result m;
    if ((r = nvw_gminimize(&ge, &mo, &m)) < 0) {
        nv_log_warn("job %s case %d: gradient minimization failed: %s", env->job_id, k->case_index,
                    strerror(-r));
        nvw_grepro_free(gr);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (!env->extra || nvw_gminimized_artifact(gr, &m, env->extra, &buf, &len, sha) < 0 ||
            env->store(env->ud, buf, len, sha) < 0)
            sha[0] = 0;
        free(buf);
    }
    json_t *c = k->c;
    nvw_gate_annotate(c, nvw_grepro_signature(gr, NULL), m.gate_runs, m.gate_failed, m.gate_bits,
                      m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "total", (json_int_t)m.numel_after, "non_neutral",
                                      (json_int_t)m.nonneutral_after));
    }
    nv_log_info("job %s case %d: gradient gate %d/%d%s%s%s", env->job_id, k->case_index,
                m.gate_failed, m.gate_runs, m.flaky ? ", flaky" : "",
                sha[0] ? ", minimized artifact " : "", sha);
    nvw_gmin_result_done(&m);
    nvw_grepro_free(gr);
}

/* A gradient case: the gradient probe (repro_grad.h), the device check of the
 * stored (minimized) case on its inputs and cotangent. It fails when the case
 * fails in any way; "same_signature" says whether it is the stored one. */
void nvw_grad_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c)
{
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_artifact(a, &gr, &err);
    if (r < 0) {
        nvw_replay_error(c, err ? err : "the gradient artifact could not be rebuilt");
        free(err);
        return;
    }
    snprintf(gr->sha, sizeof gr->sha, "%s", sha);
    nvw_genv ge = {.gr = gr, .b = env->b, .backend_spec = env->backend_spec, .timeout_ms = 60000};
    nvw_gprobe_out p;
    r = nvw_gprobe(&ge, gr->in, gr->gy, &p);
    if (r < 0 || !strcmp(p.cls, "probe_error")) {
        nvw_replay_error(c, r < 0      ? "could not start a probe"
                            : p.msg[0] ? p.msg
                                       : "the probe failed");
    } else {
        bool passed = !strcmp(p.verdict, "passed");
        json_object_set_new(c, "verdict", json_string(passed ? "passed" : "failed"));
        json_object_set_new(c, "kind", json_string("gradient"));
        json_object_set_new(c, "op", json_string(gr->gs->base->op->name));
        json_object_set_new(c, "dtype", json_string(nv_dtype_name(gr->dtype)));
        json_object_set_new(c, "check", json_string(gr->check));
        json_object_set_new(c, "stored_class", json_string(gr->cls));
        if (!passed && p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        json_object_set_new(c, "same_signature", json_boolean(nvw_gprobe_same(gr, &p)));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "mismatches", json_integer(p.mismatches));
        json_object_set_new(c, "bit_identical", json_boolean(p.bits == 1));
    }
    if (r == 0)
        nvw_gprobe_out_done(&p);
    nvw_grepro_free(gr);
}
