/* AVX2 kernels of the int8 GEMM (kernels/qgemm.h).
 *
 * Tile: up to 6 rows x 16 columns, int32 accumulators in 12 ymm registers.
 * Per group of 4 k, a row's 4 quantized bytes (u8, 0..127) are broadcast as
 * one 32-bit lane; vpmaddubsw multiplies them with a panel's 8 columns x 4
 * int8 weights and sums pairs into int16 (at most 2 * 127 * 127: never
 * saturates), vpmaddwd with ones sums the pairs into int32, added to the
 * accumulator.
 *
 * Row quantization: the row's min and max (NaN noticed), then
 * round(x / scale) + zero point with vcvtps2dq (round to nearest even),
 * packed to bytes. */
#include "kernels/qgemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define Q8_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX2

Q8_INLINE __m256i group_of(const uint8_t *q) {
  int32_t v;
  memcpy(&v, q, sizeof v);
  return _mm256_set1_epi32(v);
}

Q8_INLINE void tile(const int R, const int P, const uint8_t *qa, int64_t lq, const int8_t *p0, const int8_t *p1,
                    int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[6][2];
  for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm256_setzero_si256();
  for (int64_t g = 0; g < groups; g++) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(p0 + g * 32));
    __m256i b1 = P > 1 ? _mm256_loadu_si256((const __m256i *)(p1 + g * 32)) : b0;
    for (int r = 0; r < R; r++) {
      __m256i a = group_of(qa + r * lq + 4 * g);
      c[r][0] = _mm256_add_epi32(c[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
      if (P > 1) c[r][1] = _mm256_add_epi32(c[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
    }
  }
  for (int r = 0; r < R; r++) {
    _mm256_storeu_si256((__m256i *)acc[r], c[r][0]);
    if (P > 1) _mm256_storeu_si256((__m256i *)(acc[r] + QGEMM_NR), c[r][1]);
  }
}

#define TILE_CASE(R)                                          \
  case R:                                                     \
    if (panels > 1) tile(R, 2, qa, lq, b, b + pstride, groups, acc); \
    else tile(R, 1, qa, lq, b, b, groups, acc);                      \
    return;

SMELT_TARGET_AVX2 void qgemm_tile_avx2(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                       int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
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

/* Few rows (a decode step's GEMV): x86/q8_gemv_impl.h */
#define Q8_GEMV_INLINE Q8_INLINE
#define Q8_GEMV_MAC(c, a, b) _mm256_add_epi32((c), _mm256_madd_epi16(_mm256_maddubs_epi16((a), (b)), _mm256_set1_epi16(1)))
#include "kernels/x86/q8_gemv_impl.h"

SMELT_TARGET_AVX2 void qgemm_gemv_avx2(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                       int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  (void)panels, (void)pstride;
  switch (rows) {
    case 1: q8_gemv_panel(1, 4, qa, lq, b, groups, acc); return;
    case 2: q8_gemv_panel(2, 2, qa, lq, b, groups, acc); return;
    case 3: q8_gemv_panel(3, 2, qa, lq, b, groups, acc); return;
    case 4: q8_gemv_panel(4, 2, qa, lq, b, groups, acc); return;
    default: return;
  }
}

Q8_INLINE __m256i quant8(const float *a, __m256 inv, __m256i zero) {
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a), inv)), zero);
}

SMELT_TARGET_AVX2 void qgemm_quantize_row_avx2(int64_t K, const float *a, int levels, uint8_t *q, float *scale,
                                               int32_t *zero) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps(), vnan = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 x = _mm256_loadu_ps(a + k);
    vlo = _mm256_min_ps(vlo, x);
    vhi = _mm256_max_ps(vhi, x);
    vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  float l8[8], h8[8], lo = 0.f, hi = 0.f;
  _mm256_storeu_ps(l8, vlo);
  _mm256_storeu_ps(h8, vhi);
  for (int i = 0; i < 8; i++) lo = l8[i] < lo ? l8[i] : lo, hi = h8[i] > hi ? h8[i] : hi;
  bool bad = !_mm256_testz_ps(vnan, vnan);
  for (int64_t t = k; t < K; t++) {
    lo = a[t] < lo ? a[t] : lo;
    hi = a[t] > hi ? a[t] : hi;
    bad |= a[t] != a[t];
  }
  float inv;
  *scale = qgemm_range(bad ? NAN : lo, hi, levels, zero, &inv);
  if (inv == 0.f) { /* all zero, or not finite (scale NaN) */
    memset(q, 0, (size_t)K);
    return;
  }
  /* x * inv + zero lands in [0, levels] (up to rounding at the top:
   * clamped; at 255 by packus's unsigned saturation) */
  __m256 vinv = _mm256_set1_ps(inv);
  __m256i vz = _mm256_set1_epi32(*zero), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (k = 0; k + 32 <= K; k += 32) {
    __m256i w01 = _mm256_packs_epi32(quant8(a + k, vinv, vz), quant8(a + k + 8, vinv, vz));
    __m256i w23 = _mm256_packs_epi32(quant8(a + k + 16, vinv, vz), quant8(a + k + 24, vinv, vz));
    __m256i b = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
    b = _mm256_min_epu8(b, _mm256_set1_epi8((char)levels)); /* rounding may give levels + 1 at the top */
    _mm256_storeu_si256((__m256i *)(q + k), b);
  }
  for (; k < K; k++) {
    int32_t v = _mm_cvtss_si32(_mm_set_ss(a[k] * inv)) + *zero; /* the same rounding as above */
    q[k] = (uint8_t)(v > levels ? levels : v < 0 ? 0 : v);
  }
}
#endif
