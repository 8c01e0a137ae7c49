/* emu internals: the numerical mode, the per-call state, rounding helpers and the
 * kernels. Only worker/backends/emu*.c include this.
 *
 * Kernels work on decoded values (doubles, contiguous row-major) so that the same
 * kernels serve the op entry point and, later, backward and fused graph entry
 * points: a caller chooses the dtypes each stage rounds to through emu_call.
 * The one exception is a large reduction at the op entry (emu_reduce_view): it
 * reads the caller's encoded view in place, decoding each element as it reads
 * it, so that no decoded copy of the size of its input exists. */
#ifndef NUMVAL_WORKER_EMU_INTERNAL_H
#define NUMVAL_WORKER_EMU_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "core/ref/refmath.h"
#include "core/numerics/tensor.h"
#include "core/ops/catalog.h"
#include "emu_graph.h" /* emu_fused_mode (fused graph entry) */
#include "numval/backend.h"

typedef enum emu_order {
    EMU_ORDER_SEQUENTIAL, /* left to right */
    EMU_ORDER_PAIRWISE,   /* recursive halving (Higham §4.2, "pairwise summation") */
    EMU_ORDER_TREE,       /* k lanes, lane j takes j, j+k, ...; lanes combined pairwise */
    EMU_ORDER_SPLITK,     /* k contiguous chunks summed in order, partials added in order */
    EMU_ORDER_RANDOM,     /* a fresh pseudo-random order per call (atomics) */
    EMU_ORDER_RANDTREE,   /* a fixed binary tree per length drawn from order_k (emu_sum.c) */
} emu_order;

/* The most terms an accumulation adds with one rounding (accum_block=W). */
#define EMU_MAX_BLOCK 256

typedef enum emu_transcendental {
    EMU_TR_EXACT, /* correctly rounded (refmath.h) */
    EMU_TR_LIBM,  /* the host C library */
    EMU_TR_FAST,  /* emu_fast.c approximations */
} emu_transcendental;

typedef struct emu_mode {
    bool storage_set, compute_set, accum_set, scale_set;
    nv_dtype storage, compute, accum;
    emu_order order;
    int order_k;
    int accum_block;     /* terms added with one rounding in a sequential run (1) */
    bool accum_truncate; /* accum_align=truncate: alignment drops shifted-out bits */
    bool fma, ftz, daz, saturate;
    nv_rounding rounding;
    emu_transcendental transcendental;
    nv_scale_granularity scale;
    int block, tile_r, tile_c;
    uint64_t seed;
    bool inference_only; /* "inference_only=on": describe says so, backward refuses */
    emu_fused_mode fused; /* fused_* knobs of the graph entry (emu_graph.h) */
    /* Serving misbehaviours (docs/SERVING.md): matmul and bmm rows summed in
     * 1 + (M - 1) mod 4 contiguous chunks of K, M the rows of the call (a
     * split-k chosen by the batch size); cache_write outputs rounded to
     * kv_cache (a KV cache held narrower than the dtype it is declared in). */
    bool batch_splitk;
    bool kv_cache_set;
    nv_dtype kv_cache;
    /* Sampling misbehaviours (emu_select.c, docs/SERVING.md): sample_stream
     * "reuse" draws every row of a call at the call's offset (one uniform for a
     * whole batch), "per_call" at a draw count the context keeps across calls
     * (a generator whose state is never reset: the seed does not reproduce);
     * sample_topp "before_temperature" cuts the nucleus on softmax(x), not on
     * softmax(x / T); sample_draw "untempered" cuts top-k and top-p right but
     * draws from softmax(x) over the nucleus (the temperature left out of the
     * draw: a bias inside the support, for the G-test). */
    int sample_stream;
    bool sample_topp_first;
    bool sample_untempered;
    /* Device-driven training faults (emu_train.c): "train_fault=" skip_unscale
     * (clip the scaled gradients, unscale after) or update_skipped (step the
     * optimizer on a non-finite step) or ignore_deterministic (a job's
     * deterministic flag reported not honoured); "ckpt_drop=" scaler, rng or
     * weights (a checkpoint without that state); "allreduce=bf16" (the
     * distributed step's gradient all-reduce summed in bf16 whatever dtype the
     * job declares; "declared", the default, sums in the declared dtype;
     * "arrival": the ring starts at the rank that arrived first, drawn at
     * random at each reduction, so the order, and the bits, change
     * from run to run while the step still reports itself deterministic). */
    int train_fault, ckpt_drop, allreduce;
    /* RNG misbehaviours (emu_rng.c, docs/JOBS.md "RNG jobs"): "rng_restore=reuse"
     * (a restored state keeps the seed but drops the stream offset, so the
     * generator replays numbers it already gave), "rng_streams=overlap" (every
     * seed indexes one stream: seed s starts 256 words after seed s - 1),
     * "rng_recompute=fresh" (a checkpointed forward's recomputation draws new
     * numbers instead of replaying the forward's), "rng_threshold=DTYPE" (dropout
     * compares against 1 - p rounded to DTYPE: a keep rate off by that
     * rounding). */
    bool rng_restore_reuse, rng_streams_overlap, rng_recompute_fresh, rng_threshold_set;
    nv_dtype rng_threshold;
    /* "accum_node=NODE:DT": the op entry accumulates in DT in the calls that
     * name graph node NODE (nv_op_call.node, ABI version 4): one kernel
     * launch built with a narrower accumulator, the op-entry twin of
     * fused_accum_node. */
    bool accum_node_set;
    nv_dtype accum_node_dtype;
    char accum_node[64]; /* NV_GRAPH_MAX_NAME */
} emu_mode;

