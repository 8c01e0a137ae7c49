/* `numval-worker repro` and `numval-worker minimize` on a fused artifact
 * (fused.h, worker/repro/cmd.h): the stored graph re-run on the stored inputs,
 * and the minimized subgraph written as an artifact of its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fused.h"
#include "repro_fused.h"
#include "worker/repro/artifact.h"

/* Rebuild the fused case and load the backend (the manifest's own spec unless
 * --backend), which fr->backend then names. */
static int setup(const nvw_cmd *c, nvw_frepro **ret_fr, nvw_backend **ret_b)
{
    char *err = NULL;
    int r = nvw_frepro_from_artifact(c->a, c->sha, ret_fr, &err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        return r;
    }
    const char *spec = NULL;
    if ((r = nvw_cmd_backend(c, (*ret_fr)->manifest, ret_b, &spec)) < 0)
        return r;
    snprintf((*ret_fr)->backend, sizeof(*ret_fr)->backend, "%s", spec);
    return 0;
}

static json_t *divergent(const nvw_fprobe *p)
{
    return json_pack("{s:s, s:s, s:s, s:f}", "node", p->node, "op", p->op, "dtype", p->judge,
                     "max_ulp", p->max_ulp);
}

int nvw_fused_repro_main(const nvw_cmd *c)
{
    nvw_frepro *fr = NULL;
    nvw_backend *b = NULL;
    if (setup(c, &fr, &b) < 0) {
        nvw_frepro_free(fr);
        return NVW_EXIT_ERROR;
    }
    int runs = (int)c->runs, timeout_ms = (int)c->timeout_ms;
    int failed = 0, bits = 0, r = 0;
    nvw_fprobe first, p;
    memset(&first, 0, sizeof first);
    for (int i = 0; r == 0 && i < runs; i++) {
        r = nvw_fprobe_run(fr, b, fr->spec, fr->in, fr->g->n_inputs, timeout_ms, true, NULL, NULL,
                           &p);
        if (r == 0 && i == 0)
            first = p;
        failed += r == 0 && nvw_fprobe_same(fr, &p);
        bits += r == 0 && p.bits == 1;
    }
    nvw_backend_free(b);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot run a probe: %s\n", strerror(-r));
        nvw_frepro_free(fr);
        return NVW_EXIT_ERROR;
    }
    bool still = failed > 0;
    fprintf(stderr,
            "fused case '%s' first divergent '%s' (%s, %s) %s: failed the same way in %d of %d "
            "runs; every node's fused value bit-identical to the stored one in %d of %d runs\n",
            nv_dtype_name(fr->dt), fr->node, fr->op, fr->cls,
            still ? "STILL FAILS" : "no longer fails as stored", failed, runs, bits, runs);
    nvw_cmd_print_json(
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s}, s:i, s:i, s:i, s:b, s:s, "
                  "s:s, s:o, s:s, s:o}",
                  "artifact", fr->sha, "kind", "fused", "graph_hash",
                  json_string_value(json_object_get(fr->manifest, "graph_hash"))
                      ? json_string_value(json_object_get(fr->manifest, "graph_hash"))
                      : "",
                  "dtype", nv_dtype_name(fr->dt), "stored_class", fr->cls, "stored_first_divergent",
                  "node", fr->node, "op", fr->op, "dtype", fr->judge, "runs", runs, "failed",
                  failed, "bit_identical", bits, "still_fails", still, "verdict", first.verdict,
                  "class", first.cls, "first_divergent", divergent(&first), "message", first.msg,
                  "signature", nvw_frepro_signature(fr, NULL, NULL, NULL)));
    nvw_frepro_free(fr);
    return still ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
}

json_t *nvw_fsub_nodes(const nvw_frepro *fr, const nvw_fsub *sub)
{
    json_t *a = json_array();
    for (int k = 0; a && k < fr->g->n_nodes; k++)
        if (sub->keep[k])
            json_array_append_new(a, json_string(fr->g->nodes[k].name));
    return a;
}

