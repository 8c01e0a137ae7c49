/* Gradient job specs (docs/JOBS.md "Gradient jobs"): validation and the parsed
 * form the gradient runner expands into cases. The fields shared with op jobs
 * (op, attrs, dtypes, shapes, inputs, samples, seed, deterministic, repeat,
 * build ...) are parsed by the op-job parser (jobspec.h) on a derived spec, so
 * their rules and error pointers are the same. */
#ifndef NUMVAL_GRADSPEC_H
#define NUMVAL_GRADSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "jobspec.h"

/* Full mode holds, per differentiable input, the structurally non-zero
 * Jacobian (outputs x positions per group) twice: at most this many entries. */
#define NV_GRAD_MAX_JACOBIAN (INT64_C(1) << 24)

typedef struct nv_grad_param {
    double value;
    char reason[NV_TOL_REASON_MAX];
    bool set; /* from the job (else the default and its reason) */
} nv_grad_param;

typedef struct nv_gradspec {
    nv_jobspec *base;   /* op, attrs, dtypes, shapes, classes, samples, seed, ... */
    int order;          /* 1 or 2 ("order") */
    bool fast;          /* "mode": "fast" (projections) or "full" */
    nv_grad_param eps;  /* central-difference step */
    nv_grad_param atol; /* formula check: |analytic - numeric| <= atol + rtol |numeric| */
    nv_grad_param rtol;
    bool has_device_tolerance; /* "device_tolerance" (base->tolerance holds it) */
} nv_gradspec;

/* The entries of input i's structured Jacobian as "mode": "full" stores it
 * (n_out x n_pos of nv_jac_map_new, core/ops/jacobian.h), from the shapes alone:
 * O(1) in the tensor sizes, where the map itself is O(numel). in[] as for
 * nv_op_infer. Returns 0 with *ret (INT64_MAX when the count overflows int64_t),
 * or -EINVAL when op has no backward, input i gets no gradient or nv_op_infer
 * refuses the inputs. */
int nv_gradspec_jacobian_entries(const nv_op_def *op, const nv_op_attrs *a, int n_in,
                                 const nv_tensor *const *in, int i, int64_t *ret);

/* Whether the JSON object is a gradient job ("kind": "gradient"). */
bool nv_gradspec_is(const json_t *spec);

/* Validate and parse; same contract as nv_jobspec_parse. */
int nv_gradspec_parse(const json_t *spec, nv_gradspec **ret, char **ret_pointer, char **ret_msg);
void nv_gradspec_free(nv_gradspec *s); /* NULL is a no-op */
int nv_gradspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

#endif
