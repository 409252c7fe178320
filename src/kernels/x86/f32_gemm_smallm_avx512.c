/* AVX-512 small-M GEMM (decode steps, batch-1 heads).  Nothing is packed:
 * B is streamed once per row group and A read in place.
 *   B not transposed (M <= 16): vectors run along N; a group of R rows keeps
 *     R x W zmm accumulators (W vectors of 16 columns) over the whole K loop.
 *   B transposed (N x K, the usual Linear weight; M <= 4, A not transposed):
 *     each C element is a dot product of contiguous rows; vectors run along
 *     K and are summed at the end.  Larger M amortizes packing B, so those
 *     shapes take the packed path. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

/* Rows [m0, m0+R) x columns [n, n + 16*W) of C, B not transposed.  Masked
 * blocks (the N tail) have W == 1 and `cols` < 16 live lanes; full blocks
 * use plain loads, and no masks stay live across the K loop. */
AVX512_INLINE void block_nn(const int R, const int W, const bool masked, const gemm_params *p,
                            const gemm_store *st, int64_t m0, int64_t n, int64_t cols) {
  const int64_t sam = p->trans_a ? 1 : p->lda, sak = p->trans_a ? p->lda : 1;
  const __mmask16 mk = masked ? avx512_mask(cols) : (__mmask16)0xffff;
  __m512 acc[16][8];
#pragma GCC unroll 16
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) acc[r][w] = _mm512_setzero_ps();
  const float *b = p->B + n, *a = p->A + m0 * sam;
  for (int64_t k = 0; k < p->K; k++, b += p->ldb, a += sak) {
    __m512 bv[8];
#pragma GCC unroll 8
    for (int w = 0; w < W; w++)
      bv[w] = masked ? _mm512_maskz_loadu_ps(mk, b) : _mm512_loadu_ps(b + 16 * w);
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
      avx512_store(acc[r][w], p->C + (m0 + r) * p->ldc + n + 16 * w, mk, st,
                   cb ? cb + 16 * w : NULL, rb);
  }
}

/* Rows [m0, m0+R) x columns [n0, n1): W-vector blocks, then 16-column ones,
 * then a masked tail. */
AVX512_INLINE void rows_nn(const int R, const int W, const gemm_params *p, const gemm_store *st,
                           int64_t m0, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 16 * W <= n1; n += 16 * W) block_nn(R, W, false, p, st, m0, n, 16 * W);
  for (; n + 16 <= n1; n += 16) block_nn(R, 1, false, p, st, m0, n, 16);
  if (n < n1) block_nn(R, 1, true, p, st, m0, n, n1 - n);
}

/* Lanes 0..CN-1 (CN = 4 or 8) of the result: the sums of x[0..CN-1], by an
 * add tree that shares its shuffles across the vectors. */
AVX512_INLINE __m256 sums_of(const int CN, const __m512 x[8]) {
  __m256 y[8];
#pragma GCC unroll 8
  for (int j = 0; j < CN; j++)
    y[j] = _mm256_add_ps(_mm512_castps512_ps256(x[j]), _mm512_extractf32x8_ps(x[j], 1));
  __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(y[0], y[1]), _mm256_hadd_ps(y[2], y[3]));
  if (CN == 4)
    return _mm256_castps128_ps256(
        _mm_add_ps(_mm256_castps256_ps128(q0), _mm256_extractf128_ps(q0, 1)));
  __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(y[4], y[5]), _mm256_hadd_ps(y[6], y[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

/* One 16-wide K step of the dot products (km masks the K tail). */
AVX512_INLINE void step_nt(const int R, const int CN, const bool masked, __mmask16 km,
                           const float *const a[4], const float *const b[8], int64_t k,
                           __m512 acc[4][8]) {
  __m512 av[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
    av[r] = masked ? _mm512_maskz_loadu_ps(km, a[r] + k) : _mm512_loadu_ps(a[r] + k);
#pragma GCC unroll 8
  for (int j = 0; j < CN; j++) {
    __m512 bv = masked ? _mm512_maskz_loadu_ps(km, b[j] + k) : _mm512_loadu_ps(b[j] + k);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) acc[r][j] = _mm512_fmadd_ps(av[r], bv, acc[r][j]);
  }
}

/* Rows [m0, m0+R) x columns [n0, n1) of C in groups of CN columns, B
 * transposed: C[m][n] = dot(A row m, B row n), K along the vectors. */
AVX512_INLINE void rows_nt(const int R, const int CN, const gemm_params *p, const gemm_store *st,
                           int64_t m0, int64_t n0, int64_t n1) {
  const int64_t K = p->K;
  const float *a[4];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) a[r] = p->A + (m0 + r) * p->lda;
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
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) step_nt(R, CN, false, 0, a, b, k, acc);
    if (k < K) step_nt(R, CN, true, avx512_mask(K - k), a, b, k, acc);
    __mmask16 cm = avx512_mask(cols);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      __m512 sums = _mm512_castps256_ps512(sums_of(CN, acc[r]));
      float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
      avx512_store(sums, p->C + (m0 + r) * p->ldc + n, cm, st,
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
  gemm_store st = {p->alpha, p->beta, ep->bias_kind, ep->bias, ep->act, ep->clip_lo, ep->clip_hi, NULL, 0};
  if (!p->trans_b) {
    group_nn((int)p->M, p, &st, 0, n0, n1);
    return;
  }
  /* The dot-product form, for M <= GEMM_SMALL_M_NT. */
  for (int64_t m0 = 0; m0 < p->M; m0 += 4) {
    int64_t R = p->M - m0 < 4 ? p->M - m0 : 4;
    group_nt((int)R, p, &st, m0, n0, n1);
  }
}
#endif
