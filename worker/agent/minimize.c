/* Gate + minimize after a failed job in agent mode (worker/agent/minimize.h): a
 * dispatch by job kind (op: minimize.h, fused: repro_fused.h, gradient:
 * repro_grad.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minimize.h"
#include "common/log.h"
#include "common/sha256.h"
#include "worker/kinds/op/minimize.h"
#include "worker/kinds/fused/repro_fused.h"
#include "worker/kinds/gradient/repro_grad.h"

/* The job kinds whose failures are gated and minimized (one branch each in
 * on_failure's key and in minimize_one). */
typedef enum min_kind { MIN_OP, MIN_FUSED, MIN_GRAD } min_kind;

/* The kind of job spec, or -1 for a kind whose failures are not minimized. */
static int kind_of(const json_t *spec)
{
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    if (!kind || !strcmp(kind, "op"))
        return MIN_OP;
    if (!strcmp(kind, "fused"))
        return MIN_FUSED;
    if (!strcmp(kind, "gradient"))
        return MIN_GRAD;
    return -1;
}

typedef struct kept {
    min_kind kind;
    char key[160]; /* what the signature is made of, but the mode (one per job) */
    char sha[65];
    uint8_t *buf;
    size_t len;
    int case_index;
} kept;

/* The agent runs one job at a time; the runner calls on_failure serially. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const nvw_agent_job *g_job;
static kept g_kept[NVW_AGENT_MIN_CASES];
static int g_n;

static void clear_kept(void)
{
    for (int i = 0; i < g_n; i++)
        free(g_kept[i].buf);
    g_n = 0;
    g_job = NULL;
}

static const char *str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* Op signature (docs/ARTIFACTS.md "Signature"): dtype, out_dtype, class. */
static void op_key(const json_t *m, char *key, size_t len)
{
    snprintf(key, len, "op/%s/%s/%s", str(m, "dtype"), str(m, "out_dtype"),
             str(m, "failure_class"));
}

/* Fused signature: first divergent op and its judged dtype, case dtype, class. */
static void fused_key(const json_t *m, char *key, size_t len)
{
    const json_t *fd = json_object_get(m, "first_divergent");
    snprintf(key, len, "fused/%s/%s/%s/%s", str(fd, "op"), str(fd, "dtype"),
             str(json_object_get(m, "case"), "dtype"), str(m, "failure_class"));
}

/* Gradient signature: dtype, the failing check, class. */
static void grad_key(const json_t *m, char *key, size_t len)
{
    snprintf(key, len, "gradient/%s/%s/%s", str(m, "dtype"), str(m, "check"),
             str(m, "failure_class"));
}

int nvw_agent_on_failure_min(void *ud, const nvw_failure *f, char **ret_artifact_id)
{
    int r = nvw_agent_on_failure(ud, f, ret_artifact_id);
    if (r < 0 || !*ret_artifact_id)
        return r;
    char key[160];
    int kind = kind_of(((nvw_agent_job *)ud)->spec);
    switch (kind) {
    case MIN_OP:
        op_key(f->manifest, key, sizeof key);
        break;
    case MIN_FUSED:
        fused_key(f->manifest, key, sizeof key);
        break;
    case MIN_GRAD:
        grad_key(f->manifest, key, sizeof key);
        break;
    default: /* kept with its artifact, without a reproducer */
        return r;
    }
    pthread_mutex_lock(&g_lock);
    if (g_job != ud)
        clear_kept();
    g_job = ud;
    bool seen = false;
    for (int i = 0; i < g_n; i++)
        seen |= strcmp(g_kept[i].key, key) == 0;
    if (!seen && g_n < NVW_AGENT_MIN_CASES) {
        kept *k = &g_kept[g_n];
        /* The same manifest and tensors encode to the same bytes (and sha). */
        if (nvw_agent_artifact(ud, f, &k->buf, &k->len, k->sha) == 0) {

            k->kind = (min_kind)kind;
            snprintf(k->key, sizeof k->key, "%s", key);
            k->case_index = f->case_index;
            g_n++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static int put_artifact(nvw_agent_job *j, const uint8_t *buf, size_t len, const char *sha)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/worker/artifacts/%s", sha);
    for (int attempt = 0; attempt < 5; attempt++) {
        nvw_http_resp resp = {0};
        int r = nvw_http_request(j->http, "PUT", path, "application/zstd", buf, len, 120000, &resp,
                                 NULL);
        long st = r == 0 ? resp.status : 0;
        nvw_http_resp_done(&resp);
        if (st == 200 || st == 201)
            return 0;
        if (r == -ECANCELED || (st >= 400 && st < 500))
            return -EPROTO;
        nvw_agent_sleep(250L << attempt, &j->cancel);
    }
    return -EIO;
}

static json_t *find_case(json_t *result, int index)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(result, "cases"), i, c)
    {
        if (json_integer_value(json_object_get(c, "index")) == index)
            return c;
    }
    return NULL;
}

