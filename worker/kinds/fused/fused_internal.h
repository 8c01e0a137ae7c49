/* Internal interface of the fused kind (the folder's own files). */
#ifndef NUMVAL_WORKER_FUSED_INTERNAL_H
#define NUMVAL_WORKER_FUSED_INTERNAL_H

#include "core/numerics/compare.h"
#include "core/spec/fusedspec.h"
#include "fused.h"
#include "worker/backends/loader.h"
#include "worker/runner/job.h"

typedef struct fjob {
    nvw_job_base b; /* spec, backend, describe(), options, case slots, lock */
    nv_fusedspec *s;
    char graph_hash[65];
    /* NULL, or the exact graph inputs (graph order, contiguous, the case's dtypes
     * and shapes) used instead of generated ones (worker/kinds/fused/sub.c). */
    nv_tensor *const *given;
} fjob;

/* Case i on context ctx: new reference, NULL on ENOMEM (worker/kinds/fused/case.c). */
json_t *nvw_fused_case(fjob *j, void *ctx, int64_t i);

#define FUSED_ERRLEN 512

/* One execution's comparison of one node against the reference. */
typedef struct fnode_cmp {
    nv_compare_result cmp;
    bool ok; /* within the node's tolerance */
} fnode_cmp;

typedef struct fnode_res {
    nv_dtype judge;    /* dtype the fused value is judged in (see worker/kinds/fused/report.c) */
    nv_tolerance tol;  /* the node's tolerance in judge */
    fnode_cmp fused;   /* local: fused value vs the node's reference on the fused inputs */
    nv_tolerance etol; /* end-to-end metrics: the op's default in the node dtype */
    fnode_cmp e2e_fused, e2e_unfused; /* vs the graph reference, in the node dtype */
    bool inputs_ok;                   /* every node it reads was within its tolerance */
} fnode_res;

typedef struct fcase {
    fjob *j;
    void *ctx;
    int64_t index;
    nv_dtype dt;
    nv_input_class cls;
    int sample;
    nv_graph g; /* the spec's graph inferred for dt; nodes owned, attrs_json borrowed */
    nv_tensor *in[NV_GRAPH_MAX_INPUTS];
    nv_tensor_view inv[NV_GRAPH_MAX_INPUTS];
    int n_inv;
    /* per node (topological index) */
    nv_tensor **ref, **abs; /* reference hi and sum |terms| (NULL where not needed) */
    nv_tensor **unf;        /* unfused device output */
    nv_tensor **fus;        /* fused capture: the value as held inside the region */
    nv_tensor **fout;       /* fused graph output (output nodes only) */
    fnode_res *res;
    json_t *cj;
    double t_ref, t_unf, t_fus, t_cmp; /* milliseconds */
} fcase;

/* Set "verdict" (and "failure_class", "error" when given). 0 or -ENOMEM. */
int fused_verdict(fcase *c, const char *v, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Compare every node of both device executions with the reference, name the
 * first divergent node, fill the case JSON, report a failure. 0 or -ENOMEM. */
int fused_compare(fcase *c);

/* The composition criterion (composition.c): every graph output of the
 * spec's execution judged by the model's band on the case's inputs, into the
 * case's "composition"; *ret_out the first output outside its band, or -1.
 * 0; 1 when the case got its verdict (a reference error); -ENOMEM. */
int fused_composition(fcase *c, int *ret_out);

/* "timing_ms" of the case. 0 or -ENOMEM. */
int fused_timing(fcase *c);

#endif
