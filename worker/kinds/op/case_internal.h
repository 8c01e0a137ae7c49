/* What case.c (one op case, whole) and blocks.c (one large elementwise case in
 * blocks of rows) share: a case's state and its steps. */
#ifndef NUMVAL_WORKER_OP_CASE_INTERNAL_H
#define NUMVAL_WORKER_OP_CASE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/inputs.h"
#include "core/numerics/tensor.h"
#include "op_internal.h"

#define ERRLEN 512

/* One case, or in blocks.c one block of it (meta, the tensors and the output
 * shape are then the block's; c, cj and the job are the case's). */
typedef struct case_state {
    nvw_op_job *job;
    const nv_jobspec *s;
    nv_job_case c;
    json_t *cj;
    int n_in;
    nv_tensor meta[NV_JOB_MAX_TENSORS];
    nv_tensor *in[NV_JOB_MAX_TENSORS];
    nv_tensor_view views[NV_JOB_MAX_TENSORS];
    int n_views;
    nv_dtype out_dt;
    int out_ndim;
    int64_t out_shape[NV_MAX_DIMS];
    nv_tensor_view out;
    bool have_out;
    void *ctx;
    nv_tensor *got, *hi, *lo, *abs;
    nv_tensor *abs_exp, *peak; /* the wide abs_sum and the accumulator demand (nv_ref_out) */
} case_state;

/* The name of an NV_* return code ("NV_E_SHAPE"). */
const char *nvw_op_code_name(int r);
/* Set cs->cj's verdict (and, for "error" or "failed" with a message, "error" and
 * "failure_class"). Returns 0 or -ENOMEM. */
int nvw_op_verdict(case_state *cs, const char *v, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Storage for meta in layout l (a new tensor, NULL on ENOMEM). */
nv_tensor *nvw_op_make_layout(const nv_tensor *meta, nv_layout l);
/* One forward call on cs->views; the output lands in *out (release it). */
int nvw_op_forward(case_state *cs, nv_tensor_view *out, int32_t *ret_n_out, int32_t *ret_fb,
                   char *err);
void nvw_op_release(case_state *cs, nv_tensor_view *v);
/* cs->out's count, dtype, shape and strides: 1 when acceptable, 0 with the
 * verdict set, -ENOMEM. */
int nvw_op_check_output(case_state *cs, int32_t n_out);
/* Runs 2..repeat: 1 when every run matched cs->out bit for bit. */
int nvw_op_repeat_runs(case_state *cs);
/* The exact reference of cs->in into cs->hi, lo, abs, abs_exp, peak (new). */
int nvw_op_reference(case_state *cs, char *err);

/* v (t->numel values in row-major logical order) into t's layout. */
void nvw_op_scatter(nv_tensor *t, const double *v);
/* The request of input i of case cs (from its meta). */
void nvw_op_input_request(const case_state *cs, int i, nv_input_request *ret);
/* The whole case's inputs: cs->in in the case's layout and cs->views. */
int nvw_op_make_inputs(case_state *cs);
/* The case's tolerance into *tol: 0; 1 with the verdict "error" set; -ENOMEM. */
int nvw_op_tolerance(case_state *cs, nv_tolerance *tol);
/* The verdict of a tolerance nv_compare refuses. Returns 0 or -ENOMEM. */
int nvw_op_bad_tolerance(case_state *cs, const nv_tolerance *tol);
/* Metrics, overflow, determinism and the verdict of comparison cmp into cs->cj.
 * first_in: the inputs at cmp's first mismatches (NULL: read from cs->in). */
int nvw_op_judge(case_state *cs, const nv_tolerance *tol, const nv_compare_result *cmp,
                 const nvw_accumulator *acc, bool deterministic,
                 const double (*first_in)[NV_JOB_MAX_TENSORS]);
/* on_failure with cs->in and cs->got (the whole case's). Returns 0. */
int nvw_op_report_failure(case_state *cs);

/* Whether case cs (its meta made) runs in blocks of rows (blocks.c): an
 * elementwise op of inputs of one shape above one block's elements whose
 * rows fit a block. */
bool nvw_op_blocked(const case_state *cs);
/* Run case cs in blocks (cs->meta made, cs->out_ndim/out_shape inferred): the
 * verdict and metrics into cs->cj, exactly as the whole case would give them.
 * Returns 0 or -ENOMEM. */
int nvw_op_run_blocked(case_state *cs);

/* The elements of one block of a large case (the job's op_block_elems, else
 * 2^16; negative: never in blocks). */
int64_t nvw_op_block_elems(const nvw_op_job *job);
/* The value written into the gaps of a strided layout. */
double nvw_op_poison(nv_dtype dt);

/* Whether case cs (its meta made) is a reduction whose input is generated
 * straight into the device's view and referenced from it (reduce_stream.c):
 * sum, mean, max, norm2 or var above one block's elements. */
bool nvw_op_streamed(const case_state *cs);
/* cs->views[0] of such a case, in its layout, from the input's stream; cs->in
 * stays NULL. Returns 0, -EINVAL (the generator refused) or -ENOMEM. */
int nvw_op_make_inputs_streamed(case_state *cs);
/* nvw_op_reference of such a case, reading the input from cs->views[0]. */
int nvw_op_reference_streamed(case_state *cs, char *err);

#endif
