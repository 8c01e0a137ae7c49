/* Job specs of every kind (docs/JOBS.md): which parser a spec goes to, by its
 * "kind" (op: jobspec.h, gradient: gradspec.h, fused: fusedspec.h, longrun:
 * longrunspec.h). What numvald calls to validate a submission. */
#ifndef NUMVAL_SPEC_H
#define NUMVAL_SPEC_H

#include <jansson.h>

/* Validate a job spec of any kind with its kind's parser. Returns 0, or -EINVAL
 * with *ret_pointer (the JSON pointer of the offending field, "" for the root)
 * and *ret_msg (a sentence naming the value in quotes), both malloc'd and owned
 * by the caller; the pointers may be NULL when the caller does not want them.
 * -ENOMEM possible. A spec that is not an object, has no "kind" or an unknown
 * one is refused with the kinds listed. */
int nv_jobspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg);

#endif
