/* emu's fused graph entry (nv_backend.graph) and its mode knobs
 * (docs/BACKEND_ABI.md "Fused graphs"):
 *   fused_intermediate=DT      dtype intermediates are held in inside the fused
 *                              region (default: the accumulate dtype, fp32, or the
 *                              node's dtype when wider); bf16 models a compiler that
 *                              keeps intermediates in bf16 (the faulty mode)
 *   fused_transcendental=K     exact | libm | fast inside the fused region
 *                              (default: the mode's transcendental)
 *   fused_reduce=ORDER         reduction order inside the fused region, as reduce=
 *                              (default: the mode's reduce): compilers reassociate
 *                              reductions when they fuse
 *   fused_accum_node=NODE:DT   accumulate in DT in the one node named NODE (a
 *                              reduction or matmul; default: as every node): a
 *                              compiler that lowered that one kernel with a
 *                              narrower accumulator. The op entry has no node
 *                              names, so only the graph entry applies it; the
 *                              declared contract does not change (it is a
 *                              fault, not a declaration). */
#ifndef NUMVAL_WORKER_EMU_GRAPH_H
#define NUMVAL_WORKER_EMU_GRAPH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/numerics/dtype.h"
#include "numval/backend.h"

typedef struct emu_fused_mode {
    bool intermediate_set, transcendental_set, order_set, accum_node_set;
    nv_dtype intermediate;
    int transcendental; /* emu_transcendental */
    int order, order_k; /* emu_order */
    char accum_node[64]; /* NV_GRAPH_MAX_NAME */
    nv_dtype accum_node_dtype;
} emu_fused_mode;

struct emu_mode;

/* Apply one fused_* key of the mode text; returns the expectation text on a bad
 * value, NULL if good; *known false when key is not a fused_* knob. */
const char *emu_graph_mode_apply(struct emu_mode *m, const char *k, const char *v, bool *known);

/* The fused knobs as resolved, for describe()'s "mode" (new reference). */
json_t *emu_graph_mode_json(const struct emu_mode *m);

/* nv_backend.graph of emu. */
int emu_graph(void *ctx, nv_graph_call *call, char *err, size_t errlen);

#endif
