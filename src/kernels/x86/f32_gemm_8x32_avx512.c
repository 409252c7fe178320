/* AVX-512 GEMM micro-kernel: an 8 x 32 tile of C in 16 zmm accumulators.
 * Per k: two 16-float loads of the packed B row, 8 broadcasts of packed A,
 * 16 FMAs -- enough independent chains for two FMA pipes of latency 4.
 * On the Zen 5 this was tuned on, 8x32, 12x32, 14x32 and 6x64 ran within
 * ~2% of each other from 256^3 up; 8x32 was ahead at 64-128 (less work
 * wasted on row edges: 8 divides the usual sizes) and it is the tile of the
 * direct kernel too.  16x16 was ~8% behind. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

#define MR 8
#define NV 2 /* zmm vectors per row: NR = 32 */

/* One step of K: two vectors of the B row against 8 broadcasts of A. */
#define TILE_8X32_STEP(k)                                                              \
  do {                                                                                 \
    __m512 bv[NV];                                                                     \
    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + 16 * v); \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                            \
      __m512 ai = _mm512_set1_ps(row[i][(k) * ks]);                                    \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]); \
    }                                                                                  \
    b += 16 * NV;                                                                      \
  } while (0)

/* The tile over K: row i's value at step k is row[i][k * ks] (packed A:
 * row[i] = a + i, ks = MR; A in place: row[i] = a + i * lda, ks = 1). */
AVX512_INLINE void tile_8x32(int64_t kc, const float *const row[MR], const int64_t ks, const float *restrict b,
                             float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st_arg) {
  /* A local copy: stores to C cannot alias it, so its fields stay in
   * registers through the tile store. */
  const gemm_store st_copy = *st_arg, *st = &st_copy;
  /* C rows are ldc apart (often a power of two, so they share L1 sets):
   * start fetching them now, they are needed after the K loop. */
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + 16 * NV - 1), _MM_HINT_T0);
  }
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
  const char *pf = (const char *)st->pf;
  int64_t npf = pf ? st->pf_lines : 0;
  /* the steps that also prefetch a line (spread: a burst stalls on fill
   * buffers), then the rest, unrolled by 2: the loop's own counter, compare
   * and branch then cost half as many issue slots beside the FMAs */
  if (npf > kc) npf = kc;
  int64_t k = 0;
  for (; k < npf; k++) {
    _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
    TILE_8X32_STEP(k);
  }
#pragma GCC unroll 2
  for (; k < kc; k++) {
    TILE_8X32_STEP(k);
  }
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) m[v] = avx512_mask(nr - 16 * v);
  avx512_store_8x32(acc, c, ldc, mr, m, st);
}

SMELT_TARGET_AVX512
void f32_gemm_8x32_avx512(int64_t kc, const float *restrict a, const float *restrict b,
                          float *restrict c, int64_t ldc, int mr, int nr,
                          const gemm_store *st) {
  const float *row[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) row[i] = a + i;
  tile_8x32(kc, row, MR, b, c, ldc, mr, nr, st);
}

/* A read where it lies; rows past mr repeat row 0 (never stored). */
SMELT_TARGET_AVX512
void f32_gemm_8x32_ia_avx512(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                             float *restrict c, int64_t ldc, int mr, int nr, const gemm_store *st) {
  const float *row[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) row[i] = a + (i < mr ? i : 0) * lda;
  tile_8x32(kc, row, 1, b, c, ldc, mr, nr, st);
}
#endif
