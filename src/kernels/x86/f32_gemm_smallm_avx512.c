/* AVX-512 small-M GEMM (M <= 16: decode steps, batch-1 heads).  Nothing is
 * packed: B is streamed once per row group and A read in place.
 *   B not transposed: vectors run along N; a group of R rows keeps R x W zmm
 *     accumulators (W vectors of 16 columns) over the whole K loop.
 *   B transposed (N x K, the usual Linear weight): each C element is a dot
 *     product of contiguous rows; vectors run along K and are summed at the
 *     end.  (A transposed too is left to the packed path.) */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

/* Rows [m0, m0+R) x columns [n0, n1) of C, B not transposed. */
AVX512_INLINE void rows_nn(const int R, const int W, const gemm_params *p, const gemm_store *st,
                           int64_t m0, int64_t n0, int64_t n1) {
  const int64_t sam = p->trans_a ? 1 : p->lda, sak = p->trans_a ? p->lda : 1;
  const float *a0 = p->A + m0 * sam;
  for (int64_t n = n0; n < n1; n += 16 * W) {
    __mmask16 m[8];
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) m[w] = avx512_mask(n1 - n - 16 * w);
    __m512 acc[16][8];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int w = 0; w < W; w++) acc[r][w] = _mm512_setzero_ps();
    const float *b = p->B + n;
    const float *a = a0;
    for (int64_t k = 0; k < p->K; k++, b += p->ldb, a += sak) {
      __m512 bv[8];
#pragma GCC unroll 8
      for (int w = 0; w < W; w++) bv[w] = _mm512_maskz_loadu_ps(m[w], b + 16 * w);
#pragma GCC unroll 16
      for (int r = 0; r < R; r++) {
        __m512 ar = _mm512_set1_ps(a[r * sam]);
#pragma GCC unroll 8
        for (int w = 0; w < W; w++) acc[r][w] = _mm512_fmadd_ps(ar, bv[w], acc[r][w]);
      }
    }
    const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias + n : NULL;
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
      float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
#pragma GCC unroll 8
      for (int w = 0; w < W; w++)
        avx512_store(acc[r][w], p->C + (m0 + r) * p->ldc + n + 16 * w, m[w], st,
                     cb ? cb + 16 * w : NULL, rb);
    }
  }
}

/* Rows [m0, m0+R) x columns [n0, n1) of C in groups of CN columns, B
 * transposed: C[m][n] = dot(A row m, B row n), K along the vectors. */
AVX512_INLINE void rows_nt(const int R, const int CN, const gemm_params *p, const gemm_store *st,
                           int64_t m0, int64_t n0, int64_t n1) {
  const int64_t K = p->K;
  for (int64_t n = n0; n < n1; n += CN) {
    int cols = (int)(n1 - n < CN ? n1 - n : CN);
    const float *b[8];
#pragma GCC unroll 8
    for (int j = 0; j < CN; j++) b[j] = p->B + (n + (j < cols ? j : 0)) * p->ldb;
    __m512 acc[4][8];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) acc[r][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
      __mmask16 km = avx512_mask(K - k);
      __m512 av[4];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) av[r] = _mm512_maskz_loadu_ps(km, p->A + (m0 + r) * p->lda + k);
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) {
        __m512 bv = _mm512_maskz_loadu_ps(km, b[j] + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(av[r], bv, acc[r][j]);
      }
    }
    __mmask16 cm = avx512_mask(cols);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      float sums[16] = {0};
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) sums[j] = _mm512_reduce_add_ps(acc[r][j]);
      float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
      avx512_store(_mm512_loadu_ps(sums), p->C + (m0 + r) * p->ldc + n, cm, st,
                   st->bias_kind == GEMM_BIAS_COL ? st->bias + n : NULL, rb);
    }
  }
}

/* Register budget (32 zmm): R*W accumulators + W B vectors + 1 broadcast. */
SMELT_TARGET_AVX512 static void group_nn(int R, const gemm_params *p, const gemm_store *st,
                                         int64_t m0, int64_t n0, int64_t n1) {
  switch (R) {
#define NN(r, w) \
  case r: rows_nn(r, w, p, st, m0, n0, n1); break;
    NN(1, 8) NN(2, 4) NN(3, 4) NN(4, 4) NN(5, 4) NN(6, 4) NN(7, 2) NN(8, 2)
    NN(9, 2) NN(10, 2) NN(11, 2) NN(12, 2) NN(13, 2) NN(14, 2) NN(15, 1) NN(16, 1)
#undef NN
    default: break;
  }
}

SMELT_TARGET_AVX512 static void group_nt(int R, const gemm_params *p, const gemm_store *st,
                                         int64_t m0, int64_t n0, int64_t n1) {
  switch (R) {
    case 1: rows_nt(1, 8, p, st, m0, n0, n1); break;
    case 2: rows_nt(2, 4, p, st, m0, n0, n1); break;
    case 3: rows_nt(3, 4, p, st, m0, n0, n1); break;
    case 4: rows_nt(4, 4, p, st, m0, n0, n1); break;
    default: break;
  }
}

SMELT_TARGET_AVX512
void f32_gemm_smallm_avx512(const gemm_params *p, int64_t n0, int64_t n1) {
  const gemm_epilogue *ep = &p->epilogue;
  gemm_store st = {p->alpha, p->beta, ep->bias_kind, ep->bias, ep->act, ep->clip_lo, ep->clip_hi};
  if (!p->trans_b) {
    group_nn((int)p->M, p, &st, 0, n0, n1);
    return;
  }
  for (int64_t m0 = 0; m0 < p->M; m0 += 4) {
    int64_t R = p->M - m0 < 4 ? p->M - m0 : 4;
    group_nt((int)R, p, &st, m0, n0, n1);
  }
}
#endif
