/* The device's steps run by an exec harness (serving_internal.h,
 * docs/SERVING.md "Steps on the harness"): where the harness's hello lists
 * the optional "serve" request (docs/EXEC_PROTOCOL.md), a step of sv_forward
 * on the device side is one request to it, and the harness runs the decoder
 * with its own runtime's ops and holds the KV cache; the references stay the
 * kind's, op by op. The step interface is sv_forward's: per request, its cache
 * (named by an id the harness keys its cache by), the position it starts at
 * (the cache's length here: 0 after an eviction, which the harness reads as
 * "reset") and its tokens; the reply is the logits of every row. The model is
 * loaded into the harness on its first step (its weights in the case dtype,
 * under the model kind's parameter names) and freed with sv_model_done; a
 * freed cache is dropped with the next step. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"
#include "worker/backends/exec.h"
#include "worker/backends/views/views.h"

struct sv_served {
    int64_t id; /* the harness's name for the model, 0 until loaded */
    const nv_backend *table;
    void *ctx;    /* the exec context it was loaded into */
    json_t *drop; /* cache ids freed here, not yet dropped there */
};

/* Model and cache ids: unique in the process, so a pooled harness never
 * confuses one case's with another's. */
static atomic_llong next_id = 1;

struct sv_served *sv_steps_new(void)
{
    struct sv_served *s = calloc(1, sizeof *s);
    if (s && !(s->drop = json_array())) {
        free(s);
        s = NULL;
    }
    return s;
}

int64_t sv_steps_cache_id(void)
{
    return (int64_t)atomic_fetch_add(&next_id, 1);
}

bool sv_steps_offered(const scase *c)
{
    return c->j->b.table == nvw_exec_table() && nvw_exec_offers(c->ctx, "serve");
}

void sv_steps_forget(const sv_model *m, const sv_cache *c)
{
    if (m->served && m->served->id && c->id > 0)
        json_array_append_new(m->served->drop, json_integer(c->id)); /* best effort */
}

void sv_steps_release(sv_model *m)
{
    struct sv_served *s = m->served;
    if (!s)
        return;
    if (s->id) {
        char req[96], err[128];
        snprintf(req, sizeof req, "{\"action\": \"free\", \"model\": %lld}", (long long)s->id);
        nvw_exec_serve(s->ctx, req, NULL, 0, NULL, 0, err, sizeof err); /* a lost free costs
                                                                           the harness memory
                                                                           until it exits */
    }
    json_decref(s->drop);
    free(s);
    m->served = NULL;
}

static int fail(sv_exec *x, int rc, const char *what, const char *err)
{
    x->rc = rc;
    snprintf(x->err, sizeof x->err, "serve %s: %s", what, err);
    return -1;
}

/* The weights under the model kind's names, in the case dtype. */
static int load(sv_exec *x, const sv_model *m)
{
    const nv_servingspec *s = m->s;
    int L = s->layers, n = 5 + 9 * L;
    const nv_tensor **t = calloc((size_t)n, sizeof *t);
    nv_tensor_view *v = calloc((size_t)n, sizeof *v);
    json_t *names = json_array();
    int r = t && v && names ? 0 : -ENOMEM, k = 0;
    static const char *const per[] = {"g_attn", "wq",     "wk",   "wv",    "wo",
                                      "g_mlp",  "w_gate", "w_up", "w_down"};
    const nv_tensor *top[] = {m->wte, m->cos, m->sin, m->g_final, m->w_unembed};
    static const char *const top_names[] = {"wte", "rope_cos", "rope_sin", "g_final", "w_unembed"};
    for (int i = 0; r == 0 && i < 5; i++, k++) {
        t[k] = top[i];
        r = json_array_append_new(names, json_string(top_names[i])) ? -ENOMEM : 0;
    }
    for (int l = 0; r == 0 && l < L; l++) {
        const sv_layer *y = &m->layer[l];
        const nv_tensor *w[] = {y->g_attn, y->wq,     y->wk,   y->wv,    y->wo,
                                y->g_mlp,  y->w_gate, y->w_up, y->w_down};
        for (int i = 0; r == 0 && i < 9; i++, k++) {
            char name[64];
            snprintf(name, sizeof name, "decoder.%d.%s", l, per[i]);
            t[k] = w[i];
            r = json_array_append_new(names, json_string(name)) ? -ENOMEM : 0;
        }
    }
    int made = 0;
    for (; r == 0 && made < n; made++)
        r = nvw_view_from_tensor(t[made], &v[made]) < 0 ? -ENOMEM : 0;
    int64_t id = (int64_t)atomic_fetch_add(&next_id, 1);
    json_t *req = r ? NULL
                    : json_pack("{s:s, s:I, s:{s:i, s:i, s:i, s:i, s:i, s:s, s:f, s:i}, s:O}",
                                "action", "load", "model", (json_int_t)id, "config", "vocab",
                                s->vocab, "width", s->width, "heads", s->heads, "layers", s->layers,
                                "ffn", s->ffn, "dtype", nv_dtype_name(m->dt), "eps", 1e-5, "page",
                                s->page > 0 ? s->page : 16, "names", names);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    char err[SV_ERRLEN / 2] = "";
    int br = text ? nvw_exec_serve(x->ctx, text, v, n, NULL, 0, err, sizeof err) : NV_E_NOMEM;
    for (int i = 0; i < made; i++)
        nvw_view_free(&v[i]);
    free(t);
    free(v);
    free(text);
    json_decref(req);
    json_decref(names);
    if (br == NV_E_NOMEM)
        return fail(x, -ENOMEM, "load", "out of memory");
    if (br != NV_OK)
        return fail(x, 1, "load", err);
    m->served->id = id;
    m->served->table = x->table;
    m->served->ctx = x->ctx;
    return 0;
}

