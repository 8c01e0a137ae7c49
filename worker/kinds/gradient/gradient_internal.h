/* Internal interface of the gradient kind (the folder's own files). */
#ifndef NUMVAL_WORKER_RUN_GRADIENT_INTERNAL_H
#define NUMVAL_WORKER_RUN_GRADIENT_INTERNAL_H

#include "gradient.h"
#include "worker/backends/loader.h"
#include "worker/runner/job.h"

typedef struct gjob {
    nvw_job_base b; /* spec, backend, describe(), options, case slots, lock */
    nv_gradspec *g;
    const json_t *saved; /* describe "saved" list of the op (borrowed) */
    bool nondeterministic;
    /* describe's "gradient_dtype": "input" (each gradient in its input's dtype)
     * or the dtype every gradient comes in */
    const char *grad_dtype_name;
    bool grad_dtype_input;
    nv_dtype grad_dtype;
    /* The "contract" check every case carries when the device contradicts its
     * describe() (declares inference_only, computes gradients); NULL when it
     * does not. Owned. */
    json_t *contract;
    bool contract_refused; /* ... because it refused backward without saying why */
} gjob;

/* describe's "gradient_dtype" into j: absent or "input", or a floating-point
 * dtype name (fp64, fp32, tf32, bf16, fp16); the name points into describe.
 * Returns 0, or -EPROTO with *ret_err (malloc'd) naming the value (case.c). */
int nvw_grad_dtype_parse(gjob *j, const json_t *describe, char **ret_err);

/* The dtype gradient i of a case of dtype dt comes in, by describe's
 * "gradient_dtype" (case.c). */
nv_dtype nvw_grad_dtype(const gjob *j, nv_dtype input_dtype);
/* The declaration as the results name it ("input" when none was parsed). */
const char *nvw_grad_dtype_label(const gjob *j);

/* What the double-backward check (double.c) is given of a case of order 2, and
 * what it finds. */
typedef struct nvw_grad_dbl {
    gjob *j;
    void *ctx;
    const nv_jobspec *s;
    int64_t case_index;
    int n_in;
    nv_tensor *const *in;        /* the case's inputs, decoded */
    const nv_tensor_view *views; /* the same, as the device check passed them */
    const nv_tensor *gy;         /* the cotangent */
    const nv_tensor_view *gy_view;
    const nv_tensor_view *saved; /* the device check's saved tensors */
    int n_saved;
    json_t *checks;    /* the case's "checks" (gets "double_backward") */
    const char *cls;   /* out: failure class, NULL when it passed or was not offered */
    const char *offer; /* out: second_order's "device_double_backward" */
    char why[512];     /* (offer may point here) */
} nvw_grad_dbl;

/* The backend's double backward (ABI version 2) with one standard-normal
 * direction per differentiable input, against nv_op_vjp2 under the
 * second_order_bound default (docs/JOBS.md "double_backward"). A backend
 * without the entry, or one answering NV_E_UNSUPPORTED, does not offer it:
 * d->offer says so and nothing fails. Returns 0 or -ENOMEM (double.c). */
int nvw_grad_double_backward(nvw_grad_dbl *d);

/* Shared by case.c and double.c: a linear index of t as a JSON multi-index;
 * the entry of a gradient gv of input in whose dtype is not the declared one
 * (describe's "gradient_dtype") or whose rank is not in's, NULL when it is
 * well-formed; the compute dtype the default tolerances assume (matmul: its acc
 * attribute; fp64 for fp64 data; else fp32). */
json_t *nvw_grad_index_json(const nv_tensor *t, int64_t lin);
json_t *nvw_grad_malformed(const gjob *j, const nv_tensor *in, const nv_tensor_view *gv);
nv_dtype nvw_grad_compute_dtype(const nv_jobspec *s, nv_dtype dt);

/* One backward call on case 0's inputs (forward first, for the saved output),
 * for a device that declares inference_only: 0 when it ran, with backward's
 * return code in *ret_code and its message in msg (gradients it returned are
 * released); -ENOMEM or a negative errno when the inputs could not be made
 * (worker/kinds/gradient/case.c). */
int nvw_grad_probe_backward(gjob *j, void *ctx, int *ret_code, char *msg, size_t msglen);

/* Case i on context ctx: new reference, NULL on ENOMEM (worker/kinds/gradient/case.c).
 * A case failing its device or determinism check is handed to
 * j->opts->on_failure (serially, under j->lock) with its failure artifact
 * material (docs/ARTIFACTS.md "Gradient reproducers"). */
json_t *nvw_grad_case(gjob *j, void *ctx, int64_t i);

/* A case on given tensors (reproduction and minimization, repro_probe.c): the
 * device check, and the determinism check when asked or when the spec requires
 * it, on exactly these inputs and this output gradient; no formula or second
 * order check (they do not involve the device). report is called with the
 * case's material (manifest, inputs, output gradient, device output and
 * gradients) whether it failed or not. */
typedef struct nvw_grad_given {
    int n_in;
    nv_tensor *const *in;    /* exact inputs, contiguous, in the op's dtypes */
    const nv_tensor *gy;     /* output gradient, shaped like the op's output */
    const json_t *tolerance; /* {input name: {"u_storage", "u_compute"}} to judge by; may be NULL */
    bool determinism;        /* run the determinism check */
    nvw_failure_fn report;
    void *ud;
} nvw_grad_given;

/* Case index (the stored case's: its dtype, class and sample) on given tensors.
 * New reference, NULL on ENOMEM. */
json_t *nvw_grad_case_given(gjob *j, void *ctx, int64_t index, const nvw_grad_given *gv);
/* What a gradient failure artifact holds besides its manifest (tensors by op
 * input index; an entry may be NULL when the device gave none). */
typedef struct nvw_grad_material {
    int n_in;
    nv_tensor *const *in; /* exact inputs */
    const nv_tensor *gy;  /* output gradient (cotangent) */
    const nv_tensor *dy;  /* the device's forward output (the saved y); may be NULL */
    nv_tensor *const *grad, *const *grad2; /* device gradients; second run (determinism) */
    const char *cls, *check;               /* failure class and check; NULL when passed */
} nvw_grad_material;

/* Hand a case's material to gv->report (given cases) or, for a failed case of
 * a job, to j->opts->on_failure serially under j->lock, writing the returned
 * artifact id into the case JSON cj as "artifact" (worker/kinds/gradient/report.c).
 * Returns 0, or -ENOMEM when the manifest could not be built. */
int nvw_grad_hand_over(gjob *j, json_t *cj, const nvw_grad_material *m, const nvw_grad_given *gv);

/* A tensor's shape as a JSON array (new reference). */
json_t *nvw_grad_shape_json(const nv_tensor *t);

/* The job's formula-check parameters with their reasons (new reference). */
json_t *nvw_grad_settings(const gjob *j);

#endif
