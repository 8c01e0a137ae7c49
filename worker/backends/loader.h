/* Backend loader: turns a backend spec into a backend table. Specs:
 *   "emu" | "emu:k=v,k=v"        the built-in emulated accelerator (emu/emu.h)
 *   "exec:COMMAND ARGS"          an external harness process speaking the framed
 *                                pipe protocol (exec.h, docs/EXEC_PROTOCOL.md);
 *                                the command line is the option text
 *   "plugin:/path/lib.so[?opts]" a shared object exporting nv_backend_entry
 * Documented in docs/BACKEND_ABI.md. The tensor conversions between the numerics
 * core's decoded form (nv_tensor) and the ABI's encoded form (nv_tensor_view) are
 * views/views.h, included here for the loader's callers. */
#ifndef NUMVAL_WORKER_LOADER_H
#define NUMVAL_WORKER_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "numval/backend.h"
#include "worker/backends/views/views.h"

typedef struct nvw_backend nvw_backend; /* a loaded backend: table + dl handle + options */

/* Load the backend named by spec. On success *ret is a new backend (free with
 * nvw_backend_free). On failure returns a negative errno (-EINVAL: bad spec, an
 * exec spec without a command, or a plugin refused for its ABI; -ENOENT: plugin
 * could not be opened; -ENOMEM) and
 * writes a message naming the offending value into err (errlen > 0). Loading does
 * not open a context: the caller calls table->open(options, ...) per thread. */
int nvw_backend_load(const char *spec, nvw_backend **ret, char *err, size_t errlen);
void nvw_backend_free(nvw_backend *b); /* NULL is a no-op; plugins stay mapped */

/* The backend's function table (owned by the backend, valid until free). */
const nv_backend *nvw_backend_table(const nvw_backend *b);
/* The option text passed to open(): the part after "emu:", the command after
 * "exec:", or the part after a plugin path's '?' ("" when none). */
const char *nvw_backend_options(const nvw_backend *b);
/* The kind: "emu", "exec" or "plugin". */
const char *nvw_backend_kind(const nvw_backend *b);

#endif
