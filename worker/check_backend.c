/* `numval-worker check-backend SPEC`: whether a backend spec can be used, as
 * numvald --check-config asks for each configured device. emu and plugin
 * backends are loaded and one context opened and closed (the options are
 * parsed, a plugin's ABI checked); an exec backend is not started (its harness
 * may take a minute to import a runtime): its program must resolve to an
 * executable file, as execvp would find it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/backends/loader.h"
#include "check_backend.h"

/* The first word of an exec command line, as its argv[0]. */
static int first_word(const char *cmd, char *out, size_t len)
{
    while (*cmd == ' ' || *cmd == '\t')
        cmd++;
    size_t n = strcspn(cmd, " \t");
    if (n == 0 || n >= len)
        return -EINVAL;
    memcpy(out, cmd, n);
    out[n] = 0;
    return 0;
}

/* Whether prog names an executable: a path with '/' directly, else each PATH
 * entry. */
static bool executable(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    while (*path) {
        size_t n = strcspn(path, ":");
        if (snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? path : ".", prog) <
                (int)sizeof buf &&
            access(buf, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

int nvw_check_backend(const char *spec, char *err, size_t errlen)
{
    nvw_backend *b = NULL;
    int r = nvw_backend_load(spec, &b, err, errlen);
    if (r < 0)
        return r;
    const char *kind = nvw_backend_kind(b);
    if (!strcmp(kind, "exec")) {
        char prog[1024];
        if (first_word(nvw_backend_options(b), prog, sizeof prog) < 0) {
            snprintf(err, errlen, "backend '%s': the exec command has no program", spec);
            r = -EINVAL;
        } else if (!executable(prog)) {
            snprintf(err, errlen, "backend '%s': program '%s' is not an executable file%s",
                     spec, prog, strchr(prog, '/') ? "" : " on PATH");
            r = -ENOENT;
        }
        nvw_backend_free(b);
        return r;
    }
    const nv_backend *t = nvw_backend_table(b);
    void *ctx = NULL;
    char msg[512] = "";
    if (t->open(nvw_backend_options(b), &ctx, msg, sizeof msg) != NV_OK) {
        snprintf(err, errlen, "backend '%s' refused to open: %s", spec,
                 msg[0] ? msg : "(no message)");
        r = -EINVAL;
    } else {
        t->close(ctx);
    }
    nvw_backend_free(b);
    return r;
}

int nvw_check_backend_main(int argc, char **argv)
{
    if (argc != 1) {
        fprintf(stderr, "usage: numval-worker check-backend SPEC\n");
        return 2;
    }
    char err[1024] = "";
    if (nvw_check_backend(argv[0], err, sizeof err) < 0) {
        fprintf(stderr, "numval-worker: %s\n", err[0] ? err : "backend unusable");
        return 2;
    }
    printf("backend '%s': OK\n", argv[0]);
    return 0;
}
