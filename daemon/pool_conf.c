#include "pool_conf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The characters each sbatch option takes (Slurm's own names and lists);
 * anything else is refused at load, so a typo is an error at start, not a
 * rejected submission every few seconds. */
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

static const struct {
    const char *key;
    size_t off;
    const char *chars; /* NULL: any printable byte */
} str_keys[] = {
    {"device", offsetof(nvd_pool_conf, device), NAME_CHARS},
    {"backend", offsetof(nvd_pool_conf, backend), NULL},
    {"worker", offsetof(nvd_pool_conf, worker), NULL},
    {"server", offsetof(nvd_pool_conf, server), NULL},
    {"partition", offsetof(nvd_pool_conf, partition), NAME_CHARS ","},
    {"gres", offsetof(nvd_pool_conf, gres), NAME_CHARS ",:/"},
    {"time_limit", offsetof(nvd_pool_conf, time_limit), "0123456789:-"},
    {"account", offsetof(nvd_pool_conf, account), NAME_CHARS},
    {"qos", offsetof(nvd_pool_conf, qos), NAME_CHARS},
    /* Slurm's feature expressions: a&b, a|b, [a*2&b], (a|b). */
    {"constraint", offsetof(nvd_pool_conf, constraint), NAME_CHARS "&|,*:[]()"},
    {"output", offsetof(nvd_pool_conf, output), NULL},
    {"chdir", offsetof(nvd_pool_conf, chdir), NULL},
    {"export_env", offsetof(nvd_pool_conf, export_env),
     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_,"},
    {"job_name", offsetof(nvd_pool_conf, job_name), NAME_CHARS},
    {"sbatch", offsetof(nvd_pool_conf, sbatch), NULL},
    {"squeue", offsetof(nvd_pool_conf, squeue), NULL},
};

static nvd_pool_conf *pool(nvd_pool_conf **pools, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*pools)[i].name, name))
            return &(*pools)[i];
    nvd_pool_conf *p = realloc(*pools, sizeof(*p) * (size_t)(*n + 1));
    if (!p)
        return NULL;
    *pools = p;
    p = &p[*n];
    memset(p, 0, sizeof(*p));
    p->max_workers = 1;
    p->idle_exit_s = 60;
    p->interval_ms = 5000;
    if (!(p->name = strdup(name)))
        return NULL;
    (*n)++;
    return p;
}

/* One argv element for sbatch or the worker: printable, not empty, not taken
 * for an option, and of the option's characters. */
static bool value_ok(const char *v, const char *chars)
{
    size_t n = strlen(v);
    if (n == 0 || n > 1024 || v[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f || (chars && !strchr(chars, v[i])))
            return false;
    return true;
}

static int int_key(const char *v, long lo, long hi, long *ret)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
        return -EINVAL;
    *ret = n;
    return 0;
}

int nvd_pool_conf_key(nvd_pool_conf **pools, int *n, const char *name, const char *k, const char *v)
{
    nvd_pool_conf *p = pool(pools, n, name);
    if (!p)
        return -ENOMEM;
    for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
        if (strcmp(k, str_keys[i].key))
            continue;
        if (!value_ok(v, str_keys[i].chars))
            return -EINVAL;
        char **field = (char **)((char *)p + str_keys[i].off);
        char *d = strdup(v);
        if (!d)
            return -ENOMEM;
        free(*field);
        *field = d;
        return 0;
    }
    long x;
    /* max_workers: an sbatch --array of at most 1000 tasks fits Slurm's
     * default MaxArraySize (1001). */
    if (!strcmp(k, "max_workers") && int_key(v, 1, 1000, &x) == 0)
        p->max_workers = (int)x;
    else if (!strcmp(k, "idle_exit") && int_key(v, 1, 86400, &x) == 0)
        p->idle_exit_s = (int)x;
    else if (!strcmp(k, "threads") && int_key(v, 0, 4096, &x) == 0)
        p->threads = (int)x;
    else if (!strcmp(k, "interval_ms") && int_key(v, 200, 3600000, &x) == 0)
        p->interval_ms = x;
    else if (!strcmp(k, "drain_before") && int_key(v, 1, 65535, &x) == 0)
        p->drain_before_s = (int)x; /* sbatch --signal takes 0..65535 s */
    else if (!strcmp(k, "max_workers") || !strcmp(k, "idle_exit") || !strcmp(k, "threads") ||
             !strcmp(k, "interval_ms") || !strcmp(k, "drain_before"))
        return -EINVAL;
    else
        return -ENOENT;
    return 0;
}

const char *nvd_pool_device(const nvd_pool_conf *p)
{
    return p->device ? p->device : p->name;
}

static bool name_ok(const char *s)
{
    return s[0] && strlen(s) <= 64 && strspn(s, NAME_CHARS) == strlen(s);
}

void nvd_pool_conf_check(const nvd_pool_conf *pools, int n, const struct nvd_device_conf *devs,
                         int n_dev, char *buf, size_t len)
{
    for (int i = 0; i < n && !buf[0]; i++) {
        const nvd_pool_conf *p = &pools[i];
        const char *dev = nvd_pool_device(p);
        if (!p->backend)
            snprintf(buf, len, "pool '%s' has no 'backend' (e.g. backend = emu)", p->name);
        else if (!name_ok(p->name))
            snprintf(buf, len, "pool name '%s' may only use [A-Za-z0-9._-] (64 at most)", p->name);
        else if (!name_ok(dev))
            snprintf(buf, len, "pool '%s': device name '%s' may only use [A-Za-z0-9._-]", p->name,
                     dev);
        else if (p->server && strncmp(p->server, "http://", 7) && strncmp(p->server, "https://", 8))
            snprintf(buf, len, "pool '%s': server '%s' is not an http:// or https:// URL", p->name,
                     p->server);
        else if (p->export_env && (strstr(p->export_env, "NUMVAL_TOKEN") ||
                                   !strcmp(p->export_env, "ALL") || !strcmp(p->export_env, "NONE")))
            snprintf(buf, len,
                     "pool '%s': export_env '%s' must list variable names (NUMVAL_TOKEN is "
                     "always exported, ALL and NONE are not names)",
                     p->name, p->export_env);
        for (int k = 0; k < n_dev && !buf[0]; k++)
            if (!strcmp(devs[k].name, dev))
                snprintf(buf, len,
                         "pool '%s' serves device '%s', which is also a [device] section; "
                         "a device is local or a pool, not both",
                         p->name, dev);
        for (int k = 0; k < i && !buf[0]; k++)
            if (!strcmp(nvd_pool_device(&pools[k]), dev))
                snprintf(buf, len, "pools '%s' and '%s' both serve device '%s'", pools[k].name,
                         p->name, dev);
    }
}

void nvd_pool_conf_free(nvd_pool_conf *pools, int n)
{
    for (int i = 0; i < n; i++) {
        free(pools[i].name);
        for (size_t k = 0; k < sizeof(str_keys) / sizeof(str_keys[0]); k++)
            free(*(char **)((char *)&pools[i] + str_keys[k].off));
    }
    free(pools);
}
