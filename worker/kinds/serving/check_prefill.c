/* Prefill vs decode (docs/SERVING.md "Prefill vs decode"): the logits of a
 * prompt computed in one prefill and token by token through the KV cache
 * (each step attends to what the device's cache_write stored). Both are one
 * device's executions of the same model, each allowed the model kind's band
 * from the fp64 reference, so their distance at position t is judged
 * against twice that band (the triangle inequality). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"

sv_exec sv_exec_of(const scase *c, sv_side s)
{
    sv_exec x = {.side = s,
                 .table = c->j->b.table,
                 .ctx = c->ctx,
                 .dt = c->dt,
                 .steps = s == SV_DEV && c->steps};
    return x;
}

int sv_sequence(sv_exec *x, const sv_model *m, const int64_t *ids, int64_t n, int64_t step,
                double *out)
{
    sv_cache cache;
    int rc = sv_cache_init(&cache, m, n);
    if (rc < 0) {
        sv_cache_done(&cache, m);
        x->rc = -ENOMEM;
        return -1;
    }
    int64_t V = m->s->vocab, per = step > 0 ? step : n;
    sv_cache *cp = &cache;
    sv_trace *tr = x->trace;
    for (int64_t p = 0; rc == 0 && p < n; p += per) {
        int64_t k = p + per <= n ? per : n - p;
        const int64_t *idp = ids + p;
        nv_tensor *lg = NULL;
        x->trace = tr && p == x->trace_at ? tr : NULL;
        rc = sv_forward(x, m, 1, &k, &idp, &cp, SV_PACKED, &lg);
        x->trace = tr;
        if (rc == 0)
            memcpy(out + p * V, lg->data, (size_t)(k * V) * sizeof(double));
        nv_tensor_free(lg);
    }
    sv_cache_done(&cache, m);
    return rc;
}

/* The failing position's decode step and the prefill re-run traced, their op
 * calls judged as op jobs (localize_op.c), the decode step's first. */
static int localize(scase *c, const sv_model *m, const int64_t *ids, int64_t P, int64_t t)
{
    if (!sv_keeps_failures(c))
        return 0;
    double *buf = malloc((size_t)(P * m->s->vocab) * sizeof *buf);
    if (!buf)
        return -ENOMEM;
    sv_trace td = {.target = 0}, tp = {.target = 0};
    sv_exec x = sv_exec_of(c, SV_DEV);
    x.trace = &td;
    x.trace_at = t;
    int r = sv_sequence(&x, m, ids, P, 1, buf);
    x.trace = &tp;
    x.trace_at = 0;
    if (r == 0)
        r = sv_sequence(&x, m, ids, P, 0, buf);
    const sv_trace *both[2] = {&td, &tp};
    json_t *where = json_pack("{s:O?, s:I, s:s, s:s, s:s, s:I, s:[s, s]}", "job",
                              json_object_get(c->j->b.spec_json, "name"), "case_index",
                              (json_int_t)c->index, "case_dtype", nv_dtype_name(c->dt), "check",
                              "prefill_decode", "execution", "ops", "position", (json_int_t)t,
                              "traces", "the decode step at the position", "the prefill");
    if (r == 0 && where)
        r = sv_localize_op(c, both, 2, where);
    else {
        json_decref(where);
        r = !where || x.rc == -ENOMEM ? -ENOMEM
                                      : sv_localized(c, "none", "the traced re-run failed");
    }
    free(buf);
    sv_trace_done(&td);
    sv_trace_done(&tp);
    return r;
}

