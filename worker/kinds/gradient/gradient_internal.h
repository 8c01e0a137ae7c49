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
} gjob;

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
