/* numvalctl repro, compare and suite. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client.h"
#include "cmd_repro.h"
#include "common/sha256.h"

extern char **environ;

/* The numval-worker to run: --worker, $NUMVAL_WORKER, the build tree's or the
 * install's sibling of this numvalctl, else the PATH. */
static const char *worker_path(const char *opt, char *buf, size_t len)
{
    if (opt)
        return opt;
    if (getenv("NUMVAL_WORKER"))
        return getenv("NUMVAL_WORKER");
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            static const char *const rel[] = {"/../worker/numval-worker", "/numval-worker"};
            for (int i = 0; i < 2; i++) {
                snprintf(buf, len, "%s%s", self, rel[i]);
                if (access(buf, X_OK) == 0)
                    return buf;
            }
        }
    }
    return "numval-worker";
}

/* Download artifact sha (hash-verified) into path. */
static int download(const nvc_conn *c, const char *sha, const char *path)
{
    char url[128];
    snprintf(url, sizeof url, "/api/v1/artifacts/%s", sha);
    nvc_response resp = {0};
    char *err = NULL;
    int r = nvc_http(c, "GET", url, NULL, NULL, 0, 600, &resp, &err);
    if (r < 0) {
        nvc_error("%s", err ? err : "server unreachable");
        free(err);
        return r;
    }
    char got[65];
    nv_sha256_hex(resp.body, resp.len, got);
    r = 0;
    if (resp.status != 200) {
        nvc_error("artifact '%s': HTTP %ld %.300s", sha, resp.status, resp.body);
        r = -EPROTO;
    } else if (strcmp(got, sha) != 0) {
        nvc_error("downloaded artifact hashes to '%s', not '%s'; refusing it", got, sha);
        r = -EBADMSG;
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(resp.body, 1, resp.len, f) != resp.len || fclose(f) != 0) {
            nvc_error("cannot write '%s': %s", path, strerror(errno));
            r = -EIO;
        }
    }
    nvc_response_done(&resp);
    return r;
}

/* Run argv with stdout and stderr into the files out and err; the exit status,
 * or NVC_EXIT_ERROR when it could not run. */
static int spawn_wait(char **argv, const char *out, const char *err)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return NVC_EXIT_ERROR;
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) {
        nvc_error("cannot run '%s': %s (give --worker PATH or set NUMVAL_WORKER)", argv[0],
                  strerror(r));
        return NVC_EXIT_ERROR;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : NVC_EXIT_ERROR;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (f && m) {
        char chunk[4096];
        size_t n;
        while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
            fwrite(chunk, 1, n, m);
    }
    if (f)
        fclose(f);
    if (m)
        fclose(m);
    return buf;
}

/* The worker's messages to stderr, its mentions of the artifact's temporary
 * file (deleted when numvalctl exits) replaced by what names it for good. */
static void forward_err(const char *text, const char *tmpfile, const char *name)
{
    for (const char *p = text ? text : ""; *p;) {
        const char *hit = tmpfile ? strstr(p, tmpfile) : NULL;
        if (!hit) {
            fputs(p, stderr);
            break;
        }
        fwrite(p, 1, (size_t)(hit - p), stderr);
        fputs(name, stderr);
        p = hit + strlen(tmpfile);
    }
}

