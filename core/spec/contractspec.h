/* Contract job specs (docs/JOBS.md "Contract jobs"): validation and the parsed
 * form the contract runner (worker/kinds/contract/run.c) probes a device from. */
#ifndef NUMVAL_CONTRACTSPEC_H
#define NUMVAL_CONTRACTSPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/dtype.h"

/* The probe families of a contract job, in the order they run. */
typedef enum nv_contract_probe {
    NV_CPROBE_CONVERSION,
    NV_CPROBE_ARITHMETIC,
    NV_CPROBE_ACCUMULATION,
    NV_CPROBE_TRANSCENDENTAL,
    NV_CPROBE_COUNT
} nv_contract_probe;

typedef struct nv_contract_spec {
    bool dtype[NV_DT_COUNT];     /* the float dtypes to probe (default: every one but e8m0) */
    bool probe[NV_CPROBE_COUNT]; /* the probe families to run (default: all) */
    int repeats;                 /* repetitions of each determinism probe, 2..64 (4) */
    int64_t fp32_sweep;          /* fp32 transcendental sweep points per function (4096) */
    uint64_t seed;               /* the random probe vectors' seed (1) */
    bool judge;                  /* compare against describe()'s contract (true) */
} nv_contract_spec;

/* The probe family's name in specs and results ("conversion" ...). */
const char *nv_contract_probe_name(nv_contract_probe p);

/* Parse a contract spec: 0 with *ret (free with nv_contract_free); -EINVAL with
 * the JSON pointer and message (both malloc'd); -ENOMEM. */
int nv_contract_parse(const json_t *spec, nv_contract_spec **ret, char **ret_pointer,
                      char **ret_msg);
void nv_contract_free(nv_contract_spec *s);
/* nv_contract_parse without keeping the result. */
int nv_contract_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

#endif
