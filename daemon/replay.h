/* Suite replays judge by the tolerance that applies at replay time (docs/API.md
 * "Suite"), not by the one the promoted failure was judged by: a job's own
 * tolerance, or a stored one since replaced. */
#ifndef NUMVAL_DAEMON_REPLAY_H
#define NUMVAL_DAEMON_REPLAY_H

#include <jansson.h>
#include <stdint.h>

#include "daemon/store/store.h"

/* For the claimed suite job spec (its "cases"), in place: each op case whose
 * artifact's manifest tolerance is not the one that applies now to its op and
 * dtype on a device in mode (nvd_tolerance_current: stored, else the shipped
 * default) gets a replay artifact: the same container with that tolerance in
 * its manifest ("replay": {"origin_artifact", "origin_tolerance"} records what
 * it replaces), stored content-addressed; the case's "artifact" names it,
 * "suite_artifact" the promoted one, "tolerance" the tolerance. Fused and
 * gradient cases are left as they are (their tolerances are computed by the
 * worker per node or per element). A case whose artifact cannot be read is
 * left as it is (the worker reports it). 0, or -ENOMEM / a store error. */
int nvd_replay_tolerances(nvd_store *s, json_t *spec, const json_t *mode, int64_t now);

#endif
