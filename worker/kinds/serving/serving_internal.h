/* Internal interface of the serving kind (the folder's own files). */
#ifndef NUMVAL_WORKER_SERVING_INTERNAL_H
#define NUMVAL_WORKER_SERVING_INTERNAL_H

#include <stdbool.h>

#include "core/numerics/tensor.h"
#include "core/spec/servingspec.h"
#include "serving.h"
#include "worker/runner/job.h"

#define SV_ERRLEN 512

typedef struct sjob {
    nvw_job_base b;
    nv_servingspec *s;
} sjob;

/* Who runs an op (exec.c): the device through its op entry, or a reference
 * node by node from its own upstream values (docs/MODEL.md "The three
 * executions"): R64 keeps the double nearest each exact value, RDT rounds it
 * once to the case dtype (an ideal device of the model's precision). */
typedef enum sv_side { SV_DEV, SV_R64, SV_RDT } sv_side;

/* Where one request's values lie in a tensor of a step (decoder.c box_of):
 * per dim an offset and an extent; the whole tensor for a parameter. */
typedef struct sv_box {
    int nd;
    bool param;
    int64_t off[NV_MAX_DIMS], ext[NV_MAX_DIMS];
} sv_box;

#define SV_SITE_LEN 48

/* One device op call of a traced step: the decoder node it computes (the
 * model kind's node name: embed.x, decoder.L.q, ..., final.logits), the op,
 * copies of its inputs and output, and the traced request's box in each. */
typedef struct sv_call {
    char site[SV_SITE_LEN];
    char op[24];
    char *attrs; /* JSON text, NULL for {} */
    int n_in;
    nv_tensor *in[2], *out;
    sv_box in_box[2], out_box;
} sv_call;

/* The device's op calls of one step, for the request at index target of
 * the step's batch (trace.c): attention calls that do not hold it are not
 * kept. At most SV_TRACE_VALUES values are held; past them the trace is
 * marked full and keeps no more. */
typedef struct sv_trace {
    int target;
    int n, cap;
    sv_call *calls;
    int64_t values;
    bool full;
} sv_trace;

#define SV_TRACE_VALUES ((int64_t)1 << 23)

typedef struct sv_exec {
    sv_side side;
    const nv_backend *table; /* SV_DEV */
    void *ctx;               /* SV_DEV */
    nv_dtype dt;             /* the case dtype */
    bool steps;              /* SV_DEV: the harness runs whole steps (steps.c) */
    sv_trace *trace;         /* SV_DEV: the step being traced, else NULL */
    int64_t trace_at;        /* sv_sequence: trace only the step starting at this position */
    int argmax;              /* SV_DEV: 1 greedy tokens from the device's argmax op, -1 not
                                offered (the kind's sv_argmax), 0 not asked yet */
    int status;              /* forward's NV_* status after a backend error */
    int rc;                  /* after a failure: 1 backend error or bad output, -ENOMEM, NV_E_* */
    char err[SV_ERRLEN];     /* names the op after a failure */
} sv_exec;

/* Op `op` with attrs (JSON text, NULL: {}) on in[0..n): *ret a new tensor
 * (case dtype, int32 for a selection; values of R64 not rounded). 0, or -1
 * with x->rc and x->err. */
int sv_op(sv_exec *x, const char *op, const char *attrs, int n, const nv_tensor *const *in,
          nv_tensor **ret);

/* The decoder's weights, in the case dtype (decoder.c), drawn as the model
 * kind's decoder-lm draws them (worker/runner/params.h). */
typedef struct sv_layer {
    nv_tensor *g_attn, *wq, *wk, *wv, *wo, *g_mlp, *w_gate, *w_up, *w_down;
} sv_layer;

struct sv_served; /* the model on a harness that runs the steps (steps.c) */

typedef struct sv_model {
    const nv_servingspec *s;
    struct sv_served *served;
    nv_dtype dt;
    int64_t hd;      /* head width */
    int64_t max_pos; /* rows of the rotary tables */
    nv_tensor *wte, *w_unembed, *g_final, *rot, *cos, *sin;
    sv_layer *layer;
    char heads_attrs[32];
} sv_model;

