/* The exec backend (docs/EXEC_PROTOCOL.md). Every failure of the harness process
 * becomes an NV_E_DEVICE error of the call, with the harness's stderr tail, and the
 * process is killed so the next call starts a fresh one: a broken harness costs a
 * case, never the worker. */
#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/numerics/dtype.h"
#include "exec_internal.h"

static bool view_contiguous(const nv_tensor_view *v)
{
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        if (v->shape[d] != 1 && v->strides[d] != want)
            return false;
        want *= v->shape[d];
    }
    return true;
}

/* Contiguous little-endian bytes of a (possibly strided) view: *ret_data points at
 * the view's own memory when it is already contiguous (*ret_copy NULL), else at a
 * malloc'd copy (*ret_copy, to free). Returns 0 or -1 (bad dtype, no memory). */
static int gather(const nv_tensor_view *v, const uint8_t **ret_data, uint8_t **ret_copy,
                  size_t *ret_n)
{
    const nv_dtype_info *info = nv_dtype_get((nv_dtype)v->dtype);
    if (!info || v->ndim < 0 || v->ndim > NV_BACKEND_MAX_DIMS)
        return -1;
    int64_t numel = 1;
    for (int d = 0; d < v->ndim; d++)
        numel *= v->shape[d];
    size_t sz = (size_t)info->storage_bytes;
    *ret_copy = NULL;
    *ret_n = (size_t)numel * sz;
    if (view_contiguous(v)) {
        *ret_data = v->data;
        return 0;
    }
    uint8_t *out = malloc(numel > 0 ? (size_t)numel * sz : 1);
    if (!out)
        return -1;
    int64_t idx[NV_BACKEND_MAX_DIMS] = {0};
    for (int64_t i = 0; i < numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < v->ndim; d++)
            off += idx[d] * v->strides[d];
        memcpy(out + (size_t)i * sz, (const uint8_t *)v->data + off * (int64_t)sz, sz);
        for (int d = v->ndim - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d])
                break;
            idx[d] = 0;
        }
    }
    *ret_data = *ret_copy = out;
    return 0;
}

static json_t *tensor_desc(const char *name, const nv_tensor_view *v, size_t nbytes)
{
    json_t *shape = json_array(), *strides = json_array();
    for (int d = 0; d < v->ndim; d++) {
        json_array_append_new(shape, json_integer(v->shape[d]));
        json_array_append_new(strides, json_integer(v->strides[d]));
    }
    /* The payload is always contiguous; "strides" tells the harness the layout the
     * job asked for (transposed, strided), so it can rebuild it on the device. */
    return json_pack("{s:s, s:s, s:o, s:o, s:I}", "name", name, "dtype",
                     nv_dtype_name((nv_dtype)v->dtype), "shape", shape, "strides", strides,
                     "nbytes", (json_int_t)nbytes);
}

static int error_code(const char *code)
{
    static const struct { const char *name; int code; } map[] = {
        {"invalid", NV_E_INVALID}, {"shape", NV_E_SHAPE}, {"dtype", NV_E_DTYPE},
        {"unsupported", NV_E_UNSUPPORTED}, {"nondeterministic", NV_E_NONDETERMINISTIC},
        {"device", NV_E_DEVICE},
        /* autograd's version-counter refusal: a saved tensor was modified in place */
        {"inplace_modified", NV_E_INVALID}};
    for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(code, map[i].name) == 0)
            return map[i].code;
    return NV_E_DEVICE;
}

static void *spare_take(exec_ctx *c, size_t n)
{
    for (int i = 0; i < EXEC_SPARES; i++) {
        if (c->spare[i] && c->spare_len[i] >= n) {
            void *p = c->spare[i];
            c->spare[i] = NULL;
            return p;
        }
    }
    return malloc(n);
}

/* Keep a released buffer (replacing the smallest spare) or free it. Buffers are
 * tracked by size so a spare is only reused for a tensor it can hold. */
