/* int8 dynamically quantized GEMM (session precision int8).
 *
 *   C = alpha * dequant(quant(A) quant(B)) + bias (+ C when accumulating)
 *
 * B (the constant weight, op(B) K x N) is quantized once per output channel
 * (column n), symmetric: sb[n] = max_k |B[k][n]| / 127, qb = round(B / sb)
 * in [-127, 127].  A is quantized per row at run time the same way (sa[m]).
 * The products are summed exactly in int32 and the result dequantized in an
 * fp32 epilogue: C[m][n] = alpha * sa[m] * sb[n] * acc[m][n] + bias[n].
 *
 * Both sides are held as int16 (values in [-127, 127]) and multiplied with
 * vpmaddwd (two products summed per 32-bit lane): exact, so no 16-bit
 * saturation as with vpmaddubsw, at half of the u8 x s8 instruction's rate.
 * The accumulator stays exact while K * 127 * 127 < 2^31: K <= QGEMM_MAX_K.
 *
 * Error: |a b - a^ b^| <= |a| sb/2 + |b| sa/2 + sa sb/4 per product (the
 * rounding of each side is at most half its step), summed over K.
 *
 * Packed weights are one block of qgemm_weights_bytes(K, N) bytes: Np column
 * scales (floats), then Np/8 panels of 8 columns, each Kp/2 pairs of k, each
 * pair 8 x {B[2p][n], B[2p+1][n]} int16 (Kp: K rounded up to even, Np: N to
 * a multiple of 8, padding zero).  A block can be kept on disk
 * (cache/prep_store.h) and viewed again with qgemm_weights_view. */
#ifndef SMELT_KERNELS_QGEMM_H
#define SMELT_KERNELS_QGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "runtime/pool.h"

#define QGEMM_MAX_K ((int64_t)131072)
#define QGEMM_NR 8 /* columns per packed panel */

typedef struct qgemm_weights {
  int64_t K, N, Kp, Np;
  const float *scale;  /* Np column scales (0 past N) */
  const int16_t *w;    /* the panels */
} qgemm_weights;

/* Bytes of the packed block for op(B) K x N; 0 when K or N is out of range. */
size_t qgemm_weights_bytes(int64_t K, int64_t N);
/* Quantizes and packs op(B) (trans_b: B is N x K, else K x N, dense) into
 * blob (qgemm_weights_bytes(K, N) bytes, 16-byte aligned), on pool.  A
 * column holding NaN or an infinity gets scale NaN (its outputs are NaN). */
void qgemm_quantize_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
/* The weights in a packed block. */
void qgemm_weights_view(int64_t K, int64_t N, const void *blob, qgemm_weights *out);

/* Int16 elements per quantized row of A (K rounded up to even). */
static inline int64_t qgemm_row_len(int64_t K) { return K + (K & 1); }
/* Quantizes rows of A (M x K, row stride lda) into qa (M x qgemm_row_len(K))
 * and sa (M scales) with the row kernel of `isa`.  A row holding NaN or an
 * infinity gets scale NaN. */
void qgemm_quantize_a(smelt_pool *pool, isa_level isa, int64_t M, int64_t K, const float *A, int64_t lda, int16_t *qa,
                      float *sa);

typedef struct qgemm_args {
  int64_t M;
  const int16_t *qa; /* qgemm_quantize_a's rows */
  const float *sa;
  const qgemm_weights *w;
  float alpha;
  const float *bias; /* N values added to every row, or NULL */
  bool accumulate;   /* add to what C holds (a residual preloaded there) */
  float *C;
  int64_t ldc;
} qgemm_args;

/* Runs the product with the kernel of `isa` (ISA_AVX512 uses the AVX2 one:
 * there is no VNNI kernel yet).  On pool. */
void qgemm_run(smelt_pool *pool, isa_level isa, const qgemm_args *a);

/* ---- kernels (one row tile: up to QGEMM_MR rows x 2 panels) ---- */
#define QGEMM_MR 6
/* acc[r][j], r < rows, j < 8 * panels (1 or 2), over pairs k-pairs: rows of
 * qa at stride lq, panels p0 (and p1). */
typedef void (*qgemm_tile_fn)(int rows, int panels, const int16_t *qa, int64_t lq, const int16_t *p0,
                              const int16_t *p1, int64_t pairs, int32_t acc[QGEMM_MR][2 * QGEMM_NR]);
void qgemm_tile_scalar(int rows, int panels, const int16_t *qa, int64_t lq, const int16_t *p0,
                       const int16_t *p1, int64_t pairs, int32_t acc[QGEMM_MR][2 * QGEMM_NR]);
/* One row of A: its scale (qgemm_scale_of) and K quantized values. */
void qgemm_quantize_row_scalar(int64_t K, const float *a, int16_t *q, float *scale);
void qgemm_quantize_row_avx2(int64_t K, const float *a, int16_t *q, float *scale);
/* max|x| -> the scale max|x| / 127 and *inv = 127 / max|x| (0 and 0 for
 * zeros; NaN and 0 when amax is NaN or infinite). */
float qgemm_scale_of(float amax, float *inv);
void qgemm_tile_avx2(int rows, int panels, const int16_t *qa, int64_t lq, const int16_t *p0,
                     const int16_t *p1, int64_t pairs, int32_t acc[QGEMM_MR][2 * QGEMM_NR]);

#endif