int sv_model_init(sv_model *m, const nv_servingspec *s, nv_dtype dt, int sample, int64_t max_pos);
void sv_model_done(sv_model *m);

/* One request's KV cache on one side: per layer K and V [H, cap, Dh] (values
 * as the device's cache_write returned them), len positions filled. */
typedef struct sv_cache {
    int64_t len, cap;
    int64_t id;      /* the harness's name for it where the harness runs the steps (steps.c) */
    double **k, **v; /* per layer */
} sv_cache;

int sv_cache_init(sv_cache *c, const sv_model *m, int64_t cap);
void sv_cache_done(sv_cache *c, const sv_model *m);

/* Attention layout of a batch (docs/SERVING.md "Batch invariance"). */
typedef enum sv_layout { SV_PACKED, SV_PADDED } sv_layout;

/* One forward step of a batch of nb requests: request r feeds n[r] tokens
 * ids[r][0..n[r]) at positions cache[r]->len.. (its cache grows by n[r]);
 * rows of all requests go through the matmuls together, attention per the
 * layout. logits[r] receives a new [n[r], V] tensor. 0 or -1 (x->rc). */
int sv_forward(sv_exec *x, const sv_model *m, int nb, const int64_t *n, const int64_t *const *ids,
               sv_cache *const *cache, sv_layout layout, nv_tensor **logits);

/* The checks (check_*.c): into the case JSON cj, with its verdict. 0 or -ENOMEM. */
typedef struct scase {
    sjob *j;
    void *ctx;
    int64_t index;
    nv_dtype dt;
    int sample;
    json_t *cj;
    double u_acc; /* unit roundoff of the declared accumulator */
    const char *acc_name;
    bool sequential;    /* the declared reduction order of the case dtype is sequential */
    bool deterministic; /* describe() lists no nondeterministic op */
    bool steps;         /* the device's harness runs whole steps (serve request, steps.c) */
} scase;

/* Steps on an exec harness that offers the "serve" request (steps.c,
 * docs/SERVING.md "Steps on the harness"): sv_forward's device side when
 * x->steps, with sv_forward's contract. The rest keep a model's and a cache's
 * harness state (decoder.c calls them). */
int sv_steps_forward(sv_exec *x, const sv_model *m, int nb, const int64_t *n,
                     const int64_t *const *ids, sv_cache *const *cache, sv_layout layout,
                     nv_tensor **logits);
bool sv_steps_offered(const scase *c);
struct sv_served *sv_steps_new(void);
void sv_steps_release(sv_model *m);
int64_t sv_steps_cache_id(void);
void sv_steps_forget(const sv_model *m, const sv_cache *c);

/* Weights from the job's safetensors checkpoint (weights.c): the job's setup
 * checks the file (0 and its SHA-256 in sha, or -EINVAL / -ENOMEM with
 * *ret_err naming the file and the tensor); sv_model_init fills a model from
 * it when its SHA-256 is s->weights_sha256 (0, -ENOMEM or -EIO). */
int sv_weights_check(const nv_servingspec *s, char sha[65], char **ret_err);
int sv_weights_fill(sv_model *m);

/* Traces (trace.c): the call of op on in[] with output out and the traced
 * request's boxes, copied into t (a full trace keeps nothing more). 0 or
 * -ENOMEM. */
int sv_trace_call(sv_trace *t, const char *site, const char *op, const char *attrs, int n,
                  const nv_tensor *const *in, const sv_box *in_box, const nv_tensor *out,
                  const sv_box *out_box);
void sv_trace_done(sv_trace *t);
/* Whether box ba of a and box bb of b hold the same values bit for bit (same
 * extents required); *ret_differ the count of differing values. */
bool sv_box_same(const nv_tensor *a, const sv_box *ba, const nv_tensor *b, const sv_box *bb,
                 int64_t *ret_differ);

/* The localization of a variance failure (localize.c, docs/SERVING.md
 * "Artifacts"): traces a (the reference execution: the request alone) and b
 * (the failing one) of one step of the traced request, what each was (a
 * sentence) and the composition (JSON, stolen); the first call whose output
 * differs in the request's box while its inputs agree there becomes the
 * case's artifact (a serving pair: the two calls), "localized" on the case
 * says what became of it. Nothing when the job has no on_failure. 0 or
 * -ENOMEM. */
