/* Helpers of every kind's repro and minimize commands (cmd.h). */
#include "cmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int nvw_cmd_backend(const nvw_cmd *c, const json_t *manifest, nvw_backend **ret_b,
                    const char **ret_spec)
{
    const char *spec =
        c->backend ? c->backend : json_string_value(json_object_get(manifest, "backend"));
    if (!spec) {
        fprintf(stderr, "numval-worker: the artifact names no backend; give --backend SPEC\n");
        return -EINVAL;
    }
    char err[512] = "";
    int r = nvw_backend_load(spec, ret_b, err, sizeof err);
    if (r < 0) {
        fprintf(stderr, "numval-worker: %s\n", err[0] ? err : "cannot load the backend");
        return r;
    }
    *ret_spec = spec;
    return 0;
}

void nvw_cmd_print_json(json_t *j)
{
    if (j) {
        json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        fputc('\n', stdout);
        fflush(stdout);
    }
    json_decref(j);
}

int nvw_cmd_write_file(const char *path, const uint8_t *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    int r = f && fwrite(buf, 1, len, f) == len ? 0 : -EIO;
    int e = errno;
    if (f && fclose(f) != 0 && r == 0) {
        r = -EIO;
        e = errno;
    }
    if (r < 0)
        fprintf(stderr, "numval-worker: cannot write '%s': %s\n", path, strerror(e));
    return r;
}
