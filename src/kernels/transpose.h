/* Transposing a block of 4-byte elements (float, int32): the tiled path of
 * the strided copy behind Transpose and the other axis permutations
 * (ops/shape_util.c: su_copy_strided).
 *
 *   d[j * ldd + i] = s[i * lds + j]   for i < rows, j < cols
 *
 * (strides in elements; the two blocks must not overlap).  The AVX2 path
 * moves 8 x 8 blocks through registers (eight row loads, three rounds of
 * unpack / shuffle / lane permutes, eight row stores); the ragged edges and
 * the portable path copy element by element.  Both give the same bytes:
 * elements are moved, never converted, so NaN payloads and signed zeros
 * survive. */
#ifndef SMELT_KERNELS_TRANSPOSE_H
#define SMELT_KERNELS_TRANSPOSE_H

#include <stdint.h>

#include "kernels/isa.h"

void transpose32(isa_level isa, void *d, int64_t ldd, const void *s, int64_t lds, int64_t rows, int64_t cols);

#if defined(__x86_64__) || defined(__i386__)
/* The 8 x 8 blocks of [0, rows - rows % 8) x [0, cols - cols % 8). */
void transpose32_avx2(float *d, int64_t ldd, const float *s, int64_t lds, int64_t rows, int64_t cols);
#endif

#endif
