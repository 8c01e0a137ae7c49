/* Job spec expansion: case indices, input tensor shapes and output dtypes. */
#include "jobspec.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

nv_dtype nv_jobspec_out_dtype(const nv_jobspec *s, nv_dtype dt)
{
    if (s->has_out_dtype)
        return s->out_dtype;
    if (s->op->kind == NV_OPK_CAST)
        return s->attrs.cast_to;
    if (s->op->kind == NV_OPK_SELECT) /* indices */
        return NV_DT_INT32;
    const nv_dtype_info *di = nv_dtype_get(dt);
    /* Low-precision matmul (OCP MX v1.0 §6: fp8/fp6/fp4 element products are
     * accumulated and returned in a wider format): the result is the accumulator. */
    if (s->op->kind == NV_OPK_MATMUL && di && di->is_float && di->bits <= 8)
        return s->attrs.acc_dtype;
    return dt;
}

/* Contiguous metadata of a tensor of extents dims. The element count is a
 * product of extents from the job spec: checked, so that extents whose product
 * wraps around (121675828 x 118441921 x 1280 is 1024 modulo 2^64) cannot pass
 * for a small tensor. Returns 0, or -EOVERFLOW when the count does not fit in
 * int64_t (numel is then INT64_MAX, which every limit refuses). */
static int set_meta(nv_tensor *t, nv_dtype dt, int ndim, const int64_t *dims)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = ndim;
    t->numel = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = dims[d];
        t->strides[d] = t->numel;
        if (__builtin_mul_overflow(t->numel, dims[d], &t->numel)) {
            t->numel = t->storage_len = INT64_MAX;
            return -EOVERFLOW;
        }
    }
    t->storage_len = t->numel;
    return 0;
}

static int axis_of(const nv_jobspec *s, int ndim)
{
    int a = s->attrs.axis < 0 ? s->attrs.axis + ndim : s->attrs.axis;
    return (a < 0 || a >= ndim) ? -1 : a;
}

/* Matmul scales after A and B (catalog.h: operands by granularity). */
static int matmul_scales(const nv_jobspec *s, nv_tensor *t, int n, int max)
{
    const nv_tensor *a = &t[0], *b = &t[1];
    int nd = a->ndim;
    if (s->attrs.scale == NV_SCALE_NONE)
        return n;
    if (n + 2 > max || nd < 2 || b->ndim < 2)
        return -EINVAL;
    int64_t m = a->shape[nd - 2], k = a->shape[nd - 1], nn = b->shape[b->ndim - 1];
    int64_t da[NV_MAX_DIMS], db[NV_MAX_DIMS];
    memcpy(da, a->shape, sizeof da);
    memcpy(db, b->shape, sizeof db);
    int ra = nd, rb = b->ndim;
    nv_dtype sdt = NV_DT_FP32;
    switch (s->attrs.scale) {
    case NV_SCALE_TENSOR:
        da[0] = db[0] = 1;
        ra = rb = 1;
        break;
    case NV_SCALE_CHANNEL:
        da[nd - 2] = m;
        ra = nd - 1;
        db[rb - 2] = nn;
        rb = rb - 1;
        break;
    case NV_SCALE_BLOCK: {
        int blk = s->attrs.block > 0 ? s->attrs.block : 32;
        da[nd - 1] = (k + blk - 1) / blk;
        db[rb - 2] = (k + blk - 1) / blk;
        sdt = NV_DT_E8M0;
        break;
    }
    case NV_SCALE_TILE: {
        int tr = s->attrs.tile_r > 0 ? s->attrs.tile_r : 1;
        int tc = s->attrs.tile_c > 0 ? s->attrs.tile_c : 1;
        da[nd - 2] = (m + tr - 1) / tr;
        da[nd - 1] = (k + tc - 1) / tc;
        db[rb - 2] = (b->shape[rb - 2] + tr - 1) / tr;
        db[rb - 1] = (nn + tc - 1) / tc;
        break;
    }
    default:
        return n;
    }
    if (set_meta(&t[n], sdt, ra, da) < 0 || set_meta(&t[n + 1], sdt, rb, db) < 0)
        return -EOVERFLOW;
    return n + 2;
}

