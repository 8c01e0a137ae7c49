/* nv_tensor: construction, offsets of strided views, contiguous copies. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "core/numerics/tensor.h"

static void test_new(void)
{
    int64_t shape[3] = {2, 3, 4};
    nv_tensor *t = nv_tensor_new(NV_DT_BF16, 3, shape);
    int zeros = 1;
    for (int64_t i = 0; t && i < t->numel; i++)
        zeros &= t->data[i] == 0;
    tap_ok(t && t->numel == 24 && t->storage_len == 24 && t->strides[0] == 12 &&
               t->strides[1] == 4 && t->strides[2] == 1 && t->offset == 0 && zeros &&
               t->dtype == NV_DT_BF16 && t->ndim == 3,
           "new [2,3,4]: row-major strides 12,4,1, zero-filled");
    nv_tensor_free(t);

    nv_tensor *s = nv_tensor_new(NV_DT_FP32, 0, NULL);
    tap_ok(s && s->numel == 1, "0-d tensor holds one element");
    nv_tensor_free(s);

    int64_t empty[2] = {3, 0};
    nv_tensor *e = nv_tensor_new(NV_DT_FP32, 2, empty);
    tap_ok(e && e->numel == 0, "a zero extent gives an empty tensor");
    nv_tensor *ec = e ? nv_tensor_contiguous(e) : NULL;
    tap_ok(ec && ec->numel == 0, "contiguous copy of an empty tensor");
    nv_tensor_free(ec);
    nv_tensor_free(e);

    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -1};
    int64_t huge[2] = {INT64_MAX / 4, 8};
    tap_ok(nv_tensor_new(NV_DT_FP32, 9, nine) == NULL &&
               nv_tensor_new(NV_DT_FP32, 2, neg) == NULL &&
               nv_tensor_new(NV_DT_FP32, 2, huge) == NULL &&
               nv_tensor_new(NV_DT_COUNT, 2, shape) == NULL,
           "bad shapes and dtypes give NULL");
    nv_tensor_free(NULL);
    tap_ok(1, "nv_tensor_free(NULL) is a no-op");
}

/* A 3x4 tensor holding 10*i + j, viewed transposed and as a strided slice. */
static void test_views(void)
{
    int64_t shape[2] = {3, 4};
    nv_tensor *t = nv_tensor_new(NV_DT_FP32, 2, shape);
    if (!t) {
        tap_ok(0, "allocation");
        return;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            t->data[i * 4 + j] = 10 * i + j;
    int64_t idx[2] = {2, 1};
    tap_ok(nv_tensor_offset(t, idx) == 9 && nv_tensor_offset_linear(t, 9) == 9,
           "contiguous offsets");

    nv_tensor tr = *t; /* transposed view [4,3], strides [1,4]: shares data */
    tr.shape[0] = 4, tr.shape[1] = 3, tr.strides[0] = 1, tr.strides[1] = 4;
    int ok = 1;
    for (int64_t k = 0; k < 12; k++) {
        int64_t a = k / 3, b = k % 3; /* logical [a][b] = original [b][a] */
        ok &= tr.data[nv_tensor_offset_linear(&tr, k)] == 10 * b + a;
    }
    nv_tensor *c = nv_tensor_contiguous(&tr);
    for (int64_t k = 0; c && k < 12; k++)
        ok &= c->data[k] == 10 * (k % 3) + k / 3 && c->strides[1] == 1;
    tap_ok(ok && c, "transposed view: offset_linear and contiguous copy follow the strides");
    nv_tensor_free(c);

    nv_tensor sl = *t; /* rows 1..2, columns 1 and 3: offset 5, strides [4, 2] */
    sl.shape[0] = 2, sl.shape[1] = 2, sl.strides[0] = 4, sl.strides[1] = 2, sl.offset = 5;
    sl.numel = 4;
    const double want[4] = {11, 13, 21, 23};
    c = nv_tensor_contiguous(&sl);
    ok = c != NULL;
    for (int k = 0; c && k < 4; k++)
        ok &= c->data[k] == want[k] && sl.data[nv_tensor_offset_linear(&sl, k)] == want[k];
    int64_t ix[2] = {1, 1};
    tap_ok(ok && nv_tensor_offset(&sl, ix) == 11, "strided slice with offset");
    nv_tensor_free(c);
    nv_tensor_free(t);
}

/* nv_tensor_dense: what lets loops index offset + i, and nv_tensor_contiguous's
 * copy of such a view. */
static void test_dense(void)
{
    int64_t shape[3] = {2, 1, 3};
    nv_tensor *t = nv_tensor_new(NV_DT_FP32, 3, shape);
    tap_ok(t && nv_tensor_dense(t), "a new tensor is dense");
    if (!t)
        return;
    for (int k = 0; k < 6; k++)
        t->data[k] = k;
    nv_tensor v = *t;
    v.strides[1] = 7; /* an extent of 1: its stride never moves an element */
    tap_ok(nv_tensor_dense(&v), "an extent-1 dimension's stride is ignored");
    v.strides[0] = 4;
    tap_ok(!nv_tensor_dense(&v), "a row stride past the row is not dense");
    nv_tensor tr = *t; /* [3, 1, 2] with strides [1, 1, 3]: transposed */
    tr.shape[0] = 3, tr.shape[2] = 2, tr.strides[0] = 1, tr.strides[2] = 3;
    tap_ok(!nv_tensor_dense(&tr), "a transposed view is not dense");
    nv_tensor tail = *t; /* the last row alone, as a view at offset 3 */
    tail.shape[0] = 1, tail.numel = 3, tail.offset = 3;
    nv_tensor *c = nv_tensor_contiguous(&tail);
    int ok = c && nv_tensor_dense(&tail);
    for (int64_t k = 0; c && k < 3; k++)
        ok &= c->data[k] == 3 + k && nv_tensor_offset_lin(&tail, true, k) ==
                                        nv_tensor_offset_linear(&tail, k);
    tap_ok(ok, "a dense view at an offset: offset + i, and its contiguous copy");
    nv_tensor_free(c);
    nv_tensor_free(t);
}

int main(void)
{
    test_new();
    test_views();
    test_dense();
    return tap_done();
}
