/* numvalctl listings: jobs, show, cases, artifact, builds, devices. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "common/artifact.h"
#include "common/sha256.h"

/* Parse a command's options; prints the problem and returns -EINVAL. */
static int parse(int argc, char **argv, const nvc_opt *opts, const char **pos, int want_pos,
                 const char *usage)
{
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, want_pos, &npos, &err) < 0 || npos != want_pos) {
        nvc_error("%s", err ? err : usage);
        free(err);
        return -EINVAL;
    }
    return 0;
}

/* GET path; prints the server's error and returns NULL on failure. */
static json_t *get(const nvc_conn *c, const char *path)
{
    json_t *resp = NULL;
    char *err = NULL;
    int r = nvc_api(c, "GET", path, NULL, &resp, &err);
    if (r < 0) {
        nvc_error("%s", err ? err : strerror(-r));
        free(err);
        return NULL;
    }
    if (!resp)
        resp = json_object();
    return resp;
}

/* Append "&key=value" (escaped) to a query string when value is set. */
static int add_query(char *buf, size_t n, const char *key, const char *value)
{
    if (!value)
        return 0;
    char *e = nvc_escape(value);
    if (!e)
        return -ENOMEM;
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%c%s=%s", strchr(buf, '?') ? '&' : '?', key, e);
    free(e);
    return 0;
}

/* Print rows of objects as a table of the given keys. */
static int print_rows(const json_t *rows, int ncols, const char *const *headers,
                      const char *const *keys)
{
    nvc_table *t = nvc_table_new(ncols, headers);
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *row = json_array_get(rows, i);
        char *cells[16] = {0};
        for (int k = 0; k < ncols && k < 16; k++) {
            const json_t *v = json_object_get(row, keys[k]);
            cells[k] = v && !json_is_null(v) ? nvc_json_text(v) : NULL;
        }
        nvc_table_add(t, (const char *const *)cells);
        for (int k = 0; k < ncols && k < 16; k++)
            free(cells[k]);
    }
    nvc_table_print(t, stdout);
    nvc_table_free(t);
    return 0;
}

/* The DEVICE shown for a job: its pinned device, or for a job any device may take
 * "any (ran on NAME)" once one leased it. */
static json_t *device_text(const json_t *job)
{
    const char *pinned = json_string_value(json_object_get(job, "device"));
    const char *ran = json_string_value(json_object_get(job, "leased_by"));
    if (pinned)
        return json_string(pinned);
    if (!ran)
        return json_string("any");
    char buf[300];
    snprintf(buf, sizeof buf, "any (ran on %s)", ran);
    return json_string(buf);
}

int nvc_cmd_jobs(nvc_conn *c, int argc, char **argv)
{
    const char *state = NULL, *kind = NULL, *device = NULL, *build = NULL, *limit = NULL,
               *cursor = NULL;
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),        {"state", &state, NULL},
                            {"kind", &kind, NULL},     {"device", &device, NULL},
                            {"build", &build, NULL},   {"limit", &limit, NULL},
                            {"cursor", &cursor, NULL}, {NULL, NULL, NULL}};
    if (parse(argc, argv, opts, NULL, 0, "usage: numvalctl jobs [--state S] [--kind K]") < 0)
        return NVC_EXIT_ERROR;
    char path[1024] = "/api/v1/jobs";
    if (add_query(path, sizeof(path), "state", state) < 0 ||
        add_query(path, sizeof(path), "kind", kind) < 0 ||
        add_query(path, sizeof(path), "device", device) < 0 ||
        add_query(path, sizeof(path), "build", build) < 0 ||
        add_query(path, sizeof(path), "limit", limit) < 0 ||
        add_query(path, sizeof(path), "cursor", cursor) < 0)
        return NVC_EXIT_ERROR;
    json_t *resp = get(c, path);
    if (!resp)
        return NVC_EXIT_ERROR;
    if (c->json) {
        nvc_print_json(resp);
    } else {
        json_t *jobs = json_object_get(resp, "jobs");
        /* "done" is cases_done of cases_total, shown as one column. */
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            json_t *j = json_array_get(jobs, i);
            char prog[64];
            snprintf(prog, sizeof(prog), "%lld/%lld",
                     (long long)json_integer_value(json_object_get(j, "cases_done")),
                     (long long)json_integer_value(json_object_get(j, "cases_total")));
            json_object_set_new(j, "_progress", json_string(prog));
            json_object_set_new(j, "_device", device_text(j));
        }
        const char *h[] = {"ID",    "STATE",  "KIND", "OP",     "DEVICE",
                           "CASES", "FAILED", "PRIO", "CREATED"};
        const char *k[] = {"id",        "state",        "kind",     "op",        "_device",
                           "_progress", "cases_failed", "priority", "created_at"};
        print_rows(jobs, 9, h, k);
        const char *next = json_string_value(json_object_get(resp, "next_cursor"));
        if (next)
            fprintf(stderr, "(more: numvalctl jobs --cursor %s)\n", next);
    }
    json_decref(resp);
    return NVC_EXIT_OK;
}

