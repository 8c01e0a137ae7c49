/* Unit tests of fused reproducers in memory (worker/repro_fused*.c,
 * worker/kinds/fused/minimize.c), as agent mode uses them: a fused artifact rebuilt
 * from its bytes (nvw_frepro_from_buffer) or a decoded container
 * (nvw_frepro_from_artifact), op artifacts and broken bytes refused, the fused
 * probe on emu's faulty fused mode (fused_intermediate=bf16: the QK^T matmul
 * held in bf16 inside the region while the region promises fp32; docs/JOBS.md
 * "emu's fused mode"), the minimizer cancelled before and during its run, and
 * the minimized artifact read back into memory and rebuilt. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "core/numerics/dtype.h"
#include "worker/kinds/fused/repro_fused.h"
#include "tests/unit/tap.h"

/* bf16 bits of v (v exactly representable: multiples of 1/8 in [-1, 1]). */
static uint16_t bf16_bits(double v)
{
    return (uint16_t)nv_dtype_encode(NV_DT_BF16, v, &NV_ROUND_DEFAULT, 0);
}

static void add_bf16(nv_artifact *a, const char *name, int64_t r, int64_t c, int seed)
{
    int64_t sh[2] = {r, c};
    uint16_t *x = malloc((size_t)(r * c) * 2);
    for (int64_t i = 0; i < r * c; i++)
        x[i] = seed < 0 ? bf16_bits(0.0) : bf16_bits((double)((i * 37 + seed) % 17 - 8) / 8.0);
    nv_artifact_add_tensor(a, name, NV_DT_BF16, 2, sh, x, (size_t)(r * c) * 2);
    free(x);
}

/* A fused failure as a fused job records it: S = Q K^T (2x64 by 64x2), Z = S *
 * 1/8, in bf16, first divergent node s (matmul judged in fp32). The stored
 * fused values are zeros: only their shapes matter to the rebuild. drop: a
 * tensor left out (NULL: none). */
static nv_artifact *fused_artifact(const char *kind, const char *drop)
{
    json_t *graph =
        json_pack("{s:[{s:s, s:[i,i]}, {s:s, s:[i,i]}, {s:s, s:[i,i], s:f}], "
                  "s:[{s:s, s:s, s:[s,s]}, {s:s, s:s, s:[s,s]}], s:[s]}",
                  "inputs", "name", "q", "shape", 2, 64, "name", "kT", "shape", 64, 2, "name", "c",
                  "shape", 2, 2, "value", 0.125, "nodes", "name", "s", "op", "matmul", "inputs",
                  "q", "kT", "name", "z", "op", "mul", "inputs", "s", "c", "outputs", "z");
    json_t *spec = json_pack("{s:s, s:o, s:[s], s:[s], s:i}", "kind", kind, "graph", graph,
                             "dtypes", "bf16", "inputs", "normal", "seed", 5);
    json_t *m =
        json_pack("{s:s, s:o, s:{s:s, s:s, s:i}, s:{s:s, s:s, s:s}, s:s, s:{s:s}}", "format",
                  "numval-artifact", "spec", spec, "case", "dtype", "bf16", "input", "normal",
                  "index", 0, "first_divergent", "node", "s", "op", "matmul", "dtype", "fp32",
                  "failure_class", "bound_exceeded", "mode", "fused", "test");
    nv_artifact *a = nv_artifact_new();
    nv_artifact_set_manifest(a, m);
    json_decref(m);
    const char *names[] = {"input:q", "input:kT", "input:c", "fused:s", "fused:z"};
    const int64_t shapes[][2] = {{2, 64}, {64, 2}, {2, 2}, {2, 2}, {2, 2}};
    for (int i = 0; i < 5; i++)
        if (!drop || strcmp(drop, names[i]))
            add_bf16(a, names[i], shapes[i][0], shapes[i][1], i == 2 ? -1 : i >= 3 ? -1 : i + 1);
    /* input:c holds the constant 1/8 the graph declares. */
    if (!drop || strcmp(drop, "input:c")) {
        nv_artifact_tensor *t = (nv_artifact_tensor *)nv_artifact_find(a, "input:c");
        for (int k = 0; k < 4; k++)
            ((uint16_t *)t->data)[k] = bf16_bits(0.125);
    }
    return a;
}

