/* One-fault test devices (plugin_fault_*.c): the emu device, correct in every
 * other respect, with one classic kernel bug applied to its forward results.
 * plugin_fault_wrap.c holds the wrapping; each fault file defines fault_name
 * and fault_apply. tests/integration/test_blind_spots.py runs each against the
 * shipped smoke suite's jobs of the ops it breaks and asserts the failure class
 * that catches it, on every seed, while emu's correct mode passes them. */
#ifndef NUMVAL_PLUGIN_FAULT_H
#define NUMVAL_PLUGIN_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "numval/backend.h"

/* The device name describe() reports ("fault-maxnan" ...). */
extern const char *const fault_name;

/* Applied after emu's forward returned NV_OK: may rewrite call->outputs[0]
 * (emu allocated it; its dtype and strides stay). Returns an NV_* code. */
int fault_apply(nv_op_call *call, char *err, size_t errlen);

/* Element k (row-major logical order) of a view, decoded exactly / stored
 * rounded to the view's dtype (round to nearest even). */
double fault_get(const nv_tensor_view *v, int64_t k);
void fault_set(nv_tensor_view *v, int64_t k, double x);
int64_t fault_numel(const nv_tensor_view *v);

#endif
