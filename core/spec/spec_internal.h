/* Field checkers shared by the job-spec parsers (jobspec.c, jobspec_gradient.c,
 * jobspec_fused.c, jobspec_longrun.c, jobspec_rng.c, jobspec_contract.c,
 * jobspec_serving.c ...) and the job kinds. Internal to
 * core/spec: not installed, not part of the plugin ABI.
 *
 * Every spec error has one shape: a JSON pointer (RFC 6901) and a message that
 * names the offending value in quotes, compact JSON cut to 59 characters
 * ("'<value>' must be an integer in LO..HI", "'<value>' must be true or
 * false"). Errors are recorded in an nv_spec_err, only through nv_spec_fail
 * and the helpers built on it: the first one wins (later calls are ignored),
 * and an error that a nested parser handed out (the op parser under the
 * gradient one, graph.h under the fused one) enters through
 * nv_spec_fail_from. */
#ifndef NUMVAL_SPEC_INTERNAL_H
#define NUMVAL_SPEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/numerics/dtype.h"

typedef struct nv_spec_err {
    char *ptr; /* JSON pointer of the first error (malloc'd), or NULL */
    char *msg; /* its message (malloc'd), or NULL */
    bool oom;  /* an error could not be recorded: out of memory */
} nv_spec_err;

/* Records an error at ptr unless one is recorded already. Returns -EINVAL, or
 * -ENOMEM when the error could not be recorded (e->oom is then set). */
