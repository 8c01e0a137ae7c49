/* Backend loader: spec parsing (emu, exec, plugin) and plugin loading with the
 * ABI check. */
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/backends/emu/emu.h"
#include "exec.h"

struct nvw_backend {
    const nv_backend *table;
    void *dl; /* dlopen handle for plugins, NULL for built-ins */
    char *options;
    const char *kind;
    /* A version-1 plugin's table widened to this version's layout (the entries
     * it predates NULL): numval reads every entry through a full nv_backend. */
    nv_backend widened;
};

static nvw_backend *backend_new(const nv_backend *table, void *dl, const char *opts,
                                size_t opts_len, const char *kind)
{
    nvw_backend *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->options = strndup(opts, opts_len);
    if (!b->options) {
        free(b);
        return NULL;
    }
    b->table = table;
    b->dl = dl;
    b->kind = kind;
    return b;
}

/* The functions numval cannot run without; backward and graph may be NULL. */
static const char *missing_function(const nv_backend *t)
{
    if (!t->open)
        return "open";
    if (!t->close)
        return "close";
    if (!t->describe)
        return "describe";
    if (!t->forward)
        return "forward";
    if (!t->release_tensor)
        return "release_tensor";
    return NULL;
}

/* Versions 1 to 5 are loaded: version 2 only appended double_backward, 3
 * train, 4 rng and 5 configure, so an older table is a prefix of this one
 * (NV_BACKEND_V1_SIZE .. NV_BACKEND_V4_SIZE). A
 * newer or unknown version may have changed what its fields mean: refused. */
static int check_table(const nv_backend *t, const char *path, char *err, size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "plugin '%s': %s() returned NULL", path, NV_BACKEND_ENTRY_SYMBOL);
        return -EINVAL;
    }
    if (t->abi_version < 1 || t->abi_version > NV_BACKEND_ABI_VERSION) {
        snprintf(err, errlen,
                 "plugin '%s' was built for backend ABI version %u, but this numval speaks "
                 "version %d (and loads version 1 to %d tables): rebuild it against this numval's "
                 "include/numval/backend.h",
                 path, (unsigned)t->abi_version, NV_BACKEND_ABI_VERSION,
                 NV_BACKEND_ABI_VERSION - 1);
        return -EINVAL;
    }
    size_t need = t->abi_version == 1   ? NV_BACKEND_V1_SIZE
                  : t->abi_version == 2 ? NV_BACKEND_V2_SIZE
                  : t->abi_version == 3 ? NV_BACKEND_V3_SIZE
                  : t->abi_version == 4 ? NV_BACKEND_V4_SIZE
                                        : sizeof(nv_backend);
    if (t->struct_size < need) {
        snprintf(err, errlen,
                 "plugin '%s' declares a backend table of %u bytes, but ABI version %u needs "
                 "%zu: rebuild it against this numval's include/numval/backend.h",
                 path, (unsigned)t->struct_size, (unsigned)t->abi_version, need);
        return -EINVAL;
    }
    const char *fn = missing_function(t);
    if (fn) {
        snprintf(err, errlen, "plugin '%s' has no '%s' function in its backend table", path, fn);
        return -EINVAL;
    }
    return 0;
}

