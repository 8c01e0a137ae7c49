#include "buildid.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"

const char *const nv_buildid_fields[] = {"name",   "version",  "commit", "compiler", "runtime",
                                         "driver", "firmware", "flags",  "mode",     NULL};

int nv_buildid_canonical(const json_t *build, char **ret_json, char ret_hash[65],
                         const char **ret_field)
{
    if (!json_is_object(build)) {
        if (ret_field)
            *ret_field = "";
        return -EINVAL;
    }
    json_t *id = json_object();
    if (!id)
        return -ENOMEM;
    int r = 0;
    for (int i = 0; nv_buildid_fields[i]; i++) {
        const char *k = nv_buildid_fields[i];
        json_t *v = json_object_get(build, k);
        if (!v || json_is_null(v))
            continue;
        if (json_is_string(v) && json_string_length(v) == 0)
            continue;
        if (json_object_set(id, k, v) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }
    if (json_object_size(id) == 0) {
        if (ret_field)
            *ret_field = "name";
        r = -EINVAL;
        goto out;
    }
    /* JSON_SORT_KEYS sorts every nested object too; reals print with 17
     * significant digits, which round-trips an IEEE 754 binary64 exactly. */
    char *text = json_dumps(id, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    if (!text) {
        r = -ENOMEM;
        goto out;
    }
    nv_sha256_hex(text, strlen(text), ret_hash);
    *ret_json = text;
out:
    json_decref(id);
    return r;
}
