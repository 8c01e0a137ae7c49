/* The serving kind's failures after the job (serving.h): the signature key,
 * the agent's gate and minimization of a kept failure, the suite's replay and
 * `numval-worker repro|minimize`. A serving job's artifact is either a serving
 * pair (localize.c) or, where the kind handed on a failure of another kind's
 * form, that kind's: the artifact's own "spec" picks the row, as for the model
 * kind (worker/kinds/kinds.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/sha256.h"
#include "pair_min.h"
#include "worker/repro/artifact.h"

#define PAIR_BUDGET 2000
#define PAIR_DEADLINE_S 300.0
#define PAIR_PROBE_MS 60000

static const char *str(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

void nvw_serving_failure_key(const json_t *m, char *key, size_t len)
{
    const json_t *sp = json_object_get(m, "serving_pair");
    snprintf(key, len, "serving/%s/%s/%s/%s/%s", str(json_object_get(m, "case"), "check"),
             str(sp, "op"), str(sp, "out_dtype"), str(json_object_get(m, "case"), "dtype"),
             str(m, "failure_class"));
}

/* The minimized pair as an artifact: the stored manifest with the new boxes
 * and what minimization did, the pair's tensors. 0 or a negative errno. */
static int minimized_artifact(const sv_pair *p, const sv_pmin_result *m, const char *from,
                              const json_t *extra, uint8_t **ret_buf, size_t *ret_len, char sha[65])
{
    const sv_pair *q = m->best;
    json_t *man = json_deep_copy(q->manifest);
    json_t *sp = sv_pair_json(q);
    json_t *mj =
        json_pack("{s:s, s:i, s:f, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "method",
                  "rows, matmul extents, zeros", "probes", m->probes, "seconds", m->seconds, "stop",
                  m->stop, "elements_before", (json_int_t)m->elements_before, "elements_after",
                  (json_int_t)m->elements_after, "nonzero_before", (json_int_t)m->nonzero_before,
                  "nonzero_after", (json_int_t)m->nonzero_after, "rows_before",
                  (json_int_t)m->rows_before, "rows_after", (json_int_t)m->rows_after);
    int r = man && sp && mj ? 0 : -ENOMEM;
    if (r) {
        json_decref(man);
        json_decref(sp);
        json_decref(mj);
        return r;
    }
    /* json_object_set_new takes the value even when it fails: every one runs */
    if (json_object_set_new(man, "serving_pair", sp) |
        json_object_set_new(man, "signature", sv_pair_signature(p)) |
        json_object_set_new(man, "minimized_from", json_string(from)) |
        json_object_set_new(man, "minimized", mj) |
        json_object_set_new(man, "repro_rate",
                            json_pack("{s:i, s:i, s:i}", "runs", m->gate_runs, "failed",
                                      m->gate_failed, "bit_identical", m->gate_bits)))
        r = -ENOMEM;
    const char *keys[] = {"format", "version", "tensors", "case_index"};
    for (size_t k = 0; r == 0 && k < sizeof keys / sizeof keys[0]; k++)
        json_object_del(man, keys[k]); /* the container's, written again */
    if (r == 0 && extra)
        json_object_update(man, (json_t *)extra);
    const char *names[6];
    const nv_tensor *ts[6];
    char buf[6][24];
    int n = 0;
    for (int w = 0; w < 2; w++)
        for (int i = 0; i <= q->n_in; i++, n++) {
            bool out = i == q->n_in;
            snprintf(buf[n], sizeof buf[n], "%s.%s:%d", w ? "b" : "a", out ? "output" : "input",
                     out ? 0 : i);
            names[n] = buf[n];
            ts[n] = out ? q->out[w] : q->in[w][i];
        }
    nvw_failure f = {.case_index =
                         (int)json_integer_value(json_object_get(q->manifest, "case_index")),
                     .manifest = man,
                     .n_tensors = n,
                     .names = names,
                     .tensors = ts};
    nvw_artifact_origin o = {.backend_spec = p->backend};
    if (r == 0)
        r = nvw_failure_artifact(&f, &o, ret_buf, ret_len, sha);
    json_decref(man);
    return r;
}