int nvc_cmd_show(nvc_conn *c, int argc, char **argv)
{
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {NULL, NULL, NULL}};
    const char *pos[1];
    if (parse(argc, argv, opts, pos, 1, "usage: numvalctl show JOB_ID [--json]") < 0)
        return NVC_EXIT_ERROR;
    char *id = nvc_escape(pos[0]), path[512];
    if (!id)
        return NVC_EXIT_ERROR;
    snprintf(path, sizeof(path), "/api/v1/jobs/%s", id);
    free(id);
    json_t *resp = get(c, path);
    if (!resp)
        return NVC_EXIT_ERROR;
    json_t *job = json_object_get(resp, "job");
    if (c->json) {
        nvc_print_json(resp);
    } else {
        char idb[32];
        const char *jid = nvc_id_text(json_object_get(job, "id"), idb);
        const char *key;
        json_t *v;
        /* The spec last: it is what was asked, the rest what happened. */
        json_object_foreach(job, key, v)
        {
            if (!strcmp(key, "spec"))
                continue;
            json_t *dev = !strcmp(key, "device") ? device_text(job) : NULL;
            nvc_show_value(job, key, dev ? dev : v, 0, jid);
            json_decref(dev);
        }
        if (json_object_get(job, "spec"))
            nvc_show_value(job, "spec", json_object_get(job, "spec"), 0, jid);
    }
    json_decref(resp);
    return NVC_EXIT_OK;
}

int nvc_cmd_cancel(nvc_conn *c, int argc, char **argv)
{
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {NULL, NULL, NULL}};
    const char *pos[64];
    int npos = 0;
    char *err = NULL;
    if (nvc_parse(argc, argv, opts, pos, 64, &npos, &err) < 0 || npos == 0) {
        nvc_error("%s", err ? err : "usage: numvalctl cancel JOB_ID...");
        free(err);
        return NVC_EXIT_ERROR;
    }
    int status = NVC_EXIT_OK;
    for (int i = 0; i < npos; i++) {
        char *id = nvc_escape(pos[i]), path[512];
        json_t *resp = NULL;
        if (!id)
            return NVC_EXIT_ERROR;
        snprintf(path, sizeof(path), "/api/v1/jobs/%s/cancel", id);
        free(id);
        int r = nvc_api(c, "POST", path, NULL, &resp, &err);
        if (r < 0) {
            nvc_error("cannot cancel job '%s': %s", pos[i], err ? err : strerror(-r));
            free(err);
            err = NULL;
            status = NVC_EXIT_ERROR;
            continue;
        }
        const char *state =
            json_string_value(json_object_get(json_object_get(resp, "job"), "state"));
        if (c->json)
            nvc_print_json(resp);
        else
            printf("%s %s\n", pos[i], state ? state : "?");
        json_decref(resp);
    }
    return status;
}

int nvc_fetch_cases(const nvc_conn *c, const char *job_id, bool failed_only, json_t **ret,
                    char **ret_err)
{
    json_t *all = json_array();
    char *cursor = NULL;
    char *id = nvc_escape(job_id);
    int r = -ENOMEM;
    if (!all || !id)
        goto out;
    for (;;) {
        char path[1024];
        snprintf(path, sizeof(path), "/api/v1/jobs/%s/cases?limit=500%s", id,
                 failed_only ? "&verdict=failed" : "");
        if (cursor && (r = add_query(path, sizeof(path), "cursor", cursor)) < 0)
            goto out;
        json_t *resp = NULL;
        r = nvc_api(c, "GET", path, NULL, &resp, ret_err);
        if (r < 0)
            goto out;
        json_array_extend(all, json_object_get(resp, "cases"));
        const char *next = json_string_value(json_object_get(resp, "next_cursor"));
        free(cursor);
        cursor = next && *next ? strdup(next) : NULL;
        json_decref(resp);
        if (!cursor)
            break;
    }
    *ret = all;
    all = NULL;
    r = 0;
out:
    free(cursor);
    free(id);
    json_decref(all);
    return r;
}

