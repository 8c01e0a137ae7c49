/* Unit tests of the gradient reproducers (worker/kinds/gradient/repro*.c,
 * worker/kinds/gradient/minimize.c): broken gradient artifacts are refused naming the
 * missing piece, op artifacts are not taken, the signature is the SHA-256 of
 * its canonical JSON and ignores the build, neutral values keep inputs in the
 * differentiable domain, a probe on the correct emu passes and compares the
 * device gradients bit for bit with the stored ones, and a case that does not
 * fail is flaky and not minimized. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "worker/kinds/gradient/repro_grad.h"
#include "tests/unit/tap.h"

#define N 4

static const float X[N] = {-1.5f, -0.25f, 0.5f, 2.0f};
static const float GY[N] = {1.0f, -2.0f, 0.5f, 0.75f};

/* A sigmoid fp32 [2, 2] gradient artifact; grads: the stored device gradient
 * (NULL: zeros). drop_key / drop_tensor leave one piece out. */
static nv_artifact *artifact(const char *drop_key, const char *drop_tensor, const uint8_t *grads)
{
    json_t *spec = json_pack("{ss ss s[s] s[[ii]] si}", "kind", "gradient", "op", "sigmoid",
                             "dtypes", "fp32", "shapes", 2, 2, "seed", 1);
    json_t *tol = json_pack("{s{ss ss ss si ss ss}}", "x", "metric", "gradient_bound", "u_storage",
                            "fp32", "u_compute", "fp32", "reduction_len", 1, "reason_code",
                            "dtype_precision", "reason", "fp32 storage and compute");
    json_t *m = json_pack("{ss so si ss ss ss so s{ss} s{ss}}", "format", "numval-artifact", "spec",
                          spec, "case_index", 0, "dtype", "fp32", "failure_class",
                          "gradient_mismatch", "check", "device", "tolerance", tol, "mode",
                          "transcendental", "exact", "build", "name", "b1");
    if (drop_key)
        json_object_del(m, drop_key);
    nv_artifact *a = nv_artifact_new();
    nv_artifact_set_manifest(a, m);
    json_decref(m);
    int64_t sh[2] = {2, 2};
    uint8_t zero[N * 4] = {0};
    if (!drop_tensor || strcmp(drop_tensor, "input:0"))
        nv_artifact_add_tensor(a, "input:0", 1, 2, sh, X, sizeof X);
    if (!drop_tensor || strcmp(drop_tensor, "grad_output:0"))
        nv_artifact_add_tensor(a, "grad_output:0", 1, 2, sh, GY, sizeof GY);
    if (!drop_tensor || strcmp(drop_tensor, "grad_input:0"))
        nv_artifact_add_tensor(a, "grad_input:0", 1, 2, sh, grads ? grads : zero, sizeof zero);
    return a;
}

static void refused(const char *key, const char *tensor, const char *want)
{
    nv_artifact *a = artifact(key, tensor, NULL);
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_artifact(a, &gr, &err);
    tap_ok(r == -EINVAL && err && strstr(err, want), "missing %s: refused naming '%s' (got '%s')",
           key ? key : tensor, want, err ? err : "");
    free(err);
    nvw_grepro_free(gr);
    nv_artifact_free(a);
}

static void test_load(void)
{
    nv_artifact *a = artifact(NULL, NULL, NULL);
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_artifact(a, &gr, &err);
    tap_ok(r == 0 && gr && gr->n_in == 1 && gr->gy && gr->gy->numel == N &&
               gr->in[0]->data[0] == -1.5 && gr->gy->data[1] == -2.0 && gr->n_stored == 1 &&
               !strcmp(gr->check, "device"),
           "a complete artifact rebuilds: input, cotangent and stored gradient (%s)",
           err ? err : "");
    nvw_grepro_free(gr);
    nv_artifact_free(a);
    free(err);
    refused(NULL, "grad_output:0", "'grad_output:0'");
    refused(NULL, "grad_input:0", "'grad_input:0'");
    refused(NULL, "input:0", "'input:0'");
    refused("tolerance", NULL, "'tolerance'");
    refused("check", NULL, "'check'");
    refused("case_index", NULL, "'case_index'");
    /* An op artifact is not a gradient one: the op loader takes it. */
    a = artifact(NULL, NULL, NULL);
    json_object_set_new(json_object_get(a->manifest, "spec"), "kind", json_string("op"));
    r = nvw_grepro_from_artifact(a, &gr, &err);
    tap_ok(r == -ENOTSUP, "an op artifact is left to the op loader (-ENOTSUP)");
    nv_artifact_free(a);
}

