/* int8 dynamically quantized GEMM (session precision int8).
 *
 *   C = alpha * dequant(quant(A) quant(B)) + bias (+ C when accumulating)
 *
 * B (the constant weight, op(B) K x N) is quantized once per output channel
 * (column n), symmetric int8: sb[n] = max_k |B[k][n]| / 127, qb = round(B /
 * sb) in [-127, 127].  A is quantized per row at run time, asymmetric
 * unsigned: the row's range [min(0, lo), max(0, hi)] maps onto [0, L] with
 * L = qgemm_a_levels (255 or 127), sa[m] = (hi - lo) / L, zero point za[m] =
 * round(-lo / sa), qa = round(a / sa) + za.  The products are summed
 * exactly in int32 and dequantized in an fp32 epilogue:
 *   C[m][n] = alpha * sa[m] * sb[n] * (sum_k qa qb - za[m] * colsum[n]) + bias[n]
 * (colsum[n] = sum_k qb[k][n], kept with the weights).
 *
 * L = 255 (8-bit activations, as ONNX Runtime's u8) where the AVX512_VNNI
 * kernels run: vpdpbusd adds four u8 x s8 products straight into int32.
 * Elsewhere L = 127: the AVX2 kernel multiplies with vpmaddubsw (pairs of
 * products summed into int16 with saturation), and with qa <= 127 and
 * |qb| <= 127 a pair is at most 2 * 127 * 127 = 32258 < 32767, so it never
 * saturates (full 8-bit activations could reach 64770: ONNX Runtime's
 * reduce_range exists for this).  vpmaddwd with ones then widens to int32.
 * The int32 sum stays exact while K * L * 127 < 2^31: K <= QGEMM_MAX_K8
 * for L = 255, K <= QGEMM_MAX_K for 127.  Half the step of A halves A's
 * share of the error below: bert_base's output cosine against fp32 went
 * 0.999853 -> 0.999949 on a Zen 4 (ONNX Runtime's u8: 0.999893).
 *
 * Error: |a b - a^ b^| <= |a| sb/2 + |b| sa/2 + sa sb/4 per product (the
 * rounding of each side is at most half its step), summed over K.
 *
 * Packed weights are one block of qgemm_weights_bytes(K, N) bytes: Np column
 * scales (float), Np column sums (int32), then Np/8 panels of 8 columns,
 * each Kp/4 groups of 4 k, each group 8 x {B[4g..4g+3][n]} int8 (Kp: K
 * rounded up to a multiple of 4, Np: N to a multiple of 8, padding zero).
 * A block can be kept on disk (cache/prep_store.h) and viewed again with
 * qgemm_weights_view. */
#ifndef SMELT_KERNELS_QGEMM_H
#define SMELT_KERNELS_QGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

#define QGEMM_MAX_K ((int64_t)131072)
#define QGEMM_MAX_K8 ((int64_t)65536)
#define QGEMM_NR 8 /* columns per packed panel */
#define QGEMM_KG 4 /* k per group */

typedef struct qgemm_weights {
  int64_t K, N, Kp, Np;
  const float *scale;   /* Np column scales (0 past N) */
  const int32_t *colsum; /* Np column sums of the quantized weights */
  const int8_t *w;       /* the panels */
} qgemm_weights;

/* Bytes of the packed block for op(B) K x N; 0 when K or N is out of range. */
size_t qgemm_weights_bytes(int64_t K, int64_t N);
/* Quantizes and packs op(B) (trans_b: B is N x K, else K x N, dense) into
 * blob (qgemm_weights_bytes(K, N) bytes, 16-byte aligned), on pool.  A
 * column holding NaN or an infinity gets scale NaN (its outputs are NaN). */
void qgemm_quantize_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
/* The weights in a packed block. */
void qgemm_weights_view(int64_t K, int64_t N, const void *blob, qgemm_weights *out);

/* Bytes per quantized row of A (K rounded up to a multiple of 4). */
static inline int64_t qgemm_row_len(int64_t K) { return (K + QGEMM_KG - 1) / QGEMM_KG * QGEMM_KG; }
/* The levels L of a quantized row of A (see above) for the kernel qgemm_run
 * picks at `isa`: 255 with AVX512_VNNI and K <= QGEMM_MAX_K8, else 127. */