int nvc_cmd_cases(nvc_conn *c, int argc, char **argv)
{
    bool failed = false, csv = false;
    const nvc_opt opts[] = {
        NVC_GLOBAL_OPTS(c), {"failed", NULL, &failed}, {"csv", NULL, &csv}, {NULL, NULL, NULL}};
    const char *pos[1];
    if (parse(argc, argv, opts, pos, 1, "usage: numvalctl cases JOB_ID [--failed] [--csv]") < 0)
        return NVC_EXIT_ERROR;
    json_t *cases = NULL;
    char *err = NULL;
    int r = nvc_fetch_cases(c, pos[0], failed, &cases, &err);
    if (r < 0) {
        nvc_error("%s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    /* ID is what `numvalctl repro` and GET /api/v1/cases/{id} take; INDEX is the
     * case's place in its job. */
    const char *h[] = {"ID",    "INDEX",   "VERDICT",  "OP",    "DTYPE", "SHAPE",   "LAYOUT",
                       "INPUT", "MAX_ULP", "MISMATCH", "CLASS", "TOL_V", "ARTIFACT"};
    const char *k[] = {"id",      "index",      "verdict",       "op",
                       "dtype",   "shape",      "layout",        "input",
                       "max_ulp", "mismatches", "failure_class", "tolerance_version",
                       "artifact"};
    if (c->json) {
        json_t *o = json_pack("{s:O}", "cases", cases);
        nvc_print_json(o);
        json_decref(o);
    } else if (csv) {
        /* The table's columns; a missing value is an empty field. Numbers keep
         * every digit (the table rounds to 6). */
        nvc_csv_row(stdout, 13, h);
        size_t i;
        const json_t *cs;
        json_array_foreach(cases, i, cs)
        {
            char *cells[13];
            for (int j = 0; j < 13; j++) {
                const json_t *v = json_object_get(cs, k[j]);
                cells[j] = !v || json_is_null(v) ? NULL
                           : json_is_real(v)
                               ? json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))
                               : nvc_json_text(v);
            }
            nvc_csv_row(stdout, 13, (const char *const *)cells);
            for (int j = 0; j < 13; j++)
                free(cells[j]);
        }
    } else {
        print_rows(cases, 13, h, k);
    }
    json_decref(cases);
    return NVC_EXIT_OK;
}

/* Print a downloaded artifact's manifest and tensor list (docs/ARTIFACTS.md). */
static int print_artifact(const nvc_conn *c, const char *sha, const void *buf, size_t len)
{
    nv_artifact *a = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(buf, len, &a, &err);
    if (r < 0) {
        nvc_error("artifact '%s' cannot be loaded: %s", sha, err ? err : strerror(-r));
        free(err);
        return r;
    }
    json_t *tensors = json_array();
    for (int i = 0; tensors && i < a->n_tensors; i++) {
        const nv_artifact_tensor *t = &a->tensors[i];
        json_t *shape = json_array();
        for (int d = 0; shape && d < t->ndim; d++)
            json_array_append_new(shape, json_integer(t->shape[d]));
        json_array_append_new(tensors,
                              json_pack("{s:s,s:i,s:o,s:I}", "name", t->name, "dtype", t->dtype,
                                        "shape", shape, "nbytes", (json_int_t)t->nbytes));
    }
    json_t *out =
        json_pack("{s:s,s:O,s:o}", "sha256", sha, "manifest", a->manifest, "tensors", tensors);
    if (c->json) {
        nvc_print_json(out);
    } else {
        nvc_print_json(a->manifest);
        const char *h[] = {"TENSOR", "DTYPE_ID", "SHAPE", "BYTES"};
        const char *k[] = {"name", "dtype", "shape", "nbytes"};
        print_rows(tensors, 4, h, k);
    }
    json_decref(out);
    nv_artifact_free(a);
    return 0;
}

