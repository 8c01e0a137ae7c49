/* emu's device-driven training (nv_backend.train, docs/BACKEND_ABI.md
 * "Device-driven training"): the long run's MLP trained a whole step at a time
 * inside the emulated device, the way a framework does it: forward under an
 * autocast that holds matmul inputs and outputs in the low-precision dtype
 * (PyTorch autocast's lower-precision list), backward from the scaled loss,
 * the grad scaler's unscale and inf check, gradient-norm clipping and the
 * optimizer (torch.optim.AdamW / SGD update rules) on fp32 master weights; the
 * scaler follows torch.cuda.amp.GradScaler (growth_interval finite steps grow
 * the scale, a non-finite step is skipped and backs it off, the scale never
 * grows to inf). Each op computes in fp64 and rounds once to its output dtype,
 * so the correct mode matches the declared-precision reference. The faults of
 * the mode (emu_internal.h train_fault, ckpt_drop) are what the worker's step
 * and checkpoint checks must catch. With "distributed" ranks the batch is
 * split into R shards whose gradients are all-reduced (emu_allreduce.c) before
 * the unscale, as DDP reduces in its backward hooks. The CNN's forward and
 * backward are emu's own op entries (emu_train_cnn.c); the scaler, clipping
 * and the optimizer here serve both models. */
#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

#include "core/numerics/rng.h"
#include "emu_backward.h" /* emu_bwd_call_init */
#include "emu_train.h"

#define CKPT_MAGIC 0x6e76747231ll /* "nvtr1" */

void emu_train_free(emu_train_t *t)
{
    if (!t)
        return;
    for (int i = 0; i < NP; i++)
        free(t->w[i]), free(t->m[i]), free(t->v[i]);
    free(t);
}

static double r32(double x)
{
    return (double)(float)x;
}

/* A value in the dtype autocast gives a lower-precision op's inputs and output. */
static double lp(const emu_train_t *t, double x)
{
    return t->amp ? nv_dtype_round(t->low, x, &NV_ROUND_DEFAULT, 0) : r32(x);
}

/* An op's output: held in the mode's storage dtype when storage= sets one
 * (emu's op entry holds every op output there), else in the low-precision
 * dtype (low) or fp32. */
static double held(const emu_train_t *t, bool low, double x)
{
    if (t->mode && t->mode->storage_set)
        return nv_dtype_round(t->mode->storage, x, &NV_ROUND_DEFAULT, 0);
    return low ? lp(t, x) : r32(x);
}

/* sum_k x[k sx] (y NULL) or the dot product with y[k sy], k < n: in fp64 and
 * rounded once by the caller (the declared-precision reference's accuracy);
 * with accum= in the mode's accumulator dtype and order, as emu's op entry
 * sums (emu_sum.c). */
static double acc_sum(const emu_train_t *t, const double *x, int64_t sx, const double *y,
                      int64_t sy, int64_t n)
{
    if (t->mode && t->mode->accum_set) {
        emu_call ec;
        nv_op_attrs a;
        memset(&a, 0, sizeof a);
        emu_bwd_call_init(&ec, t->mode, nv_op_find("matmul"), &a, t->mode->accum);
        return emu_sum(&ec, t->mode->accum, x, sx, y, sy, n);
    }
    double s = 0;
    for (int64_t k = 0; k < n; k++)
        s += y ? x[k * sx] * y[k * sy] : x[k * sx];
    return s;
}

