/* The gradient kind (docs/JOBS.md "Gradient jobs"): per case, the formula
 * check (reference VJP vs central finite differences in fp64), the device check
 * (the backend's backward vs the reference in the device's dtypes), second
 * order (the reference's, and the backend's double backward) and determinism.
 * What the kind table (worker/kinds/kinds.c) and the benches reach the kind
 * through. */
#ifndef NUMVAL_WORKER_KINDS_GRADIENT_H
#define NUMVAL_WORKER_KINDS_GRADIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/numerics/tensor.h"
#include "core/ref/backward.h"
#include "core/spec/gradspec.h"
#include "worker/repro/cmd.h"
#include "worker/repro/gate.h"
#include "worker/runner/run.h"

/* Same contract as nvw_run_job (worker/kinds/kinds.h), for a spec with "kind":
 * "gradient". A backend without a backward entry, one that declares
 * inference_only and refuses backward when called (with its message), or a
 * non-deterministic op in a deterministic job, is refused: -ENOTSUP with
 * *ret_err saying so; an unknown describe "gradient_dtype": -EPROTO. */
int nvw_run_gradient(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                     json_t **ret_result, char **ret_err);

/* `numval-worker repro|minimize` on a gradient artifact (repro_cmd.c); exit
 * codes as in worker/repro/cmd.h. */
int nvw_grad_repro_main(const nvw_cmd *c);
int nvw_grad_minimize_main(const nvw_cmd *c);

/* Agent mode (gate.c): the signature key of a failure from its manifest (dtype,
 * failing check, class), the gate + minimization of a kept failure, and the
 * replay of a suite case. */
void nvw_grad_failure_key(const json_t *manifest, char *key, size_t len);
void nvw_grad_gate(const nvw_gate_env *env, const nvw_gate_case *k);
void nvw_grad_replay(const nvw_replay_env *env, const nv_artifact *a, const char *sha, json_t *c);

/* ---- the fp64 checks (worker/kinds/gradient/checks.c), usable without a backend ---- */

/* One failing Jacobian (or Hessian) element. */
typedef struct nvw_grad_bad {
    int64_t out_index; /* output element (Hessian: gradient element) */
    int64_t in_index;  /* input element */
    double analytic, numeric;
    double allowed; /* the bound it exceeded */
} nvw_grad_bad;

#define NVW_GRAD_MAX_BAD 8

typedef struct nvw_grad_report {
    bool passed;
    const char *what; /* "jacobian", "structure", "projection", "hessian" */
    int64_t checked;  /* elements or projections compared */
    int64_t mismatches;
    double max_abs_err; /* max |analytic - numeric| */
    double worst_ratio; /* max err / (atol + rtol |numeric|): <= 1 passes */
    int n_bad;
    nvw_grad_bad bad[NVW_GRAD_MAX_BAD];
    int64_t forward_calls, vjp_calls;
    /* second order: reference double-backward calls, the range of the steps the
     * error model chose, and the evaluation length its rounding bound used */
    int64_t vjp2_calls;
    double step_min, step_max;
    int64_t eval_len;
} nvw_grad_report;

/* Scratch memory a caller may keep across checks (fast mode reuses it, so
 * repeated checks do not grow and trim the heap each time); zero-initialise,
 * release with nvw_grad_work_done. */
typedef struct nvw_grad_work {
    double *buf;
    size_t cap;          /* doubles */
    nv_ref_cache *cache; /* the reference's line cache, emptied at each check */
} nvw_grad_work;

void nvw_grad_work_done(nvw_grad_work *w);

typedef struct nvw_grad_problem {
    const nv_op_def *op;
    const nv_op_attrs *attrs;
    int n_in;
    nv_tensor *const *in; /* contiguous, fp64 values (any dtype tag) */
    const double *gy;     /* output gradient for the second order */
    double eps, atol, rtol;
    uint64_t seed;
    uint32_t case_index;
    nvw_grad_work *work; /* may be NULL */
} nvw_grad_problem;

/* First order, input i: every structurally non-zero Jacobian element (full), or
 * v^T J u for random unit u, v (fast; on failure the full check runs and its
 * report replaces the fast one, so the wrong elements are named). The full
 * check relies on the declared structure and verifies it with 4 probes (a
 * random input perturbed: outputs outside its group must keep their bits);
 * the projection relies on none. Returns 0 or -ENOMEM / NV_E_*. */
int nvw_grad_formula(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret,
                     nvw_grad_report *ret_structure);

/* The first-order check of every differentiable input (rep[i], st[i] for input
 * i; others untouched): full as nvw_grad_formula; fast with one VJP shared by
 * all inputs and one projection per input. */
int nvw_grad_formula_all(const nvw_grad_problem *p, bool fast, nvw_grad_report *rep,
                         nvw_grad_report *st);

/* Second order, input i: the reference second-order VJP (nv_op_vjp2) against
 * central differences of the reference VJP, judged by the finite-difference
 * error model of checks.c (truncation h^2/6 |D^3 g|, rounding gamma_N mag / h,
 * the step h chosen per column or projection to minimise their sum): full
 * mode every stored element of the block H_ii (coloured like the Jacobian) and
 * 4 projections u_i . (H w)_i with w over every differentiable input (mixed
 * blocks included); fast mode one projection. Returns 0 or -ENOMEM / NV_E_*. */
int nvw_grad_second(const nvw_grad_problem *p, int i, bool fast, nvw_grad_report *ret);

/* The error model of nvw_grad_second in one sentence (the result's
 * second_order "error_model"). */
#define NVW_GRAD_SECOND_MODEL                                                                      \
    "reference double backward vs central differences of the reference VJP along d: "              \
    "|analytic - numeric| <= 2 (h^2/6 |D^3 g[d,d,d]| + gamma_N mag / h) + gamma_N mag2, "          \
    "D^3 g by a third difference (step 2e-3), gamma_N = N u / (1 - N u), u = 2^-53, N = 16 + "     \
    "eval_len, h minimising the sum per column or projection, in [1e-8, 1e-3] (Nocedal & "         \
    "Wright, Numerical Optimization, 2nd ed., §8.1; Higham, Accuracy and Stability of "           \
    "Numerical Algorithms, 2nd ed., §3.1, §4.2)"

#endif
