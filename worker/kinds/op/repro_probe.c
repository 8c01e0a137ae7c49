/* One probe (repro.h): the rebuilt case run on a set of inputs in a forked child,
 * so that a backend that crashes or hangs costs the probe, never the worker. The
 * child lays the inputs out as the case did, calls forward, checks the output,
 * computes the exact reference and compares under the case's tolerance, then
 * sends its verdict and the encoded device output through a pipe. */
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

#include "core/numerics/compare.h"
#include "core/ref/reference.h"
#include "op_internal.h" /* nvw_case_accumulator */
#include "repro.h"
#include "worker/repro/repro_util.h"

#define ERRLEN 256

/* Header the child writes before the output bytes. */
typedef struct wire {
    char cls[NVW_CLASS_MAX];
    char msg[256];
    double max_ulp;
    int64_t mismatches;
    int32_t out_dtype;
    int32_t out_ndim;
    int64_t out_shape[NV_MAX_DIMS];
    uint64_t nbytes;
} wire;

void nvw_probe_out_done(nvw_probe_out *p)
{
    if (!p)
        return;
    free(p->out_bytes);
    p->out_bytes = NULL;
    p->out_nbytes = 0;
}

/* The device layout the case used (worker/kinds/op/case.c make_layout): "transposed" stores
 * the last two dims swapped, "strided" every other element of a 2x storage
 * filled with NaN (or max) so a backend reading the gaps fails. */
static nv_tensor *laid_out(const nv_tensor *src, nv_layout l)
{
    int nd = src->ndim;
    nv_tensor *t = NULL;
    if (l == NV_LAYOUT_TRANSPOSED && nd >= 2) {
        int64_t sh[NV_MAX_DIMS];
        memcpy(sh, src->shape, sizeof sh);
        sh[nd - 2] = src->shape[nd - 1];
        sh[nd - 1] = src->shape[nd - 2];
        if (!(t = nv_tensor_new(src->dtype, nd, sh)))
            return NULL;
        int64_t s = t->strides[nd - 2];
        t->strides[nd - 2] = t->strides[nd - 1];
        t->strides[nd - 1] = s;
        t->shape[nd - 2] = src->shape[nd - 2];
        t->shape[nd - 1] = src->shape[nd - 1];
    } else if (l == NV_LAYOUT_STRIDED && nd >= 1) {
        int64_t len = 2 * src->numel;
        if (!(t = nv_tensor_new(src->dtype, 1, &len)))
            return NULL;
        const nv_dtype_info *di = nv_dtype_get(src->dtype);
        double p = di->is_float ? (di->has_nan ? NAN : di->max_finite)
                                : (di->bits == 8 ? 127 : 2147483647.0);
        for (int64_t i = 0; i < len; i++)
            t->data[i] = p;
        t->ndim = nd;
        for (int d = 0; d < nd; d++) {
            t->shape[d] = src->shape[d];
            t->strides[d] = 2 * src->strides[d];
        }
        t->numel = src->numel;
    } else if (!(t = nv_tensor_new(src->dtype, nd, src->shape))) {
        return NULL;
    }
    for (int64_t k = 0; k < src->numel; k++)
        t->data[nv_tensor_offset_linear(t, k)] = src->data[k];
    return t;
}

/* Encoded row-major copy of a backend output view. */
static int encode_out(const nv_tensor_view *o, wire *w, uint8_t **ret)
{
    int64_t n = 1;
    for (int d = 0; d < o->ndim; d++)
        n *= o->shape[d];
    size_t es = nv_dtype_get((nv_dtype)o->dtype)->storage_bytes;
    uint8_t *buf = malloc(n > 0 && es > 0 ? (size_t)n * es : 1);
    if (!buf)
        return -ENOMEM;
    int64_t idx[NV_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < o->ndim; d++)
            off += idx[d] * o->strides[d];
        nv_dtype_store_bits((nv_dtype)o->dtype, buf, i,
                            nv_dtype_load_bits((nv_dtype)o->dtype, o->data, off));
        for (int d = o->ndim - 1; d >= 0 && ++idx[d] == o->shape[d]; d--)
            idx[d] = 0;
    }
    w->out_dtype = o->dtype;
    w->out_ndim = o->ndim;
    memcpy(w->out_shape, o->shape, sizeof w->out_shape);
    w->nbytes = (uint64_t)n * es;
    *ret = buf;
    return 0;
}

