/* Single-precision GEMM: C = alpha * op(A) * op(B) + beta * C, row-major.
 * op(A) is M x K (A is K x M with trans_a), op(B) is K x N (N x K with trans_b).
 * lda/ldb/ldc are row strides in elements.  beta == 0 means C is not read
 * (may hold garbage/NaN).  Uses the pool's threads when worthwhile.
 * Chooses the ISA path from CPUID (SMELT_ISA=scalar|avx2|avx512 forces one). */
#ifndef SMELT_KERNELS_GEMM_H
#define SMELT_KERNELS_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/pool.h"

void gemm_f32(smelt_pool *pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
              float *C, int64_t ldc);

#endif