enum { EMU_TF_NONE, EMU_TF_SKIP_UNSCALE, EMU_TF_UPDATE_SKIPPED, EMU_TF_IGNORE_DET };
enum { EMU_SS_COUNTER, EMU_SS_REUSE, EMU_SS_PER_CALL };
enum { EMU_CK_NONE, EMU_CK_SCALER, EMU_CK_RNG, EMU_CK_WEIGHTS };
enum { EMU_AR_DECLARED, EMU_AR_BF16, EMU_AR_ARRIVAL };

/* The most inputs an op takes (matmul: a, b and two scales), with room to spare. */
#define EMU_MAX_INPUTS 8

typedef struct emu_ctx {
    emu_mode mode;
    char *describe; /* JSON text */
    uint64_t calls; /* per-context call counter (random reduction order) */
    /* Decoded inputs and the output values, reused between calls (grow only) so
     * that large tensors do not pay for fresh pages on every call. */
    double *scratch[EMU_MAX_INPUTS + 1];
    size_t scratch_cap[EMU_MAX_INPUTS + 1];
    struct emu_train *train; /* device-driven training state (emu_train.c) */
    struct emu_rng *rng;     /* the generators of nv_backend.rng (emu_rng.c) */
    uint64_t draws;          /* rows sampled so far (sample_stream=per_call) */
} emu_ctx;

/* The dtypes and rounding one op call uses, resolved from the mode and the call. */
typedef struct emu_call {
    const emu_mode *m;
    nv_dtype out;     /* dtype of the output tensor */
    nv_dtype storage; /* results are rounded here before being encoded in out */
    nv_dtype compute; /* elementwise math and composite intermediates */
    nv_dtype accum;   /* reductions and matmul accumulation */
    nv_round_mode rm;
    bool plain;           /* rounding is RNE without FTZ or saturation: fast paths apply */
    uint64_t sr_state;    /* stochastic rounding stream (deterministic per call) */
    uint64_t order_state; /* random order stream (fresh per call) */
} emu_call;

/* The call of op (attrs a, output dtype out, numel output elements, graph
 * node name or NULL) on context ctx, as emu_forward makes it: the dtypes of its
 * stages and its rounding and order streams (a fresh order stream per call). */
void emu_call_init(emu_call *ec, emu_ctx *ctx, const nv_op_def *op, const nv_op_attrs *a,
                   nv_dtype out, int64_t numel, const char *node);

/* ---- emu_rng.c ---- */
int emu_rng_call(void *ctx, nv_rng_call *call, char *err, size_t errlen);

