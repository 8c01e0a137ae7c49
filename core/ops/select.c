/* The selections (NV_OPK_SELECT, catalog.h): argmax and sample, an int32 index
 * per row of the last axis. Shape rules and what the exact reference and every
 * device share of the definition (docs/TOLERANCES.md "Selections"):
 *
 * argmax: the index of the largest value of the row; ties (-0 and +0 are equal)
 * go to the lowest index; a NaN counts above every number, so a row holding a
 * NaN gives the index of its first NaN (torch.argmax and numpy.argmax do the
 * same).
 *
 * sample (attrs temperature T > 0, top_k K >= 0, top_p P in (0, 1], seed S,
 * offset O), for row r (rows in row-major order of the leading dims):
 * 1. the order: tokens sorted by logit x descending, equal logits by index
 *    ascending (T > 0 keeps the order of x / T, so the order is exact);
 * 2. top-k: when 0 < K < V only the first K tokens of the order stay;
 * 3. q_j = exp(z_j - z_max) / sum exp(z_i - z_max) over the kept tokens, z =
 *    x / T, exact real arithmetic;
 * 4. top-p: when P < 1 only the shortest prefix of the order whose q sum is
 *    >= P stays (the nucleus, Holtzman et al., ICLR 2020), and q is
 *    renormalised over it;
 * 5. the uniform u = nv_sample_uniform(S, O + r) (core/numerics/rng.h: one
 *    Philox4x32-10 block, 53 bits);
 * 6. the token is the j-th of the order for the smallest j with u < C_j, C_j
 *    the cumulative sum of the (renormalised) q in order; a token of q = 0
 *    (logit -inf) is never drawn.
 * A row holding a NaN or +Inf, or whose logits are all -inf, has no
 * distribution: its token is -1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define ERR(code, ...) (snprintf(err, errlen, __VA_ARGS__), (code))

int nvo_select_infer(const nv_op_def *op, int n_in, const nv_tensor *const *in, int *ret_ndim,
                     int64_t *ret_shape, char *err, size_t errlen)
{
    (void)n_in;
    const nv_tensor *x = in[0];
    char s0[96];
    if (!nvo_dtype_supported(op, x->dtype))
        return ERR(NV_E_DTYPE, "op '%s' does not support dtype '%s' for input '%s'", op->name,
                   nv_dtype_name(x->dtype), op->inputs[0].name);
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return ERR(NV_E_SHAPE, "op '%s': input '%s' must have a non-empty last axis, got shape %s",
                   op->name, op->inputs[0].name, nvo_shape_str(x, s0, sizeof s0));
    if (x->shape[x->ndim - 1] > INT32_MAX)
        return ERR(NV_E_SHAPE, "op '%s': a last axis of %lld indices does not fit in int32",
                   op->name, (long long)x->shape[x->ndim - 1]);
    for (int d = 0; d + 1 < x->ndim; d++)
        ret_shape[d] = x->shape[d];
    *ret_ndim = x->ndim - 1;
    return 0;
}

int64_t nv_argmax_row(const double *x, int64_t n)
{
    int64_t b = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return i;
        if (x[i] > x[b])
            b = i;
    }
    return b;
}

typedef struct keyed {
    double x;
    int64_t i;
} keyed;

static int by_logit(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->x != b->x)
        return a->x > b->x ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

int64_t nv_sample_order(const double *x, int64_t n, int top_k, int64_t *order)
{
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i]) || x[i] == INFINITY)
            return -1;
    keyed *k = malloc((size_t)n * sizeof *k);
    if (!k)
        return -2;
    for (int64_t i = 0; i < n; i++)
        k[i] = (keyed){x[i], i};
    qsort(k, (size_t)n, sizeof *k, by_logit);
    int64_t kept = top_k > 0 && top_k < n ? top_k : n;
    for (int64_t j = 0; j < kept; j++)
        order[j] = k[j].i;
    bool finite = k[0].x != -INFINITY;
    free(k);
    return finite ? kept : -1;
}
