/* Helpers shared by the AVX-512 GEMM kernels: edge masks and the tile store
 * that applies alpha, beta and the epilogue while the tile is in registers.
 * Every function carries the AVX-512 target attribute, so this header may
 * only be included by files whose callers check isa_detect() first. */
#ifndef SMELT_KERNELS_X86_AVX512_TILE_H
#define SMELT_KERNELS_X86_AVX512_TILE_H

#include <immintrin.h>

#include "kernels/gemm_kernels.h"

#define AVX512_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX512

/* Lanes [0, n) of a 16-lane vector, n clamped to [0, 16]. */
AVX512_INLINE __mmask16 avx512_mask(int64_t n) {
  if (n >= 16) return (__mmask16)0xffff;
  if (n <= 0) return 0;
  return (__mmask16)((1u << n) - 1);
}

/* 16 x 16 words transposed in registers, r[i] lane k <-> r[k] lane i
 * (32-bit unpacks, 64-bit unpacks, then the 128-bit lanes twice); any
 * 32-bit data, through _mm512_castsi512_ps.  Unrolled, so the 16 vectors
 * stay in registers (left to gcc, the bf16 GEMM's A packing spilled them). */
AVX512_INLINE void avx512_transpose16(__m512 *r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) { /* 4 x 4 blocks within each 128-bit lane */
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) { /* then the 128-bit lanes across the four groups of rows */
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88), t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88), t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88), r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88), r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

/* act(alpha*acc + beta*c + bias) for 16 lanes of one row; masked-off lanes
 * of c are neither read nor written.  row_bias is bias[row] for ROW bias. */
AVX512_INLINE void avx512_store(__m512 acc, float *c, __mmask16 m, const gemm_store *st,
                                const float *col_bias, float row_bias) {
  __m512 x = _mm512_mul_ps(acc, _mm512_set1_ps(st->alpha));
  if (st->beta == 1.f) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, c));
  else if (st->beta != 0.f)
    x = _mm512_fmadd_ps(_mm512_set1_ps(st->beta), _mm512_maskz_loadu_ps(m, c), x);
  if (st->bias_kind == GEMM_BIAS_COL) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, col_bias));
  else if (st->bias_kind == GEMM_BIAS_ROW) x = _mm512_add_ps(x, _mm512_set1_ps(row_bias));
  /* max(lo, x) / min(hi, x): x86 returns the second operand when one is NaN,
   * so NaN passes through like the scalar path. */
  if (st->act == GEMM_ACT_RELU) x = _mm512_max_ps(_mm512_setzero_ps(), x);
  else if (st->act == GEMM_ACT_CLIP)
    x = _mm512_min_ps(_mm512_set1_ps(st->hi), _mm512_max_ps(_mm512_set1_ps(st->lo), x));
  _mm512_mask_storeu_ps(c, m, x);
}

/* alpha * acc + bias (+ c when accumulating): mul, add, add, no fma, the
 * order of the bf16 compute GEMM's scalar kernel (kernels/bf16dp.c), so its
 * AVX-512 tile and AMX driver store what it computes.  Masked-off lanes of c
 * are neither read nor written. */
AVX512_INLINE void avx512_store_scaled(__m512 acc, __m512 alpha, __m512 bias, bool accumulate, float *c,
                                       __mmask16 m) {
  __m512 v = _mm512_add_ps(_mm512_mul_ps(alpha, acc), bias);
  if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), v);
  _mm512_mask_storeu_ps(c, m, v);
}

/* Rows [0, mr) of the 8 x 32 tile of the AVX-512 GEMM kernels,
 * acc[row][vector], stored with the epilogue; m[v] masks vector v's
 * columns.  Column bias from st->bias[0], row bias st->bias[row]. */
AVX512_INLINE void avx512_store_8x32(__m512 acc[8][2], float *c, int64_t ldc, int mr,
                                     const __mmask16 m[2], const gemm_store *st) {
  const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias : NULL;
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    if (i >= mr) break;
    float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[i] : 0.f;
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++)
      avx512_store(acc[i][v], c + i * ldc + 16 * v, m[v], st, cb ? cb + 16 * v : NULL, rb);
  }
}

#endif