int nvc_cmd_artifact(nvc_conn *c, int argc, char **argv)
{
    const char *out = NULL, *tensor = NULL;
    bool manifest = false;
    nv_artifact *a = NULL; /* before the first goto: freed at out */
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c),        {"o", &out, NULL},
                            {"output", &out, NULL},    {"manifest", NULL, &manifest},
                            {"tensor", &tensor, NULL}, {NULL, NULL, NULL}};
    const char *pos[1];
    const char *usage = "usage: numvalctl artifact SHA256 (-o FILE [--tensor NAME] | --manifest)";
    /* "-o FILE" is the documented spelling; the parser knows only "--": map it. */
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "-o"))
            argv[i] = "--o";
    if (parse(argc, argv, opts, pos, 1, usage) < 0)
        return NVC_EXIT_ERROR;
    if (strlen(pos[0]) != 64 || strspn(pos[0], "0123456789abcdef") != 64) {
        nvc_error("'%s' is not an artifact id: an artifact id is its SHA-256, 64 lowercase hex "
                  "digits (numvalctl cases JOB_ID lists them)",
                  pos[0]);
        return NVC_EXIT_ERROR;
    }
    if ((!out && !manifest) || (tensor && !out)) {
        nvc_error("%s", usage);
        return NVC_EXIT_ERROR;
    }
    char path[128], *err = NULL;
    snprintf(path, sizeof(path), "/api/v1/artifacts/%s", pos[0]);
    nvc_response resp = {0};
    int r = nvc_http(c, "GET", path, NULL, NULL, 0, 600, &resp, &err);
    if (r < 0) {
        nvc_error("%s", err ? err : strerror(-r));
        free(err);
        return NVC_EXIT_ERROR;
    }
    int status = NVC_EXIT_ERROR;
    if (resp.status != 200) {
        json_t *j = json_loadb(resp.body, resp.len, 0, NULL);
        const char *msg =
            json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        nvc_error("server answered HTTP %ld: %s", resp.status, msg ? msg : "(no message)");
        json_decref(j);
        goto out;
    }
    /* The id is the SHA-256 of the bytes: verify before using anything. */
    char sha[65];
    nv_sha256_hex(resp.body, resp.len, sha);
    if (strcmp(sha, pos[0]) != 0) {
        nvc_error("downloaded artifact hashes to '%s', not '%s'; refusing it", sha, pos[0]);
        goto out;
    }
    const void *bytes = resp.body;
    size_t nbytes = resp.len;
    if (tensor) {
        /* --tensor NAME: that tensor's raw encoded bytes instead of the container. */
        char *derr = NULL;
        const nv_artifact_tensor *t = NULL;
        r = nv_artifact_decode(resp.body, resp.len, &a, &derr);
        if (r == 0 && !(t = nv_artifact_find(a, tensor)))
            nvc_error("artifact '%s' has no tensor '%s'", pos[0], tensor);
        else if (r < 0)
            nvc_error("artifact '%s' cannot be loaded: %s", pos[0], derr ? derr : strerror(-r));
        free(derr);
        if (!t)
            goto out;
        bytes = t->data;
        nbytes = t->nbytes;
    }
    if (out) {
        FILE *f = fopen(out, "wb");
        bool ok = f && fwrite(bytes, 1, nbytes, f) == nbytes;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok) {
            nvc_error("cannot write '%s': %s", out, strerror(errno));
            goto out;
        }
        fprintf(stderr, "numvalctl: wrote %zu bytes to '%s'\n", nbytes, out);
    }
    if (manifest && print_artifact(c, pos[0], resp.body, resp.len) < 0)
        goto out;
    status = NVC_EXIT_OK;
out:
    nv_artifact_free(a);
    nvc_response_done(&resp);
    return status;
}

static int simple_list(nvc_conn *c, int argc, char **argv, const char *path, const char *key,
                       int ncols, const char *const *h, const char *const *k)
{
    const nvc_opt opts[] = {NVC_GLOBAL_OPTS(c), {NULL, NULL, NULL}};
    if (parse(argc, argv, opts, NULL, 0, "this command takes no arguments") < 0)
        return NVC_EXIT_ERROR;
    json_t *resp = get(c, path);
    if (!resp)
        return NVC_EXIT_ERROR;
    if (c->json) {
        nvc_print_json(resp);
    } else {
        json_t *rows = json_object_get(resp, key);
        /* A build's identity fields are shown as columns of their own. */
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i), *ident = json_object_get(row, "identity");
            const char *f;
            json_t *v;
            json_object_foreach(ident, f, v)
            {
                if (!json_object_get(row, f))
                    json_object_set(row, f, v);
            }
        }
        print_rows(rows, ncols, h, k);
    }
    json_decref(resp);
    return NVC_EXIT_OK;
}

int nvc_cmd_builds(nvc_conn *c, int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], "register"))
        return nvc_cmd_build_register(c, argc - 1, argv + 1);
    const char *h[] = {"ID", "NAME", "VERSION", "COMMIT", "JOBS", "CREATED", "BACKEND"};
    const char *k[] = {"id", "name", "version", "commit", "jobs", "created_at", "backend"};
    return simple_list(c, argc, argv, "/api/v1/builds", "builds", 7, h, k);
}

int nvc_cmd_devices(nvc_conn *c, int argc, char **argv)
{
    const char *h[] = {"NAME",  "BACKEND",  "STATE",     "SLOTS",
                       "LOCAL", "RESTARTS", "LAST_SEEN", "LAST_CRASH"};
    const char *k[] = {"name",  "backend",  "state",     "slots",
                       "local", "restarts", "last_seen", "last_crash"};
    return simple_list(c, argc, argv, "/api/v1/devices", "devices", 8, h, k);
}
