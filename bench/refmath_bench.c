/* Benchmark 2 (bench/RESULTS.md "Numerics"): the correctly rounded reference
 * with its fp64 fast path (nv_ref_round_n, the array form of nv_ref_round) against MPFR alone
 * (nv_ref_round_mpfr: MPFR straight at the target precision) on N fp32 inputs each of exp, tanh and
 * erf, rounding to fp32 nearest-even, with the fast path's values from glibc's vector
 * math library and from scalar glibc (refmath_mvec.c). Counts differences (must be 0) and MPFR
 * calls the fast path still makes. Times are this thread's CPU time.
 *
 * usage: refmath_bench [-n N] [-m MPFR_N]
 * MPFR_N (default N) inputs go through pure MPFR; with MPFR_N < N the pure-MPFR
 * time is scaled to N and only MPFR_N results are compared (say so in results).
 * Inputs: fp32 with |x| in [2^-12, 2^7), random significand and sign: ordinary
 * arguments, tiny ones, and the saturation/overflow ranges (exp overflows fp32
 * past 88.7, tanh and erf saturate). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ref/refmath.h"

/* Thread CPU time: the machine is shared, and both sides run on this thread, so
 * CPU time compares them without the time other processes took. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t sm_state = 7;
static uint64_t splitmix(void)
{
    uint64_t z = (sm_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Best of 3 passes of nv_ref_round_n (the first also warms caches and lazy
 * binding); *ret_mpfr: the MPFR calls of one pass. */
static double time_fast(nv_fn f, const double *x, int64_t n, double *out, uint64_t *ret_mpfr)
{
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        uint64_t m0, m1;
        nv_ref_stats(NULL, &m0);
        double t0 = now();
        nv_ref_round_n(f, x, n, NV_DT_FP32, NV_ROUND_NEAREST_EVEN, out);
        double dt = now() - t0;
        nv_ref_stats(NULL, &m1);
        best = dt < best ? dt : best;
        *ret_mpfr = m1 - m0;
    }
    return best;
}

int main(int argc, char **argv)
{
    int64_t n = 10000000, nm = -1;
    int opt;
    while ((opt = getopt(argc, argv, "n:m:")) != -1) {
        if (opt == 'n')
            n = strtoll(optarg, NULL, 10);
        else if (opt == 'm')
            nm = strtoll(optarg, NULL, 10);
        else {
            fprintf(stderr, "usage: %s [-n N] [-m MPFR_N]\n", argv[0]);
            return 2;
        }
    }
    if (nm < 0 || nm > n)
        nm = n;
    double *x = malloc((size_t)n * sizeof(double));
    double *fast = malloc((size_t)n * sizeof(double));
    double *scalar = malloc((size_t)n * sizeof(double));
    if (!x || !fast || !scalar) {
        fprintf(stderr, "refmath_bench: out of memory\n");
        return 2;
    }
    memset(fast, 0, (size_t)n * sizeof(double)); /* page faults before timing */
    memset(scalar, 0, (size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = splitmix();
        uint32_t bits = (uint32_t)(r & 0x807fffffu) | ((uint32_t)(115 + (r >> 32) % 19) << 23);
        float f;
        memcpy(&f, &bits, 4);
        x[i] = f;
    }
    static const nv_fn fns[] = {NV_FN_EXP, NV_FN_TANH, NV_FN_ERF};
    double la[3] = {0};
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3)
            la[0] = la[1] = la[2] = -1;
        fclose(lf);
    }
    time_t now_t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now_t));
    printf("date: %s, load average %.2f %.2f %.2f\n", date, la[0], la[1], la[2]);
    printf("inputs: %lld fp32 per function (pure MPFR on %lld), target fp32, nearest-even\n",
           (long long)n, (long long)nm);
    for (int k = 0; k < 3; k++) {
        nv_fn f = fns[k];
        uint64_t m_vec, m_sc;
        /* The fast path with glibc's vector values, then with scalar glibc
         * (refmath_mvec.c); their results must be the same bits. */
        nv_ref_vector_math(false);
        double t_sc = time_fast(f, x, n, scalar, &m_sc);
        nv_ref_vector_math(true);
        double t_fast = time_fast(f, x, n, fast, &m_vec);
        int64_t vs = 0;
        for (int64_t i = 0; i < n; i++)
            vs += memcmp(&fast[i], &scalar[i], sizeof(double)) != 0;
        int64_t diff = 0;
        double t0 = now();
        for (int64_t i = 0; i < nm; i++) {
            double v = nv_ref_round_mpfr(f, x[i], NV_DT_FP32, NV_ROUND_NEAREST_EVEN);
            diff += !(v == fast[i] || (v != v && fast[i] != fast[i]));
        }
        double t_mpfr = (now() - t0) * (double)n / (double)nm;
        printf("%-5s fast path %8.3f s (%6.1f ns/elt, %llu MPFR fallbacks)  pure MPFR %8.3f s "
               "(%7.1f ns/elt)  speedup %6.1fx  differences %lld\n",
               nv_fn_name(f), t_fast, t_fast * 1e9 / (double)n, (unsigned long long)m_vec,
               t_mpfr, t_mpfr * 1e9 / (double)n, t_mpfr / t_fast, (long long)diff);
        printf("%-5s scalar fast path %8.3f s (%6.1f ns/elt, %llu MPFR fallbacks)  speedup "
               "%6.1fx  bits differing from the fast path %lld\n",
               nv_fn_name(f), t_sc, t_sc * 1e9 / (double)n, (unsigned long long)m_sc,
               t_mpfr / t_sc, (long long)vs);
        fflush(stdout);
    }
    free(x);
    free(fast);
    free(scalar);
    return 0;
}