static void set_cls(wire *w, const char *cls, const char *msg)
{
    snprintf(w->cls, sizeof w->cls, "%s", cls);
    snprintf(w->msg, sizeof w->msg, "%s", msg ? msg : "");
}

/* Reference and comparison of a decoded output; sets w->cls. */
static int judge(const nvw_repro *rc, nv_tensor *const *in, const nv_tensor *got, int od,
                 const int64_t *os, wire *w)
{
    const nv_op_def *op = rc->js->op;
    nv_tensor *hi = nv_tensor_new(rc->out_dt, od, os), *lo = nv_tensor_new(rc->out_dt, od, os);
    nv_tensor *abs = nv_tensor_new(NV_DT_FP64, od, os);
    nv_tensor *abs_exp = nv_tensor_new(NV_DT_FP64, od, os),
              *peak = nv_tensor_new(NV_DT_FP64, od, os);
    int r = -ENOMEM;
    if (!hi || !lo || !abs || !abs_exp || !peak)
        goto out;
    /* Judged as the case was (case.c compare_case): the wide abs_sum, and the
     * intermediate-overflow rule with the accumulator of the manifest's contract. */
    nv_ref_out ro = {.hi = hi, .lo = lo, .abs_sum = abs, .abs_exp = abs_exp, .peak = peak};
    r = nv_op_reference_ex(op, &rc->js->attrs, rc->n_in, (const nv_tensor *const *)in, &ro);
    if (r < 0) {
        set_cls(w, "probe_error", "the reference failed");
        r = 0;
        goto out;
    }
    /* a selection's justified indices count as exact, as in compare_case */
    bool select = op->kind == NV_OPK_SELECT;
    double *g = select ? malloc((size_t)(got->numel > 0 ? got->numel : 1) * sizeof *g) : NULL;
    if (select && !g) {
        r = -ENOMEM;
        goto out;
    }
    if (select) {
        memcpy(g, got->data, (size_t)got->numel * sizeof *g);
        nv_select_justify(g, hi->data, lo->data, got->numel);
    }
    nv_compare_input ci = {
        .dtype = rc->out_dt,
        .n = got->numel,
        .got = select ? g : got->data,
        .exact = hi->data,
        .exact_lo = select ? NULL : lo->data,
        .abs_sum = abs->data,
        .reduction_len =
            nv_op_reduction_len(op, &rc->js->attrs, rc->n_in, (const nv_tensor *const *)in),
        .zero_sign = nv_op_zero_sign_judged(op),
        .abs_exp = abs_exp->data,
    };
    if (nv_op_accumulates(op)) {
        nvw_accumulator acc;
        nvw_case_accumulator(json_object_get(rc->manifest, "contract"), rc->js, rc->dtype,
                             rc->out_dt, &acc);
        ci.peak = peak->data;
        ci.acc_dtype = acc.dtype;
        ci.acc_range = acc.range;
    }
    nv_compare_result cmp;
    int cr = nv_compare(&ci, &rc->tol, &cmp);
    free(g);
    if (cr < 0) {
        set_cls(w, "probe_error", "the tolerance does not apply to the op");
        r = 0;
        goto out;
    }
    w->max_ulp = cmp.max_ulp;
    w->mismatches = cmp.mismatches;
    if (cmp.failure != NV_FAIL_NONE || cmp.mismatches > 0)
        set_cls(w, nv_failure_class_name(cmp.failure), NULL);
    r = 0;
out:
    nv_tensor_free(hi);
    nv_tensor_free(lo);
    nv_tensor_free(abs);
    nv_tensor_free(abs_exp);
    nv_tensor_free(peak);
    return r;
}

static bool same_view_bits(const nv_tensor_view *o, const uint8_t *bytes, size_t nbytes)
{
    wire w;
    uint8_t *b = NULL;
    if (encode_out(o, &w, &b) < 0)
        return false;
    bool same = w.nbytes == nbytes && memcmp(b, bytes, nbytes) == 0;
    free(b);
    return same;
}