static void spare_put(exec_ctx *c, void *p, size_t n)
{
    int slot = -1;
    for (int i = 0; i < EXEC_SPARES; i++) {
        if (!c->spare[i]) {
            slot = i;
            break;
        }
        if (c->spare_len[i] < n && (slot < 0 || c->spare_len[i] < c->spare_len[slot]))
            slot = i;
    }
    if (slot < 0) {
        free(p);
        return;
    }
    free(c->spare[slot]);
    c->spare[slot] = p;
    c->spare_len[slot] = n;
}

/* Decode the reply's tensors into backend-owned views. */
static int read_outputs(exec_ctx *c, json_t *tensors, nv_tensor_view *outs, int n_outs,
                        int64_t deadline, char *err, size_t errlen)
{
    if (!json_is_array(tensors) || (int)json_array_size(tensors) != n_outs) {
        exec_fail(c, err, errlen, "reply carries %d tensors, %d expected",
             json_is_array(tensors) ? (int)json_array_size(tensors) : -1, n_outs);
        return NV_E_DEVICE;
    }
    for (int i = 0; i < n_outs; i++) {
        json_t *t = json_array_get(tensors, (size_t)i), *shape = json_object_get(t, "shape");
        nv_dtype dt;
        nv_tensor_view *v = &outs[i];
        memset(v, 0, sizeof(*v));
        if (nv_dtype_from_name(json_string_value(json_object_get(t, "dtype")), &dt) < 0 ||
            !json_is_array(shape) || json_array_size(shape) > NV_BACKEND_MAX_DIMS) {
            exec_fail(c, err, errlen, "reply tensor %d has a bad dtype or shape", i);
            return NV_E_DEVICE;
        }
        int64_t numel = 1;
        v->dtype = (int32_t)dt;
        v->ndim = (int32_t)json_array_size(shape);
        for (int d = v->ndim - 1; d >= 0; d--) {
            json_t *e = json_array_get(shape, (size_t)d);
            v->shape[d] = json_integer_value(e);
            if (!json_is_integer(e) || v->shape[d] < 0 || v->shape[d] > PAYLOAD_MAX) {
                exec_fail(c, err, errlen, "reply tensor %d has a bad extent", i);
                return NV_E_DEVICE;
            }
            v->strides[d] = numel;
            /* Checked: extents up to 2^32 each overflow int64_t in two dims
             * (saturated, the count is refused below unless an extent is 0). */
            if (__builtin_mul_overflow(numel, v->shape[d], &numel))
                numel = INT64_MAX;
        }
        int64_t nbytes = numel <= PAYLOAD_MAX ? numel * nv_dtype_get(dt)->storage_bytes : -1;
        if (nbytes < 0 || json_integer_value(json_object_get(t, "nbytes")) != nbytes) {
            exec_fail(c, err, errlen, "reply tensor %d: nbytes disagrees with dtype and shape", i);
            return NV_E_DEVICE;
        }
        v->data = spare_take(c, nbytes > 0 ? (size_t)nbytes : 1);
        if (!v->data)
            return NV_E_NOMEM;
        int r = exec_read_exact(c, v->data, (size_t)nbytes, deadline);
        if (r < 0) {
            exec_fail(c, err, errlen, "reading tensor %d: %s", i, exec_io_what(r));
            return NV_E_DEVICE;
        }
    }
    return NV_OK;
}

static void free_outputs(nv_tensor_view *outs, int n_outs)
{
    for (int i = 0; i < n_outs; i++) {
        free(outs[i].data);
        outs[i].data = NULL;
    }
}

/* Read the reply to request id: its header line, then (status "ok") the
 * payloads into outs. NV_OK, the harness's error code, NV_E_DEVICE (a garbled
 * or short reply) or NV_E_NOMEM; outs may hold buffers on failure. */
