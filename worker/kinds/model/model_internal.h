/* Internal interface of the model kind (the folder's own files). */
#ifndef NUMVAL_WORKER_MODEL_INTERNAL_H
#define NUMVAL_WORKER_MODEL_INTERNAL_H

#include "core/numerics/compare.h"
#include "core/numerics/tensor.h"
#include "core/spec/modelspec.h"
#include "model.h"
#include "worker/runner/band.h"
#include "worker/runner/job.h"

#define MODEL_ERRLEN 512

typedef struct mjob {
    nvw_job_base b;
    nv_modelspec *s;
    char graph_hash[65];
    /* per graph input: the checkpoint's values (exact in the input's dtype),
     * NULL where the input comes from the seed (weights.c) */
    double *wval[NV_GRAPH_MAX_INPUTS];
    json_t *weights_json; /* the result's "weights" */
} mjob;

/* One node's error figures (docs/MODEL.md "Judgement"). */
typedef struct mnode {
    double e_dev, e_dt; /* norm-wise relative errors against the fp64 reference */
    double band;        /* the band e_dev must stay within */
    int64_t k_red;      /* longest reduction feeding the node */
    double ulp_max, ulp_mean, ulp_p99; /* device vs fp64 reference, in the node dtype */
    bool in_band;
} mnode;

typedef struct mcase {
    mjob *j;
    void *ctx;
    int64_t index;
    nv_dtype dt;
    int sample;
    nv_graph g; /* the spec's graph inferred for dt; nodes owned, attrs_json borrowed */
    nv_tensor *in[NV_GRAPH_MAX_INPUTS];
    /* per node (topological index) */
    nv_tensor **r64; /* the fp64 reference */
    nv_tensor **rdt; /* the model-dtype reference */
    nv_tensor **dev; /* the device's output */
    mnode *res;
    double u_acc; /* unit roundoff of the declared accumulator */
    const char *acc_name;
    json_t *cj;
} mcase;

/* A reference of the case's graph on inputs in[], node by node, into out[]
 * (new tensors; the caller frees them on every return): round_all, the
 * model-dtype reference, else the fp64 one (casts still quantize). 0, NV_E_*
 * or -ENOMEM with err naming the node (case.c). */
int model_reference(mcase *c, nv_tensor *const *in, nv_tensor **out, bool round_all, char *err,
                    size_t errlen);
/* The device on inputs in[], node by node through forward, every output into
 * dev[] (new tensors; the caller frees them): 0; 1 when the case got its
 * verdict (a backend error, a bad output); -ENOMEM (case.c). */
int model_device(mcase *c, nv_tensor *const *in, nv_tensor **dev);

/* Greedy decode (decode.c): the language model's "decode" criterion into
 * crit; *fail set when it fails and nothing failed before. 0, 1 (the case got
 * its verdict) or -ENOMEM. */
int model_decode(mcase *c, json_t *crit, const char **fail);

/* Graph input i of g (inferred for the case dtype) from the seed for sample
 * (docs/MODEL.md "Deterministic init") into *ret: 0 or -ENOMEM (case.c). */
int model_seeded_input(const nv_modelspec *s, const nv_graph *g, int i, int sample,
                       nv_tensor **ret);
/* SHA-256 (hex) of the weights of a case: per weight input in graph order, its
 * name, a NUL and its elements' bits in its dtype, 8 bytes little-endian each
 * (case.c): equal exactly when the weights are bit-identical. */
void model_weights_hash(const nv_modelspec *s, const nv_graph *g, nv_tensor *const *in,
                        char out[65]);

/* The checkpoint of spec "weights" read, checked (sha256, every weight with
 * its shape, the dtype scheme against the job and describe()) and decoded into
 * j->wval; j->weights_json set (also for seeded weights). 0 or a negative
 * errno with *ret_err naming the file and the tensor (weights.c). */
int model_weights_load(mjob *j, char **ret_err);
void model_weights_free(mjob *j);
/* The numval dtype of a safetensors dtype (nv_st_dtype) and back: 0, or -1
 * where the other side has none (weights.c). */
int model_dtype_of_st(int st, nv_dtype *ret);
int model_st_of_dtype(nv_dtype dt, int *ret);

/* Case i on context ctx: new reference, NULL on ENOMEM (case.c). */
json_t *nvw_model_case(mjob *j, void *ctx, int64_t i);

