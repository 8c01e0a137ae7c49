/* Benchmark 1 (bench/RESULTS.md "Numerics"): the comparison kernel on N fp32
 * pairs against numpy.allclose and torch.testing.assert_close on the same arrays,
 * with a memcpy of the same bytes as the bandwidth ceiling, in one run.
 *
 * usage: compare_bench [-n N] [-p PEERS.py] [-r REPEATS]
 * Writes got and ref (raw little-endian fp32, got then ref) to a temporary file,
 * times nv_compare_f32 (ulp and allclose metrics) and memcpy here, then runs the
 * Python peer script on that file and prints one table. Times are the best of
 * REPEATS runs (default 5) of process CPU time, single-threaded here. PYTHON names the interpreter
 * (default /usr/bin/python3, where Debian's python3-torch/numpy are). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/numerics/compare.h"

/* Process CPU time, here and in the peers (time.process_time): the machine is
 * shared, and wall time would charge each side for the others' processes. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sm_state = 20261129;
static uint64_t splitmix(void)
{
    uint64_t z = (sm_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* ref: fp32 with |x| in [2^-10, 2^10), random sign and significand; got: ref,
 * or ref moved by 1 or 2 ulps (30% of elements): a device within 2 ulps. */
static void generate(float *got, float *ref, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix();
        uint32_t bits = (uint32_t)(r & 0x807fffffu) | ((uint32_t)(117 + (r >> 32) % 20) << 23);
        float v;
        memcpy(&v, &bits, 4);
        ref[i] = v;
        unsigned k = (unsigned)(r >> 40) % 10;
        uint32_t gb = bits + (k < 7 ? 0 : k < 9 ? 1 : (uint32_t)-2);
        memcpy(&got[i], &gb, 4);
    }
}

static double best_compare(const float *g, const float *r, int64_t n, const nv_tolerance *t,
                           int reps, nv_compare_result *res)
{
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = now();
        nv_compare_f32(g, r, n, t, res);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

static double best_memcpy(void *dst, const void *src, size_t bytes, int reps)
{
    double best = 1e30;
    memset(dst, 1, bytes); /* fault the pages in before timing */
    for (int k = 0; k < reps; k++) {
        double t0 = now();
        memcpy(dst, src, bytes);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    int64_t n = 50000000;
    int reps = 5;
    const char *peers = "bench/compare_peers.py";
    int opt;
    while ((opt = getopt(argc, argv, "n:p:r:")) != -1) {
        if (opt == 'n')
            n = strtoll(optarg, NULL, 10);
        else if (opt == 'p')
            peers = optarg;
        else if (opt == 'r')
            reps = atoi(optarg);
        else {
            fprintf(stderr, "usage: %s [-n N] [-p PEERS.py] [-r REPEATS]\n", argv[0]);
            return 2;
        }
    }
    size_t bytes = (size_t)n * sizeof(float);
    float *buf = malloc(2 * bytes), *dst = malloc(2 * bytes);
    if (!buf || !dst) {
        fprintf(stderr, "compare_bench: cannot allocate %zu bytes\n", 4 * bytes);
        return 2;
    }
    float *got = buf, *ref = buf + n;
    generate(got, ref, n);

    char path[] = "/tmp/numval-compare-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f || fwrite(buf, 1, 2 * bytes, f) != 2 * bytes || fclose(f) != 0) {
        fprintf(stderr, "compare_bench: cannot write '%s': %s\n", path, strerror(errno));
        return 2;
    }

    nv_tolerance tu = {.metric = NV_TOL_ULP, .max_ulp = 2};
    nv_tolerance ta = {.metric = NV_TOL_ALLCLOSE, .atol = 1e-8, .rtol = 1e-5};
    nv_compare_result ru, ra;
    double t_ulp = best_compare(got, ref, n, &tu, reps, &ru);
    double t_all = best_compare(got, ref, n, &ta, reps, &ra);
    double t_cpy = best_memcpy(dst, buf, 2 * bytes, reps);

    printf("pairs: %lld fp32 (%zu MB read per comparison)\n", (long long)n, 2 * bytes >> 20);
    printf("numval nv_compare_f32 ulp(2):   %8.1f ms  %6.2f GB/s  max_ulp %g p99 %g mean %.4f "
           "mismatches %lld\n",
           t_ulp * 1e3, 2 * bytes / t_ulp / 1e9, ru.max_ulp, ru.p99_ulp, ru.mean_ulp,
           (long long)ru.mismatches);
    printf("numval nv_compare_f32 allclose: %8.1f ms  %6.2f GB/s  max_abs %g max_rel %g "
           "mismatches %lld\n",
           t_all * 1e3, 2 * bytes / t_all / 1e9, ra.max_abs, ra.max_rel, (long long)ra.mismatches);
    printf("memcpy of the same bytes:       %8.1f ms  %6.2f GB/s (bytes copied)\n", t_cpy * 1e3,
           2 * bytes / t_cpy / 1e9);
    printf("kernel bandwidth / memcpy:      %8.2f\n", t_cpy / t_ulp);
    fflush(stdout);

    /* The peers read the same file; OPENBLAS_* unset for them alone (see the
     * environment notes: they slow numpy and do not affect allclose). */
    /* Debian's interpreter: python3-torch and python3-numpy live in its path. */
    const char *py = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE '%s' '%s' '%s' %lld %d", py, peers, path,
             (long long)n, reps > 3 ? 3 : reps);
    FILE *p = popen(cmd, "r");
    double t_np = -1, t_torch = -1;
    char line[512];
    while (p && fgets(line, sizeof(line), p)) {
        fputs(line, stdout);
        sscanf(line, "numpy.allclose: %lf", &t_np);
        sscanf(line, "torch.testing.assert_close: %lf", &t_torch);
    }
    if (p)
        pclose(p);
    unlink(path);
    if (t_np > 0)
        printf("speedup vs numpy.allclose:      %8.1fx (allclose metric: %.1fx)\n",
               t_np / 1e3 / t_ulp, t_np / 1e3 / t_all);
    if (t_torch > 0)
        printf("speedup vs torch assert_close:  %8.1fx (allclose metric: %.1fx)\n",
               t_torch / 1e3 / t_ulp, t_torch / 1e3 / t_all);
    free(buf);
    free(dst);
    return 0;
}