static int read_reply(exec_ctx *c, uint64_t id, nv_tensor_view *outs, int n_outs, int64_t deadline,
                      int32_t *ret_fell_back, char *err, size_t errlen)
{
    char *line = NULL;
    int io = exec_read_line(c, &line, deadline);
    if (io < 0) {
        exec_fail(c, err, errlen, "%s", exec_io_what(io));
        return NV_E_DEVICE;
    }
    int r;
    json_error_t jerr;
    json_t *reply = json_loads(line, 0, &jerr);
    const char *type = json_string_value(json_object_get(reply, "type"));
    const char *status = json_string_value(json_object_get(reply, "status"));
    if (!reply || !type || strcmp(type, "result") != 0 || !status ||
        json_integer_value(json_object_get(reply, "id")) != (json_int_t)id) {
        exec_fail(c, err, errlen, "garbled reply to request %llu: '%.160s'", (unsigned long long)id,
             line);
        r = NV_E_DEVICE;
    } else if (strcmp(status, "ok") != 0) {
        const char *msg = json_string_value(json_object_get(reply, "message"));
        snprintf(err, errlen, "%s", msg ? msg : "the harness refused the call");
        r = error_code(json_string_value(json_object_get(reply, "code")));
        json_t *t = json_object_get(reply, "tensors");
        if (json_array_size(t) > 0) { /* an error reply carries no payload by protocol */
            exec_fail(c, err, errlen, "error reply with tensors");
            r = NV_E_DEVICE;
        }
    } else {
        r = read_outputs(c, json_object_get(reply, "tensors"), outs, n_outs, deadline, err, errlen);
        json_decref(c->reply_info); /* an optional request's "info" (exec_train.c) */
        c->reply_info = json_incref(json_object_get(reply, "info"));
        if (r == NV_OK && ret_fell_back)
            *ret_fell_back = json_is_true(json_object_get(reply, "fallback"));
        json_t *comp = json_object_get(reply, "compiled");
        free(c->compiled);
        c->compiled = json_is_object(comp) ? json_dumps(comp, JSON_COMPACT) : NULL;
    }
    free(line);
    json_decref(reply);
    return r;
}

/* Send one request (hdr gets "id" and "tensors") and read its reply into outs.
 * Any conversation failure kills the harness so the next call starts afresh. */
int exec_transact(exec_ctx *c, json_t *hdr, const nv_tensor_view *const *ins, int n_ins,
                    nv_tensor_view *outs, int n_outs, int32_t *ret_fell_back, char *err,
                    size_t errlen)
{
    int r = NV_OK;
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    uint64_t id = ++c->next_id;
    json_t *descs = json_array();
    uint8_t **bufs = calloc((size_t)n_ins + 1, sizeof(*bufs));
    const uint8_t **data = calloc((size_t)n_ins + 1, sizeof(*data));
    size_t *lens = calloc((size_t)n_ins + 1, sizeof(*lens));
    char *head = NULL;
    if (!descs || !bufs || !data || !lens) {
        r = NV_E_NOMEM;
        goto out;
    }
    for (int i = 0; i < n_ins; i++) {
        char name[32];
        snprintf(name, sizeof(name), "input:%d", i);
        if (gather(ins[i], &data[i], &bufs[i], &lens[i]) < 0) {
            snprintf(err, errlen, "input %d: unknown dtype or out of memory", i);
            r = NV_E_INVALID;
            goto out;
        }
        json_array_append_new(descs, tensor_desc(name, ins[i], lens[i]));
    }
    json_object_set_new(hdr, "id", json_integer((json_int_t)id));
    json_object_set(hdr, "tensors", descs);
    head = json_dumps(hdr, JSON_COMPACT);
    if (!head) {
        r = NV_E_NOMEM;
        goto out;
    }
    int64_t deadline = exec_now_ms() + c->timeout_ms;
    int io = exec_write_all(c, head, strlen(head), deadline);
    io = io < 0 ? io : exec_write_all(c, "\n", 1, deadline);
    for (int i = 0; io == 0 && i < n_ins; i++)
        io = exec_write_all(c, data[i], lens[i], deadline);
    if (io < 0) {
        exec_fail(c, err, errlen, "%s", exec_io_what(io));
        r = NV_E_DEVICE;
        goto out;
    }
    r = read_reply(c, id, outs, n_outs, deadline, ret_fell_back, err, errlen);
out:
    if (r == NV_E_DEVICE || r == NV_E_NOMEM) {
        free_outputs(outs, n_outs);
        exec_harness_kill(c);
    }
    for (int i = 0; bufs && i < n_ins; i++)
        free(bufs[i]);
    free(bufs);
    free(data);
    free(lens);
    free(head);
    json_decref(descs);
    return r;
}

