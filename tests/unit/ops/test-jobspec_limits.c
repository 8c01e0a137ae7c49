/* Job-spec size limits: element counts are checked products (a wrapped product
 * cannot pass for a small tensor), outputs are limited like inputs, and
 * validation is O(1) in the tensor sizes (the structured Jacobian of a gradient
 * job is counted, never built). The memory tests fork: ru_maxrss is a
 * high-water mark, so each runs in a child of its own. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/ops/jacobian.h"
#include "core/spec/gradspec.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"
#include "tests/unit/tap.h"

#define MAX_RSS_GROWTH_KB (64 * 1024)

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Validate text; ok when it is refused at want_ptr with every fragment of
 * want[] (NULL-terminated) in the message, or accepted when want_ptr is NULL. */
static bool check(const char *text, const char *want_ptr, const char *const *want, long *ret_kb)
{
    json_error_t jerr;
    json_t *spec = json_loads(text, 0, &jerr);
    if (!spec) {
        tap_diag("bad test JSON: %s", jerr.text);
        return false;
    }
    char *ptr = NULL, *msg = NULL;
    long before = max_rss_kb();
    int r = nv_jobspec_validate(spec, &ptr, &msg);
    if (ret_kb)
        *ret_kb = max_rss_kb() - before;
    bool ok = want_ptr ? r == -EINVAL && ptr && strcmp(ptr, want_ptr) == 0 && msg : r == 0;
    for (int i = 0; ok && want && want[i]; i++)
        ok = strstr(msg, want[i]) != NULL;
    if (!ok)
        tap_diag("got %d '%s': '%s'", r, ptr ? ptr : "(null)", msg ? msg : "(null)");
    free(ptr);
    free(msg);
    json_decref(spec);
    return ok;
}

/* check() in a child process, so that each spec's peak memory is its own
 * (ru_maxrss is a high-water mark; a child starts from the parent's current
 * RSS). ok: the verdict as check() gives it; *ret_kb: the child's growth. */
static bool check_alone(const char *text, const char *want_ptr, const char *const *want,
                        long *ret_kb)
{
    int fd[2];
    if (pipe(fd) < 0)
        return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        long kb = -1;
        bool ok = check(text, want_ptr, want, &kb);
        fflush(stdout);
        long out[2] = {ok, kb};
        _exit(write(fd[1], out, sizeof out) == (ssize_t)sizeof out ? 0 : 1);
    }
    close(fd[1]);
    long in[2] = {0, -1};
    bool got = pid > 0 && read(fd[0], in, sizeof in) == (ssize_t)sizeof in;
    close(fd[0]);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    *ret_kb = in[1];
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0 && in[0];
}

/* The two specs of the report: each took ~8 s and GBs in numvald, building
 * the Jacobian map (4 int64 per element) only to count its entries. The
 * message and the entry counts (n_out x n_pos: 133333526 x 1 for the diagonal
 * sqrt; 8 x 1342177 x 7 outputs x 7 positions along layer_norm's last axis) are
 * the old ones; what changed is the memory. */