/* The gate's keys on case c (may be NULL); sig is stolen. */
static void annotate(json_t *c, json_t *sig, int runs, int failed, int bits, bool flaky)
{
    if (!c) {
        json_decref(sig);
        return;
    }
    json_object_set_new(c, "signature", sig ? sig : json_null());
    json_object_set_new(
        c, "repro_rate",
        json_pack("{si si si}", "runs", runs, "failed", failed, "bit_identical", bits));
    json_object_set_new(c, "flaky", json_boolean(flaky));
}

/* Gate + minimize one kept op failure; annotate its case. */
static void minimize_op(nvw_agent_job *j, const nvw_backend *b, const kept *k, double deadline,
                        json_t *result)
{
    nv_artifact *a = NULL;
    nvw_repro *rc = NULL;
    char *err = NULL;
    int r = nv_artifact_decode(k->buf, k->len, &a, &err);
    if (r == 0)
        r = nvw_repro_from_artifact(a, &rc, &err);
    nv_artifact_free(a);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its artifact: %s", j->job_id, k->case_index,
                    err ? err : strerror(-r));
        free(err);
        return;
    }
    memcpy(rc->sha, k->sha, sizeof rc->sha);
    nvw_probe_env env = {.rc = rc,
                         .table = nvw_backend_table(b),
                         .options = nvw_backend_options(b),
                         .timeout_ms = 60000,
                         .isolate = true};
    nvw_min_opts mo = {.budget = NVW_AGENT_MIN_BUDGET,
                       .deadline_s = deadline,
                       .progress = stderr,
                       .cancel = &j->cancel};
    nvw_min_result m;
    r = nvw_minimize(&env, &mo, &m);
    if (r < 0) {
        nv_log_warn("job %s case %d: minimization failed: %s", j->job_id, k->case_index,
                    strerror(-r));
        nvw_repro_free(rc);
        return;
    }
    json_t *c = find_case(result, k->case_index);
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (nvw_minimized_artifact(rc, &m, &buf, &len, sha) < 0 ||
            put_artifact(j, buf, len, sha) < 0)
            sha[0] = 0;
        free(buf);
    }
    annotate(c, nvw_repro_signature(rc, NULL), m.gate_runs, m.gate_failed, m.gate_bits, m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "total", (json_int_t)m.numel_after, "non_neutral",
                                      (json_int_t)m.nonneutral_after));
    }
    nv_log_info("job %s case %d: gate %d/%d%s%s%s", j->job_id, k->case_index, m.gate_failed,
                m.gate_runs, m.flaky ? ", flaky" : "", sha[0] ? ", minimized artifact " : "", sha);
    nvw_min_result_done(&m);
    nvw_repro_free(rc);
}

/* The minimized fused case as an artifact (with the job's id and attempt),
 * uploaded; its content id in sha ("" when none). */
static void upload_fused(nvw_agent_job *j, nvw_frepro *fr, const nvw_backend *b,
                         const nvw_fmin_result *m, char sha[65])
{
    json_t *extra =
        json_pack("{sO sI}", "job_id", j->job_id_json, "attempt", (json_int_t)j->attempt);
    uint8_t *buf = NULL;
    size_t len = 0;
    nvw_fprobe last;
    int r =
        extra ? nvw_fminimized_artifact(fr, b, m, 60000, NULL, extra, &buf, &len, &last) : -ENOMEM;
    sha[0] = 0;
    if (r == 0) {
        nv_sha256_hex(buf, len, sha); /* the bytes read back are what is named */
        if ((r = put_artifact(j, buf, len, sha)) < 0)
            sha[0] = 0;
    }
    if (r < 0)
        nv_log_warn("job %s: the minimized fused artifact was not stored: %s", j->job_id,
                    strerror(-r));
    free(buf);
    json_decref(extra);
}

/* Gate + minimize one kept fused failure (repro_fused.h); annotate its case. */
static void minimize_fused(nvw_agent_job *j, const nvw_backend *b, const kept *k, double deadline,
                           json_t *result)
{
    nvw_frepro *fr = NULL;
    char *err = NULL;
    int r = nvw_frepro_from_buffer(k->buf, k->len, &fr, &err);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its fused artifact: %s", j->job_id,
                    k->case_index, err ? err : strerror(-r));
        free(err);
        return;
    }
    snprintf(fr->backend, sizeof fr->backend, "%s", j->backend_spec);
    /* A probe runs the graph three times: none may outlast the deadline. */
    double probe_ms = deadline * 1000 < 60000 ? deadline * 1000 : 60000;
    nvw_fmin_opts mo = {.budget = NVW_AGENT_MIN_BUDGET,
                        .deadline_s = deadline,
                        .timeout_ms = probe_ms > 1000 ? (int)probe_ms : 1000,
                        .progress = stderr,
                        .cancel = &j->cancel};
    nvw_fmin_result m;
    r = nvw_fminimize(fr, b, &mo, &m);
    if (r < 0) {
        nv_log_warn("job %s case %d: fused minimization failed: %s", j->job_id, k->case_index,
                    strerror(-r));
        nvw_frepro_free(fr);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified)
        upload_fused(j, fr, b, &m, sha);
    json_t *c = find_case(result, k->case_index);
    annotate(c, nvw_frepro_signature(fr, NULL, NULL, NULL), m.gate_runs, m.gate_failed, m.gate_bits,
             m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_nodes",
                            json_pack("{si si so}", "before", m.nodes_before, "after",
                                      m.nodes_after, "nodes", nvw_fsub_nodes(fr, &m.sub)));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "before", (json_int_t)m.elements_before, "total",
                                      (json_int_t)m.elements_after));
    }
    nv_log_info("job %s case %d: fused gate %d/%d%s, %d of %d nodes (%s)%s%s", j->job_id,
                k->case_index, m.gate_failed, m.gate_runs, m.flaky ? ", flaky" : "", m.nodes_after,
                m.nodes_before, m.stop, sha[0] ? ", minimized artifact " : "", sha);
    nvw_frepro_free(fr);
}

