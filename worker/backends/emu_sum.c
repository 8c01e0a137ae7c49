/* Ordered accumulation: the emu's reductions and dot products add their terms in
 * the order the mode declares, every partial sum rounded to the accumulate dtype.
 * The error of each order is analysed in Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., ch. 4 (recursive: (n-1)u; pairwise: ceil(log2 n)u). */
#include <math.h>

#include "emu_internal.h"

typedef struct sum_seq {
    emu_call *c;
    nv_dtype dt;
    const double *x, *y;
    int64_t sx, sy;
    bool fused; /* y present and fma=on */
} sum_seq;

/* Term i rounded to dt: a value or a rounded product. */
static inline double term(const sum_seq *s, int64_t i)
{
    if (!s->y)
        return emu_round(s->c, s->dt, s->x[i * s->sx]);
    return emu_mul(s->c, s->dt, s->x[i * s->sx], s->y[i * s->sy]);
}

/* acc + term i: with fma=on the product enters the sum unrounded. */
static inline double step(const sum_seq *s, double acc, int64_t i)
{
    if (s->fused)
        return emu_fma(s->c, s->dt, s->x[i * s->sx], s->y[i * s->sy], acc);
    return emu_add(s->c, s->dt, acc, term(s, i));
}

/* Terms first, first + stride, ... (count of them), left to right. */
static double run(const sum_seq *s, int64_t first, int64_t stride, int64_t count)
{
    double acc = term(s, first);
    for (int64_t j = 1; j < count; j++)
        acc = step(s, acc, first + j * stride);
    return acc;
}

/* Plain fp32 / fp64 sequential sums: the hardware adds are the emulated ones. */
static double run_fast(const sum_seq *s, int64_t n)
{
    if (s->dt == NV_DT_FP64) {
        double acc = s->x[0];
        for (int64_t i = 1; i < n; i++)
            acc += s->x[i * s->sx];
        return acc;
    }
    float acc = (float)s->x[0];
    for (int64_t i = 1; i < n; i++)
        acc += (float)s->x[i * s->sx];
    return acc;
}

static double pairwise(const sum_seq *s, int64_t lo, int64_t n)
{
    if (n == 1)
        return term(s, lo);
    int64_t h = n / 2;
    double a = pairwise(s, lo, h);
    double b = pairwise(s, lo + h, n - h);
    return emu_add(s->c, s->dt, a, b);
}

/* Lanes [lo, lo + m) of a tree:k reduction, combined pairwise; lane j runs the
 * terms j, j + k, ... sequentially (a GPU block: strided per-thread loops, then a
 * shared-memory tree). */
static double lanes(const sum_seq *s, int64_t n, int64_t k, int64_t lo, int64_t m)
{
    if (m == 1)
        return run(s, lo, k, (n - lo + k - 1) / k);
    int64_t h = m / 2;
    double a = lanes(s, n, k, lo, h);
    double b = lanes(s, n, k, lo + h, m - h);
    return emu_add(s->c, s->dt, a, b);
}

static double splitk(const sum_seq *s, int64_t n, int64_t k)
{
    int64_t chunk = (n + k - 1) / k;
    double acc = run(s, 0, 1, chunk < n ? chunk : n);
    for (int64_t lo = chunk; lo < n; lo += chunk) {
        int64_t m = n - lo < chunk ? n - lo : chunk;
        acc = emu_add(s->c, s->dt, acc, run(s, lo, 1, m));
    }
    return acc;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A fresh order per call: i -> (a i + b) mod n with gcd(a, n) = 1, a permutation
 * drawn from the per-call stream, then left to right (as atomics land). */
static double random_order(const sum_seq *s, int64_t n)
{
    uint64_t un = (uint64_t)n;
    uint64_t a = 1 + emu_splitmix(&s->c->order_state) % (un > 1 ? un - 1 : 1);
    while (gcd64(a, un) != 1)
        a = a % (un - 1) + 1;
    uint64_t b = emu_splitmix(&s->c->order_state) % un;
    uint64_t idx = b;
    double acc = term(s, (int64_t)idx);
    for (uint64_t j = 1; j < un; j++) {
        idx = (idx + a) % un;
        acc = step(s, acc, (int64_t)idx);
    }
    return acc;
}

double emu_sum(emu_call *c, nv_dtype dt, const double *x, int64_t sx, const double *y, int64_t sy,
               int64_t n)
{
    if (n <= 0)
        return 0.0;
    sum_seq s = {c, dt, x, y, sx, sy, y && c->m->fma};
    int64_t k = c->m->order_k > 0 ? c->m->order_k : 1;
    switch (c->m->order) {
    case EMU_ORDER_SEQUENTIAL:
        if (!y && c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64))
            return run_fast(&s, n);
        return run(&s, 0, 1, n);
    case EMU_ORDER_PAIRWISE:
        return pairwise(&s, 0, n);
    case EMU_ORDER_TREE:
        return lanes(&s, n, k, 0, n < k ? n : k);
    case EMU_ORDER_SPLITK:
        return splitk(&s, n, k);
    case EMU_ORDER_RANDOM:
        return random_order(&s, n);
    }
    return run(&s, 0, 1, n);
}