static double num(const json_t *o, const char *path1, const char *k, double dflt)
{
    const json_t *g = path1 ? json_object_get(o, path1) : o;
    const json_t *v = json_object_get(g, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static int configure(emu_train_t *t, const char *config, char *err, size_t errlen)
{
    json_error_t je;
    json_t *c = json_loads(config, 0, &je);
    if (!json_is_object(c)) {
        json_decref(c);
        snprintf(err, errlen, "train config is not a JSON object: %s", je.text);
        return NV_E_INVALID;
    }
    const char *model = json_string_value(json_object_get(c, "model"));
    const char *opt = json_string_value(json_object_get(json_object_get(c, "optimizer"), "name"));
    const char *amp_dt = json_string_value(json_object_get(json_object_get(c, "amp"), "dtype"));
    int r = NV_OK;
    t->model = model && !strcmp(model, "cnn") ? EMU_TM_CNN : EMU_TM_MLP;
    if (!model || (strcmp(model, "mlp") && strcmp(model, "cnn"))) {
        snprintf(err, errlen, "not offered: emu trains the \"mlp\" and \"cnn\" models, not '%s'",
                 model ? model : "(none)");
        r = NV_E_UNSUPPORTED;
    } else if (!opt || (strcmp(opt, "adamw") && strcmp(opt, "sgd"))) {
        snprintf(err, errlen, "not offered: optimizer '%s' (emu has adamw and sgd)",
                 opt ? opt : "(none)");
        r = NV_E_UNSUPPORTED;
    }
    t->in = (int)num(c, "sizes", "in", 0), t->hid = (int)num(c, "sizes", "hidden", 0);
    t->cls = (int)num(c, "sizes", "classes", 0);
    if (r == NV_OK &&
        (t->in < 1 || t->hid < 1 || t->cls < 2 || t->in > 65536 || t->hid > 65536 ||
         t->cls > 65536 || (t->model == EMU_TM_CNN && (t->in % 4 || t->in > 64 || t->hid > 64)))) {
        snprintf(err, errlen, "train config: bad sizes (in %d, hidden %d, classes %d)", t->in,
                 t->hid, t->cls);
        r = NV_E_INVALID;
    }
    t->amp = json_is_true(json_object_get(json_object_get(c, "amp"), "enabled"));
    if (r == NV_OK && t->amp && (!amp_dt || nv_dtype_from_name(amp_dt, &t->low) < 0)) {
        snprintf(err, errlen, "train config: unknown amp dtype '%s'", amp_dt ? amp_dt : "");
        r = NV_E_INVALID;
    }
    const char *act = json_string_value(json_object_get(c, "activation"));
    t->relu = act && !strcmp(act, "relu");
    t->adamw = opt && !strcmp(opt, "adamw");
    t->dropout = num(c, NULL, "dropout", 0), t->clip = num(c, NULL, "clip_grad_norm", 0);
    t->loss_weight = num(c, NULL, "loss_weight", 1);
    t->beta1 = num(c, "optimizer", "beta1", 0.9), t->beta2 = num(c, "optimizer", "beta2", 0.999);
    t->eps = num(c, "optimizer", "eps", 1e-8), t->wd = num(c, "optimizer", "weight_decay", 0);
    t->momentum = num(c, "optimizer", "momentum", 0.9);
    t->scaler = json_is_true(json_object_get(json_object_get(c, "grad_scaler"), "enabled"));
    t->init_scale = r32(num(c, "grad_scaler", "init_scale", 65536));
    t->growth = num(c, "grad_scaler", "growth_factor", 2);
    t->backoff = num(c, "grad_scaler", "backoff_factor", 0.5);
    t->interval = (int64_t)num(c, "grad_scaler", "growth_interval", 2000);
    t->seed = (uint64_t)num(c, NULL, "seed", 0);
    t->deterministic = json_is_true(json_object_get(c, "deterministic"));
    const json_t *dist = json_object_get(c, "distributed");
    const char *alg = json_string_value(json_object_get(dist, "algorithm"));
    const char *rdt = json_string_value(json_object_get(dist, "dtype"));
    t->ranks = dist ? (int)num(dist, NULL, "ranks", 1) : 1;
    t->tree = alg && !strcmp(alg, "tree");
    t->reduce_dt = NV_DT_FP32;
    if (r == NV_OK && dist &&
        (t->ranks < 1 || t->ranks > 64 || (alg && !t->tree && strcmp(alg, "ring")) ||
         (rdt && nv_dtype_from_name(rdt, &t->reduce_dt) < 0))) {
        snprintf(err, errlen,
                 "not offered: distributed %d ranks, algorithm '%s', dtype '%s' (emu: 1 to 64 "
                 "ranks, ring or tree, a float dtype)",
                 t->ranks, alg ? alg : "ring", rdt ? rdt : "fp32");
        r = NV_E_UNSUPPORTED;
    }
    json_decref(c);
    if (r != NV_OK)
        return r;
    if (t->model == EMU_TM_CNN && (t->dropout > 0 || t->ranks > 1)) {
        snprintf(err, errlen, "not offered: emu's cnn steps have no dropout and no ranks");
        return NV_E_UNSUPPORTED;
    }
    int64_t I = t->in, H = t->hid, C = t->cls, side = t->in / 4;
    int64_t shapes[2][NP][5] = {
        {{2, I, H}, {1, H}, {2, H, C}, {1, C}},
        {{4, H, 1, 3, 3}, {4, 2 * H, H, 3, 3}, {2, 2 * H * side * side, C}, {1, C}}};
    for (int i = 0; i < NP; i++) {
        const int64_t *sh = shapes[t->model == EMU_TM_CNN][i];
        t->ndim[i] = (int)sh[0];
        t->n[i] = 1;
        for (int d = 0; d < t->ndim[i]; d++)
            t->shape[i][d] = sh[1 + d], t->n[i] *= sh[1 + d];
        t->w[i] = calloc((size_t)t->n[i], sizeof(double));
        t->m[i] = calloc((size_t)t->n[i], sizeof(double));
        t->v[i] = calloc((size_t)t->n[i], sizeof(double));
        if (!t->w[i] || !t->m[i] || !t->v[i]) {
            snprintf(err, errlen, "out of memory");
            return NV_E_NOMEM;
        }
    }
    t->scale = t->scaler ? t->init_scale : 1;
    return NV_OK;
}

static int check_view(const nv_tensor_view *v, nv_dtype dt, int64_t numel, const char *what,
                      char *err, size_t errlen)
{
    int64_t k = 1;
    for (int d = 0; d < v->ndim; d++)
        k *= v->shape[d];
    bool contiguous = v->ndim == 0 || v->strides[v->ndim - 1] == 1;
    if (v->dtype != (int32_t)dt || k != numel || !contiguous) {
        snprintf(err, errlen, "%s: expected a contiguous %s tensor of %lld elements", what,
                 nv_dtype_name(dt), (long long)numel);
        return NV_E_INVALID;
    }
    return NV_OK;
}

static int out_shape(nv_tensor_view *v, nv_dtype dt, int ndim, const int64_t *shape,
                     const double *vals)
{
    memset(v, 0, sizeof *v);
    v->dtype = (int32_t)dt, v->ndim = ndim;
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--)
        v->shape[d] = shape[d], v->strides[d] = n, n *= shape[d];
    size_t sz = (size_t)nv_dtype_get(dt)->storage_bytes;
    v->data = malloc(n > 0 ? (size_t)n * sz : 1);
    if (!v->data)
        return NV_E_NOMEM;
    for (int64_t i = 0; vals && i < n; i++) {
        if (dt == NV_DT_FP32)
            ((float *)v->data)[i] = (float)vals[i];
        else
            ((double *)v->data)[i] = vals[i];
    }
    return NV_OK;
}

static int out_new(nv_tensor_view *v, nv_dtype dt, int ndim, int64_t d0, int64_t d1,
                   const double *vals)
{
    int64_t shape[2] = {d0, d1};
    return out_shape(v, dt, ndim, shape, vals);
}

static double gelu(double x)
{
    return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static double gelu_d(double x)
{
    return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

/* c[r, n] = round(sum_k a[r, k] b[k, n]) with optional transposes (fp64 sums,
 * one rounding: the accuracy the declared-precision reference assumes; with
 * accum= the mode's accumulation, acc_sum). */
static void mm(const emu_train_t *t, int64_t R, int64_t K, int64_t N, const double *a, bool ta,
               const double *b, bool tb, double *c)
{
    for (int64_t r = 0; r < R; r++)
        for (int64_t n = 0; n < N; n++) {
            double s = acc_sum(t, ta ? a + r : a + r * K, ta ? R : 1, tb ? b + n * K : b + n,
                               tb ? 1 : N, K);
            c[r * N + n] = held(t, true, s);
        }
}

typedef struct step_buf {
    double *x, *h, *a, *al, *z2, *p, *dz2, *da, *dh, *mask, *g[NP], *w1l, *w2l;
    double *gl, *dhf; /* the bias adds' fp32 gradients per row, summed per rank */
    double *red[NP];  /* distributed: the all-reduced gradient, before the unscale */
    double *rg[64][NP]; /* distributed: each rank's (scaled) gradient */
} step_buf;

static void buf_free(step_buf *b)
{
    free(b->x), free(b->h), free(b->a), free(b->al), free(b->z2), free(b->p), free(b->dz2);
    free(b->da), free(b->dh), free(b->mask), free(b->w1l), free(b->w2l);
    free(b->gl), free(b->dhf);
    for (int i = 0; i < NP; i++) {
        free(b->g[i]), free(b->red[i]);
        for (int r = 0; r < 64; r++)
            free(b->rg[r][i]);
    }
}

static json_t *jreal(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

static json_t *op_rec(const char *op, const char *a, const char *b, const char *out)
{
    return b ? json_pack("{s:s, s:[s, s], s:s}", "op", op, "inputs", a, b, "output", out)
             : json_pack("{s:s, s:[s], s:s}", "op", op, "inputs", a, "output", out);
}

/* What autocast made of each op of the forward (input and output dtypes). */
static json_t *ops_json(const emu_train_t *t)
{
    const char *L = t->amp ? nv_dtype_name(t->low) : "fp32", *F = "fp32";
    json_t *o = json_array();
    json_array_append_new(o, op_rec("matmul", L, L, L));
    json_array_append_new(o, op_rec("add", L, F, F));
    json_array_append_new(o, op_rec(t->relu ? "relu" : "gelu", F, NULL, F));
    if (t->dropout > 0)
        json_array_append_new(o, op_rec("mul", F, F, F));
    json_array_append_new(o, op_rec("matmul", L, L, L));
    json_array_append_new(o, op_rec("add", L, F, F));
    json_array_append_new(o, op_rec("cross_entropy", F, "int32", F));
    return o;
}

/* torch.nn.utils.clip_grad_norm_: the norm of the per-parameter norms (fp32),
 * then every gradient times min(1, max_norm / (norm + 1e-6)). */
static double clip(const emu_train_t *t, double **g)
{
    double s = 0;
    for (int i = 0; i < NP; i++) {
        double pi = 0;
        for (int64_t k = 0; k < t->n[i]; k++)
            pi += g[i][k] * g[i][k];
        pi = r32(sqrt(pi));
        s += pi * pi;
    }
    double norm = r32(sqrt(s));
    if (t->clip > 0) {
        double coef = r32(t->clip / (norm + 1e-6));
        if (!(coef < 1)) /* NaN norm: torch multiplies by the NaN coefficient */
            coef = coef != coef ? coef : 1;
        for (int i = 0; i < NP; i++)
            for (int64_t k = 0; k < t->n[i]; k++)
                g[i][k] = r32(g[i][k] * coef);
    }
    return norm;
}

static void unscale(const emu_train_t *t, double **g, bool *found_inf)
{
    double inv = r32(1.0 / t->scale); /* GradScaler: scale.double().reciprocal().float() */
    for (int i = 0; i < NP; i++)
        for (int64_t k = 0; k < t->n[i]; k++) {
            g[i][k] = r32(g[i][k] * inv);
            *found_inf |= !isfinite(g[i][k]);
        }
}

static void optimizer(emu_train_t *t, double **g, double lr)
{
    t->opt_steps++;
    double bc1 = 1 - pow(t->beta1, (double)t->opt_steps),
           bc2 = 1 - pow(t->beta2, (double)t->opt_steps);
    for (int i = 0; i < NP; i++)
        for (int64_t k = 0; k < t->n[i]; k++) {
            double w = t->w[i][k], gk = g[i][k];
            if (t->adamw) { /* torch.optim.AdamW (Loshchilov & Hutter, Alg. 2) */
                w = r32(w * (1 - lr * t->wd));
                double m = t->m[i][k] = r32(t->beta1 * t->m[i][k] + (1 - t->beta1) * gk);
                double v = t->v[i][k] = r32(t->beta2 * t->v[i][k] + (1 - t->beta2) * gk * gk);
                double denom = r32(r32(sqrt(v)) / sqrt(bc2) + t->eps);
                w = r32(w - (lr / bc1) * r32(m / denom));
            } else { /* torch.optim.SGD, dampening 0 */
                gk = r32(gk + t->wd * w);
                double b = t->m[i][k] =
                    t->opt_steps == 1 ? gk : r32(t->momentum * t->m[i][k] + gk);
                w = r32(w - lr * b);
            }
            t->w[i][k] = w;
        }
}

/* The scaler's update (torch's _amp_update_scale_). */
static void scaler_update(emu_train_t *t, bool found_inf)
{
    if (!t->scaler)
        return;
    if (found_inf) {
        t->scale = r32(t->scale * t->backoff);
        t->tracker = 0;
    } else if (++t->tracker == t->interval) {
        double grown = r32(t->scale * t->growth);
        if (isfinite(grown))
            t->scale = grown;
        t->tracker = 0;
    }
}

/* The weight gradients of the batch rows [b0, b1) (one rank's shard: the whole
 * batch without ranks) from the per-row gradients of the backward. */
static void rows_grads(const emu_train_t *t, const step_buf *s, int64_t b0, int64_t b1, double **g)
{
    int64_t I = t->in, H = t->hid, C = t->cls, nb = b1 - b0;
    for (int64_t c = 0; c < C; c++)
        g[3][c] = held(t, false, acc_sum(t, s->gl + b0 * C + c, C, NULL, 0, nb));
    mm(t, H, nb, C, s->al + b0 * H, true, s->dz2 + b0 * C, false, g[2]); /* dW2 = a^T dz2 */
    for (int64_t j = 0; j < H; j++)
        g[1][j] = held(t, false, acc_sum(t, s->dhf + b0 * H + j, H, NULL, 0, nb));
    mm(t, I, nb, H, s->x + b0 * I, true, s->dh + b0 * H, false, g[0]);
}

/* The rank whose gradient arrives first: drawn from the kernel's generator at
 * each reduction. A count of reductions would not do: a repeat run of K steps
 * starts K reductions later, and with K a multiple of R it replays the first
 * run's order bit for bit. */
static int arrival_rank(int R)
{
    static atomic_uint arrivals; /* fallback if getrandom fails */
    unsigned v;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v)
        v = atomic_fetch_add(&arrivals, 1);
    return (int)(v % (unsigned)R);
}

/* Distributed: each rank's gradient of its shard, all-reduced into s->g (and
 * a copy in s->red, what the step returns). */
static int reduce_ranks(const emu_ctx *ctx, const emu_train_t *t, step_buf *s, int64_t B)
{
    int R = t->ranks;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < NP; i++)
            if (!(s->rg[r][i] = malloc((size_t)t->n[i] * sizeof(double))))
                return NV_E_NOMEM;
    for (int i = 0; i < NP; i++)
        if (!(s->red[i] = malloc((size_t)t->n[i] * sizeof(double))))
            return NV_E_NOMEM;
    for (int r = 0; r < R; r++)
        rows_grads(t, s, r * B / R, (r + 1) * B / R, s->rg[r]);
    nv_dtype dt = ctx->mode.allreduce == EMU_AR_BF16 ? NV_DT_BF16 : t->reduce_dt;
    int rotate = ctx->mode.allreduce == EMU_AR_ARRIVAL ? arrival_rank(R) : 0;
    for (int i = 0; i < NP; i++) {
        double *col[64];
        for (int r = 0; r < R; r++)
            col[r] = s->rg[r][i];
        emu_allreduce(R, t->n[i], col, t->tree, dt, rotate, s->g[i]);
        memcpy(s->red[i], s->g[i], (size_t)t->n[i] * sizeof(double));
    }
    return NV_OK;
}

/* The MLP's forward and backward of one batch, hand-written (each op in fp64,
 * rounded once to its autocast dtype): s->g the scaled gradients. */
static int mlp_grads(emu_ctx *ctx, emu_train_t *t, const nv_train_call *call, int64_t B,
                     const int32_t *y, step_buf *s, double *ret_loss)
{
    int64_t I = t->in, H = t->hid, C = t->cls;
    size_t d = sizeof(double);
    s->x = malloc((size_t)(B * I) * d), s->h = malloc((size_t)(B * H) * d);
    s->a = malloc((size_t)(B * H) * d), s->al = malloc((size_t)(B * H) * d);
    s->z2 = malloc((size_t)(B * C) * d), s->p = malloc((size_t)(B * C) * d);
    s->dz2 = malloc((size_t)(B * C) * d), s->da = malloc((size_t)(B * H) * d);
    s->dh = malloc((size_t)(B * H) * d), s->mask = malloc((size_t)(B * H) * d);
    s->w1l = malloc((size_t)(I * H) * d), s->w2l = malloc((size_t)(H * C) * d);
    s->gl = malloc((size_t)(B * C) * d), s->dhf = malloc((size_t)(B * H) * d);
    bool ok = s->x && s->h && s->a && s->al && s->z2 && s->p && s->dz2 && s->da && s->dh &&
              s->mask && s->w1l && s->w2l && s->gl && s->dhf;
    if (!ok)
        return NV_E_NOMEM;
    const float *xf = call->inputs[0].data;
    for (int64_t k = 0; k < B * I; k++)
        s->x[k] = lp(t, xf[k]);
    for (int64_t k = 0; k < I * H; k++)
        s->w1l[k] = lp(t, t->w[0][k]);
    for (int64_t k = 0; k < H * C; k++)
        s->w2l[k] = lp(t, t->w[2][k]);
    /* forward: h = x W1 (low) + b1 (fp32), activation, dropout, logits */
    mm(t, B, I, H, s->x, false, s->w1l, false, s->h);
    nv_rng rng;
    nv_rng_init(&rng, t->seed, 0x7d, (uint32_t)t->rng_calls++);
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < H; j++) {
            int64_t k = b * H + j;
            s->h[k] = held(t, false, s->h[k] + t->w[1][j]);
            double a = held(t, false, t->relu ? (s->h[k] > 0 ? s->h[k] : 0) : gelu(s->h[k]));
            s->mask[k] = 1;
            if (t->dropout > 0)
                s->mask[k] = nv_rng_uniform(&rng) < t->dropout ? 0 : r32(1 / (1 - t->dropout));
            s->a[k] = held(t, false, a * s->mask[k]);
            s->al[k] = lp(t, s->a[k]);
        }
    mm(t, B, H, C, s->al, false, s->w2l, false, s->z2);
    double loss = 0, seed = r32(t->scale * t->loss_weight);
    for (int64_t b = 0; b < B; b++) {
        double mx = -INFINITY, z = 0;
        for (int64_t c = 0; c < C; c++)
            mx = fmax(mx, held(t, false, s->z2[b * C + c] + t->w[3][c]));
        for (int64_t c = 0; c < C; c++)
            z += exp(held(t, false, s->z2[b * C + c] + t->w[3][c]) - mx);
        for (int64_t c = 0; c < C; c++) {
            double l = held(t, false, s->z2[b * C + c] + t->w[3][c]);
            s->p[b * C + c] = exp(l - mx) / z;
            if (c == y[b])
                loss += mx + log(z) - l;
        }
    }
    *ret_loss = loss = held(t, false, loss / (double)B);
    /* backward from seed = scale * loss_weight (the scaled loss) */
    /* (each rank's loss is its rows' share of the batch mean: the ranks'
     * gradients sum to the batch's, as DDP's averaging gives) */
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            double gl = held(t, false, (s->p[b * C + c] - (c == y[b])) * seed / (double)B);
            s->gl[b * C + c] = gl;
            s->dz2[b * C + c] = lp(t, gl); /* the add's gradient to its low input */
        }
    mm(t, B, C, H, s->dz2, false, s->w2l, true, s->da); /* da = dz2 W2^T */
    for (int64_t k = 0; k < B * H; k++) {
        double dh = held(t, false,
                         held(t, false, s->da[k] * s->mask[k]) *
                             (t->relu ? (s->h[k] > 0 ? 1.0 : 0.0) : gelu_d(s->h[k])));
        s->dhf[k] = dh;
        s->dh[k] = lp(t, dh);
    }
    if (t->ranks == 1) {
        rows_grads(t, s, 0, B, s->g);
        return NV_OK;
    }
    return reduce_ranks(ctx, t, s, B);
}

