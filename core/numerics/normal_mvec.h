/* The vector Box-Muller of normal_mvec.c, for inputs.c's fp32 "normal" class. */
#ifndef NUMVAL_NORMAL_MVEC_H
#define NUMVAL_NORMAL_MVEC_H

#include <stdbool.h>
#include <stdint.h>

/* Whether the vector values may be used now: libmvec present, AVX2, the FP
 * environment at its default (read once per batch of blocks, not per value). */
bool nvi_normal_mvec_ready(void);

/* For the n blocks of four Philox words at words (n a multiple of 4): where
 * decided, out[k] = (double)(float) of nv_rng_normal's value for block k and
 * undecided[k] = 0; elsewhere undecided[k] = 1 and out[k] is to be computed
 * by the scalar expression. */
void nvi_normal_f32_batch(const uint32_t *words, int n, double *out, uint8_t *undecided);

/* Off: every value by the scalar expression (tests compare the two). */
void nv_inputs_vector_math(bool on);

#endif
