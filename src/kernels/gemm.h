/* Single-precision GEMM: C = alpha * op(A) * op(B) + beta * C, row-major.
 * op(A) is M x K (A is K x M with trans_a), op(B) is K x N (N x K with trans_b).
 * lda/ldb/ldc are row strides in elements.  beta == 0 means C is not read
 * (may hold garbage/NaN).  alpha == 0 or K == 0 means A and B are not read.
 * Uses the pool's threads when worthwhile.
 * Chooses the ISA path from CPUID (SMELT_ISA=scalar|avx2|avx512 forces one). */
#ifndef SMELT_KERNELS_GEMM_H
#define SMELT_KERNELS_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

/* Returns SMELT_ERR_INVALID_ARGUMENT (with the reason in smelt_last_error(),
 * C untouched) for negative sizes, strides below the row length, or NULL
 * pointers that the sizes require, as gemm_f32_ex does; otherwise SMELT_OK. */
smelt_status gemm_f32(smelt_pool *pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc) __attribute__((warn_unused_result));

/* Work done on each output element while its tile is still in registers:
 *   C[m][n] = act(alpha * (op(A) op(B))[m][n] + beta * C[m][n] + bias)
 * where bias is bias[n] (GEMM_BIAS_COL, length N), bias[m] (GEMM_BIAS_ROW,
 * length M) or 0.  relu is max(x, 0); clip is min(max(x, lo), hi).  NaN
 * passes through both unchanged. */
typedef enum gemm_bias { GEMM_BIAS_NONE = 0, GEMM_BIAS_COL, GEMM_BIAS_ROW } gemm_bias;
typedef enum gemm_act { GEMM_ACT_NONE = 0, GEMM_ACT_RELU, GEMM_ACT_CLIP } gemm_act;

typedef struct gemm_epilogue {
  gemm_bias bias_kind;
  const float *bias; /* borrowed; required when bias_kind != NONE */
  gemm_act act;
  float clip_lo, clip_hi; /* GEMM_ACT_CLIP only; lo <= hi */
} gemm_epilogue;

/* Operands packed once, ahead of the calls that use them (constant weights):
 * the panels laid out exactly as the packed path consumes them, for one
 * ISA, one shape and the default blocking (kernels/gemm_prepack.c).
 * Opaque; made by gemm_pack_b_prepare / gemm_pack_a_prepare. */
typedef struct gemm_packed gemm_packed;

typedef struct gemm_params {
  bool trans_a, trans_b;
  int64_t M, N, K;
  float alpha, beta;
  const float *A, *B; /* borrowed */
  float *C;           /* borrowed, written */
  int64_t lda, ldb, ldc;
  gemm_epilogue epilogue;
  /* Optional, borrowed: op(B) (resp. op(A)) already packed from the same
   * B (A) -- made by gemm_pack_b_prepare (gemm_pack_a_prepare).  The packed
   * path then reads its panels instead of packing; one that does not match
   * the call (ISA, K, N / M, transposition, blocking) is ignored and the
   * operand is packed as usual, so B and A must still be given. */
  const gemm_packed *packed_b, *packed_a;
} gemm_params;

/* alpha 1, beta 0, no transposes, no epilogue, everything else zero. */
gemm_params gemm_params_default(void);

/* Like gemm_f32, with an epilogue.  Returns SMELT_ERR_INVALID_ARGUMENT (and
 * leaves C untouched) for negative sizes, strides below the row length, or
 * NULL pointers that the sizes require.  If scratch memory for packing cannot
 * be allocated it computes the result on the unpacked scalar path instead,
 * so the only failure is a bad argument. */
smelt_status gemm_f32_ex(smelt_pool *pool, const gemm_params *p);

/* Packs op(B) (K x N; B is N x K with trans_b, row stride ldb) for every
 * later call on ISA isa (clamped to what the machine has) with this K and
 * N.  *out is NULL, with SMELT_OK, when that ISA has no packed path
 * (scalar): there is nothing to prepare.  Packing runs on pool. */
smelt_status gemm_pack_b_prepare(smelt_pool *pool, isa_level isa, bool trans_b, int64_t K, int64_t N,
                                 const float *B, int64_t ldb, gemm_packed **out);
/* The same for op(A) (M x K; A is K x M with trans_a): a constant left
 * operand such as a convolution's weight. */
smelt_status gemm_pack_a_prepare(smelt_pool *pool, isa_level isa, bool trans_a, int64_t M, int64_t K,
                                 const float *A, int64_t lda, gemm_packed **out);
/* Floats gemm_pack_*_prepare makes for this shape on isa (0: nothing to
 * prepare), e.g. to size a saved copy. */
int64_t gemm_pack_b_floats(isa_level isa, int64_t K, int64_t N);
int64_t gemm_pack_a_floats(isa_level isa, int64_t M, int64_t K);
/* A packed operand over n floats prepared earlier (a saved copy of
 * gemm_packed_data's floats for the same isa, shape and transposition,
 * 64-byte aligned), borrowed: data must outlive *out. */
smelt_status gemm_pack_b_wrap(isa_level isa, bool trans_b, int64_t K, int64_t N, const float *data, int64_t n,
                              gemm_packed **out);
smelt_status gemm_pack_a_wrap(isa_level isa, bool trans_a, int64_t M, int64_t K, const float *data, int64_t n,
                              gemm_packed **out);
/* gemm_pack_*_prepare into dst (n floats, 64-byte aligned, exactly
 * gemm_pack_*_floats of them: a buffer mapped from the cache, say), which
 * *out borrows: dst must outlive it.  Every float the layout uses is
 * written (B's gaps past a short last K block are not: never read). */
smelt_status gemm_pack_b_into(smelt_pool *pool, isa_level isa, bool trans_b, int64_t K, int64_t N, const float *B,
                              int64_t ldb, float *dst, int64_t n, gemm_packed **out);
smelt_status gemm_pack_a_into(smelt_pool *pool, isa_level isa, bool trans_a, int64_t M, int64_t K, const float *A,
                              int64_t lda, float *dst, int64_t n, gemm_packed **out);
/* The packed floats (*n of them). */
const float *gemm_packed_data(const gemm_packed *pk, int64_t *n);
void gemm_packed_free(gemm_packed *pk); /* NULL ok */
void gemm_packed_free_v(void *pk);      /* for op_cache_add */

#endif
