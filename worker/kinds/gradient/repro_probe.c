/* One probe of a gradient failure (repro_grad.h nvw_gprobe): the gradient
 * runner's case code (device check, determinism check) on given inputs and
 * output gradient in a forked child, so that a backend that crashes or hangs
 * costs the probe, never the worker. The child answers with a small header and
 * the probe's case as an encoded artifact (manifest, tensors, device
 * gradients), which the parent decodes and compares with the stored one. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sha256.h"
#include "core/ref/backward.h"
#include "gradient_internal.h"
#include "repro_grad.h"
#include "worker/repro/artifact.h"
#include "worker/repro/repro_util.h"

typedef struct wire {
    int32_t status; /* 0: an artifact follows; else msg says why not */
    char msg[256];
    uint64_t len;
} wire;

typedef struct child_ctx {
    const char *backend_spec;
    uint8_t *buf;
    size_t len;
} child_ctx;

void nvw_gprobe_out_done(nvw_gprobe_out *p)
{
    if (!p)
        return;
    free(p->buf);
    p->buf = NULL;
    p->len = 0;
}

static int on_report(void *ud, const nvw_failure *f, char **ret_id)
{
    (void)ret_id;
    child_ctx *cx = ud;
    nvw_artifact_origin o = {.backend_spec = cx->backend_spec};
    char sha[65];
    free(cx->buf);
    cx->buf = NULL;
    return nvw_failure_artifact(f, &o, &cx->buf, &cx->len, sha);
}

