/* Serving pairs (pair.h): read from an artifact, every piece required and
 * checked (nothing regenerated, nothing defaulted), and probed: both calls on
 * the device in a forked child, their outputs compared in the request's box
 * bit for bit. */
#include "pair.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/repro/repro_util.h"

void sv_pair_free(sv_pair *p)
{
    if (!p)
        return;
    json_decref(p->manifest);
    free(p->attrs);
    for (int w = 0; w < 2; w++) {
        nv_tensor_free(p->out[w]);
        for (int i = 0; i < 2; i++)
            nv_tensor_free(p->in[w][i]);
    }
    free(p);
}

static nv_tensor *copy(const nv_tensor *t)
{
    nv_tensor *c = t ? nv_tensor_new(t->dtype, t->ndim, t->shape) : NULL;
    if (c)
        memcpy(c->data, t->data, (size_t)t->numel * sizeof(double));
    return c;
}

sv_pair *sv_pair_clone(const sv_pair *p)
{
    sv_pair *q = malloc(sizeof *q);
    if (!q)
        return NULL;
    *q = *p;
    json_incref(q->manifest);
    q->attrs = strdup(p->attrs);
    bool ok = q->attrs != NULL;
    for (int w = 0; w < 2; w++) {
        q->out[w] = copy(p->out[w]);
        ok &= q->out[w] != NULL;
        for (int i = 0; i < 2; i++) {
            q->in[w][i] = i < p->n_in ? copy(p->in[w][i]) : NULL;
            ok &= i >= p->n_in || q->in[w][i] != NULL;
        }
    }
    if (!ok) {
        sv_pair_free(q);
        return NULL;
    }
    return q;
}