static int step(emu_ctx *ctx, emu_train_t *t, nv_train_call *call, char *err, size_t errlen)
{
    int n_out = 4 * NP + 1 + (t->ranks > 1 ? (t->ranks + 1) * NP : 0);
    bool cnn = t->model == EMU_TM_CNN;
    if (call->n_inputs != 2 || call->n_outputs != n_out || call->inputs[0].ndim != (cnn ? 4 : 2))
        return snprintf(err, errlen, "train step: needs x %s, target [B] and %d outputs",
                        cnn ? "[B, 1, in, in]" : "[B, in]", n_out),
               NV_E_INVALID;
    int64_t B = call->inputs[0].shape[0], I = t->in, H = t->hid, C = t->cls;
    if (B % t->ranks)
        return snprintf(err, errlen, "train step: batch %lld does not split into %d ranks",
                        (long long)B, t->ranks),
               NV_E_INVALID;
    int r = check_view(&call->inputs[0], NV_DT_FP32, B * I * (cnn ? I : 1), "x", err, errlen);
    r = r ? r : check_view(&call->inputs[1], NV_DT_INT32, B, "target", err, errlen);
    if (r)
        return r;
    const int32_t *y = call->inputs[1].data;
    for (int64_t b = 0; b < B; b++)
        if (y[b] < 0 || y[b] >= C)
            return snprintf(err, errlen, "target %lld is %d, outside [0, %lld)", (long long)b,
                            (int)y[b], (long long)C),
                   NV_E_INVALID;
    json_error_t je;
    json_t *cfg = json_loads(call->config_json, 0, &je);
    double lr = num(cfg, NULL, "lr", NAN);
    json_decref(cfg);
    if (!isfinite(lr))
        return snprintf(err, errlen, "train step: config has no finite \"lr\""), NV_E_INVALID;
    step_buf s = {0};
    json_t *info = NULL, *ops = NULL;
    double loss = 0;
    bool ok = true;
    for (int i = 0; i < NP; i++)
        ok &= (s.g[i] = malloc((size_t)t->n[i] * sizeof(double))) != NULL;
    if (!ok) {
        r = NV_E_NOMEM;
        goto out;
    }
    if (cnn) {
        r = (ops = json_array()) ? NV_OK : NV_E_NOMEM;
        r = r ? r
              : emu_train_cnn_grads(ctx, t, &call->inputs[0], y, B, s.g, &loss, ops, err, errlen);
    } else {
        r = mlp_grads(ctx, t, call, B, y, &s, &loss);
        ops = r == NV_OK ? ops_json(t) : NULL;
    }
    if (r != NV_OK)
        goto out;
    /* the scaler, clipping and the optimizer (torch's order: unscale_, clip, step, update) */
    bool found_inf = false;
    bool skip_unscale = ctx->mode.train_fault == EMU_TF_SKIP_UNSCALE;
    double scale_used = t->scale;
    if (!skip_unscale)
        unscale(t, s.g, &found_inf);
    double norm = clip(t, s.g);
    if (skip_unscale) /* GradScaler.step unscales what was not unscaled: after the clip */
        unscale(t, s.g, &found_inf);
    bool skipped = found_inf && ctx->mode.train_fault != EMU_TF_UPDATE_SKIPPED;
    if (!skipped)
        optimizer(t, s.g, lr);
    scaler_update(t, found_inf);
    for (int i = 0; i < NP && r == NV_OK; i++) {
        int nd = t->ndim[i];
        const int64_t *sh = t->shape[i];
        r = out_shape(&call->outputs[i], NV_DT_FP32, nd, sh, s.g[i]);
        r = r ? r : out_shape(&call->outputs[NP + i], NV_DT_FP32, nd, sh, t->w[i]);
        r = r ? r : out_shape(&call->outputs[2 * NP + i], NV_DT_FP32, nd, sh, t->m[i]);
        r = r ? r : out_shape(&call->outputs[3 * NP + i], NV_DT_FP32, nd, sh, t->v[i]);
    }
    if (r == NV_OK)
        r = t->dropout > 0 ? out_new(&call->outputs[4 * NP], NV_DT_FP32, 2, B, H, s.mask)
                           : out_new(&call->outputs[4 * NP], NV_DT_FP32, 1, 0, 0, NULL);
    for (int k = 0; t->ranks > 1 && k < (t->ranks + 1) * NP && r == NV_OK; k++) {
        int rank = k / NP, i = k % NP;
        const double *v = rank < t->ranks ? s.rg[rank][i] : s.red[i];
        r = out_shape(&call->outputs[4 * NP + 1 + k], NV_DT_FP32, t->ndim[i], t->shape[i], v);
    }
    if (r != NV_OK)
        goto out;
    /* JSON has no inf or NaN: a non-finite number is null (docs/BACKEND_ABI.md) */
    /* emu is deterministic whatever the flag; the fault reports a demanded
     * determinism not honoured */
    bool det = !(t->deterministic && ctx->mode.train_fault == EMU_TF_IGNORE_DET);
    info = json_pack("{s:o, s:o, s:b, s:b, s:o, s:I, s:I, s:o, s:o, s:b, s:i}", "loss", jreal(loss),
                     "scale", jreal(scale_used), "found_inf", found_inf, "skipped", skipped,
                     "next_scale", jreal(t->scale), "growth_tracker", (json_int_t)t->tracker,
                     "optimizer_steps", (json_int_t)t->opt_steps, "grad_norm", jreal(norm), "ops",
                     ops, "deterministic", det, "ranks", t->ranks);
    ops = NULL; /* info holds it (json_pack's "o" takes the reference) */
    if (info && t->ranks > 1)
        json_object_set_new(info, "allreduce",
                            json_pack("{s:s, s:s}", "algorithm", t->tree ? "tree" : "ring",
                                      "dtype", nv_dtype_name(t->reduce_dt)));
    char *txt = info ? json_dumps(info, JSON_COMPACT) : NULL;
    if (!txt || strlen(txt) >= call->info_len)
        r = txt ? (snprintf(err, errlen, "info buffer too small"), NV_E_INVALID) : NV_E_NOMEM;
    else
        memcpy(call->info, txt, strlen(txt) + 1);
    free(txt);
out:
    if (r == NV_E_NOMEM)
        snprintf(err, errlen, "out of memory");
    json_decref(ops);
    json_decref(info);
    buf_free(&s);
    return r;
}