/* ---- emu_train.c ---- */
int emu_train_call(void *ctx, nv_train_call *call, char *err, size_t errlen);
void emu_train_free(struct emu_train *t);
/* ---- emu_allreduce.c ---- */
/* The all-reduce (sum) of R ranks' gradients of n elements (g[r][k]) into out,
 * by "ring" (each chunk summed rank after rank, starting one rank further per
 * chunk, as a ring reduce-scatter does; `rotate` ranks further still) or
 * "tree" (pairwise), every partial sum rounded to dt. */
void emu_allreduce(int R, int64_t n, double *const *g, bool tree, nv_dtype dt, int rotate,
                   double *out);

/* ---- emu_mode.c ---- */
void emu_mode_default(emu_mode *m);
/* Parse "k=v,k=v"; on error a message naming key and value in quotes. */
int emu_mode_parse(const char *opts, emu_mode *m, char *err, size_t errlen);
/* The describe() JSON text (malloc'd) for a mode; NULL on ENOMEM. */
char *emu_describe_json(const emu_mode *m);
/* nv_backend.configure (emu_describe.c): deterministic unless a reduction order
 * (reduce= or fused_reduce=) is random. */
int emu_configure(void *ctx, const char *config_json, char *answer, size_t answer_len, char *err,
                  size_t errlen);
const char *emu_order_name(emu_order o);

/* ---- emu_round.c: rounding and correctly rounded basic operations ---- */
static inline uint64_t emu_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* x rounded to dt under the call's rounding, saturation and FTZ. */
double emu_round_slow(emu_call *c, nv_dtype dt, double x);
static inline double emu_round(emu_call *c, nv_dtype dt, double x)
{
    if (c->plain) {
        if (dt == NV_DT_FP64)
            return x;
        if (dt == NV_DT_FP32)
            return (double)(float)x; /* C conversion: IEEE 754 §5.4.2 under RNE */
    }
    return emu_round_slow(c, dt, x);
}
/* The exact value hi + lo (|lo| <= ulp(hi)/2, as from two_sum) rounded to dt. */
double emu_round2(emu_call *c, nv_dtype dt, double hi, double lo);

/* Correctly rounded basic operations in dt (IEEE 754-2019 §5.4.1). Plain fp32
 * and fp64 are the hardware's operations (fp32 rounds through fp64, innocuous
 * for +, *, / since 53 >= 2*24 + 2: Figueroa, "When is double rounding
 * innocuous?", 1995), inline since they sit in per-element loops. A NaN
 * result goes to emu_round.c's function: which of two NaN operands an
 * operation returns is not fixed (IEEE 754-2019 §6.2.3) but follows the
 * operand order of the compiled code, and there it is a op b, the first
 * operand's NaN, whatever the inlined caller's register allocation. */
double emu_add_slow(emu_call *c, nv_dtype dt, double a, double b);
double emu_mul_slow(emu_call *c, nv_dtype dt, double a, double b);
double emu_div_slow(emu_call *c, nv_dtype dt, double a, double b);
#define EMU_PLAIN_OP(name, expr)                                                                   \
    static inline double emu_##name(emu_call *c, nv_dtype dt, double a, double b)                  \
    {                                                                                              \
        if (c->plain && (dt == NV_DT_FP32 || dt == NV_DT_FP64)) {                                  \
            double r = expr;                                                                       \
            if (!isnan(r))                                                                         \
                return dt == NV_DT_FP32 ? (double)(float)r : r;                                    \
        }                                                                                          \
        return emu_##name##_slow(c, dt, a, b);                                                     \
    }
EMU_PLAIN_OP(add, a + b)
EMU_PLAIN_OP(mul, a * b)
EMU_PLAIN_OP(div, a / b)
#undef EMU_PLAIN_OP
double emu_sqrt(emu_call *c, nv_dtype dt, double a);
double emu_fma(emu_call *c, nv_dtype dt, double a, double b, double s);

/* True when every value of b is a value of a (so rounding to b directly equals
 * rounding to a then b for a correctly rounded function). */
bool emu_dtype_contains(nv_dtype a, nv_dtype b);

