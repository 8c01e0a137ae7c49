/* Fused rows of the minimization bench (minimize_bench.h): numval's fused
 * minimizer (nvw_fminimize: node removal by placeholders, then extent
 * shrinking) against a plain ddmin over the same stored failure: Zeller's
 * ddmin2 (Zeller and Hildebrandt, IEEE TSE 28(2), 2002) deleting slices of the
 * graph inputs' extents, one extent at a time (every dim of every input that
 * has that extent is sliced alike, so the graph still infers), all nodes kept,
 * no placeholders. Both run the same gate on the stored graph, probe through
 * the same forked probe (nvw_fprobe_run), keep the same signature
 * (nvw_fprobe_same) and re-verify their result the same way. A candidate that
 * does not infer (a block-scaled contraction cut off its block size, say) is
 * rejected without a probe, as nvw_fminimize rejects it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kinds/op/minimize.h"
#include "minimize_bench.h"
#include "worker/kinds/fused/repro_fused.h"

#define MAX_MEMBERS (NV_GRAPH_MAX_INPUTS * NV_MAX_DIMS)
#define STOP 2

/* The baseline's state: the current inputs (all of the graph's, contiguous)
 * and the probe spec they go with. */
typedef struct plain {
    nvw_frepro *fr;
    const nvw_backend *b;
    json_t *spec;
    nv_tensor **in;
    int n;
    int probes, budget;
    double t0, deadline;
    const char *stop;
    int64_t orig[NV_GRAPH_MAX_INPUTS + NV_GRAPH_MAX_NODES][NV_MAX_DIMS]; /* stored extents */
    /* the extent group being reduced: dim dim[k] of input inp[k] */
    int n_mem, inp[MAX_MEMBERS], dim[MAX_MEMBERS];
} plain;

static void free_inputs(nv_tensor **in, int n)
{
    for (int i = 0; in && i < n; i++)
        nv_tensor_free(in[i]);
    free(in);
}

/* Whether spec's graph parses and infers in the case dtype. */
static bool infers(const plain *s, const json_t *spec)
{
    nv_graph *g = NULL;
    char *ptr = NULL, *msg = NULL;
    int r = nv_graph_parse(json_object_get(spec, "graph"), "/graph", &g, &ptr, &msg);
    if (r == 0)
        r = nv_graph_infer(g, s->fr->dt, "/graph", &ptr, &msg);
    nv_graph_free(g);
    free(ptr);
    free(msg);
    return r == 0;
}

/* The candidate keeping the indices idx[0..k) of the group's extent: inputs
 * in *ret_in, spec with their shapes in *ret_spec. -EINVAL: it does not infer. */
static int candidate(const plain *s, const int64_t *idx, int64_t k, json_t **ret_spec,
                     nv_tensor ***ret_in)
{
    nv_tensor **in = calloc((size_t)s->n, sizeof *in);
    json_t *spec = json_deep_copy(s->spec);
    int r = in && spec ? 0 : -ENOMEM;
    for (int i = 0; r == 0 && i < s->n; i++)
        if (!(in[i] = nv_tensor_contiguous(s->in[i])))
            r = -ENOMEM;
    for (int m = 0; r == 0 && m < s->n_mem; m++) {
        nv_tensor *t = NULL;
        if ((r = nvw_dd_slice_tensor(in[s->inp[m]], s->dim[m], idx, k, &t)) < 0)
            break;
        nv_tensor_free(in[s->inp[m]]);
        in[s->inp[m]] = t;
    }
    json_t *ins = json_object_get(json_object_get(spec, "graph"), "inputs");
    for (int i = 0; r == 0 && i < s->n; i++) {
        json_t *sh = json_array();
        for (int d = 0; sh && d < in[i]->ndim; d++)
            json_array_append_new(sh, json_integer(in[i]->shape[d]));
        if (!sh || json_object_set_new(json_array_get(ins, (size_t)i), "shape", sh))
            r = -ENOMEM;
    }
    if (r == 0 && !infers(s, spec))
        r = -EINVAL;
    if (r < 0) {
        free_inputs(in, s->n);
        json_decref(spec);
        return r;
    }
    *ret_spec = spec;
    *ret_in = in;
    return 0;
}

/* 1: the candidate fails with the signature; 0: not (or does not infer);
 * STOP: budget or deadline spent; negative errno. */
static int test(plain *s, const int64_t *idx, int64_t k)
{
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int r = candidate(s, idx, k, &spec, &in);
    if (r == -EINVAL)
        return 0;
    if (r < 0)
        return r;
    if (s->probes >= s->budget)
        s->stop = "budget";
    else if (nvw_dd_now() - s->t0 >= s->deadline)
        s->stop = "deadline";
    nvw_fprobe p;
    if (strcmp(s->stop, "done"))
        r = STOP;
    else if ((r = nvw_fprobe_run(s->fr, s->b, spec, in, s->n, MB_TIMEOUT_MS, false, NULL, NULL,
                                 &p)) == 0) {
        s->probes++;
        r = nvw_fprobe_same(s->fr, &p);
    }
    free_inputs(in, s->n);
    json_decref(spec);
    return r;
}

