/* Weight-only 16-bit GEMM (session precision bf16 or fp16): a constant
 * weight stored as bf16 or as IEEE fp16, activations, sums and outputs fp32.
 * Both formats share the layout, the driver and the kernels' structure;
 * only the rounding at packing and the widening in registers differ:
 *   bf16: what follows;
 *   fp16 (wf16_*): f32_to_f16 rounds to nearest even with 11 significant
 *     bits, |fp16(b) - b| <= 2^-11 |b| for |b| >= 2^-14 (the smallest
 *     normal), <= 2^-25 below (subnormals); |b| > 65504 would overflow to
 *     inf -- the autocast pass keeps such a weight in fp32.  Widened with
 *     F16C's vcvtph2ps (every AVX2 CPU smelt has met has it; without it, or
 *     at SMELT_ISA=scalar, the scalar kernel runs).  Columns in natural
 *     order (wb16_pos).
 *
 *   C = alpha * A bf16(B) + bias (+ C when accumulating)
 *
 * bf16(x) rounds to nearest even (f32_to_bf16: NaN stays NaN); the products
 * and sums are fp32, so the only error against the fp32 product is the
 * weights' rounding, |bf16(b) - b| <= 2^-8 |b| (half of its 8-bit step):
 *   |C - ref| <= alpha * 2^-8 sum_k |a b| (+ fp32 rounding of the sums).
 * The point is memory: a decode step's GEMVs read every weight once per
 * token, and half the bytes take half the time.  On a CPU without
 * AVX512_BF16 (this AVX2 machine) nothing runs in bf16 arithmetic: the
 * weights are widened to fp32 in registers (a bf16 is the top half of an
 * fp32: a 16-bit shift, done as an unpack with zero) and multiplied in fp32.
 *
 * Layout: N padded to a multiple of 16; Np/16 panels, each K rows of 16
 * bf16 columns, one panel after another, so a panel is read front to back.
 * Within a row of 16 the columns are stored in the order 0-3, 8-11, 4-7,
 * 12-15 (WBF16_COL), which puts columns 0-7 and 8-15 in the two halves an
 * AVX2 unpack of zero with the row produces.
 *
 * Few rows (M <= WBF16_SMALL_M) read the panels directly, rows in groups
 * of up to 6 against one panel at a time; more rows widen the weight into an
 * fp32 copy for the call and run the fp32 GEMM (prefill: compute-bound, the
 * widening is one pass over the weight beside 2*M flops per weight). */
#ifndef SMELT_KERNELS_WBF16_H
#define SMELT_KERNELS_WBF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

#define WBF16_NR 16
#define WBF16_SMALL_M 16

typedef enum wb16_format { WB16_BF16 = 0, WB16_F16 } wb16_format;

/* Where column j (0..15) of a bf16 panel row is stored. */
static inline int wbf16_pos(int j) { return j < 4 || j >= 12 ? j : j < 8 ? j + 4 : j - 4; }
/* ... of a panel row in either format (fp16: natural order). */
static inline int wb16_pos(wb16_format f, int j) { return f == WB16_F16 ? j : wbf16_pos(j); }

typedef struct wbf16_weights {
  int64_t K, N, Np;
  const uint16_t *w; /* Np/16 panels of K x 16 */
  wb16_format fmt;
} wbf16_weights;

/* Bytes for op(B) K x N; 0 when K or N is out of range. */
size_t wbf16_weights_bytes(int64_t K, int64_t N);
/* Rounds and packs op(B) (trans_b: B is N x K, else K x N, dense) into blob
 * (wbf16_weights_bytes(K, N) bytes, 32-byte aligned), on pool. */
void wbf16_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
void wbf16_weights_view(int64_t K, int64_t N, const void *blob, wbf16_weights *out);
/* The same in fp16 (the blob is the same size). */
void wf16_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
void wf16_weights_view(int64_t K, int64_t N, const void *blob, wbf16_weights *out);

typedef struct wbf16_args {
  int64_t M;
  const float *A; /* M x K, row stride lda */
  int64_t lda;
  const wbf16_weights *w;
  float alpha;
  const float *bias; /* N values added to every row, or NULL */
  bool accumulate;   /* add to what C holds */
  float *C;          /* M x N, row stride ldc */
  int64_t ldc;
  bool panels_only; /* never widen (what a failed allocation falls back to; for tests) */
} wbf16_args;

/* Runs the product with the kernels of `isa`, on pool.  When M >
 * WBF16_SMALL_M and the fp32 copy does not fit (the session's memory
 * budget), the panel kernel runs all the rows instead: slower, same result
 * up to the order of the sums.  SMELT_OK unless the arguments are bad. */
smelt_status wbf16_run(smelt_pool *pool, isa_level isa, const wbf16_args *a) __attribute__((warn_unused_result));

/* ---- kernels ---- */
/* acc[r][j] (r < rows <= 6, j < 16) = sum_k A[r][k] * panel[k][j], A's rows
 * at stride lda: one panel, all K. */
typedef void (*wbf16_panel_fn)(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                               float acc[6][WBF16_NR]);
void wbf16_panel_scalar(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                        float acc[6][WBF16_NR]);
void wbf16_panel_avx2(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                      float acc[6][WBF16_NR]);
void wf16_panel_scalar(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                       float acc[6][WBF16_NR]);
void wf16_panel_avx2(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                     float acc[6][WBF16_NR]); /* AVX2 + F16C */

#endif
