/* Internal interface of the fused runner (worker/kinds/fused/case.c, worker/kinds/fused/report.c). */
#ifndef NUMVAL_WORKER_RUN_FUSED_INTERNAL_H
#define NUMVAL_WORKER_RUN_FUSED_INTERNAL_H

#include "core/numerics/compare.h"
#include "fused.h"

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

/* "timing_ms" of the case. 0 or -ENOMEM. */
int fused_timing(fcase *c);

#endif
