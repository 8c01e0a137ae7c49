/* The reference's line cache (core/ref/backward.h nv_ref_cache): forwards and
 * VJPs through it have the bits of the uncached calls while the inputs change
 * the way a finite-difference check changes them (one element per line, a
 * line's maximum, an inexact restore, only the weight), and the full formula
 * check, which judges its elements in blocks, keeps the first failures in the
 * order position, then output. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/backward.h"
#include "tests/unit/tap.h"
#include "worker/kinds/gradient/gradient.h"

#define R 5 /* rows */
#define C 6 /* columns */

typedef struct rig {
    const nv_op_def *op;
    nv_op_attrs a;
    int n_in;
    nv_tensor *in[3];
} rig;

static int rig_init(rig *g, const char *name, const char *attrs)
{
    memset(g, 0, sizeof *g);
    g->op = nv_op_find(name);
    json_t *j = attrs ? json_loads(attrs, 0, NULL) : NULL;
    int r = g->op ? nv_op_parse_attrs(g->op, j, &g->a, NULL) : -1;
    json_decref(j);
    if (r < 0)
        return -1;
    g->n_in = g->op->n_inputs;
    int64_t sh[2] = {R, C}, w = C;
    for (int i = 0; i < g->n_in; i++) {
        g->in[i] = i == 0 ? nv_tensor_new(NV_DT_FP64, 2, sh) : nv_tensor_new(NV_DT_FP64, 1, &w);
        if (!g->in[i])
            return -1;
        for (int64_t e = 0; e < g->in[i]->numel; e++)
            g->in[i]->data[e] = sin(1.7 * (double)e + i) * 2;
    }
    return 0;
}

static void rig_done(rig *g)
{
    for (int i = 0; i < g->n_in; i++)
        nv_tensor_free(g->in[i]);
}

/* Forward and VJP (gradients alone, then with magnitudes) through c and
 * without it; 0 when every result has the same bits. */
static int differs(rig *g, nv_ref_cache *c)
{
    const nv_tensor *const *in = (const nv_tensor *const *)g->in;
    double f0[R * C], f1[R * C], gy[R * C];
    double a0[3][R * C], a1[3][R * C], m0[3][R * C], m1[3][R * C];
    double *g0[3] = {a0[0], a0[1], a0[2]}, *g1[3] = {a1[0], a1[1], a1[2]};
    double *n0[3] = {m0[0], m0[1], m0[2]}, *n1[3] = {m1[0], m1[1], m1[2]};
    for (int e = 0; e < R * C; e++)
        gy[e] = cos(0.9 * e);
    int r = nv_op_forward_f64(g->op, &g->a, g->n_in, in, f0) |
            nv_op_forward_f64_cached(g->op, &g->a, g->n_in, in, f1, c);
    int64_t n_out = g->op->kind == NV_OPK_REDUCE && !strcmp(g->op->name, "logsumexp") ? R : R * C;
    int bad = r != 0 || memcmp(f0, f1, sizeof(double) * (size_t)n_out) != 0;
    for (int with_mag = 0; with_mag < 2; with_mag++) {
        memset(a0, 0, sizeof a0);
        memset(a1, 0xff, sizeof a1); /* any unwritten element shows */
        r = nv_op_vjp(g->op, &g->a, g->n_in, in, gy, g0, with_mag ? n0 : NULL) |
            nv_op_vjp_cached(g->op, &g->a, g->n_in, in, gy, g1, with_mag ? n1 : NULL, c);
        for (int i = 0; i < g->n_in; i++) {
            size_t len = sizeof(double) * (size_t)g->in[i]->numel;
            bad |= r != 0 || memcmp(a0[i], a1[i], len) != 0 ||
                   (with_mag && memcmp(m0[i], m1[i], len) != 0);
        }
    }
    return bad;
}

/* The changes of a finite-difference check, each followed by both calls. */
static int walk(rig *g, nv_ref_cache *c)
{
    nv_tensor *x = g->in[0];
    int bad = differs(g, c) | differs(g, c); /* cold, then every line cached */
    for (int64_t q = 0; q < C; q++) {
        for (int64_t l = 0; l < R; l++)
            x->data[l * C + q] += 1e-6;
        bad |= differs(g, c);
        for (int64_t l = 0; l < R; l++)
            x->data[l * C + q] -= 2e-6;
        bad |= differs(g, c);
        for (int64_t l = 0; l < R; l++)
            x->data[l * C + q] += 1e-6; /* not exactly back: the rounding stays */
        bad |= differs(g, c);
    }
    x->data[C + 2] += 10; /* line 1's maximum moves */
    bad |= differs(g, c);
    x->data[C + 2] -= 10;
    bad |= differs(g, c);
    if (g->n_in > 1) {
        g->in[1]->data[3] *= 1.5; /* the weight alone */
        bad |= differs(g, c);
    }
    return bad;
}

static void test_cache_bits(void)
{
    static const struct {
        const char *op, *attrs;
    } cases[] = {{"softmax", NULL},   {"softmax", "{\"axis\": 0}"}, {"log_softmax", NULL},
                 {"logsumexp", NULL}, {"layer_norm", NULL},         {"rms_norm", NULL},
                 {"tanh", NULL}};
    nv_ref_cache *c = nv_ref_cache_new();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rig g;
        int r = c ? rig_init(&g, cases[k].op, cases[k].attrs) : -1;
        int bad = r < 0 || walk(&g, c);
        tap_ok(!bad, "%s %s: cached forward and VJP have the uncached bits", cases[k].op,
               cases[k].attrs ? cases[k].attrs : "");
        rig_done(&g);
    }
    nv_ref_cache_free(c);
}

/* With atol = rtol = 0 every element of softmax's [R, C] Jacobian fails (no
 * difference quotient is exact): the report names the first 8 by position,
 * then output, which are position 0 of outputs 0 .. 7 (each output's row holds
 * one element at each position). */
static void test_first_failures(void)
{
    rig g;
    int r = rig_init(&g, "softmax", NULL);
    nvw_grad_problem p = {
        .op = g.op, .attrs = &g.a, .n_in = g.n_in, .in = g.in, .eps = 1e-6, .seed = 5};
    nvw_grad_report rep, st;
    r = r < 0 ? r : nvw_grad_formula(&p, 0, false, &rep, &st);
    bool order = r == 0 && rep.n_bad == NVW_GRAD_MAX_BAD;
    for (int k = 0; order && k < rep.n_bad; k++)
        order = rep.bad[k].out_index == k && rep.bad[k].in_index == (k / C) * C;
    tap_ok(r == 0 && !rep.passed && rep.mismatches == R * C * C && rep.checked == R * C * C &&
               order,
           "full check at atol = rtol = 0: %lld of %lld fail, the first 8 by position then output",
           (long long)rep.mismatches, (long long)rep.checked);
    rig_done(&g);
}

int main(void)
{
    test_cache_bits();
    test_first_failures();
    return tap_done();
}