/* The checkpoint: int64 header then the fp64 state, as int8 bytes. The
 * ckpt_drop faults leave the scaler's or the generator's state out, as a
 * checkpoint that saved only the model and optimizer would. */
static int save(emu_ctx *ctx, emu_train_t *t, nv_train_call *call, char *err, size_t errlen)
{
    if (call->n_outputs != 1)
        return snprintf(err, errlen, "train save produces 1 output"), NV_E_INVALID;
    int64_t total = 0;
    for (int i = 0; i < NP; i++)
        total += 3 * t->n[i];
    int64_t words = 8 + total;
    double *buf = malloc((size_t)words * sizeof(double));
    if (!buf)
        return NV_E_NOMEM;
    int64_t hdr[8] = {CKPT_MAGIC, t->in, t->hid, t->cls, t->opt_steps,
                      ctx->mode.ckpt_drop == EMU_CK_RNG ? -1 : t->rng_calls,
                      ctx->mode.ckpt_drop == EMU_CK_SCALER ? -1 : t->tracker, 0};
    double sc = ctx->mode.ckpt_drop == EMU_CK_SCALER ? -1 : t->scale;
    memcpy(buf, hdr, sizeof hdr);
    memcpy(&buf[7], &sc, sizeof sc);
    int64_t o = 8;
    for (int i = 0; i < NP; i++) {
        if (ctx->mode.ckpt_drop == EMU_CK_WEIGHTS) /* restored as zeros */
            memset(buf + o, 0, (size_t)t->n[i] * sizeof(double));
        else
            memcpy(buf + o, t->w[i], (size_t)t->n[i] * sizeof(double));
        o += t->n[i];
        memcpy(buf + o, t->m[i], (size_t)t->n[i] * sizeof(double)), o += t->n[i];
        memcpy(buf + o, t->v[i], (size_t)t->n[i] * sizeof(double)), o += t->n[i];
    }
    nv_tensor_view *v = &call->outputs[0];
    memset(v, 0, sizeof *v);
    v->dtype = NV_DT_INT8, v->ndim = 1, v->shape[0] = words * 8, v->strides[0] = 1;
    v->data = buf;
    return NV_OK;
}

