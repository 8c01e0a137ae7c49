/* numval-worker: `run` executes a job (or a suite of jobs) locally and prints the
 * result JSON; every other invocation is agent mode (agent.h). */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "check_backend.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"
#include "repro_cmd.h"
#include "worker/kinds/kinds.h"
#include "worker/kinds/model/model.h"
#include "worker/repro/artifact.h"
#include "worker/runner/run.h"
#ifdef HAVE_AGENT
#include "worker/agent/agent.h"
#endif

#define EXIT_PASSED 0
#define EXIT_FAILED 1
#define EXIT_ERROR 2

static void usage(FILE *f)
{
    fprintf(f,
            "usage: numval-worker run JOB.json --backend SPEC [--threads N] [--output FILE]\n"
            "                     [--artifacts DIR]\n"
            "       numval-worker --server URL [--token T | --token-file PATH] --device NAME\n"
            "                     --backend SPEC [--threads N] [--once] [--claim-wait-ms MS]\n"
            "                     [--max-artifacts N] [--minimize-deadline S] [--cacert FILE]\n"
            "                     [--idle-exit S] [--build-backend-dir DIR]...\n"
            "       numval-worker repro ARTIFACT.nvart [--backend SPEC] [--runs N]\n"
            "       numval-worker minimize ARTIFACT.nvart [--backend SPEC] [-o OUT] [--budget N]\n"
            "                     [--deadline S] [--runs N] [--plain-ddmin] [--quiet]\n"
            "       numval-worker check-backend SPEC\n"
            "       numval-worker export-weights MODEL_JOB.json -o OUT.safetensors [--dtype D]\n"
            "                     [--sample N]\n"
            "       numval-worker --help | --version\n"
            "\n"
            "run      run one job spec, or a suite file ({\"name\": ..., \"jobs\": [...]} or an\n"
            "         array of job specs), on the backend and print the result JSON.\n"
            "         Exit status: 0 all cases passed, 1 some case failed, 2 bad input or\n"
            "         infrastructure error (a case with verdict \"error\" counts as 2).\n"
            "check-backend  load SPEC and open one context (exec: find its program);\n"
            "         exit 0 when it can be used, 2 with a message naming what is wrong.\n"
            "export-weights  write the seeded init of a model job's weights (dtype D, default\n"
            "         the job's first; sample N, default 0) as a safetensors checkpoint\n"
            "         that \"weights\": {\"safetensors\": PATH} reads (docs/MODEL.md).\n"
            "SPEC     emu | emu:key=value,... | plugin:/path/lib.so[?options] | exec:COMMAND\n"
            "agent    without \"run\": claim jobs for one device from numvald (docs/JOBS.md):\n"
            "         --token-file FILE the token read from FILE, not the command line,\n"
            "         --claim-wait-ms MS long-poll wait per claim (default 20000),\n"
            "         --max-artifacts N failure artifacts uploaded per job (default 256),\n"
            "         --minimize-deadline S seconds per job to gate and minimize failures\n"
            "         (default 120, 0 off; docs/CLIENT.md \"numval-worker agent mode\"),\n"
            "         --idle-exit S exit 0 after S seconds without a job (Slurm pools).\n"
            "         --build-backend-dir DIR load the backend a job's registered build names\n"
            "         when its file lies under DIR (docs/CLIENT.md \"Bisection\").\n"
            "         The token: --token-file PATH (mode 600) or NUMVAL_TOKEN; --token T is\n"
            "         visible to every local user (ps).\n"
            "         --cacert FILE (or NUMVAL_CACERT): the CA certificates (PEM) an https\n"
            "         server's certificate is verified against instead of the system's;\n"
            "         verification is always on.\n");
}

/* "done/total cases" on a terminal's stderr; nothing when stderr is a file, so
 * scripts and CI logs get only the result. Called serially by the runner. */
static void progress(void *ud, int64_t done, int64_t total)
{
    (void)ud;
    fprintf(stderr, "\r%lld/%lld cases%s", (long long)done, (long long)total,
            done == total ? "\n" : "");
}

