/* Helpers shared by the AVX2 GEMM kernels: the full-tile store that applies
 * alpha, beta and the epilogue, and the temp-tile detour for edge tiles
 * (masked stores are slow on AMD under AVX2).  Every function carries the
 * AVX2 target attribute: include only from files whose callers check
 * isa_detect() first. */
#ifndef SMELT_KERNELS_X86_AVX2_TILE_H
#define SMELT_KERNELS_X86_AVX2_TILE_H

#include <immintrin.h>
#include <string.h>

#include "kernels/gemm_kernels.h"

#define AVX2_INLINE static inline __attribute__((always_inline)) SMELT_TARGET_AVX2

/* act(alpha*acc + beta*c + bias) on 8 lanes.  max(lo, x) / min(hi, x): x86
 * returns the second operand when one is NaN, so NaN passes through. */
AVX2_INLINE void avx2_store(__m256 acc, float *c, const gemm_store *st, const float *col_bias,
                            float row_bias) {
  __m256 x = _mm256_mul_ps(acc, _mm256_set1_ps(st->alpha));
  if (st->beta == 1.f) x = _mm256_add_ps(x, _mm256_loadu_ps(c));
  else if (st->beta != 0.f) x = _mm256_fmadd_ps(_mm256_set1_ps(st->beta), _mm256_loadu_ps(c), x);
  if (st->bias_kind == GEMM_BIAS_COL) x = _mm256_add_ps(x, _mm256_loadu_ps(col_bias));
  else if (st->bias_kind == GEMM_BIAS_ROW) x = _mm256_add_ps(x, _mm256_set1_ps(row_bias));
  if (st->act == GEMM_ACT_RELU) x = _mm256_max_ps(_mm256_setzero_ps(), x);
  else if (st->act == GEMM_ACT_CLIP)
    x = _mm256_min_ps(_mm256_set1_ps(st->hi), _mm256_max_ps(_mm256_set1_ps(st->lo), x));
  _mm256_storeu_ps(c, x);
}

/* An edge tile goes through a full-size temp: the caller fills the temp's
 * C (when beta reads it) and bias from the real ones, stores the full tile
 * there, then copies the mr x nr corner back. */
typedef struct avx2_edge {
  float c[16 * 32];
  float col_bias[32];
  float row_bias[16];
  gemm_store st;
} avx2_edge;

AVX2_INLINE void avx2_edge_begin(avx2_edge *e, int MR, int NR, const float *c, int64_t ldc,
                                 int mr, int nr, const gemm_store *st) {
  e->st = *st;
  memset(e->c, 0, sizeof(float) * (size_t)(MR * NR));
  if (st->beta != 0.f)
    for (int i = 0; i < mr; i++) memcpy(e->c + i * NR, c + i * ldc, sizeof(float) * (size_t)nr);
  if (st->bias_kind == GEMM_BIAS_COL) {
    memset(e->col_bias, 0, sizeof e->col_bias);
    memcpy(e->col_bias, st->bias, sizeof(float) * (size_t)nr);
    e->st.bias = e->col_bias;
  } else if (st->bias_kind == GEMM_BIAS_ROW) {
    memset(e->row_bias, 0, sizeof e->row_bias);
    memcpy(e->row_bias, st->bias, sizeof(float) * (size_t)mr);
    e->st.bias = e->row_bias;
  }
}

AVX2_INLINE void avx2_edge_end(const avx2_edge *e, int NR, float *c, int64_t ldc, int mr, int nr) {
  for (int i = 0; i < mr; i++) memcpy(c + i * ldc, e->c + i * NR, sizeof(float) * (size_t)nr);
}

/* The 6 x 16 tile of the AVX2 GEMM kernels, acc[row][half], stored whole
 * with the epilogue: column bias from st->bias[0], row bias st->bias[row]. */
AVX2_INLINE void avx2_store_6x16_full(__m256 acc[6][2], float *c, int64_t ldc, const gemm_store *st) {
  const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias : NULL;
#pragma GCC unroll 8
  for (int i = 0; i < 6; i++) {
    float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[i] : 0.f;
    avx2_store(acc[i][0], c + i * ldc, st, cb, rb);
    avx2_store(acc[i][1], c + i * ldc + 8, st, cb ? cb + 8 : NULL, rb);
  }
}

/* Rows [0, mr) x columns [0, nr) of that tile: a full tile straight to c,
 * an edge tile through the temp. */
AVX2_INLINE void avx2_store_6x16(__m256 acc[6][2], float *c, int64_t ldc, int mr, int nr,
                                 const gemm_store *st) {
  if (mr == 6 && nr == 16) {
    avx2_store_6x16_full(acc, c, ldc, st);
    return;
  }
  avx2_edge e;
  avx2_edge_begin(&e, 6, 16, c, ldc, mr, nr, st);
  avx2_store_6x16_full(acc, e.c, 16, &e.st);
  avx2_edge_end(&e, 16, c, ldc, mr, nr);
}

/* Lanes [0, n) as a maskload mask, n clamped to [0, 8]. */
AVX2_INLINE __m256i avx2_mask(int64_t n) {
  int v = n < 0 ? 0 : (n > 8 ? 8 : (int)n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif
