/* Traces of a step (serving_internal.h): every device op call of one
 * forward step that touches the traced request, with copies of its tensors
 * and the request's box in each, so that two executions of the same step
 * (the request alone, the request in a batch) can be compared node by node
 * (localize.c). A trace holds at most SV_TRACE_VALUES values (64 MiB): a step
 * of a decoder larger than that is not localized. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

static nv_tensor *copy(const nv_tensor *t)
{
    nv_tensor *c = nv_tensor_new(t->dtype, t->ndim, t->shape);
    if (c)
        for (int64_t i = 0; i < t->numel; i++) /* the decoder's tensors are contiguous */
            c->data[i] = t->data[t->offset + i];
    return c;
}

int sv_trace_call(sv_trace *t, const char *site, const char *op, const char *attrs, int n,
                  const nv_tensor *const *in, const sv_box *in_box, const nv_tensor *out,
                  const sv_box *out_box)
{
    int64_t values = out->numel;
    for (int i = 0; i < n; i++)
        values += in[i]->numel;
    if (t->full || t->values + values > SV_TRACE_VALUES) {
        t->full = true;
        return 0;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        sv_call *g = realloc(t->calls, (size_t)cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        t->calls = g;
        t->cap = cap;
    }
    sv_call *c = &t->calls[t->n];
    memset(c, 0, sizeof *c);
    snprintf(c->site, sizeof c->site, "%s", site);
    snprintf(c->op, sizeof c->op, "%s", op);
    c->n_in = n;
    c->out_box = *out_box;
    bool ok = (!attrs || (c->attrs = strdup(attrs))) && (c->out = copy(out));
    for (int i = 0; ok && i < n; i++) {
        c->in_box[i] = in_box[i];
        ok = (c->in[i] = copy(in[i])) != NULL;
    }
    t->n++; /* kept even when partial, so that sv_trace_done frees it */
    t->values += values;
    return ok ? 0 : -ENOMEM;
}

void sv_trace_done(sv_trace *t)
{
    for (int k = 0; k < t->n; k++) {
        sv_call *c = &t->calls[k];
        free(c->attrs);
        nv_tensor_free(c->out);
        for (int i = 0; i < c->n_in; i++)
            nv_tensor_free(c->in[i]);
    }
    free(t->calls);
    memset(t, 0, sizeof *t);
}

/* The row-major index in t of the box element whose in-box index is e. */
static int64_t box_index(const nv_tensor *t, const sv_box *b, int64_t e)
{
    int64_t at = 0, stride = 1;
    for (int d = b->nd - 1; d >= 0; d--) {
        int64_t i = e % b->ext[d];
        e /= b->ext[d];
        at += (b->off[d] + i) * stride;
        stride *= t->shape[d];
    }
    return at;
}

bool sv_box_same(const nv_tensor *a, const sv_box *ba, const nv_tensor *b, const sv_box *bb,
                 int64_t *ret_differ)
{
    int64_t n = 1, differ = 0;
    bool shaped = ba->nd == bb->nd && a->dtype == b->dtype;
    for (int d = 0; shaped && d < ba->nd; d++) {
        shaped = ba->ext[d] == bb->ext[d];
        n *= ba->ext[d];
    }
    for (int64_t e = 0; shaped && e < n; e++) {
        double x = a->data[box_index(a, ba, e)], y = b->data[box_index(b, bb, e)];
        differ += memcmp(&x, &y, sizeof x) != 0; /* bits: -0 and 0 differ */
    }
    if (ret_differ)
        *ret_differ = shaped ? differ : -1;
    return shaped && differ == 0;
}
