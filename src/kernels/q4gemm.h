/* int4 weight GEMM (session precision int4; com.microsoft::MatMulNBits).
 *
 *   C = alpha * A w + bias (+ C when accumulating)
 *
 * Weights: op(B) (K x N) in groups of Q4_GROUP = 32 consecutive k per
 * column, 4-bit codes q in 0..15 with one fp32 scale s per (group, column):
 *   symmetric (session int4):  w = s * (q - 8);
 *   asymmetric (MatMulNBits with zero points): w = s * q + m (m = -s * zp).
 * Session int4 quantizes fp32 weights symmetric, as ggml's Q4_0: the value
 * of largest magnitude x_max gets code 0 (s = x_max / -8), the rest
 * round(x / s) + 8 clamped to 0..15 (so |w - x| <= |s| / 2, or <= |s| for a
 * value of the other sign clipped at +7 s).  K is padded to a multiple of 32
 * (the padding's weights are 0).
 *
 * Activations (few rows: a decode step's GEMV) are quantized at run time,
 * each row in the same groups of 32 k: qa = round(a / da) in -127..127,
 * da = max |a| / 127 (ggml's Q8_0), with the group's sum of qa kept.  A
 * group's product is then exact in integers:
 *   sum_k qa (q - 8) = sum_k qa q - 8 sum_k qa
 * and it enters the fp32 sum as da * s * that (asymmetric: da s sum qa q +
 * m da sum qa).  The AVX2 kernel (x86/q4_gemm_avx2.c) multiplies u4 codes
 * by s8 activations with vpmaddubsw (pairs at most 2 * 15 * 127 = 3810;
 * eight of them, a group, at most 30480: the int16 sums never saturate),
 * widens to int32 once per group with vpmaddwd, converts to fp32 and
 * accumulates with the group's scales.
 *
 * Many rows (M > Q4_SMALL_M: prefill) dequantize Q4_CHUNK columns at a time
 * into an fp32 panel and run the fp32 GEMM on it (compute-bound; the
 * activations stay fp32 there).
 *
 * Layout: N padded to a multiple of Q4_NR = 16; Np/16 panels, each Kg
 * groups of q4gemm_group_bytes(asym) bytes, one after another (one panel is
 * one front-to-back stream).  A group: 8 chunks of 32 bytes, chunk 2c + h
 * (c = 0..3: k offsets 8c..8c+7; h: columns 8h..8h+7) holding at byte
 * 4 j + t (column 8h + j, t = 0..3) the code of k offset 8c + t in its low
 * nibble and of 8c + 4 + t in its high nibble; then 16 fp32 scales; then,
 * asymmetric, 16 fp32 m. */
#ifndef SMELT_KERNELS_Q4GEMM_H
#define SMELT_KERNELS_Q4GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

#define Q4_GROUP 32
#define Q4_NR 16
#define Q4_SMALL_M 16 /* up to this many rows: the int8 x int4 kernel */
#define Q4_CHUNK 128  /* columns per dequantized fp32 panel (many rows) */

typedef struct q4gemm_weights {
  int64_t K, N, Kg, Np;
  bool asym;
  const uint8_t *w; /* Np/16 panels of Kg groups */
} q4gemm_weights;

static inline int64_t q4gemm_group_bytes(bool asym) { return 8 * 32 + (asym ? 2 : 1) * Q4_NR * 4; }

/* Bytes of the packed block for op(B) K x N; 0 when K or N is out of range. */
size_t q4gemm_weights_bytes(int64_t K, int64_t N, bool asym);
void q4gemm_weights_view(int64_t K, int64_t N, bool asym, const void *blob, q4gemm_weights *out);
/* Quantizes op(B) (trans_b: B is N x K, else K x N, dense) symmetric into
 * blob (q4gemm_weights_bytes(K, N, false) bytes), on pool.  A group holding
 * NaN or an infinity gets scale NaN (its column's outputs are NaN). */
void q4gemm_quantize_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
/* Zeroes blob (every weight 0) before q4gemm_set fills it. */
void q4gemm_clear(const q4gemm_weights *w, void *blob);
/* Stores column n's group g: codes q[0..31] (0..15, for k = 32 g + i), its
 * scale s and (asymmetric) m. */
void q4gemm_set(const q4gemm_weights *w, void *blob, int64_t n, int64_t g, const uint8_t q[Q4_GROUP], float s,
                float m);
/* The weight op(B)[k][n] the packed block holds. */
float q4gemm_weight_at(const q4gemm_weights *w, int64_t k, int64_t n);

/* One row's quantized activations: Kg groups of 32 int8 (padding 0), per
 * group its scale da, the sum of its codes, and da * that sum. */
typedef struct q4gemm_row {
  const int8_t *q;
  const float *da;
  const int32_t *sum;
  const float *dsum;
} q4gemm_row;
/* Bytes for M quantized rows of K. */
size_t q4gemm_rows_bytes(int64_t M, int64_t K);
/* Quantizes the rows of A (M x K, row stride lda) into buf
 * (q4gemm_rows_bytes(M, K) bytes, 32-byte aligned); row m's view is
 * q4gemm_row_at(buf, M, K, m).  A group holding NaN or an infinity gets da
 * NaN. */
void q4gemm_quantize_a(int64_t M, int64_t K, const float *A, int64_t lda, void *buf);
q4gemm_row q4gemm_row_at(const void *buf, int64_t M, int64_t K, int64_t m);

typedef struct q4gemm_args {
  int64_t M;
  const float *A; /* M x K, row stride lda */
  int64_t lda;
  const q4gemm_weights *w;
  float alpha;
  const float *bias; /* N values added to every row, or NULL */
  bool accumulate;   /* add to what C holds */
  float *C;          /* M x N, row stride ldc */
  int64_t ldc;
  bool small_only; /* the int8 x int4 kernel for any M (tests) */
} q4gemm_args;

/* Runs the product with the kernels of `isa` (ISA_AVX512 runs the AVX2
 * ones), on pool.  SMELT_ERR_NOMEM (C untouched) when the quantized
 * activations do not fit (few rows); a dequantized fp32 panel that does
 * not fit (many rows) makes those columns run a slow plain loop instead. */
smelt_status q4gemm_run(smelt_pool *pool, isa_level isa, const q4gemm_args *a) __attribute__((warn_unused_result));

/* ---- kernels ---- */
/* acc[j] (j < 16) = sum over the panel's groups of row x panel column j
 * (scales applied): one row, one panel of w. */
typedef void (*q4gemm_panel_fn)(const q4gemm_weights *w, const q4gemm_row *row, const uint8_t *panel,
                                float acc[Q4_NR]);
void q4gemm_panel_scalar(const q4gemm_weights *w, const q4gemm_row *row, const uint8_t *panel, float acc[Q4_NR]);
void q4gemm_panel_avx2(const q4gemm_weights *w, const q4gemm_row *row, const uint8_t *panel, float acc[Q4_NR]);

#endif