static int encode(nv_artifact *a, uint8_t **buf, size_t *len, char sha[65])
{
    int r = nv_artifact_encode(a, 0, buf, len, sha);
    nv_artifact_free(a);
    return r;
}

static void test_rebuild(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char sha[65];
    encode(fused_artifact("fused", NULL), &buf, &len, sha);
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_from_buffer(buf, len, &fr, &err);
    tap_ok(r == 0 && fr, "fused artifact rebuilt from memory (%s)", err ? err : "");
    if (fr) {
        tap_ok(!strcmp(fr->sha, sha), "its content id is the SHA-256 of the bytes");
        tap_ok(fr->g->n_inputs == 3 && fr->g->n_nodes == 2 && fr->dt == NV_DT_BF16,
               "graph of 3 inputs, 2 nodes, case dtype bf16");
        tap_ok(!strcmp(fr->op, "matmul") && !strcmp(fr->judge, "fp32") && !strcmp(fr->node, "s") &&
                   !strcmp(fr->cls, "bound_exceeded"),
               "stored first divergent node s (matmul, fp32, bound_exceeded)");
        tap_ok(fr->in[2]->data[3] == 0.125, "stored inputs decoded (c = 1/8)");
    }
    nvw_frepro_free(fr);
    nv_artifact *a = NULL;
    nv_artifact_decode(buf, len, &a, NULL);
    fr = NULL;
    r = nvw_frepro_from_artifact(a, sha, &fr, NULL);
    tap_ok(r == 0 && fr && !strcmp(fr->sha, sha), "and from a decoded container");
    nvw_frepro_free(fr);
    nv_artifact_free(a);
    free(buf);

    encode(fused_artifact("op", NULL), &buf, &len, sha);
    fr = NULL;
    r = nvw_frepro_from_buffer(buf, len, &fr, NULL);
    tap_ok(r == -ENOTSUP && !fr, "an op artifact is not fused: -ENOTSUP (%d)", r);
    free(buf);

    encode(fused_artifact("fused", "fused:z"), &buf, &len, sha);
    r = nvw_frepro_from_buffer(buf, len, &fr, &err);
    tap_ok(r == -EINVAL && err && strstr(err, "'fused:z'"), "missing fused:z refused: %s",
           err ? err : "");
    free(err);
    err = NULL;
    buf[len / 2] ^= 0x55; /* the zstd content checksum catches it */
    r = nvw_frepro_from_buffer(buf, len, &fr, &err);
    tap_ok(r == -EINVAL && err && strstr(err, "not a valid artifact"), "corrupt bytes refused: %s",
           err ? err : "");
    free(err);
    free(buf);
}

/* A progress stream that cancels the minimizer when it writes its first line
 * (the gate's verdict), so the cancel lands between the gate and ddmin. */
static atomic_int g_cancel;
static ssize_t cancel_write(void *c, const char *buf, size_t n)
{
    (void)c;
    (void)buf;
    atomic_store(&g_cancel, 1);
    return (ssize_t)n;
}

