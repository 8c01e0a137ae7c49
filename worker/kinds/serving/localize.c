/* The artifact of a variance failure (docs/SERVING.md "Artifacts"): the
 * batch and sustained checks demand that a request's logits in a batch equal
 * its solo run bit for bit, so their failure is two executions of one step
 * that disagree. The step is re-run with both executions traced
 * (trace.c); the first decoder node whose output differs in the request's
 * box while its inputs agree there is where the device's result starts to
 * depend on the batch, and the two calls of that node's op (the request
 * alone, the request among the others) are the reproducer: a serving pair
 * (pair.c), which the serving row of the kind table gates, minimizes,
 * replays and promotes. The manifest's "serving" object says where it came
 * from (job, case, check, node, composition). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pair.h"
#include "serving_internal.h"

bool sv_keeps_failures(const scase *c)
{
    return c->j->b.opts && c->j->b.opts->on_failure;
}

int sv_localized(scase *c, const char *state, const char *why)
{
    json_t *o = json_pack("{s:s, s:s}", "state", state, "reason", why);
    return !o || json_object_set_new(c->cj, "localized", o) ? -ENOMEM : 0;
}

static json_t *ints(int nd, const int64_t *v)
{
    json_t *a = json_array();
    for (int d = 0; a && d < nd; d++)
        if (json_array_append_new(a, json_integer(v[d]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *sv_box_json(const sv_box *b)
{
    if (b->param)
        return json_null();
    return json_pack("{s:o*, s:o*}", "offset", ints(b->nd, b->off), "extent", ints(b->nd, b->ext));
}

static json_t *call_json(const sv_call *k, const char *what)
{
    json_t *ib = json_array();
    for (int i = 0; ib && i < k->n_in; i++)
        if (json_array_append_new(ib, sv_box_json(&k->in_box[i]))) {
            json_decref(ib);
            ib = NULL;
        }
    return json_pack("{s:s, s:o*, s:o*}", "what", what, "output_box", sv_box_json(&k->out_box),
                     "input_boxes", ib);
}

/* The pair's manifest: the serving job's spec (its kind picks the serving
 * row), the devices' identity, the class, the two calls and where they came
 * from. */
static json_t *manifest(scase *c, const sv_call *ka, const sv_call *kb, const char *what_a,
                        const char *what_b, json_t *composition, const char *cls, int64_t differ,
                        int64_t of)
{
    const json_t *d = c->j->b.describe, *sj = c->j->b.spec_json;
    const json_t *build = json_object_get(sj, "build");
    const char *check = nv_serving_check_name(c->j->s->check), *dn = nv_dtype_name(c->dt);
    json_t *attrs = ka->attrs ? json_loads(ka->attrs, 0, NULL) : json_object();
    json_t *pair = json_pack("{s:i, s:s, s:s, s:o*, s:s, s:s, s:[o*, o*], s:I, s:I}", "version",
                             SV_PAIR_VERSION, "node", ka->site, "op", ka->op, "attrs", attrs,
                             "dtype", dn, "out_dtype", nv_dtype_name(ka->out->dtype), "calls",
                             call_json(ka, what_a), call_json(kb, what_b), "values_differing",
                             (json_int_t)differ, "values", (json_int_t)of);
    json_t *cs = json_pack("{s:I, s:s, s:i, s:I, s:s, s:s}", "index", (json_int_t)c->index, "dtype",
                           dn, "sample", c->sample, "seed", (json_int_t)c->j->s->seed, "check",
                           check, "failure_class", cls);
    json_t *origin =
        json_pack("{s:O?, s:I, s:s, s:s, s:s, s:o}", "job", json_object_get(sj, "name"),
                  "case_index", (json_int_t)c->index, "case_dtype", dn, "check", check, "node",
                  ka->site, "composition", composition);
    json_t *m = pair && cs && origin
                    ? json_pack("{s:O, s:O, s:s, s:O?, s:O?, s:O?, s:O?, s:O?, s:s, s:O, s:O}",
                                "spec", sj, "case", cs, "backend", c->j->b.backend_spec, "device",
                                json_object_get(d, "device"), "mode", json_object_get(d, "mode"),
                                "contract", json_object_get(d, "contract"), "backend_build",
                                json_object_get(d, "build"), "build",
                                build ? build : json_object_get(d, "build"), "failure_class", cls,
                                "serving_pair", pair, "serving", origin)
                    : NULL;
    json_decref(pair);
    json_decref(cs);
    json_decref(origin);
    return m;
}

