/* emu's gradient all-reduce of the distributed device-driven step (docs/JOBS.md
 * "Distributed gradient reduction"): R ranks' gradients summed element-wise
 * the way a collective library does it. "ring": the ring reduce-scatter
 * splits the tensor into R chunks and sums chunk c rank after rank starting at
 * rank (c + 1) mod R (NCCL's and gloo's ring order), so each element is a
 * recursive sum of R terms in an order that depends on its chunk; "tree":
 * pairwise (recursive halving) sums. Every partial sum is rounded to the
 * reduction dtype, the terms too when it is narrower than their fp32. */
#include "emu_internal.h"

static double rnd(nv_dtype dt, double x)
{
    return nv_dtype_round(dt, x, &NV_ROUND_DEFAULT, 0);
}

/* pairwise sum of v[0..n) (n >= 1), each partial rounded */
static double tree_sum(const double *v, int n, nv_dtype dt)
{
    if (n == 1)
        return v[0];
    int h = n / 2;
    return rnd(dt, tree_sum(v, h, dt) + tree_sum(v + h, n - h, dt));
}

void emu_allreduce(int R, int64_t n, double *const *g, bool tree, nv_dtype dt, int rotate,
                   double *out)
{
    double v[64];
    int64_t chunk = (n + R - 1) / R;
    for (int64_t k = 0; k < n; k++) {
        for (int r = 0; r < R && r < 64; r++)
            v[r] = rnd(dt, g[r][k]);
        if (tree) {
            out[k] = tree_sum(v, R, dt);
            continue;
        }
        int first = (int)((k / (chunk > 0 ? chunk : 1) + 1 + rotate) % R);
        double acc = v[first];
        for (int i = 1; i < R; i++)
            acc = rnd(dt, acc + v[(first + i) % R]);
        out[k] = acc;
    }
}
