/* Fused job specs (docs/JOBS.md "Fused jobs"): validation and the parsed form
 * the fused runner expands into cases (dtypes x input classes x samples). */
#ifndef NUMVAL_FUSEDSPEC_H
#define NUMVAL_FUSEDSPEC_H

#include <jansson.h>
#include <stdbool.h>

#include "core/numerics/inputs.h"
#include "core/numerics/tolerance.h"
#include "core/ops/graph.h"

#define NV_FUSED_MAX_CASES 10000

/* A tolerance for one node, from the job ("node_tolerances") or for all nodes
 * ("tolerance"). */
typedef struct nv_fused_node_tol {
    char name[NV_GRAPH_MAX_NAME];
    nv_tolerance tol;
} nv_fused_node_tol;

typedef struct nv_fusedspec {
    nv_graph *graph;  /* parsed; nv_graph_infer is run per case dtype */
    char *graph_text; /* canonical JSON of "graph": what backends receive */
    int n_dtypes;     /* 0: every graph input has its own dtype (one dtype axis entry) */
    nv_dtype dtypes[NV_DT_COUNT];
    int n_classes;
    nv_input_class classes[NV_IN_COUNT];
    int samples;
    uint64_t seed;
    /* "deterministic": the job demands it of the backend (nv_backend.configure,
     * docs/JOBS.md "Determinism demanded"); default false. */
    bool deterministic;
    /* "intermediate_dtype": the precision a fused region must keep intermediates
     * in (default fp32): fused node outputs are judged with the propagation
     * allowance of this dtype (docs/JOBS.md). */
    nv_dtype intermediate;
    bool has_tolerance;
    nv_tolerance tolerance; /* every node */
    int n_node_tols;
    nv_fused_node_tol *node_tols;
    /* "composition": the graph outputs of one execution (unfused: node by node
     * through the op entry; fused: the graph entry) are also judged by the
     * model's band, band_factor its F (default 4; docs/JOBS.md "Fused jobs"). */
    bool composition, composition_fused;
    double band_factor;
    int64_t n_cases;
} nv_fusedspec;

/* Whether the JSON object is a fused job ("kind": "fused"). */
bool nv_fusedspec_is(const json_t *spec);

/* Validate and parse (every case dtype is inferred once to check shapes);
 * same contract as nv_jobspec_parse (jobspec.h). */
int nv_fusedspec_parse(const json_t *spec, nv_fusedspec **ret, char **ret_pointer, char **ret_msg);
void nv_fusedspec_free(nv_fusedspec *s); /* NULL is a no-op */
int nv_fusedspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

/* The case dtype and input class of case i (dtype, class, sample order). */
void nv_fusedspec_case(const nv_fusedspec *s, int64_t i, nv_dtype *ret_dt, nv_input_class *ret_cls,
                       int *ret_sample);

/* The job's tolerance for node k, or NULL when the node takes its default. */
const nv_tolerance *nv_fusedspec_node_tolerance(const nv_fusedspec *s, int k);

#endif
