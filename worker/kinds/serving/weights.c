/* A serving job's weights from a safetensors checkpoint (docs/SERVING.md
 * "Weights"): the tensors under the model kind's decoder-lm parameter names
 * (what numval-worker export-weights writes for the model job of the same
 * sizes), each with the decoder's shape and stored in every case dtype: a
 * checkpoint is never cast (docs/MODEL.md "Checkpoints"). The job's setup
 * checks the file once (its SHA-256 when the job gives one, every tensor) and
 * records its SHA-256; each case's model reads its values from it, the same
 * bytes or none. The rotary tables and the
 * rotate-half matrix are the decoder's fixed tables, never weights. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/sha256.h"
#include "serving_internal.h"
#include "worker/runner/err.h"

static const char *const per_layer[] = {"g_attn", "wq",     "wk",   "wv",    "wo",
                                        "g_mlp",  "w_gate", "w_up", "w_down"};

/* Weight k of 3 + 9 x layers: its name and shape. */
static void weight(const nv_servingspec *s, int k, char *name, size_t len, int64_t *shape,
                   int *ndim)
{
    int64_t D = s->width, V = s->vocab, F = s->ffn;
    static const char *const top[] = {"wte", "g_final", "w_unembed"};
    if (k < 3) {
        int64_t sh[3][2] = {{V, D}, {D, 0}, {D, V}};
        snprintf(name, len, "%s", top[k]);
        *ndim = k == 1 ? 1 : 2;
        memcpy(shape, sh[k], sizeof sh[k]);
        return;
    }
    int l = (k - 3) / 9, i = (k - 3) % 9;
    snprintf(name, len, "decoder.%d.%s", l, per_layer[i]);
    int64_t sh[9][2] = {{D, 0}, {D, D}, {D, D}, {D, D}, {D, D}, {D, 0}, {D, F}, {D, F}, {F, D}};
    *ndim = i == 0 || i == 5 ? 1 : 2;
    memcpy(shape, sh[i], sizeof sh[i]);
}

static nv_tensor *tensor_of(const sv_model *m, int k)
{
    if (k < 3)
        return k == 0 ? m->wte : k == 1 ? m->g_final : m->w_unembed;
    const sv_layer *y = &m->layer[(k - 3) / 9];
    nv_tensor *t[] = {y->g_attn, y->wq,     y->wk,   y->wv,    y->wo,
                      y->g_mlp,  y->w_gate, y->w_up, y->w_down};
    return t[(k - 3) % 9];
}

static int st_of(nv_dtype dt, nv_st_dtype *ret)
{
    static const struct {
        nv_dtype dt;
        nv_st_dtype st;
    } map[] = {{NV_DT_FP64, NV_ST_F64},
               {NV_DT_FP32, NV_ST_F32},
               {NV_DT_BF16, NV_ST_BF16},
               {NV_DT_FP16, NV_ST_F16}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (map[i].dt == dt)
            return *ret = map[i].st, 0;
    return -1;
}

int sv_weights_check(const nv_servingspec *s, char sha[65], char **ret_err)
{
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_read(s->weights, &NV_ST_LIMITS_DEFAULT, &f, &err);
    if (r < 0) {
        int rr = nvw_set_err(ret_err, r == -ENOMEM ? -ENOMEM : -EINVAL, "checkpoint '%s': %s",
                             s->weights, err ? err : strerror(-r));
        free(err);
        return rr;
    }
    nv_sha256_hex(f->buf, f->len, sha);
    if (s->weights_sha256[0] && strcmp(sha, s->weights_sha256))
        r = nvw_set_err(ret_err, -EINVAL,
                        "checkpoint '%s': its SHA-256 is %s, the job's \"weights.sha256\" (or "
                        "the file's at the job's setup) says %s",
                        s->weights, sha, s->weights_sha256);
    for (int k = 0; r == 0 && k < 3 + 9 * s->layers; k++) {
        char name[64];
        int64_t shape[2];
        int nd;
        weight(s, k, name, sizeof name, shape, &nd);
        const nv_st_tensor *t = nv_st_find(f, name);
        if (!t) {
            r = nvw_set_err(ret_err, -EINVAL,
                            "checkpoint '%s': no tensor '%s' (a serving job reads the decoder's "
                            "weights under the model kind's parameter names)",
                            s->weights, name);
            break;
        }
        if (t->ndim != nd || t->shape[0] != shape[0] || (nd == 2 && t->shape[1] != shape[1])) {
            r = nvw_set_err(ret_err, -EINVAL,
                            "checkpoint '%s': tensor '%s' is not [%lld%s%lld] as the decoder's "
                            "sizes make it",
                            s->weights, name, (long long)shape[0], nd == 2 ? ", " : "",
                            nd == 2 ? (long long)shape[1] : 0LL);
            break;
        }
        for (int d = 0; r == 0 && d < s->n_dtypes; d++) {
            nv_st_dtype want;
            if (st_of(s->dtypes[d], &want) < 0 || t->dtype != want)
                r = nvw_set_err(ret_err, -EINVAL,
                                "checkpoint '%s': tensor '%s' is stored in %s, the job's "
                                "/dtypes/%d is %s (numval never casts a checkpoint)",
                                s->weights, name, nv_st_dtype_name(t->dtype), d,
                                nv_dtype_name(s->dtypes[d]));
        }
    }
    nv_st_free(f);
    return r;
}

int sv_weights_fill(sv_model *m)
{
    const nv_servingspec *s = m->s;
    nv_st_file *f = NULL;
    char *err = NULL;
    int r = nv_st_read(s->weights, &NV_ST_LIMITS_DEFAULT, &f, &err);
    free(err);
    if (r < 0)
        return r == -ENOMEM ? -ENOMEM : -EIO;
    /* the setup recorded the file's SHA-256: a file changed since is not read */
    char sha[65];
    nv_sha256_hex(f->buf, f->len, sha);
    if (strcmp(sha, s->weights_sha256))
        r = -EIO;
    for (int k = 0; r == 0 && k < 3 + 9 * s->layers; k++) {
        char name[64];
        int64_t shape[2];
        int nd;
        weight(s, k, name, sizeof name, shape, &nd);
        const nv_st_tensor *t = nv_st_find(f, name);
        nv_tensor *dst = tensor_of(m, k);
        nv_st_dtype want;
        /* checked at setup; a file changed since is an I/O error of the case */
        if (!t || st_of(m->dt, &want) < 0 || t->dtype != want || t->numel != dst->numel) {
            r = -EIO;
            break;
        }
        size_t sz = nv_st_dtype_size(t->dtype);
        for (int64_t q = 0; q < t->numel; q++) {
            uint64_t bits = 0;
            for (size_t b = sz; b-- > 0;)
                bits = bits << 8 | t->data[(size_t)q * sz + b];
            dst->data[q] = nv_dtype_decode(m->dt, bits, false);
        }
    }
    nv_st_free(f);
    return r;
}
