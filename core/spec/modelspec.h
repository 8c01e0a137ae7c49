/* Model job specs (docs/JOBS.md "Model jobs", docs/MODEL.md): validation, the
 * expansion of a model (layers, repeated blocks, parameters) into a graph of
 * the fused format (graph.h), and the parsed form the model runner expands
 * into cases (dtypes x samples). In core/spec so numvald refuses a bad model
 * with the code the worker runs. */
#ifndef NUMVAL_MODELSPEC_H
#define NUMVAL_MODELSPEC_H

#include <jansson.h>
#include <stdbool.h>

#include "core/numerics/dtype.h"
#include "core/ops/graph.h"

#define NV_MODEL_MAX_CASES 1000
#define NV_MODEL_MAX_LAYERS 512 /* after expansion: repeated instances count */
#define NV_MODEL_MAX_REPEAT 64
#define NV_MODEL_MAX_DECODE 256 /* greedy steps of a language model */

/* How a graph input gets its values (docs/MODEL.md "Deterministic init"). */
typedef enum nv_model_init {
    NV_MINIT_DATA,    /* a data input: standard normal */
    NV_MINIT_NORMAL,  /* N(0, std^2) */
    NV_MINIT_UNIFORM, /* U(-limit, limit) */
    NV_MINIT_VALUE,   /* the constant value */
    NV_MINIT_TOKENS,  /* int32 token ids uniform in [0, a) (a = "tokens", the vocabulary) */
    /* Fixed tables of a decoder-only transformer (docs/MODEL.md "Transformer"): */
    NV_MINIT_CAUSAL_MASK, /* [.., T, T]: 0 where column <= row, -inf above the diagonal */
    NV_MINIT_ROPE_COS,    /* [T, D]: per head of width hd (b), cos(t base^(-2i/hd)) with
                             i = (column mod hd) mod hd/2 (a = base) */
    NV_MINIT_ROPE_SIN,    /* [T, D]: sin of the same angles */
    NV_MINIT_ROTATE_HALF, /* [D, D]: per head, x R = [-x2, x1] for x = [x1, x2] (GPT-NeoX) */
} nv_model_init;

typedef struct nv_model_input {
    nv_model_init init;
    double a;    /* std, limit or value (fan_in: set by the parser from the shape) */
    int64_t hd;  /* rotary tables: the head width (0: the table's width) */
    bool fan_in; /* normal with std 1/sqrt(shape[0]) (LeCun normal) */
    bool is_param;
} nv_model_input;

typedef struct nv_model_layer {
    char name[NV_GRAPH_MAX_NAME];
    int output; /* node index (topological) of the layer's output */
} nv_model_layer;

typedef enum nv_model_task {
    NV_MTASK_CLASSIFIER, /* rows of the logits are samples with labels */
    NV_MTASK_LM,         /* rows of the logits are positions; greedy decode */
} nv_model_task;

/* Where the weights come from (docs/MODEL.md "Checkpoints"): the seeded init,
 * or a safetensors file read on the worker host. */
typedef struct nv_model_weights {
    char *path;      /* "weights.safetensors": NULL for the seeded init */
    char sha256[65]; /* "weights.sha256" in lowercase, "" when not given */
    /* per graph input: the checkpoint tensor it is read from (malloc'd), NULL
     * for a data input and a fixed table (nv_model_input_is_weight) */
    char *tensor[NV_GRAPH_MAX_INPUTS];
} nv_model_weights;

#define NV_MODEL_MAX_PATH 4096

typedef struct nv_modelspec {
    nv_graph *graph;  /* the expansion, parsed; nv_graph_infer is run per case dtype */
    char *graph_text; /* canonical JSON of the expanded graph */
    nv_model_input inputs[NV_GRAPH_MAX_INPUTS]; /* per graph input */
    int n_layers;
    nv_model_layer *layers;
    int *node_layer; /* per node (topological index): its layer */
    int logits;      /* node index of the logits */
    nv_model_task task;
    double label_noise, max_gap, alpha; /* classifier */
    int prompt, decode;                 /* lm: prompt length, tokens decoded */
    int ids_input;                      /* lm: the graph input holding the token ids */
    int n_dtypes;
    nv_dtype dtypes[NV_DT_COUNT];
    int samples;
    uint64_t seed;
    bool graph_exec; /* "execution": "graph": the backend's graph entry, else "eager" */
    /* A framework harness's graph request (docs/EXEC_PROTOCOL.md "Optional
     * requests"): "none", "script" or "trace"; "none", "bf16" or "fp16" (static strings). */
    const char *compile, *autocast;
    int64_t n_cases;
    nv_model_weights weights;
} nv_modelspec;

/* Whether input mi is a weight: a parameter with a drawn or constant init;
 * the fixed tables ("fill") are functions of their shape and never read. */
bool nv_model_input_is_weight(const nv_model_input *mi);

/* Validate and parse; same contract as nv_jobspec_parse (jobspec.h): -EINVAL
 * with the JSON pointer of the model field and a message, or -ENOMEM. */
int nv_modelspec_parse(const json_t *spec, nv_modelspec **ret, char **ret_pointer, char **ret_msg);
void nv_modelspec_free(nv_modelspec *s); /* NULL is a no-op */
int nv_modelspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

/* The case dtype and sample of case i (dtype-major). */
void nv_modelspec_case(const nv_modelspec *s, int64_t i, nv_dtype *ret_dt, int *ret_sample);

#endif