int sv_localize_pair(scase *c, const sv_trace *a, const sv_trace *b, const char *what_a,
                     const char *what_b, json_t *composition, const char *cls);
/* The localization of an accuracy failure (localize_op.c): the op calls of
 * traces t[0..n) (in that order) judged as op jobs judge them, on the
 * inputs the device gave them under the op's default tolerance; the first
 * that fails becomes the case's artifact (an op artifact), with where (JSON,
 * stolen) as its manifest's "serving" object. 0 or -ENOMEM. */
int sv_localize_op(scase *c, const sv_trace *const *t, int n, json_t *where);
/* "localized" {state, reason} on the case. 0 or -ENOMEM. */
int sv_localized(scase *c, const char *state, const char *why);
/* Whether failures of the case are handed on (the job has on_failure). */
bool sv_keeps_failures(const scase *c);

int sv_check_prefill_decode(scase *c);
int sv_check_long_context(scase *c);
int sv_check_batch(scase *c);
int sv_check_sustained(scase *c);
int sv_check_paged(scase *c);
int sv_check_sampling(scase *c);

/* Logits of a whole sequence ids[0..n) on side x (n[0] tokens per step,
 * step == 0: one prefill of all n), rows into out [n * V] (check_prefill.c).
 * 0 or -1 (x->rc). */
int sv_sequence(sv_exec *x, const sv_model *m, const int64_t *ids, int64_t n, int64_t step,
                double *out);
/* An executor of side s for the case. */
sv_exec sv_exec_of(const scase *c, sv_side s);

/* Helpers (judge.c). */
int sv_verdict(scase *c, const char *v, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The verdict of a failed execution x (backend error, bad output, OOM). */
int sv_exec_verdict(scase *c, const sv_exec *x, const char *where);
/* ||x_row - r_row||_2 / ||r_row||_2 over n values (absolute when r is 0; +Inf
 * on a non-finite mismatch). */
double sv_rel_err(const double *x, const double *r, int64_t n);
/* ||a - b||_2 / ||r||_2 over n values (absolute when r is 0; +Inf where a
 * and b disagree on finiteness). */
double sv_dist(const double *a, const double *b, const double *r, int64_t n);
/* The greedy token of a logits row of n values on side x: on the device,
 * through its argmax catalog op where the backend offers it (else, and on
 * the references, sv_argmax; docs/SERVING.md "Greedy tokens"). 0 or -1
 * (x->rc: the device's index outside [0, n) is a bad output). */
int sv_greedy(sv_exec *x, const double *row, int64_t n, int64_t *ret);
/* "argmax" on the case: who took the device's greedy tokens ("device" or
 * "kind"), when any was taken. 0 or -ENOMEM. */
int sv_note_argmax(scase *c, const sv_exec *x);
/* argmax of n values; *ret_margin top-1 minus top-2, *ret_norm the 2-norm. */
int64_t sv_argmax(const double *x, int64_t n, double *ret_margin, double *ret_norm);
/* The band of docs/MODEL.md "The band": F (e_dt + K u_acc) + u for the case
 * dtype's unit roundoff u. */
double sv_band(const scase *c, double e_dt, int64_t k_red);
/* band(t) at sequence position pos: K(t) = max(width, ffn, pos + 1), the
 * longest reduction feeding the position's logits (the attention sums pos + 1
 * terms). */
double sv_band_at(const scase *c, double e_dt, int64_t pos);
/* Seeded token ids in [0, vocab) for a named stream (the model kind's
 * "tokens" rule). 0 or -ENOMEM. */
int sv_tokens(const scase *c, const char *name, int64_t n, int64_t *out);
/* The same rule for integers in [0, bound) (schedules). 0 or -ENOMEM. */
int sv_draw(const scase *c, const char *name, int64_t n, int64_t bound, int64_t *out);
int sv_set_num(json_t *o, const char *k, double v);

#endif
