/* AVX2 direct micro-kernel for small GEMMs: a 6 x 16 tile of C straight from
 * the caller's A and B (B not transposed), nothing packed; the AVX2 twin of
 * f32_gemm_direct_avx512.c.  Edge columns are loaded with maskload and the
 * tile stored through a temp (avx2_tile.h). */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

#define MR 6
#define NR 16

SMELT_TARGET_AVX2
void f32_gemm_direct_6x16_avx2(int64_t K, const float *a, int64_t rsa, int64_t csa,
                               const float *b, int64_t ldb, float *c, int64_t ldc, int mr, int nr,
                               const gemm_store *st_arg) {
  /* A local copy: stores to C cannot alias it, so its fields stay in
   * registers through the tile store. */
  const gemm_store st_copy = *st_arg, *st = &st_copy;
  const float *ap[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) ap[i] = a + (i < mr ? i : mr - 1) * rsa;
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  if (nr == NR) {
    for (int64_t k = 0, ka = 0; k < K; k++, ka += csa, b += ldb) {
      __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
      for (int i = 0; i < MR; i++) {
        __m256 ai = _mm256_broadcast_ss(ap[i] + ka);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
  } else {
    __m256i m0 = avx2_mask(nr), m1 = avx2_mask(nr - 8);
    for (int64_t k = 0, ka = 0; k < K; k++, ka += csa, b += ldb) {
      __m256 b0 = _mm256_maskload_ps(b, m0), b1 = _mm256_maskload_ps(b + 8, m1);
#pragma GCC unroll 8
      for (int i = 0; i < MR; i++) {
        __m256 ai = _mm256_broadcast_ss(ap[i] + ka);
        acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
      }
    }
  }
  avx2_store_6x16(acc, c, ldc, mr, nr, st);
}
#endif
