/* 8 x 8 blocks of kernels/transpose.h on AVX2: eight rows in, the classic
 * unpacklo/hi (pairs), shuffle (quads) and permute2f128 (halves) rounds,
 * eight rows out.  Each block is read and written as whole 32-byte rows;
 * blocks run down a column strip of 8 source columns so the destination's
 * 8 rows stay in L1 while the source streams. */
#include "kernels/transpose.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86, SMELT_TARGET_AVX2 */

#ifdef SMELT_X86
#include <immintrin.h>

SMELT_TARGET_AVX2
static inline void block8(float *d, int64_t ldd, const float *s, int64_t lds) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds),
         r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds),
         r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
         u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
         u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

SMELT_TARGET_AVX2
void transpose32_avx2(float *d, int64_t ldd, const float *s, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; j += 8)
    for (int64_t i = 0; i < rows; i += 8) block8(d + j * ldd + i, ldd, s + i * lds + j, lds);
}
#endif
