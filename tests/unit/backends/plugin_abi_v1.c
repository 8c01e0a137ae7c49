/* A plugin built for backend ABI version 1: the emu device behind a table
 * that ends where version 1's did (struct_size NV_BACKEND_V1_SIZE). numval
 * must load it, read nothing past that size, and treat it as offering no
 * double backward. Its double_backward slot holds a function that aborts, so
 * a loader that read the slot anyway (or a gradient job that called it) would
 * crash the test. Built with -DABI_FUTURE it declares the version after
 * numval's instead, which numval must refuse naming both versions. Built with -DABI_V3 it is a
 * version-3 table (struct_size NV_BACKEND_V3_SIZE) whose rng slot aborts:
 * numval must load it with no rng entry. Built with -DABI_V4 it is a version-4
 * table (struct_size NV_BACKEND_V4_SIZE) whose configure slot aborts: numval
 * must load it as offering no configure. */
#include <stdlib.h>

#include "numval/backend.h"
#include "worker/backends/emu/emu.h"

static nv_backend table;

static int never(void *ctx, nv_double_backward_call *call, char *err, size_t errlen)
{
    (void)ctx, (void)call, (void)err, (void)errlen;
    abort();
}

#ifdef ABI_V4
static int never_configure(void *ctx, const char *config_json, char *answer, size_t answer_len,
                           char *err, size_t errlen)
{
    (void)ctx, (void)config_json, (void)answer, (void)answer_len, (void)err, (void)errlen;
    abort();
}
#endif

#ifdef ABI_V3
static int never_rng(void *ctx, nv_rng_call *call, char *err, size_t errlen)
{
    (void)ctx, (void)call, (void)err, (void)errlen;
    abort();
}
#endif

const nv_backend *nv_backend_entry(void)
{
    table = *nvw_emu_backend();
    table.name = "abi_v1";
#if defined ABI_FUTURE
    table.abi_version = NV_BACKEND_ABI_VERSION + 1;
#elif defined ABI_V4
    table.name = "abi_v4";
    table.abi_version = 4;
    table.struct_size = (uint32_t)NV_BACKEND_V4_SIZE;
    table.configure = never_configure;
    return &table;
#elif defined ABI_V3
    table.name = "abi_v3";
    table.abi_version = 3;
    table.struct_size = (uint32_t)NV_BACKEND_V3_SIZE;
    table.rng = never_rng;
    return &table;
#else
    table.abi_version = 1;
    table.struct_size = (uint32_t)NV_BACKEND_V1_SIZE;
#endif
    table.double_backward = never;
    return &table;
}
