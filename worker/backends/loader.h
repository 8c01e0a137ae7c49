/* Backend loader: turns a backend spec into a backend table, and converts tensors
 * between the numerics core's decoded form (nv_tensor) and the ABI's encoded form
 * (nv_tensor_view). Specs:
 *   "emu" | "emu:k=v,k=v"        the built-in emulated accelerator (emu.h)
 *   "plugin:/path/lib.so[?opts]" a shared object exporting nv_backend_entry
 * Documented in docs/BACKEND_ABI.md. */
#ifndef NUMVAL_WORKER_LOADER_H
#define NUMVAL_WORKER_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/numerics/tensor.h"
#include "numval/backend.h"

typedef struct nvw_backend nvw_backend; /* a loaded backend: table + dl handle + options */

/* Load the backend named by spec. On success *ret is a new backend (free with
 * nvw_backend_free). On failure returns a negative errno (-EINVAL: bad spec or a
 * plugin refused for its ABI; -ENOENT: plugin could not be opened; -ENOMEM) and
 * writes a message naming the offending value into err (errlen > 0). Loading does
 * not open a context: the caller calls table->open(options, ...) per thread. */
int nvw_backend_load(const char *spec, nvw_backend **ret, char *err, size_t errlen);
void nvw_backend_free(nvw_backend *b); /* NULL is a no-op; plugins stay mapped */

/* The backend's function table (owned by the backend, valid until free). */
const nv_backend *nvw_backend_table(const nvw_backend *b);
/* The option text passed to open(): the part after "emu:" or after '?' ("" when none). */
const char *nvw_backend_options(const nvw_backend *b);
/* The kind: "emu" or "plugin". */
const char *nvw_backend_kind(const nvw_backend *b);

/* A malloc'd encoded copy of t with the same shape and strides: ret->data points at
 * element [0,...,0]; every element the strides can reach (and the gaps between
 * them) is encoded. Free with nvw_view_free. Returns 0, -EINVAL (ndim or dtype out
 * of the ABI's range) or -ENOMEM; *ret is written only on success. */
int nvw_view_from_tensor(const nv_tensor *t, nv_tensor_view *ret);
/* Free the data of a view made by nvw_view_from_tensor (not a backend's output,
 * which goes back through release_tensor). Data NULL is a no-op; sets data NULL. */
void nvw_view_free(nv_tensor_view *v);

/* A decoded, contiguous row-major copy of any view (strides honoured, they may be
 * zero or negative). daz: subnormal encodings read as zero. NULL when the view is
 * invalid (unknown dtype, ndim out of range, negative extent, NULL data with
 * elements) or on ENOMEM. */
nv_tensor *nvw_tensor_from_view(const nv_tensor_view *v, bool daz);

/* Decode any view into dst (numel doubles, row-major logical order). Returns 0 or
 * -EINVAL (invalid view, or NULL data with elements). */
int nvw_view_decode(const nv_tensor_view *v, bool daz, double *dst);

/* The element span of a view: offsets (in elements, relative to data) of the lowest
 * and highest reachable elements; *ret_lo <= 0 <= *ret_hi. Returns false when the
 * view has no elements. */
bool nvw_view_span(const nv_tensor_view *v, int64_t *ret_lo, int64_t *ret_hi);

#endif