/* Forward calls and checks on an open context. */
static int run_forward(const nvw_probe_env *env, void *ctx, nv_tensor_view *views,
                       nv_tensor *const *in, wire *w, uint8_t **ret_bytes)
{
    const nvw_repro *rc = env->rc;
    char err[ERRLEN] = "";
    int od;
    int64_t os[NV_MAX_DIMS];
    if (nv_op_infer(rc->js->op, &rc->js->attrs, rc->n_in, (const nv_tensor *const *)in, &od, os,
                    err, sizeof err) != 0) {
        set_cls(w, "probe_error", err);
        return 0;
    }
    int same = 1;
    for (int k = 0; k < rc->repeat; k++) {
        nv_tensor_view out = {0};
        nv_op_call call = {.op = rc->js->op->name,
                           .attrs_json = rc->js->attrs_json,
                           .out_dtype = (int32_t)rc->out_dt,
                           .n_inputs = rc->n_in,
                           .inputs = views,
                           .n_outputs = 1,
                           .outputs = &out};
        err[0] = 0;
        int r = env->table->forward(ctx, &call, err, ERRLEN);
        if (r != NV_OK) {
            set_cls(w, "backend_error", err);
            return 0;
        }
        bool shape_ok = call.n_outputs == 1 && out.data && out.ndim == od;
        for (int d = 0; shape_ok && d < od; d++)
            shape_ok = out.shape[d] == os[d];
        if (!shape_ok || out.dtype != (int32_t)rc->out_dt) {
            set_cls(w, "bad_output", "output count, dtype or shape differs from the catalog's");
        } else if (k == 0) {
            if (encode_out(&out, w, ret_bytes) < 0)
                return -ENOMEM;
        } else if (!same_view_bits(&out, *ret_bytes, w->nbytes)) {
            same = 0;
        }
        if (out.data && env->table->release_tensor)
            env->table->release_tensor(ctx, &out);
        if (w->cls[0])
            return 0;
    }
    nv_tensor_view enc = {.dtype = w->out_dtype, .ndim = w->out_ndim, .data = *ret_bytes};
    memcpy(enc.shape, w->out_shape, sizeof enc.shape);
    int64_t stride = 1;
    for (int d = od - 1; d >= 0; d--) {
        enc.strides[d] = stride;
        stride *= os[d];
    }
    nv_tensor *got = nvw_tensor_from_view(&enc, false);
    if (!got)
        return -ENOMEM;
    int r = judge(rc, in, got, od, os, w);
    nv_tensor_free(got);
    if (r == 0 && !w->cls[0] && !same)
        set_cls(w, "nondeterministic", "repeated runs gave different bits");
    return r;
}

/* The probe body (in the child, or inline when not isolating). */
static int probe_inline(const nvw_probe_env *env, nv_tensor *const *in, wire *w,
                        uint8_t **ret_bytes)
{
    const nvw_repro *rc = env->rc;
    const nv_op_def *op = rc->js->op;
    nv_tensor_view views[NV_JOB_MAX_TENSORS];
    int n_views = 0, r = 0;
    for (; n_views < rc->n_in; n_views++) {
        bool plain = n_views < op->n_inputs && !op->inputs[n_views].is_index;
        nv_tensor *t = laid_out(in[n_views], plain ? rc->layout : NV_LAYOUT_CONTIGUOUS);
        r = t ? nvw_view_from_tensor(t, &views[n_views]) : -ENOMEM;
        nv_tensor_free(t);
        if (r < 0)
            goto out;
    }
    void *ctx = NULL;
    char err[ERRLEN] = "";
    if (env->table->open(env->options, &ctx, err, sizeof err) != NV_OK) {
        set_cls(w, "probe_error", err);
        goto out;
    }
    r = run_forward(env, ctx, views, in, w, ret_bytes);
    env->table->close(ctx);
out:
    for (int k = 0; k < n_views; k++)
        nvw_view_free(&views[k]);
    return r;
}

