/* AVX2 GEMM micro-kernel: a 6 x 16 tile of C in 12 ymm accumulators (the
 * classic Haswell shape: 12 accumulators + 2 B vectors + 1 broadcast fit the
 * 16 registers).  Edge tiles go through a temp tile. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

#define MR 6
#define NR 16

SMELT_TARGET_AVX2
void f32_gemm_6x16_avx2(int64_t kc, const float *restrict a, const float *restrict b,
                        float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st_arg) {
  /* A local copy: stores to C cannot alias it, so its fields stay in
   * registers through the tile store. */
  const gemm_store st_copy = *st_arg, *st = &st_copy;
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += MR;
    b += NR;
  }
  avx2_store_6x16(acc, c, ldc, mr, nr, st);
}
#endif
