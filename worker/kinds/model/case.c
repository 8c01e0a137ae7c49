/* One case of a model job: the parameters and data from the seed, the three
 * executions (fp64 reference, model-dtype reference, device node by node with
 * every node captured) and the judgement (judge.c). docs/MODEL.md says why
 * each is what it is. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "core/ref/reference.h"
#include "model_internal.h"
#include "worker/runner/band.h"
#include "worker/runner/graph_exec.h"
#include "worker/runner/params.h"

int model_verdict(mcase *c, const char *v, const char *cls, const char *fmt, ...)
{
    if (json_object_set_new(c->cj, "verdict", json_string(v)))
        return -ENOMEM;
    if (cls && json_object_set_new(c->cj, "failure_class", json_string(cls)))
        return -ENOMEM;
    if (!fmt)
        return 0;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_object_set_new(c->cj, "error", json_string(msg)) ? -ENOMEM : 0;
}

/* Graph input i from the seed (docs/MODEL.md "Deterministic init";
 * worker/runner/params.h). */
int model_seeded_input(const nv_modelspec *s, const nv_graph *g, int i, int sample,
                       nv_tensor **ret)
{
    const nv_graph_input *gi = &g->inputs[i];
    nv_tensor *t = nv_tensor_new(gi->dtype, gi->ndim, gi->shape);
    if (!t)
        return -ENOMEM;
    nvw_param_fill(t, &s->inputs[i], gi->name, s->seed, sample);
    *ret = t;
    return 0;
}

/* Graph input i of the case: the checkpoint's values where the job reads
 * them (weights.c checked that they are exact in this dtype), else the seed. */
static int make_input(mcase *c, int i)
{
    const double *w = c->j->wval[i];
    if (!w)
        return model_seeded_input(c->j->s, &c->g, i, c->sample, &c->in[i]);
    const nv_graph_input *gi = &c->g.inputs[i];
    nv_tensor *t = nv_tensor_new(gi->dtype, gi->ndim, gi->shape);
    if (!t)
        return -ENOMEM;
    memcpy(t->data, w, (size_t)t->numel * sizeof *t->data);
    c->in[i] = t;
    return 0;
}

void model_weights_hash(const nv_modelspec *s, const nv_graph *g, nv_tensor *const *in,
                        char out[65])
{
    nv_sha256_ctx h;
    nv_sha256_init(&h);
    for (int i = 0; i < g->n_inputs; i++) {
        if (!nv_model_input_is_weight(&s->inputs[i]))
            continue;
        nv_sha256_update(&h, g->inputs[i].name, strlen(g->inputs[i].name) + 1);
        for (int64_t k = 0; k < in[i]->numel; k++) {
            uint64_t bits = nv_dtype_encode(in[i]->dtype, in[i]->data[k], &NV_ROUND_DEFAULT, 0);
            uint8_t le[8];
            for (int b = 0; b < 8; b++)
                le[b] = (uint8_t)(bits >> (8 * b));
            nv_sha256_update(&h, le, 8);
        }
    }
    uint8_t d[32];
    nv_sha256_final(&h, d);
    nv_sha256_to_hex(d, out);
}

int model_reference(mcase *c, nv_tensor *const *in, nv_tensor **out, bool round_all, char *err,
                    size_t errlen)
{
    return nvw_band_reference(&c->g, in, out, round_all, err, errlen);
}

/* The declared accumulator for the case dtype (docs/MODEL.md "The band"). */
static void accumulator(mcase *c)
{
    nvw_band_accumulator(c->j->b.describe, c->dt, &c->acc_name, &c->u_acc);
}

static int run_body(mcase *c)
{
    int r = nvw_case_graph(c->j->s->graph, c->dt, &c->g);
    if (r < 0)
        return r == -ENOMEM ? r
                            : model_verdict(c, "error", "inputs", "the model does not infer for "
                                                                  "dtype '%s'",
                                            nv_dtype_name(c->dt));
    size_t n = (size_t)c->g.n_nodes;
    c->r64 = calloc(n, sizeof *c->r64);
    c->rdt = calloc(n, sizeof *c->rdt);
    c->dev = calloc(n, sizeof *c->dev);
    c->res = calloc(n, sizeof *c->res);
    if (!c->r64 || !c->rdt || !c->dev || !c->res)
        return -ENOMEM;
    for (int i = 0; i < c->g.n_inputs; i++)
        if ((r = make_input(c, i)) < 0)
            return r;
    char wh[65];
    model_weights_hash(c->j->s, &c->g, c->in, wh);
    if (json_object_set_new(c->cj, "weights_sha256", json_string(wh)))
        return -ENOMEM;
    accumulator(c);
    char err[MODEL_ERRLEN] = "";
    r = model_reference(c, c->in, c->r64, false, err, sizeof err);
    if (r == 0)
        r = model_reference(c, c->in, c->rdt, true, err, sizeof err);
    if (r == -ENOMEM || r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0)
        return model_verdict(c, "error", "reference", "%s", err);
    r = model_device(c, c->in, c->dev);
    if (r != 0)
        return r < 0 ? r : 0;
    return model_judge(c);
}

static void free_case(mcase *c)
{
    for (int i = 0; i < c->g.n_inputs; i++)
        nv_tensor_free(c->in[i]);
    for (int k = 0; c->r64 && k < c->g.n_nodes; k++) {
        nv_tensor_free(c->r64[k]);
        if (c->rdt)
            nv_tensor_free(c->rdt[k]);
        if (c->dev)
            nv_tensor_free(c->dev[k]);
    }
    free(c->r64);
    free(c->rdt);
    free(c->dev);
    free(c->res);
    free(c->g.nodes);
}

json_t *nvw_model_case(mjob *j, void *ctx, int64_t i)
{
    mcase c;
    memset(&c, 0, sizeof c);
    c.j = j;
    c.ctx = ctx;
    c.index = i;
    nv_modelspec_case(j->s, i, &c.dt, &c.sample);
    c.cj = json_pack("{sI ss ss sI sI ss}", "index", (json_int_t)i, "op", "model", "dtype",
                     nv_dtype_name(c.dt), "sample", (json_int_t)c.sample, "seed",
                     (json_int_t)j->s->seed, "graph_hash", j->graph_hash);
    if (!c.cj)
        return NULL;
    int r = run_body(&c);
    if (r == 0 && !json_object_get(c.cj, "verdict"))
        r = model_verdict(&c, "error", "internal", "the case ended without a verdict");
    if (r < 0 && model_verdict(&c, "error", "out_of_memory", "out of memory") < 0) {
        json_decref(c.cj);
        c.cj = NULL;
    }
    free_case(&c);
    return c.cj;
}
