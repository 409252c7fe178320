/* AVX2 GEMM micro-kernel: a 6 x 16 tile of C in 12 ymm accumulators (the
 * classic Haswell shape: 12 accumulators + 2 B vectors + 1 broadcast fit the
 * 16 registers).  Edge tiles go through a temp tile.  A tile of fewer rows
 * (the last row tile when M is not a multiple of 6: M = 32 leaves 2, 128
 * leaves 2, 130 leaves 4) runs a 4- or 2-row loop over the same packed A
 * panel (stride 6), so it costs its rows' FMAs, not a full tile's: at M = 32
 * the full-tile loop computed 36 rows for 32. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

#define MR 6
#define NR 16

/* acc[0..R) += the first R rows of A times the B panel: row i's value at
 * step k is row[i][k * ks] (packed A: row[i] = a + i, ks = MR; A in place:
 * row[i] = a + i * lda, ks = 1). */
AVX2_INLINE void tile_rows(const int R, int64_t kc, const float *const row[MR], const int64_t ks,
                           const float *restrict b, __m256 acc[MR][2]) {
  for (int64_t k = 0; k < kc; k++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
      __m256 ai = _mm256_broadcast_ss(row[i] + k * ks);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    b += NR;
  }
}

AVX2_INLINE void tile_6x16(int64_t kc, const float *const row[MR], const int64_t ks, const float *restrict b,
                           float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st_arg) {
  /* A local copy: stores to C cannot alias it, so its fields stay in
   * registers through the tile store. */
  const gemm_store st_copy = *st_arg, *st = &st_copy;
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  if (mr > 4) tile_rows(6, kc, row, ks, b, acc);
  else if (mr > 2) tile_rows(4, kc, row, ks, b, acc);
  else tile_rows(2, kc, row, ks, b, acc);
  avx2_store_6x16(acc, c, ldc, mr, nr, st);
}

SMELT_TARGET_AVX2
void f32_gemm_6x16_avx2(int64_t kc, const float *restrict a, const float *restrict b,
                        float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st) {
  const float *row[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) row[i] = a + i;
  tile_6x16(kc, row, MR, b, c, ldc, mr, nr, st);
}

/* A read where it lies; rows past mr repeat row 0 (never stored). */
SMELT_TARGET_AVX2
void f32_gemm_6x16_ia_avx2(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                           float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st) {
  const float *row[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) row[i] = a + (i < mr ? i : 0) * lda;
  tile_6x16(kc, row, 1, b, c, ldc, mr, nr, st);
}
#endif