static void child(const nvw_probe_env *env, nv_tensor *const *in, int fd)
{
    wire w;
    memset(&w, 0, sizeof w);
    uint8_t *bytes = NULL;
    if (probe_inline(env, in, &w, &bytes) < 0)
        set_cls(&w, "probe_error", "out of memory in the probe");
    if (!bytes)
        w.nbytes = 0;
    int r = nvw_write_all(fd, &w, sizeof w);
    if (r == 0 && w.nbytes)
        r = nvw_write_all(fd, bytes, w.nbytes);
    _exit(r == 0 ? 0 : 3);
}

static void from_wire(const wire *w, uint8_t *bytes, nvw_probe_out *ret)
{
    memset(ret, 0, sizeof *ret);
    memcpy(ret->cls, w->cls, sizeof ret->cls);
    ret->cls[sizeof ret->cls - 1] = 0;
    memcpy(ret->msg, w->msg, sizeof ret->msg);
    ret->msg[sizeof ret->msg - 1] = 0;
    ret->max_ulp = w->max_ulp;
    ret->mismatches = w->mismatches;
    ret->out_dtype = w->out_dtype;
    ret->out_ndim = w->out_ndim;
    memcpy(ret->out_shape, w->out_shape, sizeof ret->out_shape);
    ret->out_bytes = bytes;
    ret->out_nbytes = bytes ? w->nbytes : 0;
}

/* Parent side: read the child's answer, reap it, name a crash or a hang. */
static int collect(pid_t pid, int fd, int timeout_ms, nvw_probe_out *ret)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_ms;
    wire w;
    uint8_t *bytes = NULL;
    int r = nvw_read_all(fd, &w, sizeof w, deadline);
    if (r == 0 && w.nbytes > 0 && w.nbytes < ((uint64_t)1 << 34)) {
        bytes = malloc(w.nbytes);
        r = bytes ? nvw_read_all(fd, bytes, w.nbytes, deadline) : -ENOMEM;
    }
    if (r == -ETIMEDOUT)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (r == -ENOMEM) {
        free(bytes);
        return r;
    }
    if (r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        from_wire(&w, bytes, ret);
        return 0;
    }
    free(bytes);
    memset(ret, 0, sizeof *ret);
    nvw_probe_failed(r, status, timeout_ms, ret->cls, sizeof ret->cls, ret->msg, sizeof ret->msg);
    return 0;
}

int nvw_probe(const nvw_probe_env *env, nv_tensor *const *in, nvw_probe_out *ret)
{
    if (!env->isolate) {
        wire w;
        memset(&w, 0, sizeof w);
        uint8_t *bytes = NULL;
        int r = probe_inline(env, in, &w, &bytes);
        if (r < 0) {
            free(bytes);
            return r;
        }
        from_wire(&w, bytes, ret);
        return 0;
    }
    pid_t pid;
    int fd;
    int r = nvw_probe_fork(&pid, &fd);
    if (r < 0)
        return r;
    if (pid == 0)
        child(env, in, fd);
    r = collect(pid, fd, env->timeout_ms > 0 ? env->timeout_ms : 60000, ret);
    close(fd);
    return r;
}

bool nvw_probe_same_output(const nvw_repro *rc, const nvw_probe_out *p)
{
    if (!p->out_bytes || p->out_dtype != rc->out_dtype || p->out_ndim != rc->out_ndim ||
        p->out_nbytes != rc->out_nbytes)
        return false;
    for (int d = 0; d < rc->out_ndim; d++)
        if (p->out_shape[d] != rc->out_shape[d])
            return false;
    return memcmp(p->out_bytes, rc->out_bytes, rc->out_nbytes) == 0;
}

int nvw_repro_gate(const nvw_probe_env *env, int runs, int *ret_failed, int *ret_bits,
                   nvw_probe_out *ret_first)
{
    int failed = 0, bits = 0;
    for (int k = 0; k < runs; k++) {
        nvw_probe_out p;
        int r = nvw_probe(env, env->rc->in, &p);
        if (r < 0)
            return r;
        failed += strcmp(p.cls, env->rc->failure_class) == 0;
        bits += nvw_probe_same_output(env->rc, &p);
        if (k == 0 && ret_first)
            *ret_first = p;
        else
            nvw_probe_out_done(&p);
    }
    *ret_failed = failed;
    *ret_bits = bits;
    return 0;
}
