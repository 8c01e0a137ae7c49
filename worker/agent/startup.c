/* Agent start-up under a supervisor or a person: where the token comes from
 * (never needed on the command line, which every local user can read in
 * /proc/PID/cmdline) and the parent-death signal of a supervised worker. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_internal.h"
#include "common/log.h"

#define TOKEN_MAX 4096

int nvw_agent_token_file(const char *path, char **ret)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        nv_log_err("cannot open token file '%s': %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        nv_log_err("--token-file '%s' is not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    /* A token others can read is a token others hold (as ssh refuses such keys). */
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        nv_log_err("--token-file '%s' is readable by group or others (mode %03o); "
                   "chmod 600 it",
                   path, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -EPERM;
    }
    char buf[TOKEN_MAX + 2];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0 || n > TOKEN_MAX) {
        nv_log_err("--token-file '%s': %s", path,
                   n < 0 ? strerror(errno) : "longer than 4096 bytes");
        return n < 0 ? -EIO : -EINVAL;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (n == 0) {
        nv_log_err("--token-file '%s' is empty", path);
        return -EINVAL;
    }
    /* A token never holds white space or control characters: a file with two
     * tokens or a binary file is an error, not part of the token. */
    for (ssize_t i = 0; i < n; i++)
        if ((unsigned char)buf[i] <= ' ' || buf[i] == 0x7f) {
            nv_log_err("--token-file '%s' holds white space or a control character at byte %zd "
                       "(one token on one line expected)",
                       path, i);
            return -EINVAL;
        }
    *ret = strdup(buf);
    return *ret ? 0 : -ENOMEM;
}

char *nvw_agent_take_env(const char *name)
{
    const char *v = getenv(name);
    char *copy = v && *v ? strdup(v) : NULL;
    /* Jobs' harness processes inherit our environment: the token stops here. */
    unsetenv(name);
    return copy;
}

int nvw_agent_parent_death(void)
{
    char *pp = nvw_agent_take_env("NUMVAL_PARENT_PID");
    if (!pp)
        return 0;
    char *end;
    long want = strtol(pp, &end, 10);
    bool ok = end != pp && !*end && want > 0;
    free(pp);
    if (!ok) {
        nv_log_err("NUMVAL_PARENT_PID is not a process id");
        return -EINVAL;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) {
        nv_log_err("cannot set the parent-death signal: %s", strerror(errno));
        return -errno;
    }
    /* The parent may have died before prctl: then no signal comes. */
    if ((long)getppid() != want) {
        nv_log_err("the supervising numvald (pid %ld) is gone; exiting", want);
        return -ESRCH;
    }
    return 0;
}