/* Gate + minimize one kept gradient failure (repro_grad.h); annotate its case. */
static void minimize_grad(nvw_agent_job *j, const nvw_backend *b, const kept *k, double deadline,
                          json_t *result)
{
    nvw_grepro *gr = NULL;
    char *err = NULL;
    int r = nvw_grepro_from_buffer(k->buf, k->len, &gr, &err);
    if (r < 0) {
        nv_log_warn("job %s case %d: cannot rebuild its gradient artifact: %s", j->job_id,
                    k->case_index, err ? err : strerror(-r));
        free(err);
        return;
    }
    nvw_genv env = {.gr = gr, .b = b, .backend_spec = j->backend_spec, .timeout_ms = 60000};
    nvw_min_opts mo = {.budget = NVW_AGENT_MIN_BUDGET,
                       .deadline_s = deadline,
                       .progress = stderr,
                       .cancel = &j->cancel};
    nvw_gmin_result m;
    if ((r = nvw_gminimize(&env, &mo, &m)) < 0) {
        nv_log_warn("job %s case %d: gradient minimization failed: %s", j->job_id, k->case_index,
                    strerror(-r));
        nvw_grepro_free(gr);
        return;
    }
    char sha[65] = "";
    if (!m.flaky && m.verified) {
        json_t *extra =
            json_pack("{sO? sI}", "job_id", j->job_id_json, "attempt", (json_int_t)j->attempt);
        uint8_t *buf = NULL;
        size_t len = 0;
        if (!extra || nvw_gminimized_artifact(gr, &m, extra, &buf, &len, sha) < 0 ||
            put_artifact(j, buf, len, sha) < 0)
            sha[0] = 0;
        free(buf);
        json_decref(extra);
    }
    json_t *c = find_case(result, k->case_index);
    annotate(c, nvw_grepro_signature(gr, NULL), m.gate_runs, m.gate_failed, m.gate_bits, m.flaky);
    if (c && sha[0]) {
        json_object_set_new(c, "minimized_artifact", json_string(sha));
        json_object_set_new(c, "minimized_elements",
                            json_pack("{sI sI}", "total", (json_int_t)m.numel_after, "non_neutral",
                                      (json_int_t)m.nonneutral_after));
    }
    nv_log_info("job %s case %d: gradient gate %d/%d%s%s%s", j->job_id, k->case_index,
                m.gate_failed, m.gate_runs, m.flaky ? ", flaky" : "",
                sha[0] ? ", minimized artifact " : "", sha);
    nvw_gmin_result_done(&m);
    nvw_grepro_free(gr);
}

/* Gate + minimize one kept failure by the kind of its job. */
static void minimize_one(nvw_agent_job *j, const nvw_backend *b, const kept *k, double deadline,
                         json_t *result)
{
    switch (k->kind) {
    case MIN_OP:
        minimize_op(j, b, k, deadline, result);
        break;
    case MIN_FUSED:
        minimize_fused(j, b, k, deadline, result);
        break;
    case MIN_GRAD:
        minimize_grad(j, b, k, deadline, result);
        break;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void nvw_agent_minimize_failures(nvw_agent_job *j, json_t *result)
{
    pthread_mutex_lock(&g_lock);
    int n = g_job == j ? g_n : 0;
    kept ks[NVW_AGENT_MIN_CASES];
    memcpy(ks, g_kept, sizeof(kept) * (size_t)n);
    g_n = 0; /* ownership of the buffers moves to ks */
    g_job = NULL;
    pthread_mutex_unlock(&g_lock);
    nvw_backend *b = NULL;
    char err[512] = "";
    if (n > 0 && result && nvw_backend_load(j->backend_spec, &b, err, sizeof err) < 0)
        nv_log_warn("job %s: cannot load the backend to minimize: %s", j->job_id, err);
    double start = now_s();
    for (int i = 0; i < n; i++) {
        double left = j->minimize_deadline_s - (now_s() - start);
        if (b && left > 1 && !atomic_load(&j->cancel))

            minimize_one(j, b, &ks[i], left / (n - i), result);
        free(ks[i].buf);
    }
    nvw_backend_free(b);
}