static void test_gradient_bounded(void)
{
    static const char *const sqrt_want[] = {
        "structured Jacobian of input 'x' has 133333526 entries", "more than 16777216", NULL};
    long kb = 0;
    bool ok = check_alone(
        "{\"kind\":\"gradient\",\"op\":\"sqrt\",\"dtypes\":[\"fp32\",\"bf16\",\"fp16\"],"
        "\"shapes\":[[133333526]],\"seed\":4}",
        "/shapes/0", sqrt_want, &kb);
    tap_ok(ok, "gradient sqrt [133333526]: refused at /shapes/0 with the Jacobian size");
    tap_ok(kb >= 0 && kb < MAX_RSS_GROWTH_KB,
           "... and validation grew the peak RSS by %ld KiB (< 64 MiB)", kb);
    static const char *const ln_want[] = {"has 526133384 entries", "more than 16777216", NULL};
    ok = check_alone("{\"kind\":\"gradient\",\"op\":\"layer_norm\",\"dtypes\":[\"fp32\"],"
                     "\"shapes\":[[8, 1342177, 7]],\"seed\":4}",
                     "/shapes/0", ln_want, &kb);
    tap_ok(ok, "gradient layer_norm [8, 1342177, 7]: refused at /shapes/0 with the Jacobian size");
    tap_ok(kb >= 0 && kb < MAX_RSS_GROWTH_KB,
           "... and validation grew the peak RSS by %ld KiB (< 64 MiB)", kb);
    /* At the element limit and valid: "fast" stores no Jacobian. */
    ok = check_alone("{\"kind\":\"gradient\",\"op\":\"sqrt\",\"dtypes\":[\"fp32\"],"
                     "\"shapes\":[[134217728]],\"mode\":\"fast\"}",
                     NULL, NULL, &kb);
    tap_ok(ok && kb >= 0 && kb < MAX_RSS_GROWTH_KB,
           "gradient sqrt [2^27] fast: valid, peak RSS grew by %ld KiB (< 64 MiB)", kb);
    ok = check_alone(
        "{\"kind\":\"op\",\"op\":\"layer_norm\",\"dtypes\":[\"fp32\",\"bf16\",\"fp16\"],"
        "\"shapes\":[[8, 2097152, 8]],\"inputs\":[\"normal\",\"specials\"]}",
        NULL, NULL, &kb);
    tap_ok(ok && kb >= 0 && kb < MAX_RSS_GROWTH_KB,
           "op layer_norm [8, 2^21, 8] (2^27 elements): valid, peak RSS grew by %ld KiB", kb);
}

/* Products of extents that overflow int64_t: 121675828 x 118441921 x 1280 is
 * 1024 modulo 2^64 and 2^27 x 2^27 x 2^27 is 0; both were accepted. */
static void test_overflow(void)
{
    static const char *const want[] = {"more than 2^63 elements", "limit of 134217728", NULL};
    tap_ok(check("{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[121675828, 118441921, 1280]]}",
                 "/shapes/0", want, NULL),
           "op exp [121675828, 118441921, 1280] (wraps to 1024): refused at /shapes/0");
    tap_ok(check("{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[134217728, 134217728, 134217728]]}",
                 "/shapes/0", want, NULL),
           "op exp [2^27, 2^27, 2^27] (wraps to 0): refused at /shapes/0");
    tap_ok(check("{\"kind\":\"op\",\"op\":\"add\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[[4], [121675828, 118441921, 1280]]]}",
                 "/shapes/0", (const char *const[]){"input 1 would hold more than 2^63", NULL},
                 NULL),
           "op add, per-input shapes, input 1 wraps: refused naming input 1");
    tap_ok(check("{\"kind\":\"gradient\",\"op\":\"sqrt\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[134217728, 134217728, 134217728]]}",
                 "/shapes/0", want, NULL),
           "gradient sqrt [2^27, 2^27, 2^27]: refused at /shapes/0");
    tap_ok(check("{\"kind\":\"op\",\"op\":\"matmul\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[134217728, 134217728, 134217728, 2]]}",
                 "/shapes/0", want, NULL),
           "op matmul [2^27, 2^27, 2^27, 2] (batch x M x K wraps): refused at /shapes/0");
}