/* Zeller's ddmin2 over the kept indices u[0..*nu): subsets, then complements,
 * granularity doubling; the same loop as minimize.c's engine. */
static int ddmin(plain *s, int64_t *u, int64_t *nu)
{
    int64_t len = *nu, gran = 2;
    int64_t *buf = malloc((size_t)(len > 0 ? len : 1) * sizeof *buf);
    int r = buf ? 0 : -ENOMEM;
    while (r == 0 && len >= 2) {
        bool moved = false;
        for (int64_t i = 0; i < gran && !moved && r == 0; i++) {
            int64_t lo = len * i / gran, hi = len * (i + 1) / gran;
            if ((r = test(s, u + lo, hi - lo)) == 1) {
                memmove(u, u + lo, (size_t)(hi - lo) * sizeof *u);
                len = hi - lo;
                gran = 2;
                moved = true;
                r = 0;
            }
        }
        for (int64_t i = 0; i < gran && !moved && gran > 2 && r == 0; i++) {
            int64_t lo = len * i / gran, hi = len * (i + 1) / gran;
            memcpy(buf, u, (size_t)lo * sizeof *u);
            memcpy(buf + lo, u + hi, (size_t)(len - hi) * sizeof *u);
            if ((r = test(s, buf, len - (hi - lo))) == 1) {
                len -= hi - lo;
                memcpy(u, buf, (size_t)len * sizeof *u);
                gran = gran - 1 > 2 ? gran - 1 : 2;
                moved = true;
                r = 0;
            }
        }
        if (r == 0 && !moved) {
            if (gran >= len)
                break;
            gran = gran * 2 < len ? gran * 2 : len;
        }
    }
    *nu = len;
    free(buf);
    return r < 0 ? r : 0;
}

/* Reduce the group of stored extent e (the dims that had it in the stored
 * inputs; they are sliced alike, so they still share one extent) and adopt
 * the result. */
static int reduce_extent(plain *s, int64_t e)
{
    s->n_mem = 0;
    for (int i = 0; i < s->n; i++)
        for (int d = 0; d < s->in[i]->ndim; d++)
            if (s->orig[i][d] == e) {
                s->inp[s->n_mem] = i;
                s->dim[s->n_mem++] = d;
            }
    e = s->in[s->inp[0]]->shape[s->dim[0]]; /* its extent now */
    int64_t *u = malloc((size_t)e * sizeof *u), k = e;
    if (!u)
        return -ENOMEM;
    for (int64_t j = 0; j < e; j++)
        u[j] = j;
    int r = ddmin(s, u, &k);
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    if (r == 0 && k < e && (r = candidate(s, u, k, &spec, &in)) == 0) {
        free_inputs(s->in, s->n);
        json_decref(s->spec);
        s->in = in;
        s->spec = spec;
    }
    free(u);
    return r;
}

static int64_t total(nv_tensor *const *in, int n)
{
    int64_t e = 0;
    for (int i = 0; i < n; i++)
        e += in[i]->numel;
    return e;
}

/* runs probes of spec on in; the count failing with the signature. */
static int gate(plain *s, const json_t *spec, nv_tensor *const *in, int n, bool stored,
                nvw_fprobe *last)
{
    int failed = 0;
    for (int k = 0; k < MB_GATE_RUNS; k++) {
        if (nvw_fprobe_run(s->fr, s->b, spec, in, n, MB_TIMEOUT_MS, stored, NULL, NULL, last) < 0)
            return -EAGAIN;
        failed += nvw_fprobe_same(s->fr, last);
    }
    return failed;
}

/* The shapes of spec's graph inputs on stderr (what the table's element
 * counts are made of). */
static void print_shapes(const mb_case *c, const char *method, const json_t *spec)
{
    fprintf(stderr, "minimize_bench: %s: %s: inputs", c->label, method);
    size_t i, d;
    json_t *in, *e;
    json_array_foreach(json_object_get(json_object_get(spec, "graph"), "inputs"), i, in)
    {
        fprintf(stderr, " %s[", json_string_value(json_object_get(in, "name")));
        json_array_foreach(json_object_get(in, "shape"), d, e)
            fprintf(stderr, "%s%lld", d ? "," : "", (long long)json_integer_value(e));
        fprintf(stderr, "]");
    }
    fprintf(stderr, "\n");
}