static int store(scase *c, const sv_call *ka, const sv_call *kb, const char *what_a,
                 const char *what_b, json_t *composition, const char *cls, int64_t differ)
{
    int64_t of = 1;
    for (int d = 0; d < ka->out_box.nd; d++)
        of *= ka->out_box.ext[d];
    json_t *m = manifest(c, ka, kb, what_a, what_b, composition, cls, differ, of);
    if (!m)
        return -ENOMEM;
    const char *names[2 * 3];
    const nv_tensor *ts[2 * 3];
    char buf[2 * 3][24];
    int n = 0;
    const sv_call *k2[2] = {ka, kb};
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i <= k2[w]->n_in; i++, n++) {
            bool out = i == k2[w]->n_in;
            snprintf(buf[n], sizeof buf[n], "%s.%s:%d", w ? "b" : "a", out ? "output" : "input",
                     out ? 0 : i);
            names[n] = buf[n];
            ts[n] = out ? k2[w]->out : k2[w]->in[i];
        }
    }
    int r = nvw_store_failure(&c->j->b, c->cj, (int)c->index, m, n, names, ts);
    json_decref(m);
    if (r > 0) {
        char why[300];
        snprintf(why, sizeof why,
                 "node %s (op %s) is the first whose output for the request differs while its "
                 "inputs agree: the two calls of that op are the reproducer",
                 ka->site, ka->op);
        r = sv_localized(c, "serving_pair", why);
    }
    return r;
}

/* Whether call k's inputs hold the same values as call l's in the request's
 * boxes (parameters: whole). */
static bool inputs_agree(const sv_call *k, const sv_call *l)
{
    if (k->n_in != l->n_in)
        return false;
    for (int i = 0; i < k->n_in; i++) {
        sv_box wa = k->in_box[i], wb = l->in_box[i];
        if (wa.param != wb.param)
            return false;
        if (!sv_box_same(k->in[i], &wa, l->in[i], &wb, NULL))
            return false;
    }
    return true;
}

int sv_localize_pair(scase *c, const sv_trace *a, const sv_trace *b, const char *what_a,
                     const char *what_b, json_t *composition, const char *cls)
{
    if (!sv_keeps_failures(c)) {
        json_decref(composition);
        return 0;
    }
    const char *why = NULL;
    int r = 0;
    if (c->steps)
        why = "the harness ran the device's steps (serve request): no op call to localize to";
    else if (a->full || b->full)
        why = "the step's tensors exceed the trace's limit (2^23 values): not localized";
    for (int k = 0; !why && k < a->n; k++) {
        const sv_call *ka = &a->calls[k], *kb = k < b->n ? &b->calls[k] : NULL;
        if (!kb || strcmp(ka->site, kb->site) || strcmp(ka->op, kb->op)) {
            why = "the two executions ran other op sequences for the request: not localized";
            break;
        }
        int64_t differ = 0;
        if (sv_box_same(ka->out, &ka->out_box, kb->out, &kb->out_box, &differ))
            continue;
        if (differ < 0) {
            why = "the request's boxes differ in shape between the executions: not localized";
            break;
        }
        if (!inputs_agree(ka, kb)) {
            why = "the first node whose output differs also differs in its inputs (values the "
                  "kind gathered, from the KV cache): no op call of the step reproduces it alone";
            break;
        }
        return store(c, ka, kb, what_a, what_b, composition, cls, differ);
    }
    if (!why)
        why = "no op call of the traced step differs for the request (the difference did not "
              "recur when the step was run again)";
    json_decref(composition);
    r = sv_localized(c, "none", why);
    return r;
}
