/* Gate + minimize after a failed job in agent mode (agent_minimize.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_minimize.h"
#include "common/log.h"
#include "minimize.h"

typedef struct kept {
    char key[96]; /* dtype/out_dtype/class */
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

int nvw_agent_on_failure_min(void *ud, const nvw_failure *f, char **ret_artifact_id)
{
    int r = nvw_agent_on_failure(ud, f, ret_artifact_id);
    if (r < 0 || !*ret_artifact_id)
        return r;
    /* Only op cases are minimized (repro.h); gradient and fused failures keep
     * their artifact without a reproducer. */
    const char *kind = json_string_value(json_object_get(((nvw_agent_job *)ud)->spec, "kind"));
    if (kind && strcmp(kind, "op") != 0)
        return r;
    const json_t *m = f->manifest;
    char key[96];
    snprintf(key, sizeof key, "%s/%s/%s", json_string_value(json_object_get(m, "dtype")),
             json_string_value(json_object_get(m, "out_dtype")),
             json_string_value(json_object_get(m, "failure_class")));
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
        if (nvw_agent_build_artifact(ud, f, &k->buf, &k->len, k->sha) == 0) {
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

/* Gate + minimize one kept failure; annotate its case. */
static void minimize_one(nvw_agent_job *j, const nvw_backend *b, const kept *k, double deadline,
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
    if (c) {
        json_object_set_new(c, "signature", nvw_repro_signature(rc, NULL));
        json_object_set_new(c, "repro_rate",
                            json_pack("{si si si}", "runs", m.gate_runs, "failed", m.gate_failed,
                                      "bit_identical", m.gate_bits));
        json_object_set_new(c, "flaky", json_boolean(m.flaky));
        if (sha[0]) {
            json_object_set_new(c, "minimized_artifact", json_string(sha));
            json_object_set_new(c, "minimized_elements",
                                json_pack("{sI sI}", "total", (json_int_t)m.numel_after,
                                          "non_neutral", (json_int_t)m.nonneutral_after));
        }
    }
    nv_log_info("job %s case %d: gate %d/%d%s%s%s", j->job_id, k->case_index, m.gate_failed,
                m.gate_runs, m.flaky ? ", flaky" : "", sha[0] ? ", minimized artifact " : "", sha);
    nvw_min_result_done(&m);
    nvw_repro_free(rc);
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
        double left = NVW_AGENT_MIN_DEADLINE_S - (now_s() - start);
        if (b && left > 1 && !j->cancel)
            minimize_one(j, b, &ks[i], left / (n - i), result);
        free(ks[i].buf);
    }
    nvw_backend_free(b);
}
