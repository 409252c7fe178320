/* AVX2 tile of the exact integer matrix product (kernels/igemm.h): up to
 * IGEMM_MR rows x 2 * IGEMM_NR int32 columns (two adjacent panels), two ymm
 * accumulators per row.
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

/* R rows x P panels (P = 1 or 2: 8 or 16 columns) */
IG_INLINE void rows(const int R, const int P, int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p,
                    int64_t pstride, __m256i c[IGEMM_MR][2]) {
  for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t kp = 0; kp < kpairs; kp++) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(p + kp * IGEMM_NR * 2));
    __m256i b1 = P > 1 ? _mm256_loadu_si256((const __m256i *)(p + pstride + kp * IGEMM_NR * 2)) : b0;
    for (int r = 0; r < R; r++) {
      __m256i av = pair_of(a + r * lda2 + 2 * kp);
      c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(av, b0));
      if (P > 1) c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(av, b1));
    }
  }
}

IG_INLINE void store(__m256i v, int32_t *c, int nr) {
  if (nr >= IGEMM_NR) {
    _mm256_storeu_si256((__m256i *)c, v);
  } else if (nr > 0) {
    int32_t t[IGEMM_NR];
    _mm256_storeu_si256((__m256i *)t, v);
    memcpy(c, t, sizeof(int32_t) * (size_t)nr);
  }
}

SMELT_TARGET_AVX2
void igemm_tile_avx2(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c, int64_t ldc,
                     int mr, int nr) {
  __m256i acc[IGEMM_MR][2];
  int64_t ps = kpairs * IGEMM_NR * 2; /* the next panel */
  bool two = nr > IGEMM_NR;
  switch (mr * 2 + two) {
    case 9: rows(4, 2, kpairs, a, lda2, p, ps, acc); break;
    case 8: rows(4, 1, kpairs, a, lda2, p, ps, acc); break;
    case 7: rows(3, 2, kpairs, a, lda2, p, ps, acc); break;
    case 6: rows(3, 1, kpairs, a, lda2, p, ps, acc); break;
    case 5: rows(2, 2, kpairs, a, lda2, p, ps, acc); break;
    case 4: rows(2, 1, kpairs, a, lda2, p, ps, acc); break;
    case 3: rows(1, 2, kpairs, a, lda2, p, ps, acc); break;
    default: rows(1, 1, kpairs, a, lda2, p, ps, acc); break;
  }
  for (int r = 0; r < mr; r++) {
    store(acc[r][0], c + r * ldc, nr);
    if (two) store(acc[r][1], c + r * ldc + IGEMM_NR, nr - IGEMM_NR);
  }
}
#endif
