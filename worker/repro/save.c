/* `numval-worker run --artifacts DIR`: failure artifacts written to a directory
 * (the same container the agent uploads, docs/ARTIFACTS.md), so the desk
 * workflow run -> repro -> minimize needs no daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"

int nvw_save_failure(void *ud, const nvw_failure *f, char **ret_artifact_id)
{
    const char *dir = ud;
    uint8_t *buf = NULL;
    size_t len = 0;
    char sha[65];
    int r = nvw_failure_artifact(f, NULL, &buf, &len, sha);

    if (r < 0)
        return r;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.nvart", dir, sha);
    FILE *fp = fopen(path, "wb");
    r = fp && fwrite(buf, 1, len, fp) == len ? 0 : -EIO;
    if (fp && fclose(fp) != 0)
        r = -EIO;
    free(buf);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot write artifact '%s': %s\n", path, strerror(errno));
        return r;
    }
    char *id = strdup(sha);
    if (!id)
        return -ENOMEM;
    *ret_artifact_id = id;
    return 0;
}