int qgemm_a_levels(isa_level isa, int64_t K);
/* Quantizes rows of A (M x K, row stride lda) into qa (M x qgemm_row_len(K),
 * padding 0), sa (M scales) and za (M zero points) with the row kernel of
 * `isa`, onto qgemm_a_levels(isa, K) levels: pass qgemm_run the same isa.
 * A row holding NaN or an infinity gets scale NaN. */
void qgemm_quantize_a(smelt_pool *pool, isa_level isa, int64_t M, int64_t K, const float *A, int64_t lda,
                      uint8_t *qa, float *sa, int32_t *za);

typedef struct qgemm_args {
  int64_t M;
  const uint8_t *qa; /* qgemm_quantize_a's rows */
  const float *sa;
  const int32_t *za;
  const qgemm_weights *w;
  float alpha;
  const float *bias; /* N values added to every row, or NULL */
  bool accumulate;   /* add to what C holds (a residual preloaded there) */
  float *C;
  int64_t ldc;
} qgemm_args;

/* Runs the product with the kernel of `isa` (ISA_AVX512 uses the VNNI
 * kernels where the CPU has AVX512_VNNI, else the AVX2 ones).  On pool. */
void qgemm_run(smelt_pool *pool, isa_level isa, const qgemm_args *a);

/* ---- kernels ---- */
#define QGEMM_MR 8      /* rows of the largest tile (the VNNI one; AVX2 takes 6) */
#define QGEMM_TILE_N 32 /* columns of the largest tile: 4 panels */
/* acc[r][j] = sum over `groups` groups of 4 k of qa[r][k] * panel[k][j], for
 * r < rows, j < 8 * panels: rows of qa at stride lq, panels b, b + pstride,
 * ... (up to the kernel's panel count: scalar and AVX2 2, VNNI 4). */
typedef void (*qgemm_tile_fn)(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                              int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_tile_scalar(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                       int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_tile_avx2(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                     int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_tile_vnni(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                     int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
/* The VNNI tile that also fetches pf_lines 64-byte lines from pf into L2,
 * one per group step (the driver points it at the weights the next tile
 * reads; pf_lines <= groups). */
typedef void (*qgemm_tile_pf_fn)(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                 int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N],
                                 const int8_t *pf, int64_t pf_lines);
void qgemm_tile_vnni_pf(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                        int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N], const int8_t *pf, int64_t pf_lines);
/* M <= QGEMM_GEMV_M: one panel per call (panels 1), rows <= M, the weights
 * read as one stream (x86/q8_gemm_avx2.c, x86/q8_gemm_vnni.c); the scalar
 * path uses qgemm_tile_scalar with panels 1. */
#define QGEMM_GEMV_M 4
void qgemm_gemv_avx2(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                     int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_gemv_vnni(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                     int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
/* The epilogue: C[m0 + r][n0 + j] (=, or += when accumulating) alpha *
 * sa * sb * (acc[r][j] - za * colsum) + bias, r < rows, j < cols.  Plain C
 * (vectorized by the compiler) and AVX-512 (masked stores for the tail,
 * x86/q8_gemm_vnni.c). */
typedef void (*qgemm_store_fn)(const qgemm_args *a, int64_t m0, int rows, int64_t n0, int cols,
                               int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_store_scalar(const qgemm_args *a, int64_t m0, int rows, int64_t n0, int cols,
                        int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
void qgemm_store_avx512(const qgemm_args *a, int64_t m0, int rows, int64_t n0, int cols,
                        int32_t acc[QGEMM_MR][QGEMM_TILE_N]);
/* One row of A: K quantized values in [0, levels] (127 or 255), its scale
 * and zero point (qgemm_range). */
void qgemm_quantize_row_scalar(int64_t K, const float *a, int levels, uint8_t *q, float *scale, int32_t *zero);
void qgemm_quantize_row_avx2(int64_t K, const float *a, int levels, uint8_t *q, float *scale, int32_t *zero);
/* A row's range lo..hi (NaN if it held NaN or an infinity) onto [0, levels]
 * -> its scale, zero point and the step's inverse (0, 0, 0 for an all-zero
 * row; NaN, 0, 0 for a non-finite one). */
float qgemm_range(float lo, float hi, int levels, int32_t *zero, float *inv);
/* A weight column's max |x| -> its scale and the step's inverse. */
float qgemm_scale_of(float amax, float *inv);

#endif
