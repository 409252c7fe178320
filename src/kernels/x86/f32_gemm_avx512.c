/* AVX-512 GEMM micro-kernel: a 14 x 32 tile of C in 28 zmm accumulators.
 * Per k: two 16-float loads of the packed B row, 14 broadcasts of packed A
 * (folded into the FMAs as {1to16} memory operands), 28 FMAs.  14 x 32 keeps
 * 28 of the 32 registers busy and enough FMAs in flight to cover the FMA
 * latency on both FMA pipes; it measured best among 6x64, 8x32, 12x32 and
 * 14x32 on Zen 5 (see bench/bench_gemm.c). */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

#define MR 14
#define NV 2 /* zmm vectors per row: NR = 32 */

SMELT_TARGET_AVX512
void f32_gemm_14x32_avx512(int64_t kc, const float *restrict a, const float *restrict b,
                           float *restrict c, int64_t ldc, int mr, int nr,
                           const gemm_store *st) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
    a += MR;
    b += 16 * NV;
  }
  __mmask16 m[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) m[v] = avx512_mask(nr - 16 * v);
  const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias : NULL;
#pragma GCC unroll 16
  for (int i = 0; i < MR; i++) {
    if (i >= mr) break;
    float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[i] : 0.f;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++)
      avx512_store(acc[i][v], c + i * ldc + 16 * v, m[v], st, cb + 16 * v, rb);
  }
}
#endif
