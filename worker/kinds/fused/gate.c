/* The fused kind in agent mode (fused.h): its failure signature key, the gate
 * and minimization of a kept failure (repro_fused.h), and the replay of a suite
 * case. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/sha256.h"
#include "fused.h"
#include "repro_fused.h"

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* Fused signature: first divergent op and its judged dtype, case dtype, class. */
void nvw_fused_failure_key(const json_t *m, char *key, size_t len)
{
    const json_t *fd = json_object_get(m, "first_divergent");
    snprintf(key, len, "fused/%s/%s/%s/%s", str(fd, "op"), str(fd, "dtype"),
             str(json_object_get(m, "case"), "dtype"), str(m, "failure_class"));
}

/* The minimized fused case as an artifact (with the job's id and attempt),
 * stored; its content id in sha ("" when none). */
static void store_minimized(const nvw_gate_env *env, nvw_frepro *fr, const nvw_fmin_result *m,
                            char sha[65])
{
    uint8_t *buf = NULL;
    size_t len = 0;
    nvw_fprobe last;
    int r = env->extra
                ? nvw_fminimized_artifact(fr, env->b, m, 60000, NULL, env->extra, &buf, &len, &last)
                : -ENOMEM;
    sha[0] = 0;
    if (r == 0) {
        nv_sha256_hex(buf, len, sha); /* the bytes read back are what is named */
        if ((r = env->store(env->ud, buf, len, sha)) < 0)
            sha[0] = 0;
    }
    if (r < 0)
        nv_log_warn("job %s: the minimized fused artifact was not stored: %s", env->job_id,
                    strerror(-r));
    free(buf);
}

void nvw_fused_gate(const nvw_gate_env *env, const nvw_gate_case *k)
{
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_from_buffer(k->buf, k->len, &fr, &err);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its fused artifact: %s", env->job_id,
                    k->case_index, err ? err : strerror(-r));
        free(err);
        return;
    }
    snprintf(fr->backend, sizeof fr->backend, "%s", env->backend_spec);
    /* A probe runs the graph three times: none may outlast the deadline. */
    double deadline = k->deadline_s;
    double probe_ms = deadline * 1000 < 60000 ? deadline * 1000 : 60000;
    nvw_fmin_opts mo = {.budget = env->budget,
                        .deadline_s = deadline,
                        .timeout_ms = probe_ms > 1000 ? (int)probe_ms : 1000,
                        .progress = stderr,
                        .cancel = env->cancel};
    nvw_fmin_result m;
    r = nvw_fminimize(fr, env->b, &mo, &m);
    if (r < 0) {
        nv_log_warn("job %s case %d: fused minimization failed: %s", env->job_id, k->case_index,
                    strerror(-r));
        nvw_frepro_free(fr);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified)
        store_minimized(env, fr, &m, sha);
    json_t *c = k->c;
    nvw_gate_annotate(c, nvw_frepro_signature(fr, NULL, NULL, NULL), m.gate_runs, m.gate_failed,
                      m.gate_bits, m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_nodes",
                            json_pack("{si si so}", "before", m.nodes_before, "after",
                                      m.nodes_after, "nodes", nvw_fsub_nodes(fr, &m.sub)));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "before", (json_int_t)m.elements_before, "total",
                                      (json_int_t)m.elements_after));
    }
    nv_log_info("job %s case %d: fused gate %d/%d%s, %d of %d nodes (%s)%s%s", env->job_id,
                k->case_index, m.gate_failed, m.gate_runs, m.flaky ? ", flaky" : "", m.nodes_after,
                m.nodes_before, m.stop, sha[0] ? ", minimized artifact " : "", sha);
    nvw_frepro_free(fr);
}

static json_t *node_names(const nv_graph *g)
{
    json_t *a = json_array();
    for (int k = 0; a && k < g->n_nodes; k++)
        json_array_append_new(a, json_string(g->nodes[k].name));
    return a;
}

/* A fused case: the fused probe (repro_fused.h) of the stored (minimized)
 * graph on its stored inputs. It fails when the graph fails in any way (the
 * stored signature or another, a crash, a timeout); "same_signature" says
 * whether it is the stored one. */
void nvw_fused_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c)
{
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_from_artifact(a, sha, &fr, &err);
    if (r < 0) {
        nvw_replay_error(c, err ? err : "the fused artifact could not be rebuilt");
        free(err);
        return;
    }
    snprintf(fr->backend, sizeof fr->backend, "%s", env->backend_spec);
    nvw_fprobe p;
    r = nvw_fprobe_run(fr, env->b, fr->spec, fr->in, fr->g->n_inputs, 60000, true, NULL, NULL, &p);
    if (r < 0 || !strcmp(p.cls, "probe_error")) {
        nvw_replay_error(c, r < 0      ? "could not start a probe"
                            : p.msg[0] ? p.msg
                                       : "the probe failed");
    } else {
        bool passed = !strcmp(p.verdict, "passed");
        json_object_set_new(c, "verdict", json_string(passed ? "passed" : "failed"));
        json_object_set_new(c, "kind", json_string("fused"));
        json_object_set_new(c, "op", json_string(fr->op));
        json_object_set_new(c, "dtype", json_string(fr->judge));
        json_object_set_new(c, "case_dtype", json_string(nv_dtype_name(fr->dt)));
        json_object_set_new(c, "nodes", node_names(fr->g));
        json_object_set_new(c, "stored_class", json_string(fr->cls));
        if (!passed && p.cls[0])
            json_object_set_new(c, "failure_class", json_string(p.cls));
        if (p.node[0])
            json_object_set_new(
                c, "first_divergent",
                json_pack("{ss ss ss}", "node", p.node, "op", p.op, "dtype", p.judge));
        json_object_set_new(c, "same_signature", json_boolean(nvw_fprobe_same(fr, &p)));
        if (p.msg[0])
            json_object_set_new(c, "error", json_string(p.msg));
        json_object_set_new(c, "max_ulp", json_real(p.max_ulp));
        json_object_set_new(c, "bit_identical", json_boolean(p.bits == 1));
    }
    nvw_frepro_free(fr);
}