static const char *str(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* A box from {"offset", "extent"} (null: a parameter) that lies in t. */
static int box_from(const json_t *j, const nv_tensor *t, sv_box *b)
{
    memset(b, 0, sizeof *b);
    b->nd = t->ndim;
    if (json_is_null(j)) {
        b->param = true;
        for (int d = 0; d < t->ndim; d++)
            b->ext[d] = t->shape[d];
        return 0;
    }
    const json_t *off = json_object_get(j, "offset"), *ext = json_object_get(j, "extent");
    if (json_array_size(off) != (size_t)t->ndim || json_array_size(ext) != (size_t)t->ndim)
        return -EINVAL;
    for (int d = 0; d < t->ndim; d++) {
        const json_t *o = json_array_get(off, (size_t)d), *e = json_array_get(ext, (size_t)d);
        if (!json_is_integer(o) || !json_is_integer(e))
            return -EINVAL;
        b->off[d] = json_integer_value(o);
        b->ext[d] = json_integer_value(e);
        if (b->off[d] < 0 || b->ext[d] < 1 || b->off[d] + b->ext[d] > t->shape[d])
            return -EINVAL;
    }
    return 0;
}

static int tensor(const nv_artifact *a, const char *name, nv_tensor **ret, char **ret_err)
{
    const nv_artifact_tensor *at = nv_artifact_find(a, name);
    if (!at)
        return nvw_set_err(ret_err, -EINVAL, "serving pair artifact has no tensor '%s'", name);
    *ret = nvw_artifact_values(at);
    return *ret ? 0 : -ENOMEM;
}

int sv_pair_from_artifact(const nv_artifact *a, sv_pair **ret, char **ret_err)
{
    const json_t *m = a->manifest, *sp = json_object_get(m, "serving_pair");
    const json_t *calls = json_object_get(sp, "calls"), *cs = json_object_get(m, "case");
    *ret = NULL;
    if (!json_is_object(sp))
        return nvw_set_err(ret_err, -EINVAL, "artifact manifest has no 'serving_pair' object");
    if (json_integer_value(json_object_get(sp, "version")) != SV_PAIR_VERSION)
        return nvw_set_err(
            ret_err, -EINVAL, "serving pair version %lld: this build reads version %d",
            (long long)json_integer_value(json_object_get(sp, "version")), SV_PAIR_VERSION);
    const char *op = str(sp, "op"), *node = str(sp, "node"), *odt = str(sp, "out_dtype");
    const char *cls = str(m, "failure_class"), *check = str(cs, "check"), *cdt = str(cs, "dtype");
    const json_t *attrs = json_object_get(sp, "attrs");
    const char *missing = !op                           ? "serving_pair.op"
                          : !node                       ? "serving_pair.node"
                          : !odt                        ? "serving_pair.out_dtype"
                          : !json_is_object(attrs)      ? "serving_pair.attrs"
                          : json_array_size(calls) != 2 ? "serving_pair.calls (two)"
                          : !cls                        ? "failure_class"
                          : !check                      ? "case.check"
                          : !cdt                        ? "case.dtype"
                          : !str(m, "backend")          ? "backend"
                                                        : NULL;
    if (missing)
        return nvw_set_err(ret_err, -EINVAL, "serving pair artifact has no '%s'", missing);
    sv_pair *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->manifest = json_incref((json_t *)m);
    p->op = nv_op_find(op);
    nv_op_attrs pa;
    char *msg = NULL;
    int r = 0;
    if (!p->op || nv_dtype_from_name(odt, &p->out_dt) < 0)
        r = nvw_set_err(ret_err, -EINVAL, "serving pair: op '%s' or dtype '%s' unknown", op, odt);
    else if (nv_op_parse_attrs(p->op, attrs, &pa, &msg) < 0)
        r = nvw_set_err(ret_err, -EINVAL, "serving pair: bad attrs of op '%s': %s", op,
                        msg ? msg : "");
    free(msg);
    if (r == 0 && !(p->attrs = json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS)))
        r = -ENOMEM;
    snprintf(p->node, sizeof p->node, "%s", node);
    snprintf(p->check, sizeof p->check, "%s", check);
    snprintf(p->cls, sizeof p->cls, "%s", cls);
    snprintf(p->case_dtype, sizeof p->case_dtype, "%s", cdt);
    snprintf(p->backend, sizeof p->backend, "%s", str(m, "backend"));
    for (int w = 0; r == 0 && w < 2; w++) {
        const json_t *call = json_array_get(calls, (size_t)w);
        const json_t *ib = json_object_get(call, "input_boxes");
        char name[32];
        int n = (int)json_array_size(ib);
        if (n < 1 || n > 2 || (w && n != p->n_in)) {
            r = nvw_set_err(ret_err, -EINVAL,
                            "serving pair call %d: 'input_boxes' must list 1 or "
                            "2 inputs, as many in both calls",
                            w);
            break;
        }
        p->n_in = n;
        for (int i = 0; r == 0 && i < n; i++) {
            snprintf(name, sizeof name, "%s.input:%d", w ? "b" : "a", i);
            r = tensor(a, name, &p->in[w][i], ret_err);
            if (r == 0 && box_from(json_array_get(ib, (size_t)i), p->in[w][i], &p->in_box[w][i]))
                r = nvw_set_err(ret_err, -EINVAL, "serving pair: the box of '%s' is not inside it",
                                name);
        }
        snprintf(name, sizeof name, "%s.output:0", w ? "b" : "a");
        if (r == 0)
            r = tensor(a, name, &p->out[w], ret_err);
        if (r == 0 && p->out[w]->dtype != p->out_dt)
            r = nvw_set_err(ret_err, -EINVAL, "serving pair: '%s' is not of dtype '%s'", name, odt);
        if (r == 0 && (box_from(json_object_get(call, "output_box"), p->out[w], &p->out_box[w]) ||
                       p->out_box[w].param))
            r = nvw_set_err(ret_err, -EINVAL, "serving pair: the box of '%s' is not inside it",
                            name);
    }
    int64_t differ = 0;
    if (r == 0 && !sv_box_same(p->out[0], &p->out_box[0], p->out[1], &p->out_box[1], &differ) &&
        differ < 0)
        r = nvw_set_err(ret_err, -EINVAL, "serving pair: the two output boxes differ in extent");
    if (r < 0) {
        sv_pair_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

int sv_pair_from_buffer(const uint8_t *buf, size_t len, sv_pair **ret, char **ret_err)
{
    nv_artifact *a = NULL;
    int r = nv_artifact_decode(buf, len, &a, ret_err);
    if (r == 0)
        r = sv_pair_from_artifact(a, ret, ret_err);
    nv_artifact_free(a);
    return r;
}

json_t *sv_pair_signature(const sv_pair *p)
{
    json_t *s =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:O?, s:s}", "kind", "serving", "check", p->check,
                  "op", p->op->name, "dtype", nv_dtype_name(p->out_dt), "case_dtype", p->case_dtype,
                  "mode", json_object_get(p->manifest, "mode"), "failure_class", p->cls);
    return nvw_signature_id(s);
}

