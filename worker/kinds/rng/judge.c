/* Judgement helpers of the RNG kind (rng_internal.h): verdicts, the tests of a
 * case, bitwise comparison, the overlap as JSON. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng_internal.h"

int rg_verdict(rcase *c, const char *v, const char *cls, const char *fmt, ...)
{
    if (json_object_get(c->cj, "verdict"))
        return 0;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (json_object_set_new(c->cj, "verdict", json_string(v)) ||
        json_object_set_new(c->cj, "failure_class", json_string(cls)) ||
        json_object_set_new(c->cj, "error", json_string(msg)))
        return -ENOMEM;
    return 0;
}

int rg_test(rcase *c, const char *name, bool passed, const char *cls, const char *why,
            json_t *detail, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *t = json_pack("{s:s, s:b, s:s, s:s}", "name", name, "passed", passed, "why", why,
                          "message", msg);
    if (!t || (detail && json_object_set_new(t, "detail", detail)) ||
        json_array_append_new(c->tests, t)) {
        if (!t)
            json_decref(detail);
        return -ENOMEM;
    }
    return passed ? 0 : rg_verdict(c, "failed", cls, "%s: %s", name, msg);
}

int64_t rg_diff(const float *a, const float *b, int64_t n, int64_t *ret_first)
{
    int64_t count = 0;
    *ret_first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) {
            if (count++ == 0)
                *ret_first = i;
        }
    return count;
}

json_t *rg_overlap_json(const rg_overlap *o, const char *const *seg_names)
{
    if (o->shared == 0)
        return json_pack("{s:I}", "shared_windows", (json_int_t)0);
    return json_pack("{s:I, s:{s:s, s:I, s:s, s:I, s:I}}", "shared_windows", (json_int_t)o->shared,
                     "first", "a", seg_names[o->seg_a], "at_a", (json_int_t)o->pos_a, "b",
                     seg_names[o->seg_b], "at_b", (json_int_t)o->pos_b, "shift",
                     (json_int_t)(o->pos_b - o->pos_a));
}