int sv_steps_forward(sv_exec *x, const sv_model *m, int nb, const int64_t *n,
                     const int64_t *const *ids, sv_cache *const *cache, sv_layout layout,
                     nv_tensor **logits)
{
    int64_t V = m->s->vocab, N = 0;
    for (int r = 0; r < nb; r++)
        logits[r] = NULL;
    if (!m->served)
        return fail(x, NV_E_INVALID, "step", "the model has no harness state");
    if (!m->served->id && load(x, m) < 0)
        return -1;
    json_t *reqs = json_array();
    for (int r = 0; reqs && r < nb; r++) {
        N += n[r];
        if (json_array_append_new(
                reqs, json_pack("{s:I, s:I, s:I}", "cache", (json_int_t)cache[r]->id, "start",
                                (json_int_t)cache[r]->len, "n", (json_int_t)n[r]))) {
            json_decref(reqs);
            reqs = NULL;
        }
    }
    nv_tensor *idt = nv_tensor_new(NV_DT_INT32, 1, &N);
    for (int r = 0, at = 0; idt && r < nb; r++)
        for (int64_t i = 0; i < n[r]; i++)
            idt->data[at++] = (double)ids[r][i];
    nv_tensor_view iv = {0}, out = {0};
    int vr = idt ? nvw_view_from_tensor(idt, &iv) : -ENOMEM;
    nv_tensor_free(idt);
    json_t *req = reqs && vr == 0 ? json_pack("{s:s, s:I, s:s, s:o, s:O}", "action", "step",
                                              "model", (json_int_t)m->served->id, "layout",
                                              layout == SV_PADDED ? "padded" : "packed", "requests",
                                              reqs, "drop", m->served->drop)
                                  : NULL;
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!req)
        json_decref(reqs);
    char err[SV_ERRLEN / 2] = "";
    int br = text ? nvw_exec_serve(x->ctx, text, &iv, 1, &out, 1, err, sizeof err) : NV_E_NOMEM;
    free(text);
    nvw_view_free(&iv);
    if (br == NV_OK)
        json_array_clear(m->served->drop);
    bool fits = br == NV_OK && out.data && out.dtype == (int32_t)x->dt && out.ndim == 2 &&
                out.shape[0] == N && out.shape[1] == V;
    nv_tensor *lg = fits ? nvw_tensor_from_view(&out, false) : NULL;
    if (out.data && x->table->release_tensor)
        x->table->release_tensor(x->ctx, &out);
    if (br == NV_E_NOMEM)
        return fail(x, -ENOMEM, "step", "out of memory");
    if (br != NV_OK)
        return fail(x, 1, "step", err);
    if (!fits)
        return fail(x, 1, "step", "the logits' dtype or shape differs from the model's");
    if (!lg)
        return fail(x, -ENOMEM, "step", "out of memory");
    int rc = 0;
    int64_t at = 0;
    for (int r = 0; r < nb; at += n[r], r++) {
        int64_t shape[2] = {n[r], V};
        if (!(logits[r] = nv_tensor_new(x->dt, 2, shape))) {
            rc = fail(x, -ENOMEM, "step", "out of memory");
            break;
        }
        memcpy(logits[r]->data, lg->data + at * V, (size_t)(n[r] * V) * sizeof(double));
    }
    nv_tensor_free(lg);
    for (int r = 0; rc < 0 && r < nb; r++) {
        nv_tensor_free(logits[r]);
        logits[r] = NULL;
    }
    for (int r = 0; rc == 0 && r < nb; r++)
        cache[r]->len += n[r];
    return rc;
}
