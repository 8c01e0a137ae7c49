/* Build identity: canonical JSON (only the identity fields, keys sorted at
 * every depth, compact) and its SHA-256. The expected hash was computed
 * independently: printf '%s' '<canonical text>' | sha256sum. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buildid.h"
#include "tests/unit/tap.h"

static const char canon[] = "{\"commit\":\"abc\",\"flags\":{\"a\":1,\"b\":[2,{\"c\":3,\"d\":4}]},"
                            "\"mode\":{\"fma\":true,\"ftz\":false},\"name\":\"kern\","
                            "\"version\":\"1.2\"}";

int main(void)
{
    json_t *b = json_loads("{\"version\":\"1.2\",\"name\":\"kern\",\"extra\":\"ignored\","
                           "\"mode\":{\"ftz\":false,\"fma\":true},\"driver\":null,"
                           "\"firmware\":\"\",\"flags\":{\"b\":[2,{\"d\":4,\"c\":3}],\"a\":1},"
                           "\"commit\":\"abc\"}",
                           0, NULL);
    char *text = NULL, hash[65];
    const char *field = NULL;
    tap_ok(nv_buildid_canonical(b, &text, hash, &field) == 0, "canonical form built");
    tap_ok(text && !strcmp(text, canon), "sorted, compact, identity fields only: %s", text);
    tap_ok(!strcmp(hash, "e809a5522bdb2683111f5d8a0b41d1677b4c33432d0f93182e324b174af0b208"),
           "id is the SHA-256 of that text");
    free(text);
    json_t *same = json_loads(canon, 0, NULL);
    char h2[65];
    tap_ok(nv_buildid_canonical(same, &text, h2, &field) == 0 && !strcmp(h2, hash),
           "the same identity in another key order has the same id");
    free(text);
    json_object_set_new(same, "commit", json_string("abd"));
    nv_buildid_canonical(same, &text, h2, &field);
    tap_ok(strcmp(h2, hash) != 0, "another commit, another id");
    free(text);
    json_t *none = json_pack("{s:s}", "unrelated", "x");
    tap_ok(nv_buildid_canonical(none, &text, h2, &field) == -EINVAL && field &&
               !strcmp(field, "name"),
           "no identity field: -EINVAL");
    json_t *str = json_string("x");
    tap_ok(nv_buildid_canonical(str, &text, h2, &field) == -EINVAL, "not an object: -EINVAL");
    json_decref(str);
    json_decref(b);
    json_decref(same);
    json_decref(none);
    return tap_done();
}
