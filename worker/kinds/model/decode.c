/* Greedy decode of a language model (docs/MODEL.md "Greedy decode"): from the
 * first `prompt` tokens of the case's ids, the fp64 reference and the device
 * each decode `decode` tokens on their own (argmax at the last filled
 * position, appended, the whole model rerun). Positions after the filled ones
 * hold token 0: with a causal mask they cannot change the filled positions'
 * logits. Judged: the first position where the two disagree must be one the
 * reference's own margin leaves open to the band of the logits. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static int64_t argmax_row(const nv_tensor *t, int64_t row, int64_t n, double *ret_margin,
                          double *ret_norm)
{
    const double *x = t->data + row * n;
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b] || (isnan(x[i]) && !isnan(x[b])))
            b = i;
    double second = -INFINITY, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i != b && x[i] > second)
            second = x[i];
        sq += x[i] * x[i];
    }
    if (ret_margin)
        *ret_margin = x[b] - second;
    if (ret_norm)
        *ret_norm = sqrt(sq);
    return b;
}

static void free_all(nv_tensor **t, int n)
{
    for (int k = 0; k < n; k++) {
        nv_tensor_free(t[k]);
        t[k] = NULL;
    }
}

typedef struct dstate {
    mcase *c;
    nv_tensor *in[NV_GRAPH_MAX_INPUTS]; /* the case's inputs with its own ids tensor */
    nv_tensor *ids;
    nv_tensor **vals;
    int64_t *tokens;
    double *margin, *norm; /* the reference's only */
} dstate;

/* One step: run on the ids so far and return the argmax at position pos. */
static int step(dstate *d, bool device, int64_t pos, int64_t *ret_tok, double *margin,
                double *norm)
{
    mcase *c = d->c;
    char err[MODEL_ERRLEN] = "";
    int r = device ? model_device(c, d->in, d->vals)
                   : model_reference(c, d->in, d->vals, false, err, sizeof err);
    if (r == 0) {
        int k = c->j->s->logits;
        *ret_tok = argmax_row(d->vals[k], pos, c->g.nodes[k].shape[1], margin, norm);
    } else if (!device && r != -ENOMEM && r != NV_E_NOMEM)
        r = model_verdict(c, "error", "reference", "decode: %s", err) < 0 ? -ENOMEM : 1;
    else if (r == NV_E_NOMEM)
        r = -ENOMEM;
    free_all(d->vals, c->g.n_nodes);
    return r;
}

/* Decode on one side: tokens[s] for s < decode. */
static int decode_side(dstate *d, bool device)
{
    const nv_modelspec *s = d->c->j->s;
    const nv_tensor *ids0 = d->c->in[s->ids_input];
    for (int64_t q = 0; q < d->ids->numel; q++)
        d->ids->data[q] = q < s->prompt ? ids0->data[q] : 0;
    for (int st = 0; st < s->decode; st++) {
        int64_t pos = s->prompt - 1 + st, tok;
        int r = step(d, device, pos, &tok, device ? NULL : &d->margin[st],
                     device ? NULL : &d->norm[st]);
        if (r != 0)
            return r;
        d->tokens[st] = tok;
        if (pos + 1 < d->ids->numel)
            d->ids->data[pos + 1] = (double)tok;
    }
    return 0;
}

static json_t *tokens_json(const int64_t *t, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(t[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int report(mcase *c, const int64_t *ref, const int64_t *dev, const double *margin,
                  const double *norm, json_t *crit, const char **fail)
{
    const nv_modelspec *s = c->j->s;
    double band = c->res[s->logits].band;
    int first = -1, agree = 0;
    for (int i = 0; i < s->decode; i++) {
        agree += ref[i] == dev[i];
        if (first < 0 && ref[i] != dev[i])
            first = i;
    }
    double allowed = first >= 0 ? sqrt(2.0) * band * norm[first] : 0;
    bool ok = first < 0 || margin[first] <= allowed;
    json_t *o = json_pack(
        "{s:i, s:i, s:o, s:o, s:b, s:s, s:s}", "prompt", s->prompt, "steps", s->decode,
        "tokens_ref", tokens_json(ref, s->decode), "tokens_dev", tokens_json(dev, s->decode),
        "passed", ok, "tolerance",
        "the first divergent step's fp64 margin <= sqrt(2) band ||R64_row||", "reason",
        "an error within the logits' band can flip the argmax only where the reference's top "
        "two logits are that close; later steps continue from different tokens and are "
        "reported, not judged");
    if (!o)
        return -ENOMEM;
    int r = json_object_set_new(o, "first_divergent", first < 0 ? json_null() : json_integer(first));
    r = r ? r : json_object_set_new(o, "agreement", nvw_json_num((double)agree / s->decode));
    if (r == 0 && first >= 0)
        r = json_object_set_new(o, "margin_at_divergence", nvw_json_num(margin[first])) ||
            json_object_set_new(o, "allowed_margin", nvw_json_num(allowed));
    if (r) {
        json_decref(o);
        return -ENOMEM;
    }
    if (!ok && !*fail)
        *fail = "decode_divergence";
    return json_object_set_new(crit, "decode", o) ? -ENOMEM : 0;
}

int model_decode(mcase *c, json_t *crit, const char **fail)
{
    const nv_modelspec *s = c->j->s;
    dstate d;
    memset(&d, 0, sizeof d);
    d.c = c;
    memcpy(d.in, c->in, sizeof d.in);
    const nv_tensor *ids0 = c->in[s->ids_input];
    d.ids = nv_tensor_new(ids0->dtype, ids0->ndim, ids0->shape);
    d.in[s->ids_input] = d.ids;
    d.vals = calloc((size_t)c->g.n_nodes, sizeof *d.vals);
    int64_t *ref = calloc((size_t)s->decode, sizeof *ref);
    int64_t *dev = calloc((size_t)s->decode, sizeof *dev);
    d.margin = calloc((size_t)s->decode, sizeof *d.margin);
    d.norm = calloc((size_t)s->decode, sizeof *d.norm);
    int r = d.ids && d.vals && ref && dev && d.margin && d.norm ? 0 : -ENOMEM;
    if (r == 0) {
        d.tokens = ref;
        r = decode_side(&d, false);
    }
    if (r == 0) {
        d.tokens = dev;
        r = decode_side(&d, true);
    }
    if (r == 0)
        r = report(c, ref, dev, d.margin, d.norm, crit, fail);
    nv_tensor_free(d.ids);
    free(d.vals);
    free(ref);
    free(dev);
    free(d.margin);
    free(d.norm);
    return r;
}
