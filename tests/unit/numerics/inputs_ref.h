/* The previous scalar input generators (inputs_ref.c): the oracle of
 * test-inputs-stream.c. */
#ifndef NUMVAL_TEST_INPUTS_REF_H
#define NUMVAL_TEST_INPUTS_REF_H

#include "core/numerics/inputs.h"

/* nv_inputs_generate as it was: same request, same contract. */
int ref_inputs_generate(const nv_input_request *rq, double *out, int64_t n);

#endif