/* Set "verdict" (and "failure_class", "error"). 0 or -ENOMEM (case.c). */
int model_verdict(mcase *c, const char *v, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Judge the case: the per-node bands, layers, first divergent layer and op,
 * logits and accuracy criteria into c->cj, and the verdict (judge.c). 0 or
 * -ENOMEM. */
int model_judge(mcase *c);

/* The artifact of a failed case whose first divergent node is k (artifact.c):
 * in eager execution, when the op alone fails its default tolerance on the
 * inputs the device gave it, an op artifact through the job's on_failure, its
 * id as the case's "artifact"; "localized" on the case says what was left and
 * why. 0 or -ENOMEM. */
int model_report_failure(mcase *c, int k);

/* The op kind's judgement of node k's device output on inputs in[] (the
 * shipped default tolerance in the node dtype, the declared accumulator for a
 * reduction or matmul): *tol, *cmp, and cls the failure class, "" when within
 * the tolerance. 0, NV_E_* or -ENOMEM (artifact.c). */
int model_judge_op(const mcase *c, int k, nv_tensor *const *in, nv_dtype dt, nv_tolerance *tol,
                   nv_compare_result *cmp, char cls[48]);
/* The graph hash of a fused spec the model kind writes, by the fused kind's
 * own parse; 0 or < 0 (artifact_graph.c). */
int model_fused_graph_hash(const json_t *spec, char *ret_hash);

/* A tolerance as an artifact's manifest holds it; NULL on ENOMEM (artifact.c). */
json_t *model_tolerance_json(const nv_tolerance *tol);
/* "localized" {state, reason} on the case JSON. 0 or -ENOMEM (artifact.c). */
int model_localized(mcase *c, const char *state, const char *why);
/* The fused artifact of a graph-execution failure at node k, whose op alone
 * fails its tolerance (class cls) on the values the backend held: the
 * subgraph of k's layer, its inputs the graph inputs and the upstream nodes'
 * device values, every node's capture as its fused value (artifact_graph.c).
 * 0 or -ENOMEM. */
int model_graph_artifact(mcase *c, int k, const char *cls);

/* What of the case graph a subgraph artifact holds (artifact_graph.c). */
typedef struct model_sub {
    int layer;
    bool node[NV_GRAPH_MAX_NODES];     /* the subgraph's nodes */
    bool ginput[NV_GRAPH_MAX_INPUTS];  /* graph inputs they read */
    bool upstream[NV_GRAPH_MAX_NODES]; /* nodes outside the subgraph they read */
    bool output[NV_GRAPH_MAX_NODES];   /* the subgraph's outputs */
} model_sub;

/* ginput and upstream of ls from its node set (artifact_graph.c). */
void model_sub_select(const mcase *c, model_sub *ls);
/* The fused graph of ls: inputs (graph inputs, then upstream nodes, in graph
 * order), its nodes in topological order, its outputs; NULL on ENOMEM. */
json_t *model_sub_graph(const mcase *c, const model_sub *ls);
/* The device's value of upstream node q as a subgraph input, in the node dtype. */
nv_tensor *model_upstream_value(const mcase *c, int q);
/* The artifact of an eager failure at node k whose op alone is within its
 * tolerance (artifact_compo.c): the smallest subgraph ending at k (its layer,
 * then consecutive layers before it, then a contiguous node range) whose
 * output, fed the captured inputs, leaves the model's band, as a fused case
 * judged by the composition criterion. 0 or -ENOMEM. */
int model_composition_artifact(mcase *c, int k);

/* The band factor F of docs/MODEL.md "The band". */
#define MODEL_BAND_FACTOR NVW_BAND_FACTOR

/* ||x - r||_2 / ||r||_2 (absolute when ||r||_2 = 0), +Inf on a non-finite
 * mismatch (judge.c). */
double model_rel_err(const nv_tensor *x, const nv_tensor *r);

/* The logits criteria (KL, top-1 / top-5) and the classifier's accuracy gap
 * into crit; *fail set to the failing criterion's class unless already set
 * (logits.c). 0 or -ENOMEM. */
int model_logits_criteria(mcase *c, json_t *crit, const char **fail);

/* Wilson score bounds (Wilson 1927) of a proportion x/n at normal quantile z:
 * *lo and *hi (stats.c). n == 0 gives [0, 1]. */
void model_wilson(int64_t x, int64_t n, double z, double *lo, double *hi);
/* The upper quantile z with P(Z > z) = p of the standard normal (stats.c). */
double model_z_upper(double p);

#endif