static void test_signature(void)
{
    nv_artifact *a = artifact(NULL, NULL, NULL);
    nvw_grepro *gr = NULL;
    if (nvw_grepro_from_artifact(a, &gr, NULL) < 0) {
        tap_ok(0, "signature: artifact did not load");
        nv_artifact_free(a);
        return;
    }
    json_t *s = nvw_grepro_signature(gr, NULL);
    /* Hand-written canonical JSON (keys sorted, compact) of the signature. */
    const char *canon = "{\"attrs\":{},\"check\":\"device\",\"dtype\":\"fp32\",\"failure_class\":"
                        "\"gradient_mismatch\",\"kind\":\"gradient\",\"mode\":{\"transcendental\":"
                        "\"exact\"},\"op\":\"sigmoid\"}";
    char hex[65];
    nv_sha256_hex(canon, strlen(canon), hex);
    const char *id = json_string_value(json_object_get(s, "id"));
    tap_ok(id && !strcmp(id, hex), "signature id is the SHA-256 of the canonical JSON (%s)",
           id ? id : "none");
    json_object_set_new(json_object_get(gr->manifest, "build"), "name", json_string("b2"));
    json_t *s2 = nvw_grepro_signature(gr, NULL), *s3 = nvw_grepro_signature(gr, "bad_output");
    tap_ok(json_equal(s, s2), "another build: the same signature");
    tap_ok(strcmp(json_string_value(json_object_get(s3, "id")), hex) != 0,
           "another class: another signature");
    json_decref(s);
    json_decref(s2);
    json_decref(s3);
    nvw_grepro_free(gr);
    nv_artifact_free(a);
}

static void test_neutral(void)
{
    static const struct {
        const char *op;
        int input;
        double want; /* NAN: never neutralized */
    } cases[] = {
        {"sigmoid", 0, 0.0}, {"log", 0, 1.0},     {"relu", 0, 1.0},          {"div", 0, 0.0},
        {"div", 1, 1.0},     {"maximum", 0, NAN}, {"max", 0, NAN},           {"softmax", 0, 0.0},
        {"pow", 1, 0.0},     {"norm2", 0, 1.0},   {"cross_entropy", 1, NAN},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        nv_gradspec gs = {0};
        nv_jobspec js = {0};
        js.op = nv_op_find(cases[k].op);
        gs.base = &js;
        nvw_grepro gr = {.gs = &gs, .n_in = js.op ? js.op->n_inputs : 1};
        double v = js.op ? nvw_grad_neutral_value(&gr, cases[k].input) : -7;
        tap_ok(isnan(cases[k].want) ? isnan(v) : v == cases[k].want, "%s input %d: neutral %g",
               cases[k].op, cases[k].input, v);
        tap_ok(nvw_grad_neutral_value(&gr, gr.n_in) == 0.0,
               "%s: the cotangent's neutral value is 0", cases[k].op);
    }
}

/* A probe on emu (a correct backward): it passes; the stored zeros are not its
 * gradient, its own gradient stored back is, bit for bit. */
static void test_probe(void)
{
    nvw_backend *b = NULL;
    char berr[256] = "";
    if (nvw_backend_load("emu", &b, berr, sizeof berr) < 0) {
        tap_ok(0, "emu loads: %s", berr);
        return;
    }
    nv_artifact *a = artifact(NULL, NULL, NULL);
    nvw_grepro *gr = NULL;
    nvw_grepro_from_artifact(a, &gr, NULL);
    nv_artifact_free(a);
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = "emu", .timeout_ms = 30000};
    nvw_gprobe_out p;
    int r = gr ? nvw_gprobe(&env, gr->in, gr->gy, &p) : -EINVAL;
    tap_ok(r == 0 && !strcmp(p.verdict, "passed") && !p.cls[0] && p.bits == 0 && p.buf,
           "emu probe passes; its gradient differs from the stored zeros (verdict '%s', bits %d)",
           r == 0 ? p.verdict : "", r == 0 ? p.bits : -9);
    nv_artifact *pa = NULL;
    const nv_artifact_tensor *g = NULL;
    if (r == 0 && nv_artifact_decode(p.buf, p.len, &pa, NULL) == 0)
        g = nv_artifact_find(pa, "grad_input:0");
    /* sigmoid'(x) = s (1 - s) > 0: every stored gradient has gy's sign. */
    bool signs = g && g->nbytes == sizeof X;
    for (int k = 0; signs && k < N; k++) {
        float v;
        memcpy(&v, g->data + 4 * k, 4);
        signs = (v > 0) == (GY[k] > 0) && v != 0;
    }
    tap_ok(signs, "the probe's artifact holds the device gradient (signs of the cotangent)");
    nvw_grepro *gr2 = NULL;
    a = artifact(NULL, NULL, g ? g->data : NULL);
    nvw_grepro_from_artifact(a, &gr2, NULL);
    nv_artifact_free(a);
    nvw_gprobe_out p2;
    env.gr = gr2;
    r = gr2 ? nvw_gprobe(&env, gr2->in, gr2->gy, &p2) : -EINVAL;
    tap_ok(r == 0 && p2.bits == 1, "its own gradient stored back: bit-identical (bits %d)",
           r == 0 ? p2.bits : -9);
    if (r == 0)
        nvw_gprobe_out_done(&p2);
    /* A case that does not fail on this backend: flaky, not minimized. */
    nvw_min_opts o = {.budget = 50, .deadline_s = 30, .gate_runs = 2};
    nvw_gmin_result m;
    r = gr2 ? nvw_gminimize(&env, &o, &m) : -EINVAL;
    tap_ok(r == 0 && m.flaky && m.gate_failed == 0 && m.probes == 0 && !m.verified,
           "a passing case is flaky (0 of 2 gate runs fail) and not minimized");
    if (r == 0)
        nvw_gmin_result_done(&m);
    nv_artifact_free(pa);
    if (gr)
        nvw_gprobe_out_done(&p);
    nvw_grepro_free(gr);
    nvw_grepro_free(gr2);
    nvw_backend_free(b);
}

int main(void)
{
    test_load();
    test_signature();
    test_neutral();
    test_probe();
    return tap_done();
}