static int exit_for(const char *verdict)
{
    if (verdict && strcmp(verdict, "passed") == 0)
        return EXIT_PASSED;
    if (verdict && strcmp(verdict, "failed") == 0)
        return EXIT_FAILED;
    return EXIT_ERROR;
}

/* The jobs of a file: a single job (an object with "kind"), a suite object
 * {"name", "jobs"} or an array of jobs. *ret_jobs is a borrowed array or NULL
 * for a single job. Returns 0 or -EINVAL with a message. */
static int suite_jobs(const json_t *doc, json_t **ret_jobs, const char **ret_name, char *err,
                      size_t errlen)
{
    *ret_jobs = NULL;
    *ret_name = NULL;
    if (json_is_array(doc)) {
        *ret_jobs = (json_t *)doc;
    } else if (json_is_object(doc) && !json_object_get(doc, "kind") &&
               json_object_get(doc, "jobs")) {
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)doc, key, v)
        {
            if (strcmp(key, "name") && strcmp(key, "jobs") && strcmp(key, "description")) {
                snprintf(err, errlen, "/%s: unknown key '%s' in a suite (name, description, jobs)",
                         key, key);
                return -EINVAL;
            }
        }
        *ret_jobs = json_object_get(doc, "jobs");
        *ret_name = json_string_value(json_object_get(doc, "name"));
        if (!json_is_array(*ret_jobs)) {
            snprintf(err, errlen, "/jobs: must be an array of job specs");
            return -EINVAL;
        }
    } else {
        return 0;
    }
    if (json_array_size(*ret_jobs) == 0) {
        snprintf(err, errlen, "the suite has no jobs");
        return -EINVAL;
    }
    /* Validate every job before running any. */
    size_t i;
    json_t *job;
    const char *base = json_is_array(doc) ? "" : "/jobs";
    json_array_foreach(*ret_jobs, i, job)
    {
        char *ptr = NULL, *msg = NULL;
        int r = nv_jobspec_validate(job, &ptr, &msg);
        if (r < 0) {
            snprintf(err, errlen, "%s/%zu%s: %s", base, i, ptr ? ptr : "",
                     msg ? msg : "out of memory");
            free(ptr);
            free(msg);
            return -EINVAL;
        }
    }
    return 0;
}

static int write_result(const json_t *result, const char *output)
{
    FILE *f = output ? fopen(output, "w") : stdout;
    if (!f) {
        fprintf(stderr, "numval-worker: cannot write '%s': %s\n", output, strerror(errno));
        return -errno;
    }
    int r = json_dumpf(result, f, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    fputc('\n', f);
    if (output && fclose(f) != 0)
        r = -1;
    else if (!output)
        fflush(f);
    if (r < 0) {
        fprintf(stderr, "numval-worker: writing the result failed\n");
        return -EIO;
    }
    return 0;
}

static int run_one(const json_t *spec, const char *backend, const nvw_run_opts *o, json_t **ret)
{
    char *err = NULL;
    int r = nvw_run_job(spec, backend, o, ret, &err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err ? err : strerror(-r));
        free(err);
        return r;
    }
    return 0;
}

/* Run every job of a suite; the result is {"suite", "verdict", "summary", "results"}. */
static int run_suite(json_t *jobs, const char *name, const char *backend, const nvw_run_opts *o,
                     json_t **ret)
{
    json_t *results = json_array();
    if (!results)
        return -ENOMEM;
    json_int_t n[3] = {0, 0, 0}, cases = 0;
    size_t i;
    json_t *job;
    json_array_foreach(jobs, i, job)
    {
        json_t *res = NULL;
        int r = run_one(job, backend, o, &res);
        if (r < 0) {
            json_decref(results);
            return r;
        }
        n[exit_for(json_string_value(json_object_get(res, "verdict")))]++;
        cases += json_integer_value(json_object_get(json_object_get(res, "summary"), "cases"));
        json_array_append_new(results, res);
    }
    const char *verdict = n[EXIT_FAILED] ? "failed" : n[EXIT_ERROR] ? "error" : "passed";
    *ret = json_pack("{ss? ss s{sI sI sI sI sI} so}", "suite", name, "verdict", verdict, "summary",
                     "jobs", (json_int_t)json_array_size(jobs), "passed", n[EXIT_PASSED], "failed",
                     n[EXIT_FAILED], "errors", n[EXIT_ERROR], "cases", cases, "results", results);
    return *ret ? 0 : -ENOMEM;
}

