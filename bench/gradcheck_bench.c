/* Gradient check benchmark (bench/RESULTS.md "Gradient checks"): numval's
 * formula check (reference VJP vs central differences in fp64, the work
 * torch.autograd.gradcheck does) for tanh, softmax and layer_norm at 16, 256
 * and 4096 elements, full and fast mode. Prints one JSON object per line; bench/gradcheck_peers.py
 * runs it next to torch.autograd.gradcheck on the same shapes and prints the table.
 *
 * Equal checks: full mode compares every structurally non-zero Jacobian element
 * of every differentiable input (the zero blocks are the op's declared
 * structure, verified by 4 random probes per input: a perturbed input must
 * leave every output outside its group bit-identical); fast mode compares one
 * projection v^T J u per input, as torch's fast_mode does, plus the probes.
 *
 * Timing: process CPU time of batches of k checks, k doubled until one batch
 * takes at least MIN_BATCH_S (far above the clock's granularity, so even a
 * 1 us check measures a nonzero time), then batches until min_seconds have
 * elapsed; "seconds" is the best batch's time divided by its k (the per-check
 * time least disturbed by other processes), "reps" the checks run in all,
 * "digest" a hash of the first check's reports (two builds' figures compared).
 * Usage: gradcheck_bench [min_seconds_per_config [op n mode]] (op n mode: that
 * configuration alone; a negative min_seconds -k runs exactly k checks as one
 * batch, for a profiler's instruction counts) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sha256.h"
#include "core/numerics/rng.h"
#include "core/ref/backward.h"
#include "worker/kinds/gradient/gradient.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct cfg {
    const char *op;
    int64_t n;
} cfg;

/* tanh: [n]; softmax, layer_norm: [sqrt n, sqrt n] (rows of the last axis). */
static int make(const cfg *c, nv_tensor **in, int *ret_n)
{
    const nv_op_def *op = nv_op_find(c->op);
    int64_t r = (int64_t)llround(sqrt((double)c->n));
    int64_t sh[2] = {r, r};
    bool rows = strcmp(c->op, "tanh") != 0;
    int n_in = op->n_inputs;
    in[0] = rows ? nv_tensor_new(NV_DT_FP64, 2, sh) : nv_tensor_new(NV_DT_FP64, 1, &c->n);
    for (int i = 1; i < n_in; i++)
        in[i] = nv_tensor_new(NV_DT_FP64, 1, &r);
    nv_rng g;
    nv_rng_init(&g, 42, 0, 0);
    for (int i = 0; i < n_in; i++) {
        if (!in[i])
            return -1;
        for (int64_t e = 0; e < in[i]->numel; e++)
            in[i]->data[e] = nv_rng_normal(&g);
    }
    *ret_n = n_in;
    return 0;
}

#define MIN_BATCH_S 2e-3

typedef struct outcome {
    bool passed;
    int64_t checked, fwd, vjp;
} outcome;

/* Every figure of a report into the digest. */
static void digest(nv_sha256_ctx *h, const nvw_grad_report *r)
{
    nv_sha256_update(h, &r->passed, sizeof r->passed);
    nv_sha256_update(h, &r->checked, sizeof r->checked);
    nv_sha256_update(h, &r->mismatches, sizeof r->mismatches);
    nv_sha256_update(h, &r->max_abs_err, sizeof r->max_abs_err);
    nv_sha256_update(h, &r->worst_ratio, sizeof r->worst_ratio);
    nv_sha256_update(h, r->bad, sizeof r->bad[0] * (size_t)r->n_bad);
}

/* One check of every differentiable input; the digest of its reports into
 * hex (may be NULL). */