static int load(emu_train_t *t, nv_train_call *call, char *err, size_t errlen)
{
    int64_t total = 0;
    for (int i = 0; i < NP; i++)
        total += 3 * t->n[i];
    int64_t words = 8 + total;
    if (call->n_inputs != 1 ||
        check_view(&call->inputs[0], NV_DT_INT8, words * 8, "checkpoint", err, errlen))
        return NV_E_INVALID;
    const uint8_t *p = call->inputs[0].data;
    int64_t hdr[8];
    memcpy(hdr, p, sizeof hdr);
    if (hdr[0] != CKPT_MAGIC || hdr[1] != t->in || hdr[2] != t->hid || hdr[3] != t->cls)
        return snprintf(err, errlen, "checkpoint is not an emu checkpoint of this model"),
               NV_E_INVALID;
    t->opt_steps = hdr[4];
    /* What the checkpoint lacks starts afresh, as a framework's restore leaves it. */
    t->rng_calls = hdr[5] >= 0 ? hdr[5] : 0;
    double sc;
    memcpy(&sc, p + 7 * 8, sizeof sc);
    t->tracker = hdr[6] >= 0 ? hdr[6] : 0;
    t->scale = sc >= 0 ? sc : (t->scaler ? t->init_scale : 1);
    int64_t o = 8 * 8;
    for (int i = 0; i < NP; i++) {
        memcpy(t->w[i], p + o, (size_t)t->n[i] * 8), o += t->n[i] * 8;
        memcpy(t->m[i], p + o, (size_t)t->n[i] * 8), o += t->n[i] * 8;
        memcpy(t->v[i], p + o, (size_t)t->n[i] * 8), o += t->n[i] * 8;
    }
    return NV_OK;
}