static int cmd_run(int argc, char **argv)
{
    const char *file = NULL, *backend = NULL, *output = NULL;
    nvw_run_opts o = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--backend") == 0 || strcmp(a, "--threads") == 0 ||
             strcmp(a, "--output") == 0 || strcmp(a, "--artifacts") == 0) &&
            i + 1 >= argc) {
            fprintf(stderr, "numval-worker: '%s' needs a value\n", a);
            return EXIT_ERROR;
        }
        if (strcmp(a, "--backend") == 0) {
            backend = argv[++i];
        } else if (strcmp(a, "--output") == 0) {
            output = argv[++i];
        } else if (strcmp(a, "--artifacts") == 0) { /* worker/repro/save.c */
            o.on_failure = nvw_save_failure;
            o.ud = argv[++i];
        } else if (strcmp(a, "--threads") == 0) {
            char *end;
            long t = strtol(argv[++i], &end, 10);
            if (*end || t < 1 || t > 256) {
                fprintf(stderr, "numval-worker: --threads '%s' is not an integer in 1..256\n",
                        argv[i]);
                return EXIT_ERROR;
            }
            o.threads = (int)t;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "numval-worker: unknown option '%s' (see --help)\n", a);
            return EXIT_ERROR;
        } else if (!file) {
            file = a;
        } else {
            fprintf(stderr, "numval-worker: unexpected argument '%s' (see --help)\n", a);
            return EXIT_ERROR;
        }
    }
    if (isatty(STDERR_FILENO))
        o.progress = progress;
    if (!file || !backend) {
        fprintf(stderr, "numval-worker: run needs JOB.json and --backend SPEC (see --help)\n");
        return EXIT_ERROR;
    }
    json_error_t jerr;
    json_t *doc =
        strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(file, 0, &jerr);
    if (!doc) {
        fprintf(stderr, "numval-worker: cannot read '%s': %s (line %d)\n", file, jerr.text,
                jerr.line);
        return EXIT_ERROR;
    }
    json_t *jobs;
    const char *name;
    char err[1024];
    json_t *result = NULL;
    int r = suite_jobs(doc, &jobs, &name, err, sizeof err);
    if (r < 0)
        fprintf(stderr, "numval-worker: %s: %s\n", file, err);
    else if (jobs)
        r = run_suite(jobs, name, backend, &o, &result);
    else
        r = run_one(doc, backend, &o, &result);
    int status = EXIT_ERROR;
    if (r == 0 && write_result(result, output) == 0)
        status = exit_for(json_string_value(json_object_get(result, "verdict")));
    json_decref(result);
    json_decref(doc);
    return status;
}

int main(int argc, char **argv)
{
    /* Every case allocates and frees tensors of a few MB; glibc would serve them
     * with mmap/munmap (or trim the heap) and fault the pages in again for each
     * case, which cost more CPU than the numerics (bench/RESULTS.md, exec
     * section). A worker keeps its freed memory for the next case instead. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
        printf("numval-worker %s\n", NV_VERSION);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return cmd_run(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "repro") == 0) /* repro_cmd.c */
        return nvw_repro_main(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "minimize") == 0)
        return nvw_minimize_main(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "export-weights") == 0)
        return nvw_model_export_main(argc - 2, argv + 2);
    if (argc >= 2 && strcmp(argv[1], "check-backend") == 0)
        return nvw_check_backend_main(argc - 2, argv + 2);
#ifdef HAVE_AGENT
    return nvw_agent_main(argc - 1, argv + 1);
#else
    usage(stderr);
    return EXIT_ERROR;
#endif
}