json_t *sv_pair_json(const sv_pair *p)
{
    json_t *sp = json_deep_copy(json_object_get(p->manifest, "serving_pair"));
    json_t *calls = json_object_get(sp, "calls");
    for (int w = 0; sp && w < 2; w++) {
        json_t *call = json_array_get(calls, (size_t)w), *ib = json_array();
        for (int i = 0; ib && i < p->n_in; i++)
            json_array_append_new(ib, sv_box_json(&p->in_box[w][i]));
        if (!call || !ib || json_object_set_new(call, "input_boxes", ib) ||
            json_object_set_new(call, "output_box", sv_box_json(&p->out_box[w]))) {
            json_decref(sp);
            return NULL;
        }
    }
    return sp;
}

/* What a child sends back, then each call's output values. */
typedef struct answer {
    sv_pprobe p;
    int64_t numel[2];
} answer;

/* One call on the device: its output, or NULL with a's class and message. */
static nv_tensor *call(const sv_pair *p, const nv_backend *t, void *ctx, int w, answer *a)
{
    nv_tensor_view iv[2], out = {0};
    int made = 0;
    for (; made < p->n_in; made++)
        if (nvw_view_from_tensor(p->in[w][made], &iv[made]) < 0)
            break;
    int nd = 0;
    int64_t shape[NV_MAX_DIMS];
    char err[200] = "";
    nv_op_attrs pa;
    json_t *aj = json_loads(p->attrs, 0, NULL);
    char *msg = NULL;
    bool shaped = made == p->n_in && nv_op_parse_attrs(p->op, aj, &pa, &msg) == 0 &&
                  nv_op_infer(p->op, &pa, p->n_in, (const nv_tensor *const *)p->in[w], &nd, shape,
                              err, sizeof err) == 0;
    json_decref(aj);
    free(msg);
    nv_tensor *got = NULL;
    if (!shaped) {
        snprintf(a->p.cls, sizeof a->p.cls, "probe_error");
        snprintf(a->p.msg, sizeof a->p.msg, "call %c: the inputs do not infer: %s", "ab"[w], err);
    } else {
        nv_op_call c = {.op = p->op->name,
                        .attrs_json = p->attrs,
                        .out_dtype = (int32_t)p->out_dt,
                        .n_inputs = p->n_in,
                        .inputs = iv,
                        .n_outputs = 1,
                        .outputs = &out};
        int br = t->forward(ctx, &c, err, sizeof err);
        bool fits = br == NV_OK && out.data && out.dtype == (int32_t)p->out_dt && out.ndim == nd;
        for (int d = 0; fits && d < nd; d++)
            fits = out.shape[d] == shape[d];
        if (br != NV_OK) {
            snprintf(a->p.cls, sizeof a->p.cls, "backend_error");
            snprintf(a->p.msg, sizeof a->p.msg, "call %c: the backend returned %d: '%s'", "ab"[w],
                     br, err);
        } else if (!fits) {
            snprintf(a->p.cls, sizeof a->p.cls, "bad_output");
            snprintf(a->p.msg, sizeof a->p.msg,
                     "call %c: the output's dtype or shape is not "
                     "the op's",
                     "ab"[w]);
        } else if (!(got = nvw_tensor_from_view(&out, false))) {
            snprintf(a->p.cls, sizeof a->p.cls, "probe_error");
            snprintf(a->p.msg, sizeof a->p.msg, "out of memory");
        }
        if (out.data && t->release_tensor)
            t->release_tensor(ctx, &out);
    }
    for (int i = 0; i < made; i++)
        nvw_view_free(&iv[i]);
    return got;
}