/* The limit itself, on both sides, for inputs and outputs. */
static void test_limit_edges(void)
{
    tap_ok(check("{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[2, 67108864]]}",
                 NULL, NULL, NULL),
           "op exp [2, 2^26] (exactly 2^27 elements): valid");
    tap_ok(check("{\"kind\":\"op\",\"op\":\"exp\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[2, 67108865]]}",
                 "/shapes/0",
                 (const char *const[]){"input 0 would hold 134217730 elements",
                                       "limit of 134217728 per tensor", NULL},
                 NULL),
           "op exp [2, 2^26 + 1]: refused with the count and the limit");
    /* [M, 1] x [1, N]: two operands of 2^14 elements, an output of 2^28. */
    tap_ok(check("{\"kind\":\"op\",\"op\":\"matmul\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[16384, 1, 16384]]}",
                 "/shapes/0",
                 (const char *const[]){"the output would hold 268435456 elements",
                                       "limit of 134217728 per tensor", NULL},
                 NULL),
           "op matmul [2^14, 1, 2^14]: the output over the limit is refused");
    tap_ok(check("{\"kind\":\"op\",\"op\":\"matmul\",\"dtypes\":[\"fp32\"],"
                 "\"shapes\":[[8192, 1, 16384]]}",
                 NULL, NULL, NULL),
           "op matmul [2^13, 1, 2^14]: an output of exactly 2^27 elements is valid");
    tap_ok(check("{\"kind\":\"fused\",\"graph\":{\"inputs\":[{\"name\":\"a\",\"shape\":[16384,1]},"
                 "{\"name\":\"b\",\"shape\":[1,16384]}],\"nodes\":[{\"name\":\"mm\","
                 "\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"]}],\"outputs\":[\"mm\"]},"
                 "\"dtypes\":[\"fp32\"]}",
                 "/graph/nodes/0",
                 (const char *const[]){"node 'mm' (op 'matmul') would output more than 134217728",
                                       NULL},
                 NULL),
           "fused: a matmul node whose output exceeds the limit is refused at its node");
}

/* nv_gradspec_jacobian_entries against the map it stands for: for every op
 * with a backward, at small shapes and the axis/reduction variants, the count
 * equals n_out x n_pos of the map nv_jac_map_new builds. */
static void test_entries_match_map(void)
{
    static const char *const shapes[] = {"[[7]]", "[[3, 5]]", "[[2, 3, 4]]", "[[3, 4, 5]]",
                                         "[[2, 3, 4, 5]]"};
    static const char *const attrs[] = {"{}", "{\"axis\": 0}", "{\"reduction\": \"mean\"}"};
    size_t n_ops;
    const nv_op_def *ops = nv_op_all(&n_ops);
    int compared = 0, wrong = 0;
    for (size_t o = 0; o < n_ops; o++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
                char text[256];
                snprintf(text, sizeof text,
                         "{\"kind\":\"op\",\"op\":\"%s\",\"dtypes\":[\"fp64\"],\"shapes\":[%s],"
                         "\"attrs\":%s}",
                         ops[o].name, shapes[s], attrs[a]);
                json_t *spec = json_loads(text, 0, NULL);
                nv_jobspec *js = NULL;
                int r = nv_jobspec_parse(spec, &js, NULL, NULL);
                json_decref(spec);
                if (r < 0 || !nv_op_has_backward(js->op, &js->attrs)) {
                    nv_jobspec_free(js);
                    continue;
                }
                nv_tensor t[NV_JOB_MAX_TENSORS];
                int n =
                    nv_jobspec_tensors(js, &js->shapes[0], NV_DT_FP64, -1, t, NV_JOB_MAX_TENSORS);
                const nv_tensor *in[NV_JOB_MAX_TENSORS];
                for (int i = 0; i < n; i++)
                    in[i] = &t[i];
                for (int i = 0; i < n && i < js->op->n_inputs; i++) {
                    nv_jac_map *m = NULL;
                    int64_t entries = -1;
                    if (nv_jac_map_new(js->op, &js->attrs, n, in, i, &m) < 0)
                        continue;
                    int re = nv_gradspec_jacobian_entries(js->op, &js->attrs, n, in, i, &entries);
                    compared++;
                    if (re < 0 || entries != m->n_out * m->n_pos) {
                        wrong++;
                        tap_diag("%s input %d: counted %lld, the map has %lld x %lld", text, i,
                                 (long long)entries, (long long)m->n_out, (long long)m->n_pos);
                    }
                    nv_jac_map_free(m);
                }
                nv_jobspec_free(js);
            }
        }
    }
    tap_ok(compared > 100 && wrong == 0,
           "Jacobian entries counted from shapes equal the map's n_out x n_pos (%d inputs, %d "
           "differ)",
           compared, wrong);
}

int main(void)
{
    test_gradient_bounded();
    test_overflow();
    test_limit_edges();
    test_entries_match_map();
    return tap_done();
}