/* ---- fast encode/decode of fp32 and bf16 (emu.c) ----
 * bf16 is fp32 without its low 16 fraction bits (same sign, exponent field and
 * bias), so a bf16 value's encoding is the upper half of its fp32 encoding and
 * decoding is a shift. emu_store_exact stores v, a value already in dt's value
 * set (emu_round to dt), when dt is fp32 or bf16 and v is not NaN (NaN payloads
 * are nv_dtype_encode's business, IEEE 754-2019 §6.2.3); false: the caller
 * encodes it the general way. The bits are nv_dtype_encode's (test-emu-bf16). */
static inline bool emu_store_exact(nv_dtype dt, void *buf, int64_t i, double v)
{
    if (isnan(v) || (dt != NV_DT_FP32 && dt != NV_DT_BF16))
        return false;
    float f = (float)v; /* exact: v is an fp32 (or bf16) value */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if (dt == NV_DT_FP32)
        memcpy((char *)buf + i * 4, &u, 4);
    else {
        uint16_t h = (uint16_t)(u >> 16);
        memcpy((char *)buf + i * 2, &h, 2);
    }
    return true;
}
/* nvw_view_decode (views/views.h) with a fast path for contiguous bf16 views; the
 * same values bit for bit (NaN patterns go through nv_dtype_decode). */
int emu_view_decode(const nv_tensor_view *v, bool daz, double *dst);

/* Element off (in elements) of encoded data p of dtype dt, decoded as
 * emu_view_decode decodes it: fp32 and fp64 by a load (a float is exactly its
 * double, IEEE 754-2019 §5.4.2; the conversion keeps a NaN's payload as
 * nvw_view_decode's does), bf16 by a shift, DAZ reading a subnormal as the zero
 * of its sign; NaN patterns and every other dtype through nv_dtype_decode. */
static inline float emu_decode_f32(const void *p, int64_t off, bool daz)
{
    float f;
    memcpy(&f, (const unsigned char *)p + off * 4, 4);
    if (daz && f != 0 && fabsf(f) < 0x1p-126f)
        f = copysignf(0.0f, f);
    return f;
}

static inline double emu_decode_at(nv_dtype dt, const void *p, int64_t off, bool daz)
{
    const unsigned char *b = p;
    if (dt == NV_DT_FP32)
        return emu_decode_f32(p, off, daz);
    if (dt == NV_DT_FP64) {
        double d;
        memcpy(&d, b + off * 8, 8);
        if (daz && d != 0 && fabs(d) < 0x1p-1022)
            d = copysign(0.0, d);
        return d;
    }
    if (dt != NV_DT_BF16)
        return nv_dtype_decode(dt, nv_dtype_load_bits(dt, p, off), daz);
    uint16_t h;
    memcpy(&h, b + off * 2, 2);
    if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) /* NaN */
        return nv_dtype_decode(NV_DT_BF16, h, daz);
    if (daz && (h & 0x7f80) == 0)
        h &= 0x8000;
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The n terms a kernel reads: decoded doubles d[i * st], or, with d NULL, the
 * elements enc[i * st] of a device's encoded view read in place (emu_decode_at),
 * so that a large reduction needs no decoded copy of its input; map, when set,
 * is applied to each value read (a pure function of it: the caller computes it
 * on the fly only where no rounding draws from the stochastic stream). */
typedef struct emu_vec {
    const double *d;
    const void *enc;
    nv_dtype dt;
    bool daz;
    int64_t st;
    double (*map)(const void *ud, double v);
    const void *map_ud;
} emu_vec;

static inline double emu_vec_at(const emu_vec *v, int64_t i)
{
    double x = v->d ? v->d[i * v->st] : emu_decode_at(v->dt, v->enc, i * v->st, v->daz);
    return v->map ? v->map(v->map_ud, x) : x;
}

/* ---- emu_fn.c ---- */
/* f(x) in dt by the mode's transcendental quality; the exact kind rounds once. */
double emu_fn(emu_call *c, nv_fn f, double x, nv_dtype dt);

/* ---- emu_fast.c: float approximations typical of accelerators ---- */
float emu_fast_exp2f(float x);
float emu_fast_expf(float x);
float emu_fast_logf(float x);
float emu_fast_log2f(float x);
float emu_fast_tanhf(float x);
float emu_fast_erff(float x);
float emu_fast_sinf(float x);
float emu_fast_cosf(float x);
float emu_fast_rsqrtf(float x);
float emu_fast_recipf(float x);
/* Stated error bounds in fp32 ulps (docs/BACKEND_ABI.md; checked by test-emu). */
typedef struct emu_fast_bound {
    const char *fn;
    double max_ulp;
    const char *domain;
} emu_fast_bound;
const emu_fast_bound *emu_fast_bounds(int *ret_n);

