/* One probe of a fused failure (repro_fused.h nvw_fprobe_run): the (sub)graph
 * run on given inputs in a forked child, so that a backend that crashes or
 * hangs costs the probe, never the worker. The child answers with one JSON
 * object through a pipe. */
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

#include "repro_fused.h"
#include "sub.h"
#include "worker/repro/artifact.h"
#include "worker/repro/repro_util.h"

typedef struct child_ctx {
    const nvw_frepro *fr;
    bool stored;
    const char *artifact_path;
    const json_t *extra;
    int bits;
    char sha[65];
} child_ctx;

static bool same_values(const nv_tensor *a, const nv_tensor *b)
{
    if (!a || !b || a->dtype != b->dtype || a->numel != b->numel)
        return false;
    for (int64_t k = 0; k < a->numel; k++)
        if (!(a->data[k] == b->data[k] || (isnan(a->data[k]) && isnan(b->data[k]))) ||
            signbit(a->data[k]) != signbit(b->data[k]))
            return false;
    return true;
}

/* Every node's value of the judged execution against the stored one (the
 * stored graph only). */
static int compare_stored(const nvw_frepro *fr, const nvw_failure *f)
{
    int seen = 0;
    size_t pl = strlen(fr->stored);
    for (int i = 0; i < f->n_tensors; i++) {
        if (strncmp(f->names[i], fr->stored, pl))
            continue;
        int id = nv_graph_lookup(fr->g, f->names[i] + pl);
        if (id < 0 || !same_values(f->tensors[i], fr->fus[id]))
            return 0;
        seen++;
    }
    return seen == fr->g->n_nodes;
}

static int write_artifact(child_ctx *cx, const nvw_failure *f)
{
    json_t *m = json_deep_copy(f->manifest);
    if (!m || (cx->extra && json_object_update(m, (json_t *)cx->extra))) {
        json_decref(m);
        return -ENOMEM;
    }
    nvw_failure g = *f;
    g.manifest = m;
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = nvw_failure_artifact(&g, NULL, &buf, &len, cx->sha);

    json_decref(m);
    if (r < 0)
        return r;
    FILE *fp = fopen(cx->artifact_path, "wb");
    r = fp && fwrite(buf, 1, len, fp) == len ? 0 : -EIO;
    if (fp && fclose(fp) != 0)
        r = -EIO;
    free(buf);
    if (r < 0)
        cx->sha[0] = 0;
    return r;
}

static int on_failure(void *ud, const nvw_failure *f, char **ret_id)
{
    (void)ret_id;
    child_ctx *cx = ud;
    if (cx->stored)
        cx->bits = compare_stored(cx->fr, f);
    return cx->artifact_path ? write_artifact(cx, f) : 0;
}

/* A string member of o, or "" (o may be NULL). */
static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static void child(const nvw_frepro *fr, const nvw_backend *b, const json_t *spec,
                  nv_tensor *const *in, int n, bool stored, const char *path, const json_t *extra,
                  int fd)
{
    child_ctx cx = {.fr = fr, .stored = stored, .artifact_path = path, .extra = extra, .bits = -1};
    json_t *c = NULL;
    char *err = NULL;
    int r = nvw_fused_run_given(spec, fr->backend, nvw_backend_table(b), nvw_backend_options(b), in,
                                n, on_failure, &cx, &c, NULL, &err);
    const json_t *fdv = json_object_get(c, "first_divergent");
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:f, s:i, s:s, s:s}", "verdict", r < 0 ? "" : str(c, "verdict"),
        "cls", r < 0 ? "probe_error" : str(c, "failure_class"), "op", str(fdv, "op"), "judge",
        str(fdv, "dtype"), "node", str(fdv, "node"), "max_ulp",
        json_number_value(json_object_get(fdv, "max_ulp")), "bits", cx.bits, "sha", cx.sha, "msg",
        r < 0 ? (err ? err : strerror(-r)) : str(c, "error"));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    size_t len = text ? strlen(text) : 0, off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    int status = text ? 0 : 3;
    free(text);
    json_decref(o);
    json_decref(c);
    free(err);
    _exit(status);
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Read the child's answer until EOF or the deadline. */
static int read_answer(int fd, int timeout_ms, char **ret, size_t *ret_len, bool *timed_out)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    double end = mono_ms() + timeout_ms;
    *timed_out = false;
    for (;;) {
        int left = (int)(end - mono_ms());
        if (left <= 0) {
            *timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            *timed_out = pr == 0;
            break;
        }
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    buf[n] = 0;
    *ret = buf;
    *ret_len = n;
    return 0;
}

static void parse_answer(const char *text, nvw_fprobe *p)
{
    json_t *o = json_loads(text, 0, NULL);
    const char *keys[] = {"verdict", "cls", "op", "judge", "node", "sha", "msg"};
    char *dst[] = {p->verdict, p->cls, p->op, p->judge, p->node, p->sha, p->msg};
    size_t cap[] = {sizeof p->verdict, sizeof p->cls, sizeof p->op, sizeof p->judge,
                    sizeof p->node,    sizeof p->sha, sizeof p->msg};
    for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = json_string_value(json_object_get(o, keys[i]));
        snprintf(dst[i], cap[i], "%s", v ? v : "");
    }
    p->max_ulp = json_number_value(json_object_get(o, "max_ulp"));
    p->bits = o ? (int)json_integer_value(json_object_get(o, "bits")) : -1;
    if (!o)
        snprintf(p->cls, sizeof p->cls, "probe_error");
    json_decref(o);
}

int nvw_fprobe_run(const nvw_frepro *fr, const nvw_backend *b, const json_t *spec,
                   nv_tensor *const *in, int n, int timeout_ms, bool stored,
                   const char *artifact_path, const json_t *extra, nvw_fprobe *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->bits = -1;
    pid_t pid;
    int fd;
    int r = nvw_probe_fork(&pid, &fd);
    if (r < 0)
        return r;
    if (pid == 0)
        child(fr, b, spec, in, n, stored, artifact_path, extra, fd);
    char *text = NULL;
    size_t len = 0;
    bool timed_out = false;
    r = read_answer(fd, timeout_ms > 0 ? timeout_ms : 60000, &text, &len, &timed_out);
    close(fd);
    if (timed_out || r < 0)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    if (timed_out)
        snprintf(ret->cls, sizeof ret->cls, "timeout");
    else if (WIFSIGNALED(st))
        snprintf(ret->cls, sizeof ret->cls, "crash"),
            snprintf(ret->msg, sizeof ret->msg, "the probe died of signal %d", WTERMSIG(st));
    else
        parse_answer(text, ret);
    free(text);
    return 0;
}

bool nvw_fprobe_same(const nvw_frepro *fr, const nvw_fprobe *p)
{
    return !strcmp(p->verdict, "failed") && !strcmp(p->cls, fr->cls) && !strcmp(p->op, fr->op) &&
           !strcmp(p->judge, fr->judge);
}
