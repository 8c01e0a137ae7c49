/* Replay tolerances for suite jobs (replay.h). */
#include "replay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/artifact.h"
#include "common/log.h"
#include "tolerance.h"

/* The replay artifact of case cs (an element of the spec's "cases"), or
 * nothing when its own tolerance is the one that applies. */
static int replay_case(nvd_store *s, json_t *cs, const json_t *mode, int64_t now)
{
    const char *kind = json_string_value(json_object_get(cs, "kind"));
    const char *sha = json_string_value(json_object_get(cs, "artifact"));
    if ((kind && strcmp(kind, "op")) || !sha)
        return 0;
    void *blob = NULL;
    size_t len = 0;
    int r = nvd_store_artifact_get(s, sha, &blob, &len);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    nv_artifact *a = NULL;
    char *err = NULL;
    r = nv_artifact_decode(blob, len, &a, &err);
    free(blob);
    if (r < 0) {
        nv_log_warn("suite artifact %.12s cannot be decoded: %s", sha, err ? err : "?");
        free(err);
        return r == -ENOMEM ? r : 0;
    }
    const json_t *m = a->manifest, *spec = json_object_get(m, "spec");
    const json_t *own = json_object_get(m, "tolerance");
    const char *op = json_string_value(json_object_get(spec, "op"));
    const char *dtype = json_string_value(json_object_get(m, "dtype"));
    json_t *now_tol = NULL, *nm = NULL;
    r = nvd_tolerance_current(s, op, json_object_get(spec, "attrs"), dtype,
                              json_string_value(json_object_get(m, "out_dtype")), mode, &now_tol);
    if (r == -ENOENT || (r == 0 && nvd_tolerance_same(own, now_tol))) {
        r = 0;
        goto out;
    }
    if (r < 0)
        goto out;
    nm = json_deep_copy(m);
    r = -ENOMEM;
    if (!nm || json_object_set(nm, "tolerance", now_tol) < 0 ||
        json_object_set_new(nm, "replay",
                            json_pack("{ss sO}", "origin_artifact", sha, "origin_tolerance",
                                      own ? own : json_null())) < 0 ||
        nv_artifact_set_manifest(a, nm) < 0)
        goto out;
    uint8_t *buf = NULL;
    size_t n = 0;
    char rsha[65];
    r = nv_artifact_encode(a, 0, &buf, &n, rsha);
    if (r < 0)
        goto out;
    unsigned long long raw = ZSTD_getFrameContentSize(buf, n);
    bool existed = false;
    r = nvd_store_artifact_put(
        s, rsha, buf, n,
        raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN ? 0 : (int64_t)raw, now,
        &existed);
    free(buf);
    if (r < 0)
        goto out;
    r = json_object_set_new(cs, "suite_artifact", json_string(sha)) |
                json_object_set_new(cs, "artifact", json_string(rsha)) |
                json_object_set(cs, "tolerance", now_tol)
            ? -ENOMEM
            : 0;
out:
    json_decref(nm);
    json_decref(now_tol);
    nv_artifact_free(a);
    return r;
}

int nvd_replay_tolerances(nvd_store *s, json_t *spec, const json_t *mode, int64_t now)
{
    size_t i;
    json_t *cs;
    json_array_foreach(json_object_get(spec, "cases"), i, cs)
    {
        int r = replay_case(s, cs, mode, now);
        if (r < 0)
            return r;
    }
    return 0;
}