static int make_tensors(const nv_jobspec *s, const nv_job_shape *sh, nv_dtype dt, nv_tensor *t,
                        int max)
{
    const nv_op_def *op = s->op;
    int n = op->n_inputs;
    bool overflow = false;
    if (n > max || n < 1)
        return -EINVAL;
    if (sh->n > 0) {
        for (int i = 0; i < n; i++)
            overflow |= set_meta(&t[i], op->inputs[i].is_index ? NV_DT_INT32 : dt, sh->ndim[i],
                                 sh->dims[i]) < 0;
    } else if (op->kind == NV_OPK_MATMUL) {
        int nd = sh->ndim[0];
        if (nd < 3 || n != 2)
            return -ERANGE;
        const int64_t *d = sh->dims[0];
        int64_t a[NV_MAX_DIMS], b[NV_MAX_DIMS];
        memcpy(a, d, (size_t)(nd - 3) * sizeof *d);
        memcpy(b, d, (size_t)(nd - 3) * sizeof *d);
        a[nd - 3] = d[nd - 3];
        a[nd - 2] = d[nd - 2];
        b[nd - 3] = d[nd - 2];
        b[nd - 2] = d[nd - 1];
        overflow |= set_meta(&t[0], dt, nd - 1, a) < 0;
        overflow |= set_meta(&t[1], dt, nd - 1, b) < 0;
    } else {
        const int64_t *d = sh->dims[0];
        int nd = sh->ndim[0];
        /* layer_norm and rms_norm normalize over the last axis (catalog). */
        bool last = strcmp(op->name, "layer_norm") == 0 || strcmp(op->name, "rms_norm") == 0;
        int ax = last ? nd - 1 : axis_of(s, nd);
        overflow |= set_meta(&t[0], dt, nd, d) < 0;
        for (int i = 1; i < n; i++) {
            int64_t x[NV_MAX_DIMS];
            if (op->inputs[i].is_index) {
                int r = 0;
                for (int k = 0; k < nd; k++)
                    if (k != ax)
                        x[r++] = d[k];
                overflow |= set_meta(&t[i], NV_DT_INT32, r, x) < 0;
            } else if (op->kind == NV_OPK_REDUCE) {
                x[0] = ax >= 0 ? d[ax] : 1;
                overflow |= set_meta(&t[i], dt, 1, x) < 0;
            } else {
                overflow |= set_meta(&t[i], dt, nd, d) < 0;
            }
        }
    }
    if (overflow)
        return -EOVERFLOW;
    if (op->kind == NV_OPK_MATMUL)
        return matmul_scales(s, t, n, max);
    return n;
}

/* Make the inputs invalid in the way of kind k: a mismatched extent in the last
 * input, or a wrong dtype (index inputs as fp32, a second input in another
 * float dtype, a lone input as int32). */
static int make_bad(const nv_jobspec *s, nv_tensor *t, int n, nv_expect_kind k, nv_dtype dt)
{
    const nv_op_def *op = s->op;
    int last = op->n_inputs - 1;
    if (k == NV_EXPECT_SHAPE_MISMATCH) {
        if (op->n_inputs < 2)
            return -EINVAL;
        nv_tensor *x = &t[last];
        int64_t d[NV_MAX_DIMS];
        memcpy(d, x->shape, sizeof d);
        int nd = x->ndim > 0 ? x->ndim : 1;
        if (x->ndim == 0)
            d[0] = 1;
        int which = op->kind == NV_OPK_MATMUL ? nd - 2 : nd - 1;
        d[which < 0 ? 0 : which] += 1;
        return set_meta(x, x->dtype, nd, d) < 0 ? -EOVERFLOW : n;
    }
    for (int i = 0; i < op->n_inputs; i++) {
        if (op->inputs[i].is_index) {
            t[i].dtype = NV_DT_FP32;
            return n;
        }
    }
    if (op->n_inputs >= 2)
        t[last].dtype = dt == NV_DT_FP32 ? NV_DT_FP16 : NV_DT_FP32;
    else
        t[0].dtype = NV_DT_INT32;
    return n;
}

int nv_jobspec_tensors(const nv_jobspec *s, const nv_job_shape *sh, nv_dtype dt, int bad,
                       nv_tensor *ret, int max)
{
    int n = make_tensors(s, sh, dt, ret, max);
    if (n < 0 || bad < 0)
        return n;
    return make_bad(s, ret, n, (nv_expect_kind)bad, dt);
}

int nv_jobspec_case(const nv_jobspec *s, int64_t i, nv_job_case *ret)
{
    if (i < 0 || i >= s->n_total)
        return -EINVAL;
    nv_job_case c = {.index = i};
    if (i >= s->n_cases) {
        int64_t j = i - s->n_cases;
        c.dtype = s->dtypes[j / s->n_expect];
        c.expect_error = true;
        c.expect = s->expect[j % s->n_expect];
        c.shape = &s->shapes[0];
        c.layout = NV_LAYOUT_CONTIGUOUS;
        c.cls = s->classes[0];
        *ret = c;
        return 0;
    }
    int64_t r = i;
    c.sample = (int)(r % s->samples);
    r /= s->samples;
    c.cls = s->classes[r % s->n_classes];
    r /= s->n_classes;
    c.layout = s->layouts[r % s->n_layouts];
    r /= s->n_layouts;
    c.shape_index = (int)(r % s->n_shapes);
    c.shape = &s->shapes[c.shape_index];
    r /= s->n_shapes;
    c.dtype = s->dtypes[r];
    *ret = c;
    return 0;
}
