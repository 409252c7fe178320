/* AVX2 tile of the int8 GEMM (kernels/qgemm.h): up to 6 rows x 16 columns,
 * int32 accumulators in 12 ymm registers.  Per pair of k, a row's two
 * quantized values are broadcast as one 32-bit lane and vpmaddwd multiplies
 * them with a panel's 8 columns x 2 values: two exact products summed per
 * lane, added to the accumulator (no 16-bit saturation). */
#include "kernels/qgemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <math.h>
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

SMELT_TARGET_AVX2 void qgemm_quantize_row_avx2(int64_t K, const float *a, int16_t *q, float *scale) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 x = _mm256_loadu_ps(a + k);
    vmax = _mm256_max_ps(vmax, _mm256_and_ps(x, abs_mask));
    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  float m[8], amax = 0.f;
  _mm256_storeu_ps(m, vmax);
  for (int i = 0; i < 8; i++) amax = m[i] > amax ? m[i] : amax;
  if (!_mm256_testz_ps(vnan, vnan)) amax = NAN;
  for (int64_t t = k; t < K; t++) {
    float v = a[t] < 0 ? -a[t] : a[t];
    amax = v > amax || v != v ? v : amax;
  }
  float inv;
  *scale = qgemm_scale_of(amax, &inv);
  __m256 vinv = _mm256_set1_ps(inv);
  for (k = 0; k + 16 <= K; k += 16) { /* |x * inv| <= 127: no clamp; cvtps rounds to nearest even */
    __m256i lo = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a + k), vinv));
    __m256i hi = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a + k + 8), vinv));
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256((__m256i *)(q + k), p);
  }
  for (; k < K; k++) {
    float x = a[k] * inv;
    q[k] = (int16_t)_mm_cvtss_si32(_mm_set_ss(x)); /* the same rounding as above */
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
