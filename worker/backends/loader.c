/* Backend loader: spec parsing, plugin loading with the ABI check, and the
 * nv_tensor <-> nv_tensor_view conversions. */
#include "loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <float.h>
#include <math.h>
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

static int check_table(const nv_backend *t, const char *path, char *err, size_t errlen)
{
    if (!t) {
        snprintf(err, errlen, "plugin '%s': %s() returned NULL", path, NV_BACKEND_ENTRY_SYMBOL);
        return -EINVAL;
    }
    if (t->abi_version != NV_BACKEND_ABI_VERSION) {
        snprintf(err, errlen,
                 "plugin '%s' was built for backend ABI version %u, but this numval speaks "
                 "version %d: rebuild it against this numval's include/numval/backend.h",
                 path, (unsigned)t->abi_version, NV_BACKEND_ABI_VERSION);
        return -EINVAL;
    }
    if (t->struct_size < sizeof(nv_backend)) {
        snprintf(err, errlen,
                 "plugin '%s' declares a backend table of %u bytes, but ABI version %d needs "
                 "%zu: rebuild it against this numval's include/numval/backend.h",
                 path, (unsigned)t->struct_size, NV_BACKEND_ABI_VERSION, sizeof(nv_backend));
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

/* ---- tensor views ---- */

static bool view_shape_ok(const nv_tensor_view *v)
{
    if (!nv_dtype_get((nv_dtype)v->dtype) || v->ndim < 0 || v->ndim > NV_BACKEND_MAX_DIMS ||
        v->ndim > NV_MAX_DIMS)
        return false;
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] < 0)
            return false;
    return true;
}

bool nvw_view_span(const nv_tensor_view *v, int64_t *ret_lo, int64_t *ret_hi)
{
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0)
            return false;
        int64_t reach = (v->shape[d] - 1) * v->strides[d];
        if (reach < 0)
            lo += reach;
        else
            hi += reach;
    }
    *ret_lo = lo;
    *ret_hi = hi;
    return true;
}

int nvw_view_from_tensor(const nv_tensor *t, nv_tensor_view *ret)
{
    if (!nv_dtype_get(t->dtype) || t->ndim < 0 || t->ndim > NV_BACKEND_MAX_DIMS)
        return -EINVAL;
    nv_tensor_view v;
    memset(&v, 0, sizeof(v));
    v.dtype = (int32_t)t->dtype;
    v.ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        v.shape[d] = t->shape[d];
        v.strides[d] = t->strides[d];
    }
    int nb = nv_dtype_get(t->dtype)->storage_bytes;
    int64_t lo = 0, hi = -1;
    if (!nvw_view_span(&v, &lo, &hi))
        lo = 0, hi = -1;
    int64_t n = hi - lo + 1;
    unsigned char *base = calloc((size_t)(n > 0 ? n : 1), (size_t)nb);
    if (!base)
        return -ENOMEM;
    /* Encode the whole span, gaps included, so the view is the tensor's real layout.
     * Values are exact in the dtype: fp32 and fp64 store by conversion. */
    for (int64_t i = 0; i < n; i++) {
        int64_t src = t->offset + lo + i;
        if (src < 0 || src >= t->storage_len)
            continue;
        if (t->dtype == NV_DT_FP32) {
            float f = (float)t->data[src];
            memcpy(base + i * 4, &f, 4);
        } else if (t->dtype == NV_DT_FP64) {
            memcpy(base + i * 8, &t->data[src], 8);
        } else {
            uint64_t bits = nv_dtype_encode(t->dtype, t->data[src], &NV_ROUND_DEFAULT, 0);
            nv_dtype_store_bits(t->dtype, base, i, bits);
        }
    }
    v.data = base + (size_t)(-lo) * (size_t)nb;
    *ret = v;
    return 0;
}

void nvw_view_free(nv_tensor_view *v)
{
    if (!v || !v->data)
        return;
    int64_t lo = 0, hi = 0;
    const nv_dtype_info *info = nv_dtype_get((nv_dtype)v->dtype);
    if (info && nvw_view_span(v, &lo, &hi))
        free((unsigned char *)v->data + lo * info->storage_bytes);
    else
        free(v->data);
    v->data = NULL;
}

/* One element, with fp32/fp64 read directly (DAZ: a subnormal reads as signed zero). */
static inline double load(nv_dtype dt, const void *data, int64_t off, bool daz)
{
    if (dt == NV_DT_FP32) {
        float f;
        memcpy(&f, (const char *)data + off * 4, 4);
        if (daz && f != 0 && fabsf(f) < FLT_MIN)
            f = copysignf(0.0f, f);
        return f;
    }
    if (dt == NV_DT_FP64) {
        double d;
        memcpy(&d, (const char *)data + off * 8, 8);
        if (daz && d != 0 && fabs(d) < DBL_MIN)
            d = copysign(0.0, d);
        return d;
    }
    return nv_dtype_decode(dt, nv_dtype_load_bits(dt, data, off), daz);
}

/* One run of n elements along the last axis (element stride st) into dst. */
static void load_run(nv_dtype dt, const void *data, int64_t off, int64_t st, int64_t n, bool daz,
                     double *dst)
{
    if (dt == NV_DT_FP32 && !daz) {
        const char *p = (const char *)data + off * 4;
        for (int64_t j = 0; j < n; j++) {
            float f;
            memcpy(&f, p + j * st * 4, 4);
            dst[j] = f;
        }
        return;
    }
    for (int64_t j = 0; j < n; j++)
        dst[j] = load(dt, data, off + j * st, daz);
}

int nvw_view_decode(const nv_tensor_view *v, bool daz, double *dst)
{
    if (!view_shape_ok(v))
        return -EINVAL;
    int nd = v->ndim;
    int64_t numel = 1;
    for (int d = 0; d < nd; d++)
        numel *= v->shape[d];
    if (numel == 0)
        return 0;
    if (!v->data)
        return -EINVAL;
    nv_dtype dt = (nv_dtype)v->dtype;
    int64_t len = nd ? v->shape[nd - 1] : 1, st = nd ? v->strides[nd - 1] : 0;
    int64_t idx[NV_BACKEND_MAX_DIMS] = {0};
    int64_t off = 0;
    /* Runs along the last axis; an odometer over the others keeps the offset. */
    for (int64_t i = 0; i < numel; i += len) {
        load_run(dt, v->data, off, st, len, daz, dst + i);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) {
                off += v->strides[d];
                break;
            }
            off -= (v->shape[d] - 1) * v->strides[d];
            idx[d] = 0;
        }
    }
    return 0;
}

nv_tensor *nvw_tensor_from_view(const nv_tensor_view *v, bool daz)
{
    if (!view_shape_ok(v))
        return NULL;
    nv_tensor *t = nv_tensor_new((nv_dtype)v->dtype, v->ndim, v->shape);
    if (!t)
        return NULL;
    if (nvw_view_decode(v, daz, t->data) < 0) {
        nv_tensor_free(t);
        return NULL;
    }
    return t;
}