int nvc_cmd_repro(nvc_conn *c, int argc, char **argv)
{
    const char *backend = NULL, *worker = NULL, *runs = NULL, *keep = NULL;
    bool minimized = false;
    nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),        {"backend", &backend, NULL},
                      {"worker", &worker, NULL}, {"runs", &runs, NULL},
                      {"keep", &keep, NULL},     {"minimized", NULL, &minimized},
                      {NULL, NULL, NULL}};
    const char *pos[1];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 1, &npos, &err) < 0 || npos != 1) {
        nvc_error("%s", err ? err
                            : "usage: numvalctl repro CASE_ID [--backend SPEC] [--minimized] "
                              "[--runs N] [--worker PATH] [--keep FILE] [--json]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char path[160];
    snprintf(path, sizeof path, "/api/v1/cases/%s", pos[0]);
    json_t *resp = NULL;
    if (nvc_api(c, "GET", path, NULL, &resp, &err) < 0) {
        nvc_error("case '%s': %s", pos[0], err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    const json_t *cj = json_object_get(resp, "case");
    const char *sha =
        json_string_value(json_object_get(cj, minimized ? "minimized_artifact" : "artifact"));
    if (!sha) {
        nvc_error("case '%s' has no %s artifact (only failed cases carry one)", pos[0],
                  minimized ? "minimized" : "failure");
        json_decref(resp);
        return NVC_EXIT_ERROR;
    }
    /* The worker's output goes to a temporary directory; the artifact too
     * unless --keep names where it stays. */
    char tmpl[] = "/tmp/numvalctl-repro-XXXXXX";
    if (!mkdtemp(tmpl)) {
        nvc_error("cannot create a temporary directory: %s", strerror(errno));
        json_decref(resp);
        return NVC_EXIT_ERROR;
    }
    char file[PATH_MAX], out[PATH_MAX], errf[PATH_MAX];
    if (keep)
        snprintf(file, sizeof file, "%s", keep);
    else
        snprintf(file, sizeof file, "%s/%.64s.nvart", tmpl, sha);
    snprintf(out, sizeof out, "%s/out.json", tmpl);
    snprintf(errf, sizeof errf, "%s/err.txt", tmpl);
    int status = NVC_EXIT_ERROR;
    if (download(c, sha, file) == 0) {
        char wbuf[PATH_MAX];
        char *args[10];
        int n = 0;
        args[n++] = (char *)worker_path(worker, wbuf, sizeof wbuf);
        args[n++] = "repro";
        args[n++] = file;
        if (backend) { /* else the backend spec recorded in the artifact */
            args[n++] = "--backend";
            args[n++] = (char *)backend;
        }
        if (runs) {
            args[n++] = "--runs";
            args[n++] = (char *)runs;
        }
        args[n] = NULL;
        status = spawn_wait(args, out, errf);
        char *o = slurp(out), *e = slurp(errf), name[120];
        snprintf(name, sizeof name, "artifact %.12s", sha);
        forward_err(e, keep ? NULL : file, name);
        json_t *res = o ? json_loads(o, 0, NULL) : NULL;
        if (c->json || !json_is_object(res)) {
            fputs(o ? o : "", stdout);
        } else {
            char idb[32];
            printf("case %s (%s artifact %s):\n", nvc_id_text(json_object_get(cj, "id"), idb),
                   minimized ? "minimized" : "failure", sha);
            const char *k;
            const json_t *v;
            json_object_foreach(res, k, v) nvc_show_value(res, k, v, 2, NULL);
            if (keep)
                printf("  %-12s %s\n", "kept at", keep);
        }
        json_decref(res);
        free(o);
        free(e);
    }
    if (!keep)
        unlink(file);
    unlink(out);
    unlink(errf);
    rmdir(tmpl);
    json_decref(resp);
    return status;
}

static void print_side(const json_t *e, const char *title)
{
    const json_t *m = json_object_get(e, "match");
    const char *kind = json_string_value(json_object_get(m, "kind"));
    const char *metric =
        json_object_get(json_object_get(e, "head"), "headroom") ? "headroom" : "max_ulp";
    char *shape = nvc_json_text(json_object_get(m, "shape"));
    char *attrs = nvc_json_text(json_object_get(m, "attrs"));
    char *bu = nvc_json_text(json_object_get(json_object_get(e, "base"), metric));
    char *hu = nvc_json_text(json_object_get(json_object_get(e, "head"), metric));
    if (kind && !strcmp(kind, "fused"))
        printf("  %-14s fused %s %s %s  %s %s -> %s\n", title,
               json_string_value(json_object_get(m, "graph")),
               json_string_value(json_object_get(m, "dtype")),
               json_string_value(json_object_get(m, "input")), metric, bu, hu);
    else
        printf("  %-14s %s %s %s %s %s %s %s  %s %s -> %s\n", title, kind ? kind : "op",
               json_string_value(json_object_get(m, "op")),
               json_string_value(json_object_get(m, "dtype")), shape,
               json_string_value(json_object_get(m, "layout")),
               json_string_value(json_object_get(m, "input")), attrs, metric, bu, hu);
    free(shape);
    free(attrs);
    free(bu);
    free(hu);
    /* A changed tolerance explains a verdict that changed with the same error. */
    const json_t *bt = json_object_get(json_object_get(e, "base"), "tolerance");
    const json_t *ht = json_object_get(json_object_get(e, "head"), "tolerance");
    if ((bt || ht) && !json_equal((json_t *)bt, (json_t *)ht)) {
        char a[200], b[200];
        nvc_tolerance_text(bt, a, sizeof a);
        nvc_tolerance_text(ht, b, sizeof b);
        printf("  %-14s tolerance changed: %s -> %s\n", "", a, b);
    }
}

int nvc_cmd_compare(nvc_conn *c, int argc, char **argv)
{
    const char *kind = NULL, *op = NULL;
    nvc_opt opts[] = {
        NVC_GLOBAL_OPTS(c), {"kind", &kind, NULL}, {"op", &op, NULL}, {NULL, NULL, NULL}};
    const char *pos[2];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 2, &npos, &err) < 0 || npos != 2) {
        nvc_error("%s", err ? err
                            : "usage: numvalctl compare BASE_BUILD HEAD_BUILD "
                              "[--kind op|gradient|fused|contract] [--op OP]");
        free(err);
        return NVC_EXIT_ERROR;
    }
    char *b = nvc_escape(pos[0]), *h = nvc_escape(pos[1]);
    char *k = kind ? nvc_escape(kind) : NULL, *o = op ? nvc_escape(op) : NULL;
    char path[1200];
    snprintf(path, sizeof path, "/api/v1/compare?base=%s&head=%s%s%s%s%s", b ? b : "", h ? h : "",
             k ? "&kind=" : "", k ? k : "", o ? "&op=" : "", o ? o : "");
    free(b);
    free(h);
    free(k);
    free(o);
    json_t *r = NULL;
    if (nvc_api(c, "GET", path, NULL, &r, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    const json_t *counts = json_object_get(r, "counts");
    json_int_t matched = json_integer_value(json_object_get(counts, "matched"));
    json_int_t only_head = json_integer_value(json_object_get(counts, "only_in_head"));
    json_int_t only_base = json_integer_value(json_object_get(counts, "only_in_base"));
    if (c->json) {
        nvc_print_json(r);
    } else {
        printf("matched: %lld (only in head: %lld, only in base: %lld)\n", (long long)matched,
               (long long)only_head, (long long)only_base);
        static const char *const lists[] = {"newly_failing", "newly_passing", "drift"};
        for (int k = 0; k < 3; k++) {
            const json_t *a = json_object_get(r, lists[k]);
            printf("%s: %zu\n", lists[k], json_array_size(a));
            size_t i;
            json_t *e;
            json_array_foreach(a, i, e) print_side(e, lists[k]);
        }
        const json_t *cc = json_object_get(r, "contract_changes");
        printf("contract_changes: %zu (devices compared: %lld)\n", json_array_size(cc),
               (long long)json_integer_value(json_object_get(counts, "contract_devices")));
        size_t i;
        json_t *e;
        json_array_foreach(cc, i, e)
        {
            char *bv = nvc_json_text(json_object_get(e, "base")),
                 *hv = nvc_json_text(json_object_get(e, "head"));
            char bj[32], hj[32];
            printf("  %s %s %s: %s -> %s (jobs %s -> %s)\n",
                   json_string_value(json_object_get(e, "device")),
                   json_string_value(json_object_get(e, "dtype")),
                   json_string_value(json_object_get(e, "field")), bv ? bv : "-", hv ? hv : "-",
                   nvc_id_text(json_object_get(e, "base_job"), bj),
                   nvc_id_text(json_object_get(e, "head_job"), hj));
            free(bv);
            free(hv);
        }
    }
    /* 1 when the head build newly fails a case (for CI gates); 3 when no case
     * matched: the gate compared nothing and must not pass. */
    /* A measured contract that changed is a regression even where every
     * tolerance still passes (docs/CONTRACT.md); a device whose contract both
     * builds measured counts as compared. */
    json_int_t devices = json_integer_value(json_object_get(counts, "contract_devices"));
    int status = json_array_size(json_object_get(r, "newly_failing")) ||
                         json_array_size(json_object_get(r, "contract_changes"))
                     ? NVC_EXIT_FAILED
                     : NVC_EXIT_OK;
    if (matched == 0 && devices == 0 && status == NVC_EXIT_OK) {
        nvc_error("nothing compared: no case of build '%s' matches one of build '%s' (%lld only "
                  "in head, %lld only in base); exit status 3",
                  pos[0], pos[1], (long long)only_head, (long long)only_base);
        status = NVC_EXIT_NOTHING;
    }
    json_decref(r);
    return status;
}

static int suite_retire(nvc_conn *c, const char *id, const char *reason)
{
    if (!reason || !*reason) {
        nvc_error("retiring a suite case needs --reason TEXT");
        return NVC_EXIT_ERROR;
    }
    char path[160];
    snprintf(path, sizeof path, "/api/v1/suite/%s/retire", id);
    json_t *r = NULL;
    char *err = NULL;
    if (nvc_api(c, "POST", path, json_pack("{ss}", "reason", reason), &r, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (c->json) {
        nvc_print_json(r);
    } else {
        const json_t *one = json_object_get(r, "suite_case");
        printf("suite case %s retired: %s\n", id,
               json_string_value(json_object_get(one, "retire_reason"))
                   ? json_string_value(json_object_get(one, "retire_reason"))
                   : reason);
    }
    json_decref(r);
    return NVC_EXIT_OK;
}

int nvc_cmd_suite(nvc_conn *c, int argc, char **argv)
{
    const char *reason = NULL, *state = NULL;
    nvc_opt opts[] = {
        NVC_GLOBAL_OPTS(c), {"reason", &reason, NULL}, {"state", &state, NULL}, {NULL, NULL, NULL}};
    const char *pos[2];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 2, &npos, &err) < 0 || npos < 1) {
        nvc_error("%s", err ? err
                            : "usage: numvalctl suite list [--state active|retired] | suite show "
                              "ID | suite retire ID --reason TEXT");
        free(err);
        return NVC_EXIT_ERROR;
    }
    if (!strcmp(pos[0], "retire") && npos == 2)
        return suite_retire(c, pos[1], reason);
    char path[160];
    if (!strcmp(pos[0], "show") && npos == 2)
        snprintf(path, sizeof path, "/api/v1/suite/%s", pos[1]);
    else if (!strcmp(pos[0], "list"))
        snprintf(path, sizeof path, "/api/v1/suite%s%s", state ? "?state=" : "",
                 state ? state : "");
    else {
        nvc_error("unknown suite command '%s' (list, show ID, retire ID --reason TEXT)", pos[0]);
        return NVC_EXIT_ERROR;
    }
    json_t *r = NULL;
    if (nvc_api(c, "GET", path, NULL, &r, &err) < 0) {
        nvc_error("%s", err ? err : "request failed");
        free(err);
        return NVC_EXIT_ERROR;
    }
    const json_t *list = json_object_get(r, "suite");
    const json_t *one = json_object_get(r, "suite_case");
    if (c->json || (!list && !one)) {
        nvc_print_json(r);
    } else if (one) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)one, k, v) nvc_show_value(one, k, v, 0, NULL);
    } else {
        /* KIND: op or fused (a fused case's OP and DTYPE are its first divergent
         * node's op and the dtype it was judged in). */
        static const char *const hdr[] = {"ID",    "STATE",       "KIND", "OP",       "DTYPE",
                                          "CLASS", "OCCURRENCES", "LAST", "SIGNATURE"};
        nvc_table *t = nvc_table_new(9, hdr);
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e)
        {
            char *cells[9];
            static const char *const keys[] = {"id",          "state",        "kind",
                                               "op",          "dtype",        "failure_class",
                                               "occurrences", "last_verdict", "signature"};
            for (int k = 0; k < 9; k++)
                cells[k] = nvc_json_text(json_object_get(e, keys[k]));
            if (t)
                nvc_table_add(t, (const char *const *)cells);
            for (int k = 0; k < 9; k++)
                free(cells[k]);
        }
        if (t)
            nvc_table_print(t, stdout);
        nvc_table_free(t);
    }
    json_decref(r);
    return NVC_EXIT_OK;
}
