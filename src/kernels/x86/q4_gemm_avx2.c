/* AVX2 kernel of the int4 weight GEMM (kernels/q4gemm.h): one row of int8
 * activations against one 16-column panel.
 *
 * Per group of 32 k and half panel (8 columns), four 32-byte chunks each
 * hold 8 columns x 4 k in the low nibbles and the next 4 k in the high
 * nibbles: an and with 0x0f and a 16-bit shift by 4 (then the and) give two
 * u8 vectors, each multiplied by the row's 4 matching int8 activations
 * broadcast to every 32-bit lane (vpmaddubsw: u8 x s8, pairs summed into
 * int16).  The eight products of a group are summed in int16 (at most
 * 30480: no saturation), widened to int32 per column with vpmaddwd, the
 * offset (8 * sum of the row's codes; asymmetric: nothing) taken off,
 * converted to fp32 and accumulated times scale x da (asymmetric: plus m x
 * da x sum).  The weights are read as one stream, 320 (384) bytes a group. */
#include "kernels/q4gemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <string.h>

#define Q4_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX2

Q4_INLINE __m256i dword_of(const int8_t *q) {
  int32_t v;
  memcpy(&v, q, sizeof v);
  return _mm256_set1_epi32(v);
}

/* sum over the chunk's 8 k of codes x activations, as 16 int16 pairs */
Q4_INLINE __m256i chunk_dot(__m256i v, __m256i lo, __m256i hi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256i l = _mm256_and_si256(v, m4), h = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  return _mm256_add_epi16(_mm256_maddubs_epi16(l, lo), _mm256_maddubs_epi16(h, hi));
}

Q4_INLINE void panel(const bool asym, int64_t Kg, const q4gemm_row *row, const uint8_t *p, float acc[Q4_NR]) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t gb = asym ? 384 : 320;
  __m256 f0 = _mm256_setzero_ps(), f1 = _mm256_setzero_ps();
  for (int64_t g = 0; g < Kg; g++, p += gb) {
    const int8_t *q = row->q + g * Q4_GROUP;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      __m256i lo = dword_of(q + 8 * c), hi = dword_of(q + 8 * c + 4);
      s0 = _mm256_add_epi16(s0, chunk_dot(_mm256_loadu_si256((const __m256i *)(p + 64 * c)), lo, hi));
      s1 = _mm256_add_epi16(s1, chunk_dot(_mm256_loadu_si256((const __m256i *)(p + 64 * c + 32)), lo, hi));
    }
    __m256i i0 = _mm256_madd_epi16(s0, ones), i1 = _mm256_madd_epi16(s1, ones);
    if (!asym) {
      __m256i off = _mm256_set1_epi32(8 * row->sum[g]);
      i0 = _mm256_sub_epi32(i0, off);
      i1 = _mm256_sub_epi32(i1, off);
    }
    __m256 da = _mm256_set1_ps(row->da[g]);
    const float *sc = (const float *)(p + 256);
    f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(_mm256_loadu_ps(sc), da), f0);
    f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(_mm256_loadu_ps(sc + 8), da), f1);
    if (asym) {
      __m256 ds = _mm256_set1_ps(row->dsum[g]);
      f0 = _mm256_fmadd_ps(_mm256_loadu_ps(sc + 16), ds, f0);
      f1 = _mm256_fmadd_ps(_mm256_loadu_ps(sc + 24), ds, f1);
    }
  }
  _mm256_storeu_ps(acc, f0);
  _mm256_storeu_ps(acc + 8, f1);
}

SMELT_TARGET_AVX2 void q4gemm_panel_avx2(const q4gemm_weights *w, const q4gemm_row *row, const uint8_t *p,
                                         float acc[Q4_NR]) {
  if (w->asym) panel(true, w->Kg, row, p, acc);
  else panel(false, w->Kg, row, p, acc);
}

#endif
