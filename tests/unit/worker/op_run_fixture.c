#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"
#include "op_run_fixture.h"

static int on_failure(void *ud, const nvw_failure *f, char **ret_id)
{
    failures *fs = ud;
    fs->n++;
    for (int i = 0; i < f->n_tensors; i++)
        fs->numel_sum += f->tensors[i]->numel;
    *ret_id = strdup("artifact");
    return 0;
}

char *run(const char *spec, const char *backend, int threads, int64_t block, failures *fs)
{
    json_t *j = json_loads(spec, 0, NULL);
    nvw_run_opts o = {.threads = threads, .op_block_elems = block};
    if (fs) {
        o.on_failure = on_failure;
        o.ud = fs;
    }
    json_t *res = NULL;
    char *err = NULL;
    int r = nvw_run_job(j, backend, &o, &res, &err);
    json_decref(j);
    char *text = r == 0 ? json_dumps(res, JSON_COMPACT) : NULL;
    if (r != 0)
        tap_diag("run failed (%d): %s", r, err ? err : "?");
    json_decref(res);
    free(err);
    return text;
}