int nvw_exec_read_reply(int fd, uint64_t id, nv_tensor_view *outs, int n_outs, int timeout_ms,
                        char *err, size_t errlen)
{
    exec_ctx c = {.command = "(reply reader)",
                  .pid = -1,
                  .to_fd = -1,
                  .from_fd = fd,
                  .err_fd = -1,
                  .rbuf = malloc(LINE_MAX_BYTES + 1)};
    if (!c.rbuf)
        return NV_E_NOMEM;
    int r = read_reply(&c, id, outs, n_outs, exec_now_ms() + timeout_ms, NULL, err, errlen);
    if (r == NV_E_DEVICE || r == NV_E_NOMEM)
        free_outputs(outs, n_outs);
    free(c.rbuf);
    return r;
}

static int attrs_into(json_t *hdr, const char *attrs_json, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *attrs = json_loads(attrs_json ? attrs_json : "{}", 0, &jerr);
    if (!json_is_object(attrs)) {
        json_decref(attrs);
        snprintf(err, errlen, "attrs are not a JSON object: '%.120s'", attrs_json);
        return NV_E_INVALID;
    }
    json_object_set_new(hdr, "attrs", attrs);
    return NV_OK;
}

static int exec_forward(void *ctx, nv_op_call *call, char *err, size_t errlen)
{
    exec_ctx *c = ctx;
    const nv_tensor_view *ins[16];
    if (call->n_inputs < 0 || call->n_inputs > 16)
        return snprintf(err, errlen, "%d inputs", call->n_inputs), NV_E_INVALID;
    for (int i = 0; i < call->n_inputs; i++)
        ins[i] = &call->inputs[i];
    json_t *hdr = json_pack("{s:s, s:s, s:s}", "type", "forward", "op", call->op, "out_dtype",
                            nv_dtype_name((nv_dtype)call->out_dtype));
    int r = hdr ? attrs_into(hdr, call->attrs_json, err, errlen) : NV_E_NOMEM;
    if (r == NV_OK)
        r = exec_transact(c, hdr, ins, call->n_inputs, call->outputs, call->n_outputs,
                     &call->fell_back, err, errlen);
    json_decref(hdr);
    return r;
}

static int exec_backward(void *ctx, nv_backward_call *call, char *err, size_t errlen)
{
    exec_ctx *c = ctx;
    const nv_tensor_view *ins[33];
    int n = 0;
    if (call->n_inputs < 0 || call->n_saved < 0 || call->n_inputs + call->n_saved > 32)
        return snprintf(err, errlen, "too many tensors"), NV_E_INVALID;
    for (int i = 0; i < call->n_inputs; i++)
        ins[n++] = &call->inputs[i];
    for (int i = 0; i < call->n_saved; i++)
        ins[n++] = &call->saved[i];
    ins[n++] = call->grad_output;
    json_t *hdr = json_pack("{s:s, s:s, s:i, s:i}", "type", "backward", "op", call->op,
                            "n_inputs", call->n_inputs, "n_saved", call->n_saved);
    int r = hdr ? attrs_into(hdr, call->attrs_json, err, errlen) : NV_E_NOMEM;
    if (r == NV_OK)
        r = exec_transact(c, hdr, ins, n, call->grad_inputs, call->n_grads, NULL, err, errlen);
    json_decref(hdr);
    return r;
}

/* Protocol 2: inputs, saved, grad_output, then one direction per gradient. */
static int exec_double_backward(void *ctx, nv_double_backward_call *call, char *err, size_t errlen)
{
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    if (c->protocol < 2)
        return snprintf(err, errlen,
                        "not offered: harness '%s' speaks exec protocol %d; double_backward "
                        "needs protocol 2",
                        c->command, c->protocol),
               NV_E_UNSUPPORTED;
    const nv_tensor_view *ins[49];
    int n = 0;
    if (call->n_inputs < 0 || call->n_saved < 0 || call->n_grads < 0 ||
        call->n_inputs + call->n_saved + call->n_grads > 48)
        return snprintf(err, errlen, "too many tensors"), NV_E_INVALID;
    for (int i = 0; i < call->n_inputs; i++)
        ins[n++] = &call->inputs[i];
    for (int i = 0; i < call->n_saved; i++)
        ins[n++] = &call->saved[i];
    ins[n++] = call->grad_output;
    for (int i = 0; i < call->n_grads; i++)
        ins[n++] = &call->grad_grads[i];
    json_t *hdr =
        json_pack("{s:s, s:s, s:i, s:i, s:i}", "type", "double_backward", "op", call->op,
                  "n_inputs", call->n_inputs, "n_saved", call->n_saved, "n_grads", call->n_grads);
    r = hdr ? attrs_into(hdr, call->attrs_json, err, errlen) : NV_E_NOMEM;
    if (r == NV_OK)
        r = exec_transact(c, hdr, ins, n, call->grad_inputs, call->n_grads, NULL, err, errlen);
    json_decref(hdr);
    return r;
}

