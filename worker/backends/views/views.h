/* Tensor views: the numerics core's decoded tensors (nv_tensor, one double per
 * element) as the backend ABI's encoded form (nv_tensor_view, docs/BACKEND_ABI.md
 * "Rules of the ABI") and back. Used by the loader's callers, the emulated accelerator
 * (emu/) and every runner; it depends on nothing of the loader. */
#ifndef NUMVAL_WORKER_BACKENDS_VIEWS_H
#define NUMVAL_WORKER_BACKENDS_VIEWS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/tensor.h"
#include "numval/backend.h"

/* A malloc'd encoded copy of t with the same shape and strides: ret->data points at
 * element [0,...,0]; every element the strides can reach (and the gaps between
 * them) is encoded. Free with nvw_view_free. Returns 0, -EINVAL (ndim or dtype out
 * of the ABI's range) or -ENOMEM; *ret is written only on success. */
int nvw_view_from_tensor(const nv_tensor *t, nv_tensor_view *ret);
/* A malloc'd view of dtype dt with these shape and strides (none negative), every
 * element of its span (gaps included) encoded from fill, for the caller to write
 * with nvw_view_put_run: the view nvw_view_from_tensor makes of a tensor of the
 * same layout once every element is written, without the tensor. Free with
 * nvw_view_free. Returns 0, -EINVAL or -ENOMEM; *ret is written only on success. */
int nvw_view_alloc(nv_dtype dt, int ndim, const int64_t *shape, const int64_t *strides,
                   double fill, nv_tensor_view *ret);
/* n values of src encoded (exact in the view's dtype) at element offsets
 * off, off + st, ... of v->data. */
void nvw_view_put_run(nv_tensor_view *v, int64_t off, int64_t st, int64_t n, const double *src);
/* n elements at offsets off, off + st, ... of v->data decoded into dst. */
void nvw_view_get_run(const nv_tensor_view *v, int64_t off, int64_t st, int64_t n, double *dst);

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