static void check_once(const nvw_grad_problem *p, bool fast, outcome *ret, char hex[65])
{
    nvw_grad_report r[NV_OP_MAX_INPUTS], st[NV_OP_MAX_INPUTS];
    if (nvw_grad_formula_all(p, fast, r, st) < 0) {
        fprintf(stderr, "check failed to run\n");
        exit(2);
    }
    outcome o = {.passed = true};
    nv_sha256_ctx h;
    nv_sha256_init(&h);
    for (int i = 0; i < p->n_in; i++) {
        if (!nv_op_grad_input(p->op, i))
            continue;
        o.passed = o.passed && r[i].passed && st[i].passed;
        o.checked += r[i].checked + st[i].checked;
        o.fwd += r[i].forward_calls + st[i].forward_calls;
        o.vjp += r[i].vjp_calls + st[i].vjp_calls;
        if (hex) { /* the first check only: its batch (k = 1) is timed only when it is long */
            digest(&h, &r[i]);
            digest(&h, &st[i]);
        }
    }
    uint8_t d[32];
    if (hex) {
        nv_sha256_final(&h, d);
        nv_sha256_to_hex(d, hex);
    }
    *ret = o;
}

static void run(const cfg *c, bool fast, double min_s)
{
    nv_tensor *in[NV_OP_MAX_INPUTS] = {0};
    int n_in = 0;
    if (make(c, in, &n_in) < 0) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    const nv_op_def *op = nv_op_find(c->op);
    nv_op_attrs a;
    nv_op_parse_attrs(op, NULL, &a, NULL);
    nvw_grad_work work = {0}; /* reused across repetitions, as torch's allocator caches */
    nvw_grad_problem p = {.op = op,
                          .attrs = &a,
                          .n_in = n_in,
                          .in = in,
                          .eps = 1e-6,
                          .atol = 1e-5,
                          .rtol = 1e-3,
                          .seed = 7,
                          .work = &work};
    outcome o = {0};
    char first[65] = "";
    double best = INFINITY, total = 0;
    bool exact = min_s < 0;
    int64_t k = exact ? (int64_t)-min_s : 1, reps = 0;
    while (total < min_s || !isfinite(best)) {
        double t0 = now();
        for (int64_t j = 0; j < k; j++)
            check_once(&p, fast, &o, reps + j == 0 ? first : NULL);
        double dt = now() - t0;
        total += dt;
        reps += k;
        if (exact) {
            best = dt / (double)k;
            break;
        }
        if (dt < MIN_BATCH_S) { /* too short to time: a longer batch */
            k *= 2;
            continue;
        }
        best = fmin(best, dt / (double)k);
    }
    printf("{\"op\": \"%s\", \"n\": %lld, \"mode\": \"%s\", \"seconds\": %.9f, \"reps\": %lld, "
           "\"checked\": %lld, \"forward_calls\": %lld, \"vjp_calls\": %lld, \"passed\": %s, "
           "\"digest\": \"%.16s\"}\n",
           c->op, (long long)c->n, fast ? "fast" : "full", best, (long long)reps,
           (long long)o.checked, (long long)o.fwd, (long long)o.vjp, o.passed ? "true" : "false",
           first);
    fflush(stdout);
    nvw_grad_work_done(&work);
    for (int i = 0; i < n_in; i++)
        nv_tensor_free(in[i]);
}

int main(int argc, char **argv)
{
    double min_s = argc > 1 ? atof(argv[1]) : 0.2;
    static const cfg cfgs[] = {{"tanh", 16},       {"tanh", 256},       {"tanh", 4096},
                               {"softmax", 16},    {"softmax", 256},    {"softmax", 4096},
                               {"layer_norm", 16}, {"layer_norm", 256}, {"layer_norm", 4096}};
    const char *only_op = argc > 4 ? argv[2] : NULL, *only_mode = argc > 4 ? argv[4] : NULL;
    int64_t only_n = argc > 4 ? atoll(argv[3]) : 0;
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        if (only_op && (strcmp(only_op, cfgs[k].op) != 0 || only_n != cfgs[k].n))
            continue;
        if (!only_mode || !strcmp(only_mode, "full"))
            run(&cfgs[k], false, min_s);
        if (!only_mode || !strcmp(only_mode, "fast"))
            run(&cfgs[k], true, min_s);
    }
    return 0;
}
