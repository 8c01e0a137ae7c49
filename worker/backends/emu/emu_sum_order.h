/* The reduction orders of emu_sum.c over one kind of terms. Not a header: emu_sum.c
 * includes it once per kind, with T(name) naming its functions, X(s, i) and
 * Y(s, i, x) reading the two factors of term i (x the first, read already) and
 * HAS_Y(s) saying whether the terms are products; fast_d / fast_v is the plain
 * sequential sum of the kind. No include guard, on purpose. */

/* Term i rounded to dt: a value or a rounded product. */
static inline double T(term)(const sum_seq *s, int64_t i)
{
    double x = X(s, i);
    if (!HAS_Y(s))
        return emu_round(s->c, s->dt, x);
    return emu_mul(s->c, s->dt, x, Y(s, i, x));
}

/* acc + term i: with fma=on the product enters the sum unrounded. */
static inline double T(step)(const sum_seq *s, double acc, int64_t i)
{
    if (s->fused) {
        double x = X(s, i);
        return emu_fma(s->c, s->dt, x, Y(s, i, x), acc);
    }
    return emu_add(s->c, s->dt, acc, T(term)(s, i));
}

/* Term i into t[*n] (and t[*n + 1]): a value, or a product, exact when fused
 * (its two halves, Dekker's TwoProduct through fma), else rounded first. */
static void T(block_term)(const sum_seq *s, int64_t i, double *t, int *n)
{
    if (!s->fused) {
        t[(*n)++] = T(term)(s, i);
        return;
    }
    double x = X(s, i), y = Y(s, i, x), p = x * y;
    t[(*n)++] = p;
    if (isfinite(p))
        t[(*n)++] = fma(x, y, -p);
}

/* A sequential run with a multi-term adder (Fasi et al. 2021 §3): the
 * accumulator and the next accum_block terms are added with one rounding; the
 * first block is the first accum_block terms alone. */
static double T(run_blocked)(const sum_seq *s, int64_t first, int64_t stride, int64_t count)
{
    double t[2 * EMU_MAX_BLOCK + 1], acc = 0;
    int w = s->c->m->accum_block;
    for (int64_t j = 0; j < count;) {
        int n = 0;
        if (j > 0)
            t[n++] = acc;
        for (int q = 0; q < w && j < count; q++, j++)
            T(block_term)(s, first + j * stride, t, &n);
        acc = block(s, t, n);
    }
    return acc;
}

/* Terms first, first + stride, ... (count of them), left to right. */
static double T(run)(const sum_seq *s, int64_t first, int64_t stride, int64_t count)
{
    if (s->blocked)
        return T(run_blocked)(s, first, stride, count);
    double acc = T(term)(s, first);
    for (int64_t j = 1; j < count; j++)
        acc = T(step)(s, acc, first + j * stride);
    return acc;
}

static double T(pairwise)(const sum_seq *s, int64_t lo, int64_t n)
{
    if (n == 1)
        return T(term)(s, lo);
    int64_t h = n / 2;
    double a = T(pairwise)(s, lo, h);
    double b = T(pairwise)(s, lo + h, n - h);
    return acc_add(s, a, b);
}

/* Lanes [lo, lo + m) of a tree:k reduction, combined pairwise; lane j runs the
 * terms j, j + k, ... sequentially (a GPU block: strided per-thread loops, then a
 * shared-memory tree). */
static double T(lanes)(const sum_seq *s, int64_t n, int64_t k, int64_t lo, int64_t m)
{
    if (m == 1)
        return T(run)(s, lo, k, (n - lo + k - 1) / k);
    int64_t h = m / 2;
    double a = T(lanes)(s, n, k, lo, h);
    double b = T(lanes)(s, n, k, lo + h, m - h);
    return acc_add(s, a, b);
}

static double T(splitk)(const sum_seq *s, int64_t n, int64_t k)
{
    int64_t chunk = (n + k - 1) / k;
    double acc = T(run)(s, 0, 1, chunk < n ? chunk : n);
    for (int64_t lo = chunk; lo < n; lo += chunk) {
        int64_t m = n - lo < chunk ? n - lo : chunk;
        acc = acc_add(s, acc, T(run)(s, lo, 1, m));
    }
    return acc;
}

static double T(randtree)(const sum_seq *s, uint64_t seed, int64_t lo, int64_t n)
{
    if (n == 1)
        return T(term)(s, lo);
    int64_t h = emu_randtree_split(seed, lo, n);
    double a = T(randtree)(s, seed, lo, h);
    return acc_add(s, a, T(randtree)(s, seed, lo + h, n - h));
}

static double T(random_order)(const sum_seq *s, int64_t n)
{
    uint64_t un = (uint64_t)n, a, idx;
    random_perm(s, un, &a, &idx);
    double acc = T(term)(s, (int64_t)idx);
    for (uint64_t j = 1; j < un; j++) {
        idx = (idx + a) % un;
        acc = T(step)(s, acc, (int64_t)idx);
    }
    return acc;
}

/* The n >= 1 terms in the call's order. */
static double T(sum)(const sum_seq *s, int64_t n)
{
    emu_call *c = s->c;
    int64_t k = c->m->order_k > 0 ? c->m->order_k : 1;
    switch (c->m->order) {
    case EMU_ORDER_SEQUENTIAL:
        if (!HAS_Y(s) && c->plain && !s->blocked && (s->dt == NV_DT_FP32 || s->dt == NV_DT_FP64))
            return T(fast)(s, n);
        return T(run)(s, 0, 1, n);
    case EMU_ORDER_PAIRWISE:
        return T(pairwise)(s, 0, n);
    case EMU_ORDER_TREE:
        return T(lanes)(s, n, k, 0, n < k ? n : k);
    case EMU_ORDER_SPLITK:
        return T(splitk)(s, n, k);
    case EMU_ORDER_RANDOM:
        return T(random_order)(s, n);
    case EMU_ORDER_RANDTREE:
        return T(randtree)(s, (uint64_t)k, 0, n);
    }
    return T(run)(s, 0, 1, n);
}