static void test_probe_and_minimize(void)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    char sha[65];
    encode(fused_artifact("fused", NULL), &buf, &len, sha);
    nvw_frepro *fr = NULL;
    nvw_frepro_from_buffer(buf, len, &fr, NULL);
    free(buf);
    nvw_backend *bad = NULL, *good = NULL;
    char err[256] = "";
    if (!fr || nvw_backend_load("emu:fused_intermediate=bf16", &bad, err, sizeof err) < 0 ||
        nvw_backend_load("emu", &good, err, sizeof err) < 0) {
        tap_ok(0, "setup: %s", err);
        nvw_frepro_free(fr);
        return;
    }
    snprintf(fr->backend, sizeof fr->backend, "emu:fused_intermediate=bf16");
    nvw_fprobe p;
    int r = nvw_fprobe_run(fr, bad, fr->spec, fr->in, fr->g->n_inputs, 30000, true, NULL, NULL, &p);
    tap_ok(r == 0 && !strcmp(p.verdict, "failed") && nvw_fprobe_same(fr, &p),
           "faulty mode: fails at '%s' (%s, %s, %s) as stored", p.node, p.op, p.judge, p.cls);
    tap_ok(p.bits == 0, "stored fused values (zeros) differ from the device's: bits 0 (%d)",
           p.bits);
    r = nvw_fprobe_run(fr, good, fr->spec, fr->in, fr->g->n_inputs, 30000, true, NULL, NULL, &p);
    tap_ok(r == 0 && !strcmp(p.verdict, "passed") && !nvw_fprobe_same(fr, &p),
           "correct emu: passes (%s)", p.verdict);

    atomic_store(&g_cancel, 1);
    nvw_fmin_opts o = {.gate_runs = 3, .cancel = &g_cancel};
    nvw_fmin_result m;
    r = nvw_fminimize(fr, bad, &o, &m);
    tap_ok(r == 0 && !strcmp(m.stop, "cancelled") && m.gate_runs == 0 && m.probes == 0 &&
               !m.verified && !m.flaky,
           "cancelled before it starts: no probe, neither verified nor flaky (stop %s)", m.stop);

    atomic_store(&g_cancel, 0);

    o.deadline_s = 1e-9;
    r = nvw_fminimize(fr, bad, &o, &m);
    tap_ok(r == 0 && !strcmp(m.stop, "deadline") && m.gate_runs == 0 && !m.flaky && !m.verified,
           "deadline passed before the gate: neither flaky nor minimized (stop %s)", m.stop);
    o.deadline_s = 0;

    FILE *progress = fopencookie(NULL, "w", (cookie_io_functions_t){.write = cancel_write});
    setvbuf(progress, NULL, _IONBF, 0);
    o.progress = progress;
    r = nvw_fminimize(fr, bad, &o, &m);
    fclose(progress);
    tap_ok(r == 0 && !strcmp(m.stop, "cancelled") && m.gate_runs == 3 && m.gate_failed == 3 &&
               m.probes == 0 && !m.verified,
           "cancelled after the gate (3/3 failed): stops before ddmin (stop %s, %d probes)", m.stop,
           m.probes);

    atomic_store(&g_cancel, 0);

    o.progress = NULL;
    r = nvw_fminimize(fr, bad, &o, &m);
    tap_ok(r == 0 && !strcmp(m.stop, "done") && m.verified && m.sub.keep[0],
           "not cancelled: verified, 's' kept (%d of %d nodes)", m.nodes_after, m.nodes_before);
    tap_ok(m.elements_after < m.elements_before, "input elements %lld -> %lld",
           (long long)m.elements_before, (long long)m.elements_after);

    json_t *extra = json_pack("{ss}", "job_id", "42");
    nvw_fprobe last;
    r = nvw_fminimized_artifact(fr, bad, &m, 30000, NULL, extra, &buf, &len, &last);
    json_decref(extra);
    char got[65] = "";
    if (r == 0)
        nv_sha256_hex(buf, len, got);
    tap_ok(r == 0 && !strcmp(got, last.sha), "minimized artifact read back, id %.12s", got);
    nvw_frepro *mr = NULL;
    if (r == 0 && nvw_frepro_from_buffer(buf, len, &mr, NULL) == 0) {
        json_t *s0 = nvw_frepro_signature(fr, NULL, NULL, NULL);
        json_t *s1 = json_object_get(mr->manifest, "signature");
        tap_ok(json_equal(s0, s1) &&
                   !strcmp(json_string_value(json_object_get(mr->manifest, "minimized_from")),
                           fr->sha),
               "it carries the signature and minimized_from");
        tap_ok(!strcmp(json_string_value(json_object_get(mr->manifest, "job_id")), "42"),
               "and the extra keys (job_id)");
        tap_ok(mr->g->n_nodes == m.nodes_after && !strcmp(mr->op, "matmul"),
               "rebuilt: %d nodes, first divergent matmul", mr->g->n_nodes);
        json_decref(s0);
    } else {
        tap_ok(0, "the minimized artifact rebuilds");
    }
    nvw_frepro_free(mr);
    free(buf);
    nvw_backend_free(bad);
    nvw_backend_free(good);
    nvw_frepro_free(fr);
}

int main(void)
{
    test_rebuild();
    test_probe_and_minimize();
    return tap_done();
}
