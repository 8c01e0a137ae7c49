/* The synthetic long-run dataset: inputs ~ N(0, 1) rounded to fp32, labels drawn
 * from a fixed random teacher network's softmax, so the best achievable loss
 * (the Bayes loss, the teacher's mean entropy) is known. Every draw comes from a
 * Philox stream keyed by (seed, step, tensor), independent of threading. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/rng.h"
#include "train_internal.h"

enum { STREAM_TEACHER = 0xA0, STREAM_EVAL = 0xA1, STREAM_X = 1, STREAM_Y = 2 };

static double teacher_probs(const nvw_data *d, const double *x, double *p)
{
    const nv_longrun_spec *s = d->s;
    int D = (int)d->teacher_in, H = s->teacher_hidden, C = s->classes;
    double z[1024];
    double feat[256];
    /* Transformer inputs are [T, D]: the teacher sees sqrt(T) * mean_t x_t (~ N(0, 1)). */
    int T = s->model == NV_LR_TRANSFORMER ? s->seq : 1;
    for (int j = 0; j < D; j++) {
        double acc = 0;
        for (int t = 0; t < T; t++)
            acc += x[t * D + j];
        feat[j] = acc / sqrt((double)T);
    }
    double hid[1024]; /* the teacher's hidden layer, once per example */
    int h = 0;
    /* four units at a time, each summed over j in order as below: the same
     * values, four independent chains instead of one */
    for (; h + 4 <= H; h += 4) {
        const double *w = d->t1 + (int64_t)h * D;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int j = 0; j < D; j++) {
            a0 += w[j] * feat[j], a1 += w[D + j] * feat[j];
            a2 += w[2 * D + j] * feat[j], a3 += w[3 * D + j] * feat[j];
        }
        hid[h] = tanh(a0), hid[h + 1] = tanh(a1), hid[h + 2] = tanh(a2), hid[h + 3] = tanh(a3);
    }
    for (; h < H; h++) {
        double a = 0;
        for (int j = 0; j < D; j++)
            a += d->t1[h * D + j] * feat[j];
        hid[h] = tanh(a);
    }
    double mx = -INFINITY;
    for (int c = 0; c < C; c++) {
        double acc = 0;
        for (int h = 0; h < H; h++)
            acc += d->t2[c * H + h] * hid[h];
        z[c] = acc / s->temperature;
        mx = fmax(mx, z[c]);
    }
    double sum = 0;
    for (int c = 0; c < C; c++)
        sum += (p[c] = exp(z[c] - mx));
    double ent = 0;
    for (int c = 0; c < C; c++) {
        p[c] /= sum;
        if (p[c] > 0)
            ent -= p[c] * log(p[c]);
    }
    return ent;
}

static int sample(const nvw_data *d, nv_rng *rx, nv_rng *ry, int n, nv_dtype dt, nv_tensor **ret_x,
                  nv_tensor **ret_y, double *ret_ent)
{
    const nv_longrun_spec *s = d->s;
    int64_t xs[3] = {n, s->in_dim, 0};
    int nd = 2;
    if (s->model == NV_LR_TRANSFORMER)
        xs[1] = s->seq, xs[2] = s->in_dim, nd = 3;
    int64_t xs4[4] = {n, 1, s->in_dim, s->in_dim}; /* cnn: one-channel images */
    nv_tensor *x = s->model == NV_LR_CNN ? nv_tensor_new(dt, 4, xs4) : nv_tensor_new(dt, nd, xs);
    int64_t ys = n;
    nv_tensor *y = nv_tensor_new(NV_DT_INT32, 1, &ys);
    if (!x || !y) {
        nv_tensor_free(x);
        nv_tensor_free(y);
        return -ENOMEM;
    }
    double ent = 0, p[1024];
    for (int i = 0; i < n; i++) {
        double *xi = x->data + (int64_t)i * d->in_numel;
        for (int64_t k = 0; k < d->in_numel; k++)
            xi[k] = (double)(float)nv_rng_normal(rx); /* fp32 data for device and reference */
        ent += teacher_probs(d, xi, p);
        double u = nv_rng_uniform(ry), c = 0;
        int label = s->classes - 1;
        for (int k = 0; k < s->classes; k++)
            if (u < (c += p[k])) {
                label = k;
                break;
            }
        y->data[i] = label;
    }
    *ret_x = x, *ret_y = y;
    if (ret_ent)
        *ret_ent = ent / n;
    return 0;
}

int nvw_data_init(nvw_data *d, const nv_longrun_spec *s)
{
    memset(d, 0, sizeof *d);
    d->s = s;
    /* the teacher's features: the MLP's inputs, the transformer's pooled
     * tokens, the CNN's pixels */
    int D = s->model == NV_LR_CNN ? s->in_dim * s->in_dim : s->in_dim, H = s->teacher_hidden,
        C = s->classes;
    d->teacher_in = D;
    d->in_numel = (int64_t)D * (s->model == NV_LR_TRANSFORMER ? s->seq : 1);
    d->t1 = malloc((size_t)H * D * sizeof(double));
    d->t2 = malloc((size_t)C * H * sizeof(double));
    if (!d->t1 || !d->t2 || D > 256 || C > 1024) {
        nvw_data_done(d);
        return -ENOMEM;
    }
    nv_rng r;
    nv_rng_init(&r, s->data_seed, STREAM_TEACHER, 0);
    for (int i = 0; i < H * D; i++)
        d->t1[i] = nv_rng_normal(&r) * 2.0 / sqrt((double)D);
    for (int i = 0; i < C * H; i++)
        d->t2[i] = nv_rng_normal(&r) * 3.0 / sqrt((double)H);
    nv_rng rx, ry;
    nv_rng_init(&rx, s->data_seed, STREAM_EVAL, STREAM_X);
    nv_rng_init(&ry, s->data_seed, STREAM_EVAL, STREAM_Y);
    int r2 =
        sample(d, &rx, &ry, s->eval_examples, NV_DT_FP32, &d->eval_x, &d->eval_y, &d->bayes_loss);
    if (r2 < 0)
        nvw_data_done(d);
    return r2;
}

void nvw_data_done(nvw_data *d)
{
    free(d->t1);
    free(d->t2);
    nv_tensor_free(d->eval_x);
    nv_tensor_free(d->eval_y);
    d->t1 = d->t2 = NULL;
    d->eval_x = d->eval_y = NULL;
}

int nvw_data_batch(const nvw_data *d, uint64_t seed, int64_t step, nv_dtype dt, nv_tensor **ret_x,
                   nv_tensor **ret_y)
{
    nv_rng rx, ry;
    uint64_t key = seed * 0x9E3779B97F4A7C15ull ^ d->s->data_seed;
    nv_rng_init(&rx, key, (uint32_t)step, STREAM_X);
    nv_rng_init(&ry, key, (uint32_t)step, STREAM_Y);
    return sample(d, &rx, &ry, d->s->batch, dt, ret_x, ret_y, NULL);
}
