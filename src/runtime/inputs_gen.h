/* Seeded random inputs for models run without given inputs (`smelt run`,
 * `smelt bench`).
 *
 * Determinism: the values of input number `index` depend only on (seed, index,
 * dtype, element count, int_high) and are the same on every platform and run.
 * Each input draws from its own xoshiro256** stream, whose state is filled by
 * splitmix64 from key = mix64(seed ^ mix64(index)), mix64 being splitmix64's
 * output function; elements take successive draws in row-major order.
 *
 * Values:
 *   float32/float64   uniform in [-1, 1) on a grid of 2^-23 / 2^-52
 *   float16/bfloat16  uniform in [-1, 1) on a grid of 2^-10 / 2^-7 (every value
 *                     exactly representable, so rounding never yields 1.0)
 *   integers          uniform in [0, int_high) without modulo bias; int_high is
 *                     clamped to the type's maximum + 1
 *   bool              0 or 1 with equal odds */
#ifndef SMELT_RUNTIME_INPUTS_GEN_H
#define SMELT_RUNTIME_INPUTS_GEN_H

#include <stdint.h>

#include "ir/tensor.h"

#define INPUTS_INT_HIGH_DEFAULT 100

/* Allocates *t (owning, tensor_release) with the given type and shape (all dims
 * concrete) and fills it.  int_high == 0 means INPUTS_INT_HIGH_DEFAULT; a
 * negative int_high, a negative (symbolic) dim or an unsupported dtype is an
 * error naming the input index. */
smelt_status inputs_generate(tensor *t, smelt_dtype dt, int rank, const int64_t *dims,
                             uint64_t seed, int index, int64_t int_high);

#endif
