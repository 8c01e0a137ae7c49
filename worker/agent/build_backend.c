/* Whether this worker may load the backend a job's build names
 * (docs/API.md "POST /api/v1/builds", docs/CLIENT.md "Bisection").
 *
 * A build's backend spec comes from whoever registered the build, over the
 * network: loading a plugin or starting a harness is running its code on this
 * host. So the worker, not numvald, decides: it loads a plugin or exec program
 * only from the directories its operator named with --build-backend-dir, after
 * resolving symbolic links and "..", and an exec command only when /bin/sh
 * would see plain words (exec_proc.c runs it through "sh -c"). The emulator's
 * options run no foreign code and are always admitted. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"

/* Whether real (a resolved path) lies under one of dirs (resolved). */
static bool under(const char *real, char *const *dirs, int n_dirs)
{
    for (int i = 0; i < n_dirs; i++) {
        size_t n = strlen(dirs[i]);
        if (n == 1 && dirs[i][0] == '/')
            return true;
        if (!strncmp(real, dirs[i], n) && real[n] == '/')
            return true;
    }
    return false;
}

/* Characters a command may hold so that sh -c sees words and nothing else:
 * no quoting, expansion, redirection or command separators. */
static bool plain_words(const char *s)
{
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._,:=+@%- ",
                    *s))
            return false;
    return true;
}

int nvw_agent_build_backend_check(const char *spec, char *const *dirs, int n_dirs, char *err,
                                  size_t errlen)
{
    if (!strcmp(spec, "emu") || !strncmp(spec, "emu:", 4))
        return 0;
    bool plugin = !strncmp(spec, "plugin:", 7), exec = !strncmp(spec, "exec:", 5);
    if (!plugin && !exec) {
        snprintf(err, errlen, "build backend '%.200s' is not 'emu:...', 'plugin:/...' or "
                 "'exec:/...'", spec);
        return -EPERM;
    }
    if (n_dirs == 0) {
        snprintf(err, errlen, "the job's build names backend '%.200s', but this worker admits "
                 "no build backends: start it with --build-backend-dir DIR", spec);
        return -EPERM;
    }
    const char *rest = spec + (plugin ? 7 : 5);
    if (exec && !plain_words(rest)) {
        snprintf(err, errlen, "build backend '%.200s': an exec command from a build may hold "
                 "only words (letters, digits, spaces and /._,:=+@%%-), no shell syntax", spec);
        return -EPERM;
    }
    /* The file: a plugin's path up to its "?options", an exec command's first word. */
    size_t n = plugin ? strcspn(rest, "?") : strcspn(rest, " ");
    char path[PATH_MAX], real[PATH_MAX];
    if (n == 0 || n >= sizeof path || rest[0] != '/') {
        snprintf(err, errlen, "build backend '%.200s' needs an absolute path", spec);
        return -EPERM;
    }
    memcpy(path, rest, n);
    path[n] = '\0';
    if (!realpath(path, real)) {
        snprintf(err, errlen, "build backend '%.200s': cannot resolve '%s': %s", spec, path,
                 strerror(errno));
        return -EPERM;
    }
    if (!under(real, dirs, n_dirs)) {
        snprintf(err, errlen, "build backend '%.200s': '%s' is outside this worker's "
                 "--build-backend-dir directories", spec, real);
        return -EPERM;
    }
    return 0;
}