bool exec_offers(const exec_ctx *c, const char *request)
{
    json_error_t jerr;
    json_t *d = json_loads(c->describe ? c->describe : "", 0, &jerr);
    json_t *reqs = json_object_get(d, "requests"), *v;
    bool found = false;
    size_t i;
    json_array_foreach(reqs, i, v)
    {
        const char *name = json_string_value(v);
        found = found || (name && !strcmp(name, request));
    }
    json_decref(d);
    return found;
}

int nvw_exec_graph(void *ctx, nv_graph_call *call, const char *options_json, char **ret_compiled,
                   char *err, size_t errlen)
{
    exec_ctx *c = ctx;
    int r = NV_OK;
    if (ret_compiled)
        *ret_compiled = NULL;
    if (c->pid < 0 && (r = exec_harness_start(c, err, errlen)) != NV_OK)
        return r;
    if (!exec_offers(c, "graph"))
        return snprintf(err, errlen,
                        "not offered: harness '%s' does not list the optional request 'graph' in "
                        "its hello (describe \"requests\", docs/EXEC_PROTOCOL.md \"Optional "
                        "requests\")",
                        c->command),
               NV_E_UNSUPPORTED;
    if (call->n_inputs < 0 || call->n_inputs > 64 || call->n_outputs < 0)
        return snprintf(err, errlen, "%d inputs, %d outputs", call->n_inputs, call->n_outputs),
               NV_E_INVALID;
    json_error_t jerr;
    json_t *graph = json_loads(call->graph_json ? call->graph_json : "", 0, &jerr);
    json_t *opts = json_loads(options_json ? options_json : "{}", 0, &jerr);
    if (!json_is_object(graph) || !json_is_object(opts)) {
        json_decref(graph);
        json_decref(opts);
        return snprintf(err, errlen, "the graph or its options are not a JSON object"),
               NV_E_INVALID;
    }
    json_t *hdr = json_pack("{s:s, s:o, s:b, s:o}", "type", "graph", "graph", graph, "capture",
                            call->capture != 0, "options", opts);
    const nv_tensor_view *ins[64];
    for (int i = 0; i < call->n_inputs; i++)
        ins[i] = &call->inputs[i];
    r = hdr ? exec_transact(c, hdr, ins, call->n_inputs, call->outputs, call->n_outputs, NULL, err,
                       errlen)
            : NV_E_NOMEM;
    json_decref(hdr);
    if (r == NV_OK && ret_compiled) {
        *ret_compiled = c->compiled;
        c->compiled = NULL;
    }
    return r;
}

/* Idle harnesses kept for the next open() with the same command: starting a
 * harness (importing PyTorch) costs seconds, and the runner opens one context per
 * thread per job. At process exit their stdin closes and they exit on EOF. */
#define POOL_MAX 16
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static exec_ctx *pool[POOL_MAX];

