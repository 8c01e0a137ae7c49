/* The model kind (docs/JOBS.md "Model jobs", docs/MODEL.md): per case, a whole
 * model (a graph of catalog ops expanded from layers and blocks, parameters
 * from a seed) run forward on the device node by node with every node
 * captured, against the same model in fp64 and correctly rounded in the model
 * dtype; per-layer error bands, logits criteria (KL, top-1), the classifier's
 * accuracy gap, and the first divergent layer and op. What the kind table
 * (worker/kinds/kinds.c) reaches the kind through. */
#ifndef NUMVAL_WORKER_KINDS_MODEL_H
#define NUMVAL_WORKER_KINDS_MODEL_H

#include <jansson.h>

#include "worker/runner/run.h"

/* Same contract as nvw_run_job (worker/kinds/kinds.h), for a spec with "kind":
 * "model". */
int nvw_run_model(const json_t *spec, const char *backend_spec, const nvw_run_opts *opts,
                  json_t **ret_result, char **ret_err);

/* numval-worker export-weights MODEL_JOB.json -o OUT.safetensors [--dtype D]
 * [--sample N]: the seeded init of the model's weights as a safetensors
 * checkpoint (export.c; docs/MODEL.md "Checkpoints"). An exit status. */
int nvw_model_export_main(int argc, char **argv);

#endif
