/* AVX2 kernels of the weight-only bf16 / fp16 GEMM (kernels/wbf16.h): rows
 * x 16 columns against one panel, all K, fp32 accumulators in registers.  A
 * panel row is 16 values (32 bytes).  bf16: unpacking zero with it puts each
 * bf16 in the top half of a 32-bit lane -- the fp32 it stands for -- columns
 * 0-7 in the low unpack and 8-15 in the high one (the packer's column
 * order).  fp16: F16C's vcvtph2ps widens each 128-bit half (columns 0-7,
 * 8-15).  The functions carry the f16c target so one template serves both;
 * the bf16 one uses no F16C instruction, and the fp16 one is called only
 * where the CPU has F16C (wbf16_run). */
#include "kernels/wbf16.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>

#define WB_TARGET __attribute__((target("avx2,fma,f16c")))
#define WB_INLINE static inline __attribute__((always_inline)) WB_TARGET

/* Row k of the panel as fp32, columns 0-7 in *b0, 8-15 in *b1. */
WB_INLINE void load_row(const bool f16, const uint16_t *row, __m256 *b0, __m256 *b1) {
  if (f16) { /* two 128-bit loads straight into the conversions: no lane extract */
    *b0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)row));
    *b1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 8)));
  } else {
    __m256i v = _mm256_loadu_si256((const __m256i *)row);
    const __m256i zero = _mm256_setzero_si256();
    *b0 = _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v));
    *b1 = _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v));
  }
}

/* U rows of the panel per step into U accumulator sets (U*R*2 chains). */
WB_INLINE void rows_panel(const bool f16, const int R, const int U, int64_t K, const float *A, int64_t lda,
                          const uint16_t *b, float acc[6][WBF16_NR]) {
  __m256 c[2][6][2];
  for (int u = 0; u < U; u++)
    for (int r = 0; r < R; r++) c[u][r][0] = c[u][r][1] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + U <= K; k += U)
    for (int u = 0; u < U; u++) {
      __m256 b0, b1;
      load_row(f16, b + (k + u) * WBF16_NR, &b0, &b1);
      for (int r = 0; r < R; r++) {
        __m256 av = _mm256_broadcast_ss(A + r * lda + k + u);
        c[u][r][0] = _mm256_fmadd_ps(av, b0, c[u][r][0]);
        c[u][r][1] = _mm256_fmadd_ps(av, b1, c[u][r][1]);
      }
    }
  for (; k < K; k++) {
    __m256 b0, b1;
    load_row(f16, b + k * WBF16_NR, &b0, &b1);
    for (int r = 0; r < R; r++) {
      __m256 av = _mm256_broadcast_ss(A + r * lda + k);
      c[0][r][0] = _mm256_fmadd_ps(av, b0, c[0][r][0]);
      c[0][r][1] = _mm256_fmadd_ps(av, b1, c[0][r][1]);
    }
  }
  for (int r = 0; r < R; r++) {
    if (U > 1) {
      c[0][r][0] = _mm256_add_ps(c[0][r][0], c[1][r][0]);
      c[0][r][1] = _mm256_add_ps(c[0][r][1], c[1][r][1]);
    }
    _mm256_storeu_ps(acc[r], c[0][r][0]);
    _mm256_storeu_ps(acc[r] + 8, c[0][r][1]);
  }
}

WB_INLINE void panel_rows(const bool f16, int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                          float acc[6][WBF16_NR]) {
  switch (rows) {
    case 1: rows_panel(f16, 1, 2, K, A, lda, panel, acc); return;
    case 2: rows_panel(f16, 2, 2, K, A, lda, panel, acc); return;
    case 3: rows_panel(f16, 3, 2, K, A, lda, panel, acc); return;
    case 4: rows_panel(f16, 4, 1, K, A, lda, panel, acc); return;
    case 5: rows_panel(f16, 5, 1, K, A, lda, panel, acc); return;
    case 6: rows_panel(f16, 6, 1, K, A, lda, panel, acc); return;
    default: return;
  }
}

WB_TARGET void wbf16_panel_avx2(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                                float acc[6][WBF16_NR]) {
  panel_rows(false, rows, K, A, lda, panel, acc);
}

WB_TARGET void wf16_panel_avx2(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                               float acc[6][WBF16_NR]) {
  panel_rows(true, rows, K, A, lda, panel, acc);
}
#endif