static bool listed(const json_t *arr, const char *name)
{
    size_t k;
    json_t *v;
    json_array_foreach(arr, k,
                       v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return true;
    return false;
}

/* The case on an open context; w->msg set when no artifact came. */
static void run_on(const nvw_genv *env, void *ctx, nv_tensor *const *in, const nv_tensor *gy,
                   child_ctx *cx, wire *w)
{
    const nvw_grepro *gr = env->gr;
    const nv_backend *t = nvw_backend_table(env->b);
    const char *op = gr->gs->base->op->name;
    const char *text = t->describe ? t->describe(ctx) : NULL;
    json_t *d = text ? json_loads(text, 0, NULL) : json_object();
    gjob j;
    memset(&j, 0, sizeof j);
    j.b.spec_json = json_object_get(gr->manifest, "spec");
    j.g = gr->gs;
    j.b.backend_spec = env->backend_spec;
    j.b.table = t;
    j.b.options = nvw_backend_options(env->b);
    j.b.describe = d;
    j.saved = json_object_get(json_object_get(d, "saved"), op);
    j.nondeterministic = listed(json_object_get(d, "nondeterministic_ops"), op);
    nvw_grad_given gv = {.n_in = gr->n_in,
                         .in = in,
                         .gy = gy,
                         .tolerance = json_object_get(gr->manifest, "tolerance"),
                         .determinism = !strcmp(gr->check, "determinism"),
                         .report = on_report,
                         .ud = cx};
    json_t *cj = NULL;
    char *perr = NULL;
    if (!json_is_object(d))
        snprintf(w->msg, sizeof w->msg, "the backend returned an invalid describe() JSON");
    else if (nvw_grad_dtype_parse(&j, d, &perr) < 0)
        snprintf(w->msg, sizeof w->msg, "%s", perr ? perr : "bad gradient_dtype");
    else if (!t->backward || json_is_true(json_object_get(d, "inference_only")))
        snprintf(w->msg, sizeof w->msg, "the backend is inference-only: it offers no backward");
    else if (!(cj = nvw_grad_case_given(&j, ctx, gr->case_index, &gv)))
        snprintf(w->msg, sizeof w->msg, "out of memory in the probe");
    else if (!cx->buf)
        snprintf(w->msg, sizeof w->msg, "%s",
                 json_string_value(json_object_get(cj, "error"))
                     ? json_string_value(json_object_get(cj, "error"))
                     : "the case gave no artifact");
    free(perr);
    json_decref(cj);
    json_decref(d);
}

static void child(const nvw_genv *env, nv_tensor *const *in, const nv_tensor *gy, int fd)
{
    wire w;
    memset(&w, 0, sizeof w);
    child_ctx cx = {.backend_spec = env->backend_spec};
    const nv_backend *t = nvw_backend_table(env->b);
    void *ctx = NULL;
    char err[256] = "";
    if (t->open(nvw_backend_options(env->b), &ctx, err, sizeof err) != NV_OK) {
        snprintf(w.msg, sizeof w.msg, "the backend failed to open: %.200s", err);
    } else {
        run_on(env, ctx, in, gy, &cx, &w);
        t->close(ctx);
    }
    w.status = cx.buf ? 0 : 1;
    w.len = cx.buf ? cx.len : 0;
    int r = nvw_write_all(fd, &w, sizeof w);
    if (r == 0 && w.len)
        r = nvw_write_all(fd, cx.buf, w.len);
    free(cx.buf);
    _exit(r == 0 ? 0 : 3);
}

/* Every stored device gradient equal, bit for bit, to the probe's. */
static int same_bits(const nvw_grepro *gr, const nv_artifact *a)
{
    if (gr->n_stored == 0)
        return -1;
    for (int k = 0; k < gr->n_stored; k++) {
        const nvw_gstored *s = &gr->stored[k];
        const nv_artifact_tensor *t = nv_artifact_find(a, s->name);
        if (!t || t->dtype != s->dtype || t->ndim != s->ndim || t->nbytes != s->nbytes ||
            memcmp(t->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim) ||
            memcmp(t->data, s->data, s->nbytes))
            return 0;
    }
    return 1;
}

/* Verdict, class, check, headroom and bits from the probe's artifact. */
static int parse_answer(const nvw_grepro *gr, nvw_gprobe_out *p)
{
    nv_artifact *a = NULL;
    int r = nv_artifact_decode(p->buf, p->len, &a, NULL);
    if (r < 0) {
        snprintf(p->cls, sizeof p->cls, "probe_error");
        snprintf(p->msg, sizeof p->msg, "the probe's artifact does not decode");
        return r == -ENOMEM ? r : 0;
    }
    const json_t *m = a->manifest, *c = json_object_get(m, "case");
    const char *v = json_string_value(json_object_get(c, "verdict"));
    const char *cls = json_string_value(json_object_get(m, "failure_class"));
    const char *check = json_string_value(json_object_get(m, "check"));
    snprintf(p->verdict, sizeof p->verdict, "%s", v ? v : "");
    snprintf(p->cls, sizeof p->cls, "%s", cls ? cls : "");
    snprintf(p->check, sizeof p->check, "%s", check ? check : "");
    const char *key;
    json_t *o;
    json_object_foreach(json_object_get(json_object_get(c, "checks"), "device"), key, o)
    {
        double h = json_number_value(json_object_get(o, "headroom"));
        if (json_is_string(json_object_get(o, "headroom"))) /* "inf" or "nan" */
            h = INFINITY;
        p->headroom = fmax(p->headroom, h);
        p->mismatches += json_integer_value(json_object_get(o, "mismatches"));
        const char *e = json_string_value(json_object_get(o, "error"));
        if (e && !p->msg[0])
            snprintf(p->msg, sizeof p->msg, "%s: %s", key, e);
    }
    p->bits = same_bits(gr, a);
    nv_sha256_hex(p->buf, p->len, p->sha);
    nv_artifact_free(a);
    return 0;
}

/* Parent side: the child's answer, a crash or a hang. */
static int collect(const nvw_genv *env, pid_t pid, int fd, nvw_gprobe_out *p)
{
    int tmo = env->timeout_ms > 0 ? env->timeout_ms : 60000;
    int64_t end = nvw_mono_ms() + tmo;
    wire w;
    int r = nvw_read_all(fd, &w, sizeof w, end);
    if (r == 0 && w.status == 0 && w.len > 0 && w.len < ((uint64_t)1 << 34)) {
        p->buf = malloc(w.len);
        r = p->buf ? nvw_read_all(fd, p->buf, w.len, end) : -ENOMEM;
        p->len = (size_t)w.len;
    }
    if (r == -ETIMEDOUT)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r == -ENOMEM)
        return r;
    if (r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        if (w.status != 0) {
            snprintf(p->cls, sizeof p->cls, "probe_error");
            memcpy(p->msg, w.msg, sizeof p->msg);
            p->msg[sizeof p->msg - 1] = 0;
            return 0;
        }
        return parse_answer(env->gr, p);
    }
    nvw_gprobe_out_done(p);
    nvw_probe_failed(r, st, tmo, p->cls, sizeof p->cls, p->msg, sizeof p->msg);
    return 0;
}

int nvw_gprobe(const nvw_genv *env, nv_tensor *const *in, const nv_tensor *gy, nvw_gprobe_out *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->bits = -1;
    pid_t pid;
    int fd;
    int r = nvw_probe_fork(&pid, &fd);
    if (r < 0)
        return r;
    if (pid == 0)
        child(env, in, gy, fd);
    r = collect(env, pid, fd, ret);
    close(fd);
    return r;
}

bool nvw_gprobe_same(const nvw_grepro *gr, const nvw_gprobe_out *p)
{
    return !strcmp(p->cls, gr->cls) && !strcmp(p->check, gr->check);
}

int nvw_grepro_gate(const nvw_genv *env, int runs, int *ret_failed, int *ret_bits,
                    nvw_gprobe_out *ret_first)
{
    int failed = 0, bits = 0;
    for (int k = 0; k < runs; k++) {
        nvw_gprobe_out p;
        int r = nvw_gprobe(env, env->gr->in, env->gr->gy, &p);
        if (r < 0)
            return r;
        failed += nvw_gprobe_same(env->gr, &p);
        bits += p.bits == 1;
        if (k == 0 && ret_first)
            *ret_first = p;
        else
            nvw_gprobe_out_done(&p);
    }
    *ret_failed = failed;
    *ret_bits = bits;
    return 0;
}