int nv_spec_fail(nv_spec_err *e, const char *ptr, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* nv_spec_fail with the message "'<v as compact JSON>' <what>" (v cut to 59
 * characters with "..."). */
int nv_spec_fail_value(nv_spec_err *e, const char *ptr, const json_t *v, const char *what);

/* Records the error (ptr, msg) another parser returned with status r (its own
 * copies stay the caller's to free): -EINVAL with a message is recorded as
 * nv_spec_fail(e, ptr, "%s", msg) would (ptr NULL: the root ""); r >= 0 and
 * -ENOMEM are returned as they are; -EINVAL without a message is -ENOMEM
 * (the other parser could not word it). */
int nv_spec_fail_from(nv_spec_err *e, int r, const char *ptr, const char *msg);

/* v as short text for messages: compact JSON, at most 59 characters ("..." at
 * the end when cut). Returns malloc'd text, or NULL when out of memory. */
char *nv_spec_show(const json_t *v);

/* Writes "<base>/<key>" into buf (size n, truncated if needed), key escaped as
 * a JSON-pointer token (RFC 6901 §3: '~' as "~0", '/' as "~1"). base is "" for
 * the top level or a pointer such as "/sizes". */
void nv_spec_pointer(char *buf, size_t n, const char *base, const char *key);

/* The first key of obj that is not in keys (a NULL-terminated list), or NULL
 * when every key is known or obj is not an object. The caller words the error. */
const char *nv_spec_unknown_key(const json_t *obj, const char *const *keys);

/* Integer obj[key] in [lo, hi] (both inclusive) into *ret; dflt when obj is
 * NULL or has no key. Errors at "<base>/<key>": "'<value>' must be an integer
 * in LO..HI". 0 or -EINVAL / -ENOMEM (nv_spec_fail). */
int nv_spec_int(nv_spec_err *e, const json_t *obj, const char *base, const char *key, int64_t dflt,
                int64_t lo, int64_t hi, int64_t *ret);

/* Number (integer or real) obj[key] in [lo, hi] (both inclusive; NaN never
 * fits) into *ret; dflt when absent. "'<value>' must be a number in LO..HI". */
int nv_spec_number(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                   double dflt, double lo, double hi, double *ret);

/* Boolean obj[key] into *ret; dflt when absent. "'<value>' must be true or false". */
int nv_spec_bool(nv_spec_err *e, const json_t *obj, const char *base, const char *key, bool dflt,
                 bool *ret);

/* obj[key] must be the string a or b: *ret_is_b says which; absent: a.
 * "'<s>' must be \"A\" or \"B\"" ('(not a string)' for other values). */
int nv_spec_choice(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                   const char *a, const char *b, bool *ret_is_b);

/* spec["dtypes"]: a non-empty array of distinct float dtype names (not e8m0)
 * into dtypes[] (room for NV_DT_COUNT) and *ret_n; errors at "/dtypes/i".
 * 0 or -EINVAL / -ENOMEM (the model and serving kinds). */
int nv_spec_float_dtypes(nv_spec_err *e, const json_t *spec, nv_dtype *dtypes, int *ret_n);

/* The key-list and parse boilerplate of the kinds' parsers (rng, contract,
 * serving). */

/* The first key of obj not in keys (nv_spec_unknown_key) as the error
 * "unknown key '<key>' <where>" at ptr, or at "<ptr>/<key>" with at_key.
 * 0 when every key is known. */
int nv_spec_no_unknown(nv_spec_err *e, const json_t *obj, const char *const *keys, const char *ptr,
                       bool at_key, const char *where);

/* nv_spec_int into an int (lo and hi within int's range). */
int nv_spec_int32(nv_spec_err *e, const json_t *obj, const char *base, const char *key,
                  int64_t dflt, int64_t lo, int64_t hi, int *ret);

/* spec[key]: a non-empty array of distinct names out of names[0..n), each
 * setting its set[i]; absent: every set[i] true. Errors, noun "check":
 * "/key: '<v>' must be a non-empty array of check names", "/key/i: '<v>' is
 * not a check (NAME, NAME, ...)", "/key/i: duplicate check 'NAME'". */
int nv_spec_names(nv_spec_err *e, const json_t *spec, const char *key, const char *const *names,
                  int n, const char *noun, bool *set);

/* A kind's parse entry: a zeroed spec of size bytes (calloc) filled by
 * parse_all, which records its errors in e; through nv_spec_err_finish. 0 with
 * *ret (the caller frees it with free()), -EINVAL with the pointer and
 * message, -ENOMEM. */
typedef int (*nv_spec_parse_fn)(const json_t *spec, void *ret, nv_spec_err *e);
int nv_spec_parse_new(const json_t *spec, size_t size, nv_spec_parse_fn parse_all, void **ret,
                      char **ret_pointer, char **ret_msg);

/* The job kinds a spec's "kind" names (docs/JOBS.md), in the order error
 * messages list them. */
typedef enum nv_spec_kind {
    NV_SPEC_KIND_OP,
    NV_SPEC_KIND_GRADIENT,
    NV_SPEC_KIND_FUSED,
    NV_SPEC_KIND_LONGRUN,
    NV_SPEC_KIND_MODEL,
    NV_SPEC_KIND_SUITE,
    NV_SPEC_KIND_CONTRACT,
    NV_SPEC_KIND_SERVING,
    NV_SPEC_KIND_RNG,
    NV_SPEC_KIND_COUNT
} nv_spec_kind;

/* The kind spec names: an nv_spec_kind, or -1 when spec is not an object, has
 * no "kind", a "kind" that is not a string, or one that names no kind. */
int nv_spec_kind_of(const json_t *spec);

/* The kinds as a list for messages, "op, gradient, ...", written into buf
 * (size n, truncated if needed). */
void nv_spec_kind_list(char *buf, size_t n);

/* Ends a parse whose status is r: on success (r >= 0 and nothing recorded)
 * returns 0. Otherwise hands the recorded pointer and message to *ret_pointer
 * and *ret_msg (each may be NULL: then freed) and returns -EINVAL, or frees
 * them and returns -ENOMEM when memory ran out (r == -ENOMEM, e->oom, or no
 * message recorded). e is left empty. */
int nv_spec_err_finish(nv_spec_err *e, int r, char **ret_pointer, char **ret_msg);

#endif