static exec_ctx *pool_take(const char *command)
{
    exec_ctx *c = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_MAX && !c; i++) {
        if (pool[i] && strcmp(pool[i]->command, command) == 0) {
            c = pool[i];
            pool[i] = NULL;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return c;
}

static bool pool_put(exec_ctx *c)
{
    bool kept = false;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < POOL_MAX && !kept; i++) {
        if (!pool[i]) {
            pool[i] = c;
            kept = true;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return kept;
}

static void exec_close(void *ctx)
{
    exec_ctx *c = ctx;
    if (!c)
        return;
    if (c->pid > 0 && waitpid(c->pid, NULL, WNOHANG) == 0 && pool_put(c))
        return;
    if (c->pid > 0) {
        /* A polite goodbye; the harness gets a moment to exit before the kill. */
        static const char bye[] = "{\"type\":\"bye\"}\n";
        if (exec_write_all(c, bye, sizeof(bye) - 1, exec_now_ms() + 200) == 0) {
            for (int i = 0; i < 50 && waitpid(c->pid, NULL, WNOHANG) == 0; i++)
                usleep(10000);
        }
    }
    exec_harness_kill(c);
    if (c->err_fd >= 0)
        close(c->err_fd);
    for (int i = 0; i < EXEC_SPARES; i++)
        free(c->spare[i]);
    free(c->command);
    free(c->describe);
    free(c->compiled);
    free(c->rbuf);
    json_decref(c->reply_info);
    free(c);
}

static int exec_open(const char *options, void **ret_ctx, char *err, size_t errlen)
{
    if (!options || !*options)
        return snprintf(err, errlen, "exec backend needs a command: 'exec:COMMAND'"),
               NV_E_INVALID;
    exec_ctx *c = pool_take(options);
    if (c) {
        *ret_ctx = c;
        return NV_OK;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        return NV_E_NOMEM;
    c->pid = -1;
    c->to_fd = c->from_fd = -1;
    c->command = strdup(options);
    c->rbuf = malloc(LINE_MAX_BYTES + 1);
    const char *t = getenv("NUMVAL_EXEC_TIMEOUT");
    c->timeout_ms = t && atoi(t) > 0 ? atoi(t) * 1000 : 60000;
    const char *st = getenv("NUMVAL_EXEC_START_TIMEOUT");
    c->start_timeout_ms = st && atoi(st) > 0 ? atoi(st) * 1000 : 300000;
    if (c->start_timeout_ms < c->timeout_ms)
        c->start_timeout_ms = c->timeout_ms;
    char path[] = "/tmp/numval-exec-stderr-XXXXXX";
    c->err_fd = mkostemp(path, O_CLOEXEC);
    if (c->err_fd >= 0)
        unlink(path);
    if (!c->command || !c->rbuf || c->err_fd < 0) {
        exec_close(c);
        return snprintf(err, errlen, "exec backend: out of memory or no temp file"),
               NV_E_NOMEM;
    }
    /* Writing to a harness that died must be an error of the call, not a SIGPIPE
     * that kills the worker. */
    signal(SIGPIPE, SIG_IGN);
    int r = exec_harness_start(c, err, errlen);
    if (r != NV_OK) {
        exec_close(c);
        return r;
    }
    *ret_ctx = c;
    return NV_OK;
}

static const char *exec_describe(void *ctx)
{
    return ((exec_ctx *)ctx)->describe;
}

static void exec_release(void *ctx, nv_tensor_view *t)
{
    exec_ctx *c = ctx;
    if (!t->data)
        return;
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= t->shape[d];
    const nv_dtype_info *info = nv_dtype_get((nv_dtype)t->dtype);
    size_t n = info && numel > 0 ? (size_t)numel * (size_t)info->storage_bytes : 1;
    spare_put(c, t->data, n);
    t->data = NULL;
}

static const nv_backend exec_table = {
    .abi_version = NV_BACKEND_ABI_VERSION,
    .struct_size = sizeof(nv_backend),
    .name = "exec",
    .open = exec_open,
    .close = exec_close,
    .describe = exec_describe,
    .forward = exec_forward,
    .backward = exec_backward,
    /* No graph entry in the table: the graph request is optional and only the
     * model kind sends it (nvw_exec_graph); fused jobs on exec stay refused. */
    .graph = NULL,
    .release_tensor = exec_release,
    .double_backward = exec_double_backward,
    .train = exec_train, /* exec_train.c: an optional request */
    .rng = exec_rng,     /* exec_rng.c: an optional request */
    .configure = exec_configure, /* exec_configure.c: an optional request */
};

const nv_backend *nvw_exec_table(void)
{
    return &exec_table;
}
