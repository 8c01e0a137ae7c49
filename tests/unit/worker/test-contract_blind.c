/* Blind identification (docs/CONTRACT.md "Blind identification"): 30 emu modes
 * drawn at random (a fixed seed, so the draw is the same on every run) from the
 * knobs emu offers: accumulate dtype, reduction order, fma, ftz, daz, rounding,
 * saturation and transcendental quality. For each, the contract job measures
 * the device from its outputs alone (the probes never read describe()) and
 * every knob must come back exactly as drawn. The one knob that cannot be
 * measured in some modes, the reduction order under stochastic rounding, must
 * then be reported "indistinguishable" (not guessed). emu tells the truth in
 * describe(), so the judgement must find no mismatch either. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"

#define N_MODES 30
#define SEED 20261201u

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *pick(uint64_t *s, const char *const *v, size_t n)
{
    return v[splitmix(s) % n];
}

typedef struct mode {
    char text[256];
    const char *accum, *rounding, *transcendental;
    char reduce[32];
    bool fma, ftz, daz, saturate;
} mode;

static void draw(uint64_t *s, mode *m)
{
    static const char *const accums[] = {"", "fp64", "fp32", "tf32", "bf16", "fp16"};
    static const char *const orders[] = {"sequential", "pairwise", "tree", "splitk", "random"};
    static const int ks[] = {2, 3, 4, 5, 7, 8, 16, 32, 64, 100, 128};
    static const char *const roundings[] = {"rne", "rtz", "up", "down", "stochastic"};
    static const char *const trs[] = {"exact", "libm", "fast"};
    m->accum = pick(s, accums, 6);
    const char *o = pick(s, orders, 5);
    if (!strcmp(o, "tree") || !strcmp(o, "splitk"))
        snprintf(m->reduce, sizeof m->reduce, "%s:%d", o, ks[splitmix(s) % 11]);
    else
        snprintf(m->reduce, sizeof m->reduce, "%s", o);
    m->fma = splitmix(s) & 1;
    m->ftz = splitmix(s) & 1;
    m->daz = splitmix(s) & 1;
    m->saturate = splitmix(s) & 1;
    m->rounding = pick(s, roundings, 5);
    m->transcendental = pick(s, trs, 3);
    snprintf(m->text, sizeof m->text,
             "emu:%s%s%sreduce=%s,fma=%s,ftz=%s,daz=%s,saturate=%s,rounding=%s,transcendental=%s",
             *m->accum ? "accum=" : "", m->accum, *m->accum ? "," : "", m->reduce,
             m->fma ? "on" : "off", m->ftz ? "on" : "off", m->daz ? "on" : "off",
             m->saturate ? "on" : "off", m->rounding, m->transcendental);
}

static const char *str_at(const json_t *c, const char *dt, const char *key)
{
    const char *v = json_string_value(json_object_get(json_object_get(c, dt), key));
    return v ? v : "(none)";
}

static int mistakes;

static void same(const mode *m, const char *knob, const char *want, const char *got)
{
    bool ok = !strcmp(want, got);
    mistakes += !ok;
    tap_ok(ok, "%s: %s drawn '%s', measured '%s'", m->text, knob, want, got);
}

static void check(const mode *m, const json_t *res)
{
    const json_t *c = json_object_get(json_object_get(res, "measured"), "contract");
    /* conversions: fp32 -> bf16 is the boundary-set conversion of the pair */
    same(m, "rounding", m->rounding, str_at(c, "bf16", "conversion_rounding"));
    same(m, "saturate", m->saturate ? "saturate" : "overflow", str_at(c, "bf16", "saturation"));
    const json_t *f = json_object_get(c, "fp32");
    same(m, "ftz", m->ftz ? "on" : "off",
         json_is_boolean(json_object_get(f, "ftz"))
             ? (json_is_true(json_object_get(f, "ftz")) ? "on" : "off")
             : "(not a boolean)");
    same(m, "daz", m->daz ? "on" : "off",
         json_is_boolean(json_object_get(f, "daz"))
             ? (json_is_true(json_object_get(f, "daz")) ? "on" : "off")
             : "(not a boolean)");
    same(m, "fma", m->fma ? "fused" : "split", str_at(c, "fp32", "fma"));
    same(m, "accum", *m->accum ? m->accum : "fp32", str_at(c, "fp32", "accumulation"));
    /* Stochastic rounding draws bits no probe sees, so no order model can be
     * simulated bit for bit: the order must then be reported as such. A random
     * order shows anyway, as nondeterminism. */
    bool sr = !strcmp(m->rounding, "stochastic") && strcmp(m->reduce, "random");
    if (sr)
        tap_diag("%s: reduce excluded (stochastic rounding): must be indistinguishable", m->text);
    same(m, "reduce", sr ? "indistinguishable" : m->reduce, str_at(c, "fp32", "reduction_order"));
    /* matmul: the mode's accumulator, else the op's "acc" attribute (fp32) */
    same(m, "accum (matmul)", *m->accum ? m->accum : "fp32",
         str_at(c, "fp32", "matmul_accumulation"));
    same(m, "reduce (matmul)", sr ? "indistinguishable" : m->reduce,
         str_at(c, "fp32", "matmul_reduction_order"));
    /* Products fuse into a running accumulator only: sequential and random
     * orders have one from the second term on; pairwise, tree:k and splitk:k
     * start the probe's two-term rows afresh (docs/CONTRACT.md). */
    if (!strcmp(m->accum, "fp64")) /* x = 1 + 2^-k would need k >= 27 > 23 */
        same(m, "fma (matmul products)", "indistinguishable", str_at(c, "fp32", "matmul_products"));
    else if (!strcmp(m->reduce, "sequential") || !strcmp(m->reduce, "random"))
        same(m, "fma (matmul products)", m->fma ? "fused" : "rounded",
             str_at(c, "fp32", "matmul_products"));
    else
        tap_diag("%s: matmul products excluded (order %s starts each two-term row afresh)", m->text,
                 m->reduce);
    static const char *const kinds[][2] = {
        {"exact", "correctly_rounded"}, {"libm", "host_libm"}, {"fast", "approximation"}};
    const char *want = "";
    for (int k = 0; k < 3; k++)
        if (!strcmp(m->transcendental, kinds[k][0]))
            want = kinds[k][1];
    const char *got = json_string_value(json_object_get(
        json_object_get(json_object_get(c, "fp32"), "transcendental_error"), "kind"));
    same(m, "transcendental", want, got ? got : "(none)");
    size_t nm = json_array_size(json_object_get(res, "mismatches"));
    if (nm) {
        char *t = json_dumps(json_object_get(res, "mismatches"), JSON_COMPACT);
        tap_diag("mismatches: %.600s", t ? t : "?");
        free(t);
    }
    mistakes += nm != 0;
    tap_ok(nm == 0, "%s: truthful describe(), %zu contract_mismatch", m->text, nm);
}

int main(void)
{
    uint64_t s = SEED;
    json_t *spec = json_loads("{\"kind\": \"contract\", \"dtypes\": [\"fp32\", \"bf16\"],"
                              " \"fp32_sweep\": 512}",
                              0, NULL);
    nvw_run_opts opts = {.threads = 2};
    /* Under the sanitizers the first 10 draws: they check memory on every probe
     * path; the optimized pass identifies all 30. */
    int n_modes = getenv("NV_TEST_SANITIZER") ? 10 : N_MODES;
    for (int i = 0; i < n_modes; i++) {
        mode m;
        draw(&s, &m);
        json_t *res = NULL;
        char *err = NULL;
        int r = nvw_run_job(spec, m.text, &opts, &res, &err);
        tap_ok(r == 0, "%s: the contract job ran (%s)", m.text, err ? err : "ok");
        if (r == 0)
            check(&m, res);
        else
            mistakes++;
        json_decref(res);
        free(err);
    }
    tap_ok(mistakes == 0, "blind identification: %d mistakes over %d modes", mistakes, n_modes);
    json_decref(spec);
    return tap_done();
}