static int report(scase *c, const double *pre, const double *dec, const double *r64,
                  const double *rdt, int64_t P, const sv_model *m, const int64_t *ids)
{
    const nv_servingspec *s = c->j->s;
    int64_t V = s->vocab, first = -1, worst = 0;
    double worst_ratio = 0, d_first = 0, allowed_first = 0;
    json_t *pos = json_array();
    for (int64_t t = 0; pos && t < P; t++) {
        const double *rr = r64 + t * V;
        double d = sv_dist(dec + t * V, pre + t * V, rr, V);
        double e_dt = sv_rel_err(rdt + t * V, rr, V);
        double allowed = 2 * sv_band_at(c, e_dt, t);
        bool ok = d <= allowed;
        if (!ok && first < 0) {
            first = t;
            d_first = d;
            allowed_first = allowed;
        }
        if (d / allowed > worst_ratio || isnan(d))
            worst_ratio = d / allowed, worst = t;
        json_t *o = json_pack(
            "{s:I, s:b, s:b}", "position", (json_int_t)t, "within", ok, "same_top1",
            sv_argmax(pre + t * V, V, NULL, NULL) == sv_argmax(dec + t * V, V, NULL, NULL));
        if (!o || sv_set_num(o, "d", d) || sv_set_num(o, "allowed", allowed) ||
            sv_set_num(o, "e_prefill", sv_rel_err(pre + t * V, rr, V)) ||
            sv_set_num(o, "e_decode", sv_rel_err(dec + t * V, rr, V)) ||
            sv_set_num(o, "e_dtype_ref", e_dt) || json_array_append_new(pos, o)) {
            json_decref(o);
            json_decref(pos);
            return -ENOMEM;
        }
    }
    json_t *crit = json_pack(
        "{s:b, s:I, s:o, s:s, s:s}", "passed", first < 0, "positions", (json_int_t)P,
        "per_position", pos, "tolerance",
        "d(t) = ||decode_t - prefill_t|| / ||R64_t|| <= 2 band(t), band(t) = 4 "
        "(e_dtype_ref(t) + K(t) u_acc) + u, K(t) = max(width, ffn, t + 1)",
        "reason",
        "prefill and cached decode are two executions of one model by one device, each allowed "
        "the model kind's band from the fp64 reference (docs/MODEL.md), so they may differ by "
        "twice it; K(t) is the longest reduction feeding position t's logits (attention sums "
        "t + 1 terms)");
    if (!crit || sv_set_num(crit, "worst_ratio", worst_ratio) ||
        json_object_set_new(crit, "worst_position", json_integer(worst)) ||
        json_object_set_new(c->cj, "criteria", json_pack("{s:o}", "prefill_decode", crit)))
        return -ENOMEM;
    if (first < 0)
        return sv_verdict(c, "passed", NULL, NULL);
    int r = sv_verdict(c, "failed", "prefill_decode_mismatch",
                       "position %lld of %lld: the logits decoded through the KV cache differ "
                       "from the prefill's by %.3g, more than 2 band = %.3g (the cache or the "
                       "decode path changed them)",
                       (long long)first, (long long)P, d_first, allowed_first);
    return r ? r : localize(c, m, ids, P, first);
}

int sv_check_prefill_decode(scase *c)
{
    const nv_servingspec *s = c->j->s;
    int64_t P = s->prompt, V = s->vocab;
    sv_model m;
    int64_t *ids = malloc((size_t)P * sizeof *ids);
    double *buf = malloc((size_t)(4 * P * V) * sizeof *buf);
    int r = sv_model_init(&m, s, c->dt, c->sample, P);
    if (!ids || !buf || r < 0 || sv_tokens(c, "prompt", P, ids) < 0) {
        r = -ENOMEM;
        goto out;
    }
    double *pre = buf, *dec = buf + P * V, *r64 = buf + 2 * P * V, *rdt = buf + 3 * P * V;
    sv_exec x = sv_exec_of(c, SV_DEV);
    if (sv_sequence(&x, &m, ids, P, 0, pre) < 0) {
        r = sv_exec_verdict(c, &x, "prefill");
        goto out;
    }
    if (sv_sequence(&x, &m, ids, P, 1, dec) < 0) {
        r = sv_exec_verdict(c, &x, "decode");
        goto out;
    }
    sv_exec x64 = sv_exec_of(c, SV_R64), xdt = sv_exec_of(c, SV_RDT);
    if (sv_sequence(&x64, &m, ids, P, 0, r64) < 0) {
        r = sv_exec_verdict(c, &x64, "prefill");
        goto out;
    }
    if (sv_sequence(&xdt, &m, ids, P, 0, rdt) < 0) {
        r = sv_exec_verdict(c, &xdt, "prefill");
        goto out;
    }
    r = report(c, pre, dec, r64, rdt, P, &m, ids);
out:
    sv_model_done(&m);
    free(ids);
    free(buf);
    return r;
}