void nvw_serving_gate(const nvw_gate_env *env, const nvw_gate_case *k)
{
    sv_pair *p = NULL;
    char *err = NULL;
    int r = sv_pair_from_buffer(k->buf, k->len, &p, &err);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its serving pair: %s", env->job_id,
                    k->case_index, err ? err : strerror(-r));
        free(err);
        return;
    }
    snprintf(p->backend, sizeof p->backend, "%s", env->backend_spec);
    double probe_ms = k->deadline_s * 1000 < PAIR_PROBE_MS ? k->deadline_s * 1000 : PAIR_PROBE_MS;
    sv_pmin_opts o = {.runs = 5,
                      .budget = env->budget,
                      .deadline_s = k->deadline_s,
                      .timeout_ms = probe_ms > 1000 ? (int)probe_ms : 1000,
                      .cancel = env->cancel};
    sv_pmin_result m;
    if ((r = sv_pair_minimize(p, env->b, &o, &m)) < 0) {
        nv_log_warn("job %s case %d: serving pair minimization failed: %s", env->job_id,
                    k->case_index, strerror(-r));
        sv_pair_free(p);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        uint8_t *buf = NULL;
        size_t len = 0;
        r = env->extra ? minimized_artifact(p, &m, k->sha, env->extra, &buf, &len, sha) : -ENOMEM;
        if (r == 0 && (r = env->store(env->ud, buf, len, sha)) < 0)
            sha[0] = 0;
        if (r < 0)
            nv_log_warn("job %s: the minimized serving pair was not stored: %s", env->job_id,
                        strerror(-r));
        free(buf);
    }
    json_t *c = k->c;
    nvw_gate_annotate(c, sv_pair_signature(p), m.gate_runs, m.gate_failed, m.gate_bits, m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{s:I, s:I, s:I}", "before", (json_int_t)m.elements_before,
                                      "total", (json_int_t)m.elements_after, "non_neutral",
                                      (json_int_t)m.nonzero_after));
    }
    nv_log_info("job %s case %d: serving pair gate %d/%d%s, %lld -> %lld input values (%lld "
                "nonzero), %d probes (%s)%s%s",
                env->job_id, k->case_index, m.gate_failed, m.gate_runs, m.flaky ? ", flaky" : "",
                (long long)m.elements_before, (long long)m.elements_after,
                (long long)m.nonzero_after, m.probes, m.stop, sha[0] ? ", minimized artifact " : "",
                sha);
    sv_pair_free(m.best);
    sv_pair_free(p);
}

void nvw_serving_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c)
{
    (void)sha;
    sv_pair *p = NULL;
    char *err = NULL;
    if (sv_pair_from_artifact(a, &p, &err) < 0) {
        nvw_replay_error(c, err ? err : "the serving pair could not be rebuilt");
        free(err);
        return;
    }
    sv_pprobe pr;
    if (sv_pair_probe(p, env->b, PAIR_PROBE_MS, &pr, NULL) < 0 || !strcmp(pr.cls, "probe_error")) {
        nvw_replay_error(c, pr.msg[0] ? pr.msg : "could not run a probe");
    } else {
        bool passed = !pr.cls[0];
        json_object_set_new(c, "verdict", json_string(passed ? "passed" : "failed"));
        json_object_set_new(c, "kind", json_string("serving"));
        json_object_set_new(c, "op", json_string(p->op->name));
        json_object_set_new(c, "dtype", json_string(nv_dtype_name(p->out_dt)));
        json_object_set_new(c, "case_dtype", json_string(p->case_dtype));
        json_object_set_new(c, "check", json_string(p->check));
        json_object_set_new(c, "node", json_string(p->node));
        json_object_set_new(c, "stored_class", json_string(p->cls));
        if (!passed)
            json_object_set_new(c, "failure_class", json_string(pr.cls));
        json_object_set_new(c, "same_signature", json_boolean(!strcmp(pr.cls, p->cls)));
        json_object_set_new(c, "values_differing", json_integer(pr.differ > 0 ? pr.differ : 0));
        if (pr.msg[0])
            json_object_set_new(c, "error", json_string(pr.msg));
        json_object_set_new(c, "bit_identical", json_boolean(pr.bits[0] && pr.bits[1]));
    }
    sv_pair_free(p);
}

static int setup(const nvw_cmd *c, sv_pair **ret, nvw_backend **ret_b)
{
    char *err = NULL;
    int r = sv_pair_from_artifact(c->a, ret, &err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s: %s\n", c->path, err ? err : strerror(-r));
        free(err);
        return r;
    }
    const char *spec = NULL;
    if ((r = nvw_cmd_backend(c, (*ret)->manifest, ret_b, &spec)) < 0)
        return r;
    snprintf((*ret)->backend, sizeof(*ret)->backend, "%s", spec);
    return 0;
}

