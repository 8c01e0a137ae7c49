/* The measured contract of a device in the store (store_contract.c): the
 * newest finished contract job of a device, optionally of one build.
 * Conventions as store.h: 0 or negative errno; JSON through ret is a new
 * reference owned by the caller. */
#ifndef NUMVAL_DAEMON_STORE_CONTRACT_H
#define NUMVAL_DAEMON_STORE_CONTRACT_H

#include "store.h"

/* What an -ENOENT of nvd_store_device_contract is missing. */
enum { NVD_CONTRACT_NO_DEVICE = 1, NVD_CONTRACT_NO_BUILD, NVD_CONTRACT_NO_JOB };

/* {"device", "job_id", "state", "build_id", "finished_at", "mode", "declared"
 * (describe()'s contract), "measured" (measured.contract), "judged",
 * "mismatches" (without evidence)} of the newest passed or failed contract job
 * that ran on device (and of build: a hash, name or version, newest build of
 * that name). -ENOENT with *ret_missing saying what is missing. */
int nvd_store_device_contract(nvd_store *s, const char *device, const char *build, json_t **ret,
                              int *ret_missing);

/* Build compare (docs/API.md "Compare"): for each device with a finished
 * contract job of both builds (the newest of each), every measured contract
 * field that both decided and that differs, as {"device", "dtype", "field",
 * "base", "head", "base_job", "head_job"} in *ret_changes; the number of
 * devices compared in *ret_devices. Hashes as nvd_store_build_resolve gives. */
int nvd_store_compare_contracts(nvd_store *s, const char *base_hash, const char *head_hash,
                                json_t **ret_changes, int64_t *ret_devices);

#endif
