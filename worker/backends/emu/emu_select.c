/* emu argmax and sample: the catalog's definition (core/ops/select.c) computed
 * in fp64 from the decoded logits: the order and top-k from
 * nv_sample_order, exp(x / T - z_max) by the host's exp, prefix sums in order,
 * the uniform from nv_sample_uniform. An fp64 CDF is within about V 2^-52 of
 * the exact one, far inside the reference's delta (ref_select.c), so a correct
 * emu returns the exact token.
 *
 * The misbehaviours (emu_internal.h) change one step each, as a serving
 * runtime's bugs do: sample_stream=reuse draws every row at the call's offset
 * (a batch sharing one generator), per_call at a count of draws the context
 * keeps (a generator state that is never reset from the seed), and
 * sample_topp=before_temperature cuts the nucleus on softmax(x) while drawing
 * from softmax(x / T), and sample_draw=untempered cuts it right but draws from
 * softmax(x). */
#include <stdio.h>
#include <stdlib.h>

#include "core/numerics/rng.h"
#include "emu_internal.h"

static int64_t nucleus(const double *pre, int64_t m, double top_p)
{
    if (top_p >= 1)
        return m;
    for (int64_t j = 0; j < m; j++)
        if (pre[j] / pre[m - 1] >= top_p)
            return j + 1;
    return m;
}

/* One row: the token, or -1 without a distribution; -2 out of memory. */
static int64_t sample_row(const emu_mode *m, const nv_op_attrs *a, const double *x, int64_t V,
                          double u, int64_t *order, double *pre, double *pre1)
{
    int64_t k = nv_sample_order(x, V, a->top_k, order);
    if (k < 0)
        return k;
    double z0 = x[order[0]] / a->temperature, s = 0, s1 = 0;
    for (int64_t j = 0; j < k; j++) {
        double xj = x[order[j]];
        s += xj == -INFINITY ? 0 : exp(xj / a->temperature - z0);
        s1 += xj == -INFINITY ? 0 : exp(xj - x[order[0]]);
        pre[j] = s;
        pre1[j] = s1;
    }
    int64_t n = nucleus(m->sample_topp_first ? pre1 : pre, k, a->top_p);
    const double *cdf = m->sample_untempered ? pre1 : pre;
    double t = u * cdf[n - 1];
    int64_t j = 0;
    while (j + 1 < n && t >= cdf[j])
        j++;
    return order[j];
}

int emu_select(const emu_mode *m, const nv_op_def *op, const nv_op_attrs *a,
               const nv_tensor *const *in, double *out, uint64_t *draws, char *err,
               size_t errlen)
{
    const nv_tensor *x = in[0];
    int64_t V = x->shape[x->ndim - 1], rows = x->numel / V;
    if (strcmp(op->name, "argmax") == 0) {
        for (int64_t r = 0; r < rows; r++)
            out[r] = (double)nv_argmax_row(x->data + r * V, V);
        return NV_OK;
    }
    int64_t *order = malloc((size_t)V * sizeof *order);
    double *pre = malloc(2 * (size_t)V * sizeof *pre);
    int rc = order && pre ? NV_OK : NV_E_NOMEM;
    for (int64_t r = 0; rc == NV_OK && r < rows; r++) {
        uint64_t n = m->sample_stream == EMU_SS_REUSE      ? a->offset
                     : m->sample_stream == EMU_SS_PER_CALL ? (*draws)++
                                                           : a->offset + (uint64_t)r;
        int64_t t = sample_row(m, a, x->data + r * V, V, nv_sample_uniform(a->seed, n), order,
                               pre, pre + V);
        if (t == -2)
            rc = NV_E_NOMEM;
        out[r] = (double)t;
    }
    if (rc != NV_OK)
        snprintf(err, errlen, "out of memory");
    free(order);
    free(pre);
    return rc;
}
