/* A block of terms added with one rounding, as a fused multi-term adder does
 * (the tensor cores of Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of
 * NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330, 2021, §3: the products of a
 * block and the accumulator are aligned, summed and rounded once). Shared by the
 * emulated device that has such an adder (worker/backends/emu, accum_block) and
 * by the contract probe's model of it (worker/kinds/contract). */
#ifndef NUMVAL_BLOCKSUM_H
#define NUMVAL_BLOCKSUM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/numerics/dtype.h"

/* t[0] + ... + t[n-1] rounded once to acc under mode (rnd: stochastic bits).
 * truncate false: the exact sum is rounded (IEEE 754-2019 §5.4.1 for n = 2).
 * truncate true: each term is first cut toward zero to a multiple of the
 * accumulator's ulp at the largest term's binade, 2^(e_max - (p - 1)) with p =
 * acc's significand bits and no guard bit (the alignment shift drops the bits
 * it moves out, Fasi et al. 2021 §4.2); then the sum, exact, is rounded. An
 * exact zero is -0 only when every term is -0, or under rounding down
 * (IEEE 754-2019 §6.3). NaN and infinities follow IEEE 754 §6.1/§7.2. */
double nv_block_sum(const double *t, int n, nv_dtype acc, const nv_round_mode *mode, uint32_t rnd,
                    bool truncate);

#endif
