/* AVX2 tile of the exact integer matrix product (kernels/igemm.h): up to
 * IGEMM_MR rows x IGEMM_NR int32 columns, one ymm accumulator per row.
 * Per pair of k, a row's two int16 values are broadcast as one 32-bit
 * lane and vpmaddwd multiplies them with the panel's 8 columns x 2 k and
 * sums each column's pair into int32 (exact: two products of at most
 * 255 * 255); vpaddd accumulates modulo 2^32. */
#include "kernels/igemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <string.h>

#define IG_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX2

IG_INLINE __m256i pair_of(const int16_t *a) {
  int32_t v;
  memcpy(&v, a, sizeof v);
  return _mm256_set1_epi32(v);
}

IG_INLINE void rows(const int R, int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, __m256i *c) {
  for (int r = 0; r < R; r++) c[r] = _mm256_setzero_si256();
  for (int64_t kp = 0; kp < kpairs; kp++) {
    __m256i b = _mm256_loadu_si256((const __m256i *)(p + kp * IGEMM_NR * 2));
    for (int r = 0; r < R; r++) c[r] = _mm256_add_epi32(c[r], _mm256_madd_epi16(pair_of(a + r * lda2 + 2 * kp), b));
  }
}

SMELT_TARGET_AVX2
void igemm_tile_avx2(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c, int64_t ldc,
                     int mr, int nr) {
  __m256i acc[IGEMM_MR];
  switch (mr) {
    case 4: rows(4, kpairs, a, lda2, p, acc); break;
    case 3: rows(3, kpairs, a, lda2, p, acc); break;
    case 2: rows(2, kpairs, a, lda2, p, acc); break;
    default: rows(1, kpairs, a, lda2, p, acc); break;
  }
  for (int r = 0; r < mr; r++) {
    if (nr == IGEMM_NR) {
      _mm256_storeu_si256((__m256i *)(c + r * ldc), acc[r]);
    } else {
      int32_t t[IGEMM_NR];
      _mm256_storeu_si256((__m256i *)t, acc[r]);
      memcpy(c + r * ldc, t, sizeof(int32_t) * (size_t)nr);
    }
  }
}
#endif
