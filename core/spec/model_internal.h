/* The model expansion (model_expand.c) for the model job parser
 * (jobspec_model.c); internal to core/spec. */
#ifndef NUMVAL_MODEL_INTERNAL_H
#define NUMVAL_MODEL_INTERNAL_H

#include <jansson.h>

#include "modelspec.h"
#include "spec_internal.h"

#define NV_MODEL_PTR_LEN 200

typedef struct mexp_layer {
    char name[NV_GRAPH_MAX_NAME];
    char out[2 * NV_GRAPH_MAX_NAME]; /* full name of the layer's output node */
} mexp_layer;

typedef struct mexp {
    nv_spec_err *e;
    json_t *ginputs, *gnodes; /* the graph being built */
    json_t *names;            /* every input and node name so far */
    json_t *graph;            /* the expanded graph object, when done */
    int n_inputs;
    nv_model_input inputs[NV_GRAPH_MAX_INPUTS];
    char input_src[NV_GRAPH_MAX_INPUTS][NV_MODEL_PTR_LEN];
    int n_nodes;
    char (*node_src)[NV_MODEL_PTR_LEN]; /* per expanded node: its model field */
    int *node_layer;                    /* per expanded node: its layer */
    int n_layers;
    mexp_layer *layers;
} mexp;

/* Expand spec["model"] into x (zeroed here): 0, or the first error recorded in
 * e (-EINVAL) or -ENOMEM. Free with nv_model_expand_done in every case. */
int nv_model_expand(const json_t *model, nv_spec_err *e, mexp *x);
void nv_model_expand_done(mexp *x);

/* The model field a graph parser pointer ("/graph/nodes/3/op") came from. */
void nv_model_map_pointer(const mexp *x, const char *gptr, char *out, size_t len);

/* spec["weights"] into s->weights after the graph parsed (model_weights.c):
 * 0, -EINVAL (recorded in e) or -ENOMEM. */
int nv_model_weights_parse(const json_t *spec, nv_modelspec *s, nv_spec_err *e);
void nv_model_weights_free(nv_model_weights *w);

#endif
