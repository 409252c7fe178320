/* AVX2 loops of DynamicQuantizeLinear (kernels/dynq.h).  vminps/vmaxps
 * return their second operand when either is NaN, so with the running
 * value second a NaN input leaves it as it was (the scalar loop's
 * comparisons do the same); vroundps rounds to nearest even as nearbyintf
 * does in the default rounding mode; a NaN quotient is masked to 0. */
#include "kernels/dynq.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <math.h>

SMELT_TARGET_AVX2
void dynq_range_avx2(int64_t n, const float *x, float *lo, float *hi) {
  __m256 mn = _mm256_setzero_ps(), mx = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    mn = _mm256_min_ps(v, mn);
    mx = _mm256_max_ps(v, mx);
  }
  float a[8], b[8];
  _mm256_storeu_ps(a, mn);
  _mm256_storeu_ps(b, mx);
  float l = 0, h = 0;
  for (int k = 0; k < 8; k++) {
    if (a[k] < l) l = a[k];
    if (b[k] > h) h = b[k];
  }
  for (; i < n; i++) {
    if (x[i] > h) h = x[i];
    if (x[i] < l) l = x[i];
  }
  *lo = l, *hi = h;
}

SMELT_TARGET_AVX2
void dynq_apply_avx2(int64_t n, const float *x, float scale, float zp, bool sgn, uint8_t *y) {
  const float lo = sgn ? -128.f : 0.f, hi = sgn ? 127.f : 255.f;
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 v = _mm256_add_ps(q, z);
    __m256 ok = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
    v = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(v, vlo), vhi), ok); /* NaN -> 0 */
    __m256i w = _mm256_cvtps_epi32(v); /* integral already */
    __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    p = sgn ? _mm_packs_epi16(p, p) : _mm_packus_epi16(p, p);
    _mm_storel_epi64((__m128i *)(y + i), p);
  }
  for (; i < n; i++) y[i] = dynq_q1(x[i], scale, zp, sgn);
}

SMELT_TARGET_AVX2
void dynq_dequant_avx2(int64_t n, const uint8_t *x, bool sgn, float zp, float scale, float *y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(x + i));
    __m256i w = sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w), z), s));
  }
  for (; i < n; i++) y[i] = dynq_dq1(x[i], sgn, zp, scale);
}
#endif
