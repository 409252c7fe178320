/* AVX-512 direct micro-kernel for small GEMMs: an 8 x 32 tile of C straight
 * from the caller's A and B (B not transposed), nothing packed.  When all
 * operands sit in L1/L2, packing costs as much as it saves; this is the
 * kernel for that case.  op(A)[i][k] is a[i*rsa + k*csa], so both A layouts
 * work; rows past mr read row mr-1 (in bounds, results dropped). */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

#define MR 8
#define NV 2

SMELT_TARGET_AVX512
void f32_gemm_direct_8x32_avx512(int64_t K, const float *a, int64_t rsa, int64_t csa,
                                 const float *b, int64_t ldb, float *c, int64_t ldc, int mr,
                                 int nr, const gemm_store *st_arg) {
  /* A local copy: stores to C cannot alias it, so its fields stay in
   * registers through the tile store. */
  const gemm_store st_copy = *st_arg, *st = &st_copy;
  const float *ap[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++) ap[i] = a + (i < mr ? i : mr - 1) * rsa;
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) m[v] = avx512_mask(nr - 16 * v);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0, ka = 0; k < K; k++, ka += csa, b += ldb) {
    /* Rows of B (and of A when transposed) are a stride apart, often a
     * page or more: the hardware prefetchers lag, so fetch 8 rows ahead. */
    _mm_prefetch((const char *)(b + 8 * ldb), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + 8 * ldb + 16), _MM_HINT_T0);
    _mm_prefetch((const char *)(ap[0] + ka + 8 * csa), _MM_HINT_T0);
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = _mm512_maskz_loadu_ps(m[v], b + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      __m512 ai = _mm512_set1_ps(ap[i][ka]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  avx512_store_8x32(acc, c, ldc, mr, m, st);
}
#endif