/* ---- kernels: in[] decoded contiguous inputs, out preallocated (numel of the
 * inferred shape); return NV_OK or NV_E_* with err set. ---- */
int emu_elementwise(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
                    const nv_tensor *const *in, double *out, char *err, size_t errlen);
int emu_reduce_op(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
                  const nv_tensor *const *in, double *out, char *err, size_t errlen);
/* Reductions whose one input emu_reduce_view reads in place: sum, mean, max,
 * var and norm2 (the ones whose terms are the input's values, read in any
 * order: no decoded copy of an input of the job's size needs to exist). */
bool emu_reduce_reads_view(const nv_op_def *op);
/* emu_reduce_op on the view v, read where it lies (any strides, any dtype),
 * each element decoded as emu_view_decode with DAZ daz decodes it: the same
 * out bit for bit, and the same draws from the call's streams. */
int emu_reduce_view(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const nv_tensor_view *v,
                    bool daz, double *out, char *err, size_t errlen);
/* The most elements of an input emu_forward decodes for a reduction that
 * emu_reduce_view can read in place (2^16; tests move it to run both paths
 * through the whole call). */
extern int64_t emu_view_min;
int emu_matmul(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, int n_in,
               const nv_tensor *const *in, double *out, char *err, size_t errlen);
/* conv2d and avg_pool2d (emu_conv.c): in[] = x (, weight), contiguous. */
int emu_conv2d(emu_call *c, const nv_op_def *op, const nv_op_attrs *a, const nv_tensor *const *in,
               double *out, char *err, size_t errlen);

/* rotary_embedding (emu_rotary.c): in[0] = x decoded, contiguous. */
int emu_rotary(emu_call *c, const nv_op_attrs *a, const nv_tensor *const *in, double *out,
               char *err, size_t errlen);

/* argmax and sample (emu_select.c): in[0] = x [.., V] decoded, out one index per
 * row; *draws is the context's draw count (sample_stream=per_call). */
int emu_select(const emu_mode *m, const nv_op_def *op, const nv_op_attrs *a,
               const nv_tensor *const *in, double *out, uint64_t *draws, char *err,
               size_t errlen);

/* ---- emu_sum.c: ordered accumulation in dt ----
 * Sum of x[i*sx] (y NULL) or dot product of x[i*sx]*y[i*sy] over i < n, in the
 * call's reduction order; products fused into the accumulation when the mode has
 * fma=on, else rounded to dt first. n == 0 gives +0. */
double emu_sum(emu_call *c, nv_dtype dt, const double *x, int64_t sx, const double *y, int64_t sy,
               int64_t n);
/* The same over emu_vec terms (y NULL: a sum; y == x: the sum of the squares). */
double emu_sum_vec(emu_call *c, nv_dtype dt, const emu_vec *x, const emu_vec *y, int64_t n);
/* out[i*N + j] = emu_sum(c, dt, A(i, .), B(., j), K) for i < M, j < N, with
 * A(i, k) = a[i*asi + k*ask], B(k, j) = b[k*bsk + j*bsj], computed at once with
 * the hardware's fp32 fma where that gives the same bits: the call qualifies
 * (emu_dot_fast_applies: fp32 accumulation, RNE, no FTZ or saturation, fma=on,
 * sequential order) and every operand is a non-NaN fp32 value. Returns 1 when
 * out is written, 0 when the caller must take the general path. */
bool emu_dot_fast_applies(const emu_call *c, nv_dtype dt);
/* reduce=randtree:S: the length of the left part of [lo, lo + n), n >= 2. */
int64_t emu_randtree_split(uint64_t seed, int64_t lo, int64_t n);
int emu_dot_fast(const emu_call *c, nv_dtype dt, const double *a, int64_t asi, int64_t ask,
                 const double *b, int64_t bsk, int64_t bsj, double *out, int64_t M, int64_t K,
                 int64_t N);

#endif