static void child(const sv_pair *p, const nvw_backend *b, int fd)
{
    answer a;
    memset(&a, 0, sizeof a);
    const nv_backend *t = nvw_backend_table(b);
    void *ctx = NULL;
    char err[200] = "";
    nv_tensor *got[2] = {NULL, NULL};
    if (t->open(nvw_backend_options(b), &ctx, err, sizeof err) != NV_OK) {
        snprintf(a.p.cls, sizeof a.p.cls, "backend_error");
        snprintf(a.p.msg, sizeof a.p.msg, "the backend did not open: '%s'", err);
    }
    for (int w = 0; ctx && w < 2 && !a.p.cls[0]; w++)
        got[w] = call(p, t, ctx, w, &a);
    if (got[0] && got[1]) {
        for (int w = 0; w < 2; w++) {
            sv_box whole = {.nd = got[w]->ndim};
            for (int d = 0; d < whole.nd; d++)
                whole.ext[d] = got[w]->shape[d];
            bool same_shape = got[w]->ndim == p->out[w]->ndim;
            for (int d = 0; same_shape && d < whole.nd; d++)
                same_shape = got[w]->shape[d] == p->out[w]->shape[d];
            a.p.bits[w] = same_shape && sv_box_same(got[w], &whole, p->out[w], &whole, NULL);
            a.numel[w] = got[w]->numel;
        }
        if (!sv_box_same(got[0], &p->out_box[0], got[1], &p->out_box[1], &a.p.differ)) {
            snprintf(a.p.cls, sizeof a.p.cls, "%s", a.p.differ < 0 ? "bad_output" : p->cls);
            snprintf(a.p.msg, sizeof a.p.msg,
                     "node %s (op %s): %lld values of the request's output differ between the "
                     "call alone and the call among the others",
                     p->node, p->op->name, (long long)a.p.differ);
        }
    }
    int r = nvw_write_all(fd, &a, sizeof a);
    for (int w = 0; r == 0 && w < 2; w++)
        if (a.numel[w])
            r = nvw_write_all(fd, got[w]->data, (size_t)a.numel[w] * sizeof(double));
    _exit(r == 0 ? 0 : 3);
}

int sv_pair_probe(const sv_pair *p, const nvw_backend *b, int timeout_ms, sv_pprobe *ret,
                  nv_tensor **out)
{
    memset(ret, 0, sizeof *ret);
    if (out)
        out[0] = out[1] = NULL;
    pid_t pid;
    int fd;
    int r = nvw_probe_fork(&pid, &fd);
    if (r < 0)
        return r;
    if (pid == 0)
        child(p, b, fd);
    answer a;
    int64_t deadline = nvw_mono_ms() + timeout_ms;
    r = nvw_read_all(fd, &a, sizeof a, deadline);
    for (int w = 0; r == 0 && w < 2; w++) {
        if (!a.numel[w])
            continue;
        /* the output has the stored output's shape when it has its count */
        nv_tensor *t = a.numel[w] == p->out[w]->numel
                           ? nv_tensor_new(p->out_dt, p->out[w]->ndim, p->out[w]->shape)
                           : NULL;
        double *sink = t ? t->data : malloc((size_t)a.numel[w] * sizeof(double));
        r = sink ? nvw_read_all(fd, sink, (size_t)a.numel[w] * sizeof(double), deadline) : -EIO;
        if (!t)
            free(sink);
        if (out)
            out[w] = t;
        else
            nv_tensor_free(t);
    }
    close(fd);
    if (r < 0)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r < 0)
        nvw_probe_failed(r, st, timeout_ms, ret->cls, sizeof ret->cls, ret->msg, sizeof ret->msg);
    else
        *ret = a.p;
    return 0;
}
