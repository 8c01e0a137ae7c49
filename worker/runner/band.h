/* The band of a graph's nodes (docs/MODEL.md "The band"), shared by the model
 * kind, which judges every node of a model by it, and the fused kind, which
 * judges a subgraph's outputs by it under the composition criterion
 * (docs/JOBS.md "Fused jobs", "composition"): the device's norm-wise error
 * against the fp64 reference must stay within F times the error of the
 * model-dtype reference (every node correctly rounded to its dtype) plus what
 * K terms accumulated in the declared accumulator may add, plus one rounding:
 *
 *     e_dev <= F (e_dt + K u_acc) + u
 *
 * Both references are computed here from the same inputs, so the band of a
 * subgraph fed captured inputs is the model's band of that subgraph. */
#ifndef NUMVAL_WORKER_RUNNER_BAND_H
#define NUMVAL_WORKER_RUNNER_BAND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/numerics/tensor.h"
#include "core/ops/graph.h"

/* F: the device and the model-dtype reference make rounding errors of the
 * same size that are not the same errors (a margin chosen before measuring). */
#define NVW_BAND_FACTOR 4.0

/* One node's figures. */
typedef struct nvw_band {
    double e_dev, e_dt; /* norm-wise relative errors against the fp64 reference */
    double band;        /* the bound e_dev must stay within */
    int64_t k_red;      /* longest reduction feeding the node (its own or upstream) */
    bool in_band;
} nvw_band;

/* ||x - r||_2 / ||r||_2 (||x - r||_2 when ||r||_2 = 0); +Inf when x has a
 * non-finite value where r is finite, or the other way round. */
double nvw_band_rel_err(const nv_tensor *x, const nv_tensor *r);

/* A reference of g on inputs in[], node by node, into out[] (new tensors; the
 * caller frees them on every return): round_all, the model-dtype reference
 * (each node's exact value on the reference's own upstream values rounded once
 * to its dtype, RNE); else the fp64 one (the double nearest the exact value),
 * except that a cast node is rounded to its target in both: an explicit
 * quantization is part of the model in every precision. 0, NV_E_* or -ENOMEM
 * with err naming the node. */
int nvw_band_reference(const nv_graph *g, nv_tensor *const *in, nv_tensor **out, bool round_all,
                       char *err, size_t errlen);

/* The declared accumulator for case dtype dt: describe()'s contract entry
 * "accumulator" of dt, else fp32 (fp64 for fp64); its name and unit roundoff. */
void nvw_band_accumulator(const json_t *describe, nv_dtype dt, const char **ret_name,
                          double *ret_u);

/* Per node of g: k_red (the longest reduction feeding it) and the band from
 * e_dev and e_dt already set: band = factor (e_dt + k_red u_acc) + u of the
 * node dtype; in_band (NaN is outside). */
void nvw_band_finish(const nv_graph *g, double factor, double u_acc, nvw_band *b);

/* The figures of the nodes whose dev[k] is set (the others get e_dev NaN and
 * are left out of nothing else): both references of g on in[] computed, then
 * nvw_band_finish. 0, NV_E_* or -ENOMEM with err naming the node. */
int nvw_band_judge(const nv_graph *g, nv_tensor *const *in, const nv_tensor *const *dev,
                   double factor, double u_acc, nvw_band *b, char *err, size_t errlen);

#endif