static int init(emu_ctx *ctx, nv_train_call *call, char *err, size_t errlen)
{
    emu_train_free(ctx->train);
    ctx->train = calloc(1, sizeof *ctx->train);
    if (!ctx->train)
        return NV_E_NOMEM;
    emu_train_t *t = ctx->train;
    t->mode = &ctx->mode; /* storage= and accum= act inside the MLP's step too */
    int r = configure(t, call->config_json, err, errlen);
    if (r == NV_OK && call->action == NV_TRAIN_LOAD)
        return load(t, call, err, errlen);
    if (r == NV_OK && call->n_inputs != NP)
        r = (snprintf(err, errlen, "train init: %d weights, %d expected", call->n_inputs, NP),
             NV_E_INVALID);
    for (int i = 0; r == NV_OK && i < NP; i++) {
        char what[32];
        snprintf(what, sizeof what, "weight %d", i);
        r = check_view(&call->inputs[i], NV_DT_FP32, t->n[i], what, err, errlen);
        for (int64_t k = 0; r == NV_OK && k < t->n[i]; k++)
            t->w[i][k] = ((const float *)call->inputs[i].data)[k];
    }
    if (r != NV_OK) {
        emu_train_free(ctx->train);
        ctx->train = NULL;
    }
    return r;
}

int emu_train_call(void *vctx, nv_train_call *call, char *err, size_t errlen)
{
    emu_ctx *ctx = vctx;
    if (!call || !call->config_json || (call->action != NV_TRAIN_INIT &&
                                        call->action != NV_TRAIN_LOAD && !ctx->train))
        return snprintf(err, errlen, "train: no run (init or load first)"), NV_E_INVALID;
    switch (call->action) {
    case NV_TRAIN_INIT:
    case NV_TRAIN_LOAD:
        return init(ctx, call, err, errlen);
    case NV_TRAIN_STEP:
        return step(ctx, ctx->train, call, err, errlen);
    case NV_TRAIN_SAVE:
        return save(ctx, ctx->train, call, err, errlen);
    default:
        return snprintf(err, errlen, "train: unknown action %d", (int)call->action),
               NV_E_INVALID;
    }
}
