/* The fp32 "normal" inputs with glibc's vector log and cos (libmvec, AVX2):
 * the same fp32 values as nv_rng_normal's expression rounded to fp32, with
 * the two scalar libm calls per value replaced by four-lane ones wherever the
 * fp32 rounding cannot tell them apart.
 *
 * Why the values are the same: the scalar value is v = sqrt(-2 log u1)
 * cos(2 pi u2) with glibc's log and cos, the vector one v' the same
 * expression with libmvec's. glibc's manual lists at most 1 ulp for log and
 * cos on x86_64 (19.7 "Known Maximum Errors"); libmvec's page states 4 ulps
 * (sourceware.org/glibc/wiki/libmvec: "tested (via reasonable random
 * sampling)"). The -2 x scaling is exact, sqrt halves a relative
 * perturbation, and sqrt and the product add a rounding each on either side,
 * so |v' / v - 1| <= (5/2 + 5 + 2) 2^-53 < 2^-49 (Higham, 2nd ed., §2.2 and
 * Lemma 3.1 for the accumulation). We assume 2^-44 (32 times that): when both
 * ends of [|v'| (1 - 2^-43), |v'| (1 + 2^-43)] (wider again, for the ends' own
 * roundings) round to the same fp32 and the interval lies in fp32's normal
 * range, v rounds to that fp32 too (rounding is monotonic), so the vector
 * value is taken; any other lane is computed by the scalar expression. Used
 * only in the default FP environment (libmvec is tested in round to nearest,
 * and FTZ/DAZ would change both libraries' internals).
 *
 * Checked by measurement besides: tests/unit/numerics/test-inputs-normal.c
 * compares millions of values against the scalar expression bit for bit. */
#include <fenv.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "normal_mvec.h"

#if defined(NV_HAVE_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MVEC 1
typedef double v4d __attribute__((vector_size(32)));
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_log(v4d);
extern __attribute__((target("avx2"))) v4d _ZGVdN4v_cos(v4d);
#endif

static int normal_mvec_on = 1;

void nv_inputs_vector_math(bool on)
{
    normal_mvec_on = on;
}

bool nvi_normal_mvec_ready(void)
{
#ifdef MVEC
    return normal_mvec_on && __builtin_cpu_supports("avx2") && fegetround() == FE_TONEAREST &&
           (_mm_getcsr() & 0x8040) == 0;
#else
    return false;
#endif
}

/* nv_rng_normal's expression, term for term, from a block's four words. */
static inline void uniforms(const uint32_t *w, double *u1, double *u2)
{
    uint64_t a = (uint64_t)w[0] << 32 | w[1], b = (uint64_t)w[2] << 32 | w[3];
    *u1 = 1.0 - (double)(a >> 11) * 0x1p-53;
    *u2 = (double)(b >> 11) * 0x1p-53;
}

#ifdef MVEC
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int64_t v4l __attribute__((vector_size(32)));

/* Four lanes at a time: the same IEEE operations per lane as the scalar
 * expression (no contraction: -std=c11 sets -ffp-contract=off). */
__attribute__((target("avx2,fma"))) void nvi_normal_f32_batch(const uint32_t *words, int n,
                                                                double *out, uint8_t *undecided)
{
    const v4d z = {0, 0, 0, 0};
    for (int k = 0; k + 4 <= n; k += 4) {
        v4d u1, u2;
        for (int j = 0; j < 4; j++) {
            double a, b; /* clang takes no address of a vector's element */
            uniforms(words + 4 * (k + j), &a, &b);
            u1[j] = a;
            u2[j] = b;
        }
        v4d l = _ZGVdN4v_log(u1), c = _ZGVdN4v_cos(2.0 * M_PI * u2);
        v4d v = (v4d)_mm256_sqrt_pd((__m256d)(-2.0 * l)) * c;
        v4d a = (v4d)((v4l)v & INT64_C(0x7fffffffffffffff)), e = a * 0x1p-43;
        v4d lo_d = a - e, hi_d = a + e;
        v4f lo = __builtin_convertvector(lo_d, v4f), hi = __builtin_convertvector(hi_d, v4f);
        v4l ok = (lo_d >= z + 0x1p-126) & (hi_d <= z + 0x1p127) &
                 __builtin_convertvector((v4i)(lo == hi), v4l);
        v4d r = __builtin_convertvector(lo, v4d);
        r = (v4d)((v4l)r | ((v4l)v & INT64_MIN)); /* v's sign: rounding is symmetric */
        memcpy(out + k, &r, sizeof r);
        for (int j = 0; j < 4; j++)
            undecided[k + j] = ok[j] == 0;
    }
}
#else
void nvi_normal_f32_batch(const uint32_t *words, int n, double *out, uint8_t *undecided)
{
    (void)words;
    (void)out;
    for (int k = 0; k < n; k++)
        undecided[k] = 1;
}
#endif
