/* Internal interface of numvalctl's JUnit writer (junit.c: the XML and the
 * per-case kinds; junit_rules.c: the kinds judged as a whole job). */
#ifndef NUMVAL_CLIENT_JUNIT_INTERNAL_H
#define NUMVAL_CLIENT_JUNIT_INTERNAL_H

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

/* A string field of o, "" when missing or not a string. */
static inline const char *nvc_jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* A number field of o, NaN when missing or not a number. */
static inline double nvc_jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A JSON value as text into f ("-" when missing). */
void nvc_junit_put_json(FILE *f, const json_t *v);

/* A growing text (open_memstream): nvc_text_end returns the malloc'd string. */
typedef struct nvc_text {
    char *buf;
    size_t len;
    FILE *f;
} nvc_text;

bool nvc_text_begin(nvc_text *t);
char *nvc_text_end(nvc_text *t);

/* Appends a test case {"name", "status", "type", "message", "text"} to list
 * (type, message and body may be NULL). 0 or -ENOMEM. */
int nvc_junit_add_tc(json_t *list, const char *name, const char *status, const char *type,
                     const char *message, const char *body);

/* The test cases of a long-run job (one per acceptance rule) and of a contract
 * job (one per judged field). 0 or -ENOMEM. */
int nvc_junit_longrun(json_t *list, const json_t *job);
int nvc_junit_contract(json_t *list, const json_t *job);

#endif
