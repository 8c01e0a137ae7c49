/* Gate + minimize after a failed job in agent mode (minimize.h): the failures
 * kept while the job ran are gated and minimized by their kind's row of the
 * kind table (worker/kinds/kinds.h). */
#include "minimize.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "worker/kinds/kinds.h"

typedef struct kept {
    const nvw_kind *kind;
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

int nvw_agent_on_failure_min(void *ud, const nvw_failure *f, char **ret_artifact_id)
{
    int r = nvw_agent_on_failure(ud, f, ret_artifact_id);
    if (r < 0 || !*ret_artifact_id)
        return r;
    const nvw_kind *kind = nvw_kind_named(((nvw_agent_job *)ud)->spec, NULL);
    if (!kind || !kind->failure_key || !kind->gate) /* kept with its artifact, no reproducer */
        return r;
    char key[160];
    kind->failure_key(f->manifest, key, sizeof key);
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
            k->kind = kind;
            snprintf(k->key, sizeof k->key, "%s", key);
            k->case_index = f->case_index;
            g_n++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* nvw_gate_env's store: PUT a minimized artifact, a few retries. */
static int put_artifact(void *ud, const uint8_t *buf, size_t len, const char *sha)
{
    nvw_agent_job *j = ud;
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
    /* A minimized artifact records the job it came from. */
    json_t *extra =
        n > 0 ? json_pack("{sO? sI}", "job_id", j->job_id_json, "attempt", (json_int_t)j->attempt)
              : NULL;
    nvw_gate_env env = {.b = b,
                        .backend_spec = j->backend_spec,
                        .job_id = j->job_id,
                        .extra = extra,
                        .cancel = &j->cancel,
                        .budget = NVW_AGENT_MIN_BUDGET,
                        .store = put_artifact,
                        .ud = j};
    double start = now_s();
    for (int i = 0; i < n; i++) {
        double left = j->minimize_deadline_s - (now_s() - start);
        if (b && left > 1 && !atomic_load(&j->cancel)) {
            nvw_gate_case k = {.buf = ks[i].buf,
                               .len = ks[i].len,
                               .sha = ks[i].sha,
                               .case_index = ks[i].case_index,
                               .deadline_s = left / (n - i),
                               .c = find_case(result, ks[i].case_index)};
            ks[i].kind->gate(&env, &k);
        }
        free(ks[i].buf);
    }
    json_decref(extra);
    nvw_backend_free(b);
}
