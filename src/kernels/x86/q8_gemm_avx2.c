/* AVX2 tile of the int8 GEMM (kernels/qgemm.h): up to 6 rows x 16 columns,
 * int32 accumulators in 12 ymm registers.  Per pair of k, a row's two
 * quantized values are broadcast as one 32-bit lane and vpmaddwd multiplies
 * them with a panel's 8 columns x 2 values: two exact products summed per
 * lane, added to the accumulator (no 16-bit saturation). */
#include "kernels/qgemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <string.h>

#define Q8_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX2

Q8_INLINE __m256i pair_of(const int16_t *q) {
  int32_t v;
  memcpy(&v, q, sizeof v);
  return _mm256_set1_epi32(v);
}

Q8_INLINE void tile(const int R, const int P, const int16_t *qa, int64_t lq, const int16_t *p0,
                    const int16_t *p1, int64_t pairs, int32_t acc[QGEMM_MR][2 * QGEMM_NR]) {
  __m256i c[QGEMM_MR][2];
  for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < pairs; q++) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(p0 + q * 2 * QGEMM_NR));
    __m256i b1 = P > 1 ? _mm256_loadu_si256((const __m256i *)(p1 + q * 2 * QGEMM_NR)) : b0;
    for (int r = 0; r < R; r++) {
      __m256i a = pair_of(qa + r * lq + 2 * q);
      c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(a, b0));
      if (P > 1) c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(a, b1));
    }
  }
  for (int r = 0; r < R; r++) {
    _mm256_storeu_si256((__m256i *)acc[r], c[r][0]);
    if (P > 1) _mm256_storeu_si256((__m256i *)(acc[r] + QGEMM_NR), c[r][1]);
  }
}

#define TILE_CASE(R)                                     \
  case R:                                                \
    if (panels > 1) tile(R, 2, qa, lq, p0, p1, pairs, acc); \
    else tile(R, 1, qa, lq, p0, p1, pairs, acc);           \
    return;

SMELT_TARGET_AVX2 void qgemm_tile_avx2(int rows, int panels, const int16_t *qa, int64_t lq, const int16_t *p0,
                                       const int16_t *p1, int64_t pairs, int32_t acc[QGEMM_MR][2 * QGEMM_NR]) {
  switch (rows) {
    TILE_CASE(1)
    TILE_CASE(2)
    TILE_CASE(3)
    TILE_CASE(4)
    TILE_CASE(5)
    TILE_CASE(6)
  default: return;
  }
}
#endif
