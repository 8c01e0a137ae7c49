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

int main(void)
{
    test_new();
    test_views();
    return tap_done();
}