static json_t *extra_keys(const nvw_frepro *fr, const nvw_fmin_result *m, const json_t *extra)
{
    json_t *o =
        json_pack("{s:o, s:s, s:{s:i, s:i, s:i}, s:{s:s, s:i, s:f, s:s, s:i, s:i, s:o, s:I, s:I}}",
                  "signature", nvw_frepro_signature(fr, NULL, NULL, NULL), "minimized_from",
                  fr->sha, "repro_rate", "runs", m->gate_runs, "failed", m->gate_failed,
                  "bit_identical", m->gate_bits, "minimized", "method",
                  "fused: ddmin over nodes (placeholders fed reference values), then extents "
                  "(power-of-two prefixes, then window bisection)",
                  "probes", m->probes, "seconds", m->seconds, "stop", m->stop, "nodes_before",
                  m->nodes_before, "nodes_after", m->nodes_after, "nodes",
                  nvw_fsub_nodes(fr, &m->sub), "elements_before", (json_int_t)m->elements_before,
                  "elements_after", (json_int_t)m->elements_after);
    /* Where each shrunk extent's window lies in the stored tensors: every dim
     * of that extent, in every input, keeps indices [offset, offset + length). */
    json_t *win = json_array();
    for (int i = 0; o && win && i < m->sub.n_map; i++)
        json_array_append_new(
            win, json_pack("{s:I, s:I, s:I}", "extent", (json_int_t)m->sub.from[i], "offset",
                           (json_int_t)m->sub.off[i], "length", (json_int_t)m->sub.to[i]));
    if (!o || !win || json_object_set_new(json_object_get(o, "minimized"), "windows", win) < 0) {
        json_decref(o);
        return NULL;
    }
    if (o && extra && json_object_update(o, (json_t *)extra) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A fresh temporary file name for the child to write (the file is left empty). */
static int temp_path(char *buf, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, len, "%s/numval-fmin-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(buf);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

/* The minimized subgraph run once more, the child writing its artifact to path. */
static int write_minimized(nvw_frepro *fr, const nvw_backend *b, const nvw_fmin_result *m,
                           int timeout_ms, const char *path, const json_t *extra, nvw_fprobe *ret)
{
    json_t *spec = NULL, *keys = extra_keys(fr, m, extra);
    nv_tensor **in = NULL;
    int n = 0;
    int r = keys ? nvw_fsub_build(fr, &m->sub, &spec, &in, &n) : -ENOMEM;
    if (r == 0)
        r = nvw_fprobe_run(fr, b, spec, in, n, timeout_ms, false, path, keys, ret);
    if (r == 0 && !ret->sha[0])
        r = -EIO;
    for (int i = 0; in && i < n; i++)
        nv_tensor_free(in[i]);
    free(in);
    json_decref(spec);
    json_decref(keys);
    return r;
}

int nvw_fminimized_artifact(nvw_frepro *fr, const nvw_backend *b, const nvw_fmin_result *m,
                            int timeout_ms, const char *path, const json_t *extra,
                            uint8_t **ret_buf, size_t *ret_len, nvw_fprobe *ret)
{
    if (path) {
        int r = write_minimized(fr, b, m, timeout_ms, path, extra, ret);
        if (r < 0 || !ret_buf)
            return r;
        return nvw_read_file(path, ret_buf, ret_len);
    }
    char tmp[4096];
    int r = temp_path(tmp, sizeof tmp);
    if (r < 0)
        return r;
    r = write_minimized(fr, b, m, timeout_ms, tmp, extra, ret);
    if (r == 0 && ret_buf)
        r = nvw_read_file(tmp, ret_buf, ret_len);
    unlink(tmp);
    return r;
}

int nvw_fused_minimize_main(const nvw_cmd *c)
{
    nvw_frepro *fr = NULL;
    nvw_backend *b = NULL;
    nvw_fmin_result m;
    int status = NVW_EXIT_ERROR;
    if (setup(c, &fr, &b) < 0)
        goto out;
    nvw_fmin_opts mo = {.budget = (int)c->budget,
                        .deadline_s = c->deadline,
                        .gate_runs = (int)c->runs,
                        .timeout_ms = (int)c->timeout_ms,
                        .progress = c->quiet ? NULL : stderr};
    const nvw_fmin_opts *o = &mo;
    const char *output = c->output;
    int r = nvw_fminimize(fr, b, o, &m);
    if (r < 0) {
        fprintf(stderr, "numval-worker: minimization stopped: %s\n", strerror(-r));
        goto out;
    }
    nvw_fprobe art = {0};
    if (!m.flaky && m.verified && output &&
        (r = nvw_fminimized_artifact(fr, b, &m, o->timeout_ms, output, NULL, NULL, NULL, &art)) <
            0) {
        fprintf(stderr, "numval-worker: cannot write the minimized artifact '%s': %s\n", output,
                strerror(-r));
        goto out;
    }
    nvw_cmd_print_json(json_pack(
        "{s:s, s:s?, s:o, s:{s:i, s:i, s:i}, s:b, s:b, s:i, s:f, s:s, s:i, s:i, s:o, s:I, s:I, "
        "s:o}",
        "artifact", fr->sha, "minimized_artifact", art.sha[0] ? art.sha : NULL, "signature",
        nvw_frepro_signature(fr, NULL, NULL, NULL), "repro_rate", "runs", m.gate_runs, "failed",
        m.gate_failed, "bit_identical", m.gate_bits, "flaky", m.flaky, "verified", m.verified,
        "probes", m.probes, "seconds", m.seconds, "stop", m.stop, "nodes_before", m.nodes_before,
        "nodes_after", m.nodes_after, "nodes", nvw_fsub_nodes(fr, &m.sub), "elements_before",
        (json_int_t)m.elements_before, "elements_after", (json_int_t)m.elements_after,
        "first_divergent", divergent(&m.last)));
    status = !m.flaky && m.verified ? NVW_EXIT_FAILS : NVW_EXIT_PASSES;
out:
    nvw_backend_free(b);
    nvw_frepro_free(fr);
    return status;
}