static int load_plugin(const char *rest, nvw_backend **ret, char *err, size_t errlen)
{
    const char *q = strchr(rest, '?');
    size_t path_len = q ? (size_t)(q - rest) : strlen(rest);
    const char *opts = q ? q + 1 : "";
    int r;
    char *path = strndup(rest, path_len);
    if (!path) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (path_len == 0 || !strchr(path, '/')) {
        /* A bare name would go through the dynamic linker's search path: refuse it so
         * that the library that runs is the one the user named. */
        snprintf(err, errlen, "plugin path '%s' must be a path to a .so file (e.g. '/abs/lib.so')",
                 path);
        r = -EINVAL;
        goto out;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(err, errlen, "cannot load plugin '%s': %s", path, e ? e : "unknown error");
        r = -ENOENT;
        goto out;
    }
    dlerror();
    void *sym = dlsym(dl, NV_BACKEND_ENTRY_SYMBOL);
    if (!sym) {
        const char *e = dlerror();
        snprintf(err, errlen, "plugin '%s' does not export '%s': %s", path, NV_BACKEND_ENTRY_SYMBOL,
                 e ? e : "symbol is NULL");
        dlclose(dl);
        r = -EINVAL;
        goto out;
    }
    nv_backend_entry_fn entry;
    /* POSIX dlsym returns data pointers; the memcpy is the portable conversion. */
    memcpy(&entry, &sym, sizeof(entry));
    const nv_backend *table = entry();
    r = check_table(table, path, err, errlen);
    if (r < 0) {
        dlclose(dl);
        goto out;
    }
    nvw_backend *b = backend_new(table, dl, opts, strlen(opts), "plugin");
    if (!b) {
        dlclose(dl);
        snprintf(err, errlen, "out of memory");
        r = -ENOMEM;
        goto out;
    }
    if (table->abi_version < NV_BACKEND_ABI_VERSION) { /* read only the prefix it has */
        memset(&b->widened, 0, sizeof b->widened);
        memcpy(&b->widened, table,
               table->abi_version == 1   ? NV_BACKEND_V1_SIZE
               : table->abi_version == 2 ? NV_BACKEND_V2_SIZE
               : table->abi_version == 3 ? NV_BACKEND_V3_SIZE
                                         : NV_BACKEND_V4_SIZE);
        b->table = &b->widened;
    }
    *ret = b;
    r = 0;
out:
    free(path);
    return r;
}

int nvw_backend_load(const char *spec, nvw_backend **ret, char *err, size_t errlen)
{
    if (!spec || !*spec) {
        snprintf(err, errlen,
                 "empty backend spec: expected 'emu[:options]' or 'plugin:/path/lib.so'");
        return -EINVAL;
    }
    const char *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *rest = colon ? colon + 1 : "";

    /* The switch point of backend kinds: each kind's loader gets the text after
     * the first ':'. */
    if (kind_len == 3 && !strncmp(spec, "emu", 3)) {
        nvw_backend *b = backend_new(nvw_emu_backend(), NULL, rest, strlen(rest), "emu");
        if (!b) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        *ret = b;
        return 0;
    }
    if (kind_len == 4 && !strncmp(spec, "exec", 4)) {
        if (!*rest) {
            snprintf(err, errlen, "backend spec 'exec' needs a command: 'exec:COMMAND ARGS'");
            return -EINVAL;
        }
        nvw_backend *b = backend_new(nvw_exec_table(), NULL, rest, strlen(rest), "exec");
        if (!b) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        *ret = b;
        return 0;
    }
    if (kind_len == 6 && !strncmp(spec, "plugin", 6)) {
        if (!colon) {
            snprintf(err, errlen, "backend spec 'plugin' needs a path: 'plugin:/path/lib.so'");
            return -EINVAL;
        }
        return load_plugin(rest, ret, err, errlen);
    }
    snprintf(err, errlen,
             "unknown backend kind '%.*s' in spec '%s': expected 'emu', 'plugin' or 'exec'",
             (int)kind_len, spec, spec);
    return -EINVAL;
}

void nvw_backend_free(nvw_backend *b)
{
    if (!b)
        return;
    /* The plugin stays mapped (its dlopen handle is dropped, not closed): a
     * runtime may keep process-wide state built once (pthread_once tables,
     * driver handles, threads) that dlclose would orphan or unmap under a live
     * thread. A worker loads a handful of plugins in its life, and dlopen of the
     * same path again reuses the mapping. */
    free(b->options);
    free(b);
}

const nv_backend *nvw_backend_table(const nvw_backend *b)
{
    return b->table;
}

const char *nvw_backend_options(const nvw_backend *b)
{
    return b->options;
}

const char *nvw_backend_kind(const nvw_backend *b)
{
    return b->kind;
}