static void plain_row(const mb_case *c, nvw_frepro *fr, const nvw_backend *b, int budget,
                      double deadline)
{
    plain s = {.fr = fr, .b = b, .budget = budget, .deadline = deadline, .stop = "done"};
    nvw_fsub all = {.n_map = 0};
    for (int k = 0; k < fr->g->n_nodes; k++)
        all.keep[k] = true;
    s.t0 = nvw_dd_now();
    nvw_fprobe last;
    int r = nvw_fsub_build(fr, &all, &s.spec, &s.in, &s.n);
    int64_t before = r == 0 ? total(s.in, s.n) : 0;
    int failed = r == 0 ? gate(&s, fr->spec, s.in, s.n, true, &last) : r;
    if (failed >= 0 && 2 * failed >= MB_GATE_RUNS) {
        /* distinct extents > 1 of the original inputs, largest first */
        int64_t ext[MAX_MEMBERS];
        int ne = 0;
        for (int i = 0; i < s.n; i++)
            for (int d = 0; d < s.in[i]->ndim; d++) {
                int64_t e = s.orig[i][d] = s.in[i]->shape[d];
                int j = 0;
                while (j < ne && ext[j] != e)
                    j++;
                if (e > 1 && j == ne)
                    ext[ne++] = e;
            }
        for (int i = 0; i < ne; i++)
            for (int j = i + 1; j < ne; j++)
                if (ext[j] > ext[i]) {
                    int64_t t = ext[i];
                    ext[i] = ext[j];
                    ext[j] = t;
                }
        for (int i = 0; r == 0 && i < ne && !strcmp(s.stop, "done"); i++)
            r = reduce_extent(&s, ext[i]);
    }
    int verified = r == 0 && failed >= 0 && 2 * failed >= MB_GATE_RUNS
                       ? gate(&s, s.spec, s.in, s.n, false, &last)
                       : -1;
    double secs = nvw_dd_now() - s.t0;
    if (r < 0 || failed < 0 || verified < 0)
        printf("| %s | plain ddmin | %s | %s |\n", c->label,
               failed >= 0 && 2 * failed < MB_GATE_RUNS ? "flaky" : "probe failed", fr->cls);
    else
        printf(
            "| %s | plain ddmin | %s at %s (%s) | %d | %.2f s | %s | %d -> %d | %lld -> %lld | - | "
            "%s |\n",
            c->label, fr->cls, fr->node, fr->op, s.probes, secs, s.stop, fr->g->n_nodes,
            fr->g->n_nodes, (long long)before, (long long)total(s.in, s.n),
            verified == MB_GATE_RUNS ? "yes" : "no");
    fflush(stdout);
    print_shapes(c, "plain ddmin", s.spec);
    free_inputs(s.in, s.n);
    json_decref(s.spec);
}

static void numval_row(const mb_case *c, nvw_frepro *fr, const nvw_backend *b, int budget,
                       double deadline)
{
    nvw_fmin_opts o = {.budget = budget,
                       .deadline_s = deadline,
                       .gate_runs = MB_GATE_RUNS,
                       .timeout_ms = MB_TIMEOUT_MS};
    nvw_fmin_result m;
    if (nvw_fminimize(fr, b, &o, &m) < 0 || m.flaky) {
        printf("| %s | numval | %s |\n", c->label, m.flaky ? "flaky" : "probe failed");
        return;
    }
    json_t *names = nvw_fsub_nodes(fr, &m.sub);
    char *kept = names ? json_dumps(names, JSON_COMPACT) : NULL;
    printf("| %s | numval | %s at %s (%s) | %d | %.2f s | %s | %d -> %d %s | %lld -> %lld | - | %s "
           "|\n",
           c->label, fr->cls, fr->node, fr->op, m.probes, m.seconds, m.stop, m.nodes_before,
           m.nodes_after, kept ? kept : "", (long long)m.elements_before,
           (long long)m.elements_after, m.verified ? "yes" : "no");
    fflush(stdout);
    json_t *spec = NULL;
    nv_tensor **in = NULL;
    int n = 0;
    if (nvw_fsub_build(fr, &m.sub, &spec, &in, &n) == 0) {
        print_shapes(c, "numval", spec);
        free_inputs(in, n);
        json_decref(spec);
    }
    free(kept);
    json_decref(names);
}

int mb_fused(const mb_case *c, int budget, double deadline)
{
    nvw_frepro *fr = NULL;
    nvw_backend *b = NULL;
    char *err = NULL, berr[512] = "";
    if (nvw_frepro_load(c->artifact, &fr, &err) < 0 ||
        nvw_backend_load(c->backend, &b, berr, sizeof berr) < 0) {
        printf("| %s | - | cannot load: %s%s |\n", c->label, err ? err : "", berr);
        free(err);
        nvw_frepro_free(fr);
        return -1;
    }
    numval_row(c, fr, b, budget, deadline);
    plain_row(c, fr, b, budget, deadline);
    nvw_backend_free(b);
    nvw_frepro_free(fr);
    return 0;
}
