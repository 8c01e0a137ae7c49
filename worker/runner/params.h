/* The values of a model's parameters and data inputs from the job seed
 * (docs/MODEL.md "Deterministic init"), shared by the kinds that run a model
 * (model, serving): the same seed, sample and parameter name give the same
 * tensor in both, whatever the thread count. */
#ifndef NUMVAL_WORKER_RUNNER_PARAMS_H
#define NUMVAL_WORKER_RUNNER_PARAMS_H

#include <stdint.h>

#include "core/numerics/tensor.h"
#include "core/spec/modelspec.h"

/* Fill t (allocated by the caller with its dtype and shape) by the rule mi for
 * the input named name: Philox keyed by (seed ^ FNV-1a(name) * golden, sample),
 * fp64 draws rounded to t's dtype under round-to-nearest-even; token ids are
 * kept as integers; the fixed tables (causal mask, rotary cos/sin, rotate-half)
 * computed from t's shape and mi's base and head width. */
void nvw_param_fill(nv_tensor *t, const nv_model_input *mi, const char *name, uint64_t seed,
                    int sample);

#endif
