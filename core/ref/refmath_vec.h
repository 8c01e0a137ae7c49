/* The four-lane fp64 vector types and lane selects that refmath's batched
 * decisions (refmath_batch.c, refmath_tail_pairs.c) share: gcc/clang vector
 * extensions, a mask lane being all ones (true) or all zeros. */
#ifndef NUMVAL_REF_REFMATH_VEC_H
#define NUMVAL_REF_REFMATH_VEC_H

#include <stdint.h>

typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef uint64_t v4u __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));

#define SELD(m, a, b) ((v4d)(((v4l)(a) & (m)) | ((v4l)(b) & ~(m))))
#define SELL(m, a, b) (((a) & (m)) | ((b) & ~(m)))
#define ABSD(a) ((v4d)((v4l)(a)&INT64_C(0x7fffffffffffffff)))

#endif