int nvw_serving_repro_main(const nvw_cmd *c)
{
    sv_pair *p = NULL;
    nvw_backend *b = NULL;
    int status = NVW_EXIT_ERROR;
    if (setup(c, &p, &b) < 0)
        goto out;
    int runs = c->runs > 0 ? (int)c->runs : 5, failed = 0, bits = 0;
    int timeout = c->timeout_ms > 0 ? (int)c->timeout_ms : PAIR_PROBE_MS;
    sv_pprobe first;
    int r = sv_pair_probe(p, b, timeout, &first, NULL);
    if (r == 0 && runs > 1)
        r = sv_pair_gate(p, b, runs - 1, timeout, &failed, &bits);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        goto out;
    }
    failed += !strcmp(first.cls, p->cls);
    bits += first.bits[0] && first.bits[1];
    nvw_cmd_print_json(
        json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:s, s:I, s:s}", "artifact", c->sha,
                  "kind", "serving_pair", "node", p->node, "op", p->op->name, "signature",
                  sv_pair_signature(p), "runs", runs, "failed", failed, "bit_identical", bits,
                  "failure_class", first.cls, "values_differing",
                  (json_int_t)(first.differ > 0 ? first.differ : 0), "message", first.msg));
    status = failed > 0 ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
out:
    nvw_backend_free(b);
    sv_pair_free(p);
    return status;
}

int nvw_serving_minimize_main(const nvw_cmd *c)
{
    sv_pair *p = NULL;
    nvw_backend *b = NULL;
    int status = NVW_EXIT_ERROR;
    sv_pmin_result m = {0};
    if (setup(c, &p, &b) < 0)
        goto out;
    sv_pmin_opts o = {.runs = c->runs > 0 ? (int)c->runs : 5,
                      .budget = c->budget > 0 ? (int)c->budget : PAIR_BUDGET,
                      .deadline_s = c->deadline > 0 ? c->deadline : PAIR_DEADLINE_S,
                      .timeout_ms = c->timeout_ms > 0 ? (int)c->timeout_ms : PAIR_PROBE_MS};
    int r = sv_pair_minimize(p, b, &o, &m);
    if (r < 0) {
        fprintf(stderr, "numval-worker: minimization stopped: %s\n", strerror(-r));
        goto out;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified && c->output) {
        uint8_t *buf = NULL;
        size_t len = 0;
        r = minimized_artifact(p, &m, c->sha, NULL, &buf, &len, sha);
        if (r == 0)
            r = nvw_cmd_write_file(c->output, buf, len);
        free(buf);
        if (r < 0) {
            fprintf(stderr, "numval-worker: cannot write the minimized artifact '%s': %s\n",
                    c->output, strerror(-r));
            goto out;
        }
    }
    const sv_pair *q = m.best;
    json_t *shapes = json_array();
    for (int w = 0; q && shapes && w < 2; w++)
        for (int i = 0; i < q->n_in; i++) {
            json_t *s = json_array();
            for (int d = 0; s && d < q->in[w][i]->ndim; d++)
                json_array_append_new(s, json_integer(q->in[w][i]->shape[d]));
            json_array_append_new(shapes, s);
        }
    nvw_cmd_print_json(json_pack(
        "{s:s, s:s?, s:o, s:{s:i, s:i, s:i}, s:b, s:b, s:i, s:f, s:s, s:I, s:I, s:I, s:I, s:o}",
        "artifact", c->sha, "minimized_artifact", sha[0] ? sha : NULL, "signature",
        sv_pair_signature(p), "repro_rate", "runs", m.gate_runs, "failed", m.gate_failed,
        "bit_identical", m.gate_bits, "flaky", m.flaky, "verified", m.verified, "probes", m.probes,
        "seconds", m.seconds, "stop", m.stop, "elements_before", (json_int_t)m.elements_before,
        "elements_after", (json_int_t)m.elements_after, "nonzero_after",
        (json_int_t)m.nonzero_after, "rows_after", (json_int_t)m.rows_after, "input_shapes",
        shapes));
    status = !m.flaky && m.verified ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
out:
    sv_pair_free(m.best);
    nvw_backend_free(b);
    sv_pair_free(p);
    return status;
}
