/* Build identity: what was built (name, version, commit), with what (compiler,
 * runtime, driver, firmware, flags) and in which numerical mode. Its canonical
 * form is compact JSON with sorted keys (recursively) of exactly these fields,
 * absent and null fields left out; its id is the SHA-256 hex of that text, so
 * the same build submitted twice is stored once. */
#ifndef NUMVAL_BUILDID_H
#define NUMVAL_BUILDID_H

#include <jansson.h>

/* The identity fields, in the order documented above. */
extern const char *const nv_buildid_fields[];

/* Canonical JSON of build (a JSON object; other keys are ignored; "flags" and
 * "mode" may be structured) into *ret_json (malloc'd) and its id into ret_hash
 * (65 bytes). Returns 0; -EINVAL when build is not an object or carries none of
 * the fields, with the field to blame in *ret_field (static; may be NULL);
 * -ENOMEM. */
int nv_buildid_canonical(const json_t *build, char **ret_json, char ret_hash[65],
                         const char **ret_field);

#endif
