/* AVX2 small-M GEMM, the same scheme as the AVX-512 one with 16 ymm
 * registers: B streamed once per row group, A read in place, no packing.
 * B not transposed (M <= 16): vectors along N, groups of up to 6 rows;
 * groups of 1-3 rows stream B by rows (rows_stream).
 * B transposed (M <= 4): dot products along K, groups of up to 2 rows. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

/* The first n (< 8) lanes: through an 8-float temp (see avx2_tile.h). */
AVX2_INLINE void store_part(__m256 acc, float *c, int64_t n, const gemm_store *st,
                            const float *col_bias, float row_bias) {
  if (n >= 8) {
    avx2_store(acc, c, st, col_bias, row_bias);
    return;
  }
  if (n <= 0) return;
  float tc[8] = {0}, tb[8] = {0};
  if (st->beta != 0.f) memcpy(tc, c, sizeof(float) * (size_t)n);
  if (col_bias) memcpy(tb, col_bias, sizeof(float) * (size_t)n);
  avx2_store(acc, tc, st, tb, row_bias);
  memcpy(c, tc, sizeof(float) * (size_t)n);
}

/* Rows [m0, m0+R) x columns [n, n + 8*W) of C, B not transposed.  Masked
 * blocks (the N tail) have W == 1 and `cols` < 8 live lanes; full blocks
 * use plain loads, so no mask holds a register across the K loop. */
AVX2_INLINE void block_nn(const int R, const int W, const bool masked, const gemm_params *p,
                          const gemm_store *st, int64_t m0, int64_t n, int64_t cols) {
  const int64_t sam = p->trans_a ? 1 : p->lda, sak = p->trans_a ? p->lda : 1;
  __m256 acc[6][8];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int w = 0; w < W; w++) acc[r][w] = _mm256_setzero_ps();
  const float *b = p->B + n, *a = p->A + m0 * sam;
  for (int64_t k = 0; k < p->K; k++, b += p->ldb, a += sak) {
    __m256 bv[8];
#pragma GCC unroll 8
    for (int w = 0; w < W; w++)
      bv[w] = masked ? _mm256_maskload_ps(b, avx2_mask(cols)) : _mm256_loadu_ps(b + 8 * w);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m256 ar = _mm256_broadcast_ss(a + r * sam);
#pragma GCC unroll 8
      for (int w = 0; w < W; w++) acc[r][w] = _mm256_fmadd_ps(ar, bv[w], acc[r][w]);
    }
  }
  const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias + n : NULL;
#pragma GCC unroll 8
  for (int r = 0; r < R; r++) {
    float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
#pragma GCC unroll 8
    for (int w = 0; w < W; w++)
      store_part(acc[r][w], p->C + (m0 + r) * p->ldc + n + 8 * w, cols - 8 * w, st,
                 cb ? cb + 8 * w : NULL, rb);
  }
}

AVX2_INLINE void rows_nn(const int R, const int W, const gemm_params *p, const gemm_store *st,
                         int64_t m0, int64_t n0, int64_t n1) {
  int64_t n = n0;
  for (; n + 8 * W <= n1; n += 8 * W) block_nn(R, W, false, p, st, m0, n, 8 * W);
  for (; n + 8 <= n1; n += 8) block_nn(R, 1, false, p, st, m0, n, 8);
  if (n < n1) block_nn(R, 1, true, p, st, m0, n, n1 - n);
}

/* Rows [m0, m0+R) x columns [n0, n1) of C for R <= 3, B not transposed, by
 * rows of B: the sums for up to STREAM_NB columns stay in an L1 buffer while
 * U rows of B at a time are read along N (a[r][k..k+U) broadcast once per
 * pass), so B is read as U contiguous streams.  The column-block form above
 * walks B down its columns instead, a few cache lines per row and a new page
 * per row once a row is 4 KB, which leaves a one-row product (a decode
 * step's GEMV) waiting on memory: 1.5-1.7x slower at 1-3 rows on
 * gpt_tiny_kv's weights (16 MB, K 256/1024, N 256-4096).  From 4 rows the
 * sums' loads and stores per row of B cost more than the walk; the column
 * blocks stay. */
#define STREAM_NB 512
AVX2_INLINE void vec_stream(const int R, const int U, const bool masked, const gemm_params *p,
                            const __m256 av[3][8], const float *b, int64_t n, int64_t cols, float *acc) {
  const __m256i mk = avx2_mask(cols);
  __m256 x[3];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) x[r] = _mm256_load_ps(acc + r * STREAM_NB + n);
#pragma GCC unroll 8
  for (int u = 0; u < U; u++) {
    const float *bu = b + u * p->ldb + n;
    __m256 bv = masked ? _mm256_maskload_ps(bu, mk) : _mm256_loadu_ps(bu);
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) x[r] = _mm256_fmadd_ps(av[r][u], bv, x[r]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; r++) _mm256_store_ps(acc + r * STREAM_NB + n, x[r]);
}

AVX2_INLINE void pass_stream(const int R, const int U, const gemm_params *p, int64_t m0, int64_t k,
                             int64_t n0, int64_t w, float *acc) {
  const int64_t sam = p->trans_a ? 1 : p->lda, sak = p->trans_a ? p->lda : 1;
  __m256 av[3][8];
#pragma GCC unroll 4
  for (int r = 0; r < R; r++)
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) av[r][u] = _mm256_broadcast_ss(p->A + (m0 + r) * sam + (k + u) * sak);
  const float *b = p->B + k * p->ldb + n0;
  int64_t n = 0;
  for (; n + 8 <= w; n += 8) vec_stream(R, U, false, p, av, b, n, 8, acc);
  if (n < w) vec_stream(R, U, true, p, av, b, n, w - n, acc);
}

AVX2_INLINE void rows_stream(const int R, const gemm_params *p, const gemm_store *st, int64_t m0,
                             int64_t n0, int64_t n1) {
  const int U = R == 1 ? 8 : R == 2 ? 4 : 2;
  _Alignas(32) float acc[3 * STREAM_NB];
  for (int64_t nb = n0; nb < n1; nb += STREAM_NB) {
    int64_t w = n1 - nb < STREAM_NB ? n1 - nb : STREAM_NB, wv = (w + 7) / 8 * 8;
    for (int r = 0; r < R; r++) memset(acc + r * STREAM_NB, 0, sizeof(float) * (size_t)wv);
    int64_t k = 0;
    for (; k + U <= p->K; k += U) pass_stream(R, U, p, m0, k, nb, w, acc);
    for (; k < p->K; k++) pass_stream(R, 1, p, m0, k, nb, w, acc);
    const float *cb = st->bias_kind == GEMM_BIAS_COL ? st->bias + nb : NULL;
    for (int r = 0; r < R; r++) {
      float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
      for (int64_t n = 0; n < w; n += 8)
        store_part(_mm256_load_ps(acc + r * STREAM_NB + n), p->C + (m0 + r) * p->ldc + nb + n, w - n,
                   st, cb ? cb + n : NULL, rb);
    }
  }
}

/* Lanes 0..CN-1 (CN = 4 or 8) of the result: the sums of x[0..CN-1], by an
 * add tree that shares its shuffles across the vectors. */
AVX2_INLINE __m256 sums_of(const int CN, const __m256 x[8]) {
  __m256 q0 = _mm256_hadd_ps(_mm256_hadd_ps(x[0], x[1]), _mm256_hadd_ps(x[2], x[3]));
  if (CN == 4)
    return _mm256_castps128_ps256(
        _mm_add_ps(_mm256_castps256_ps128(q0), _mm256_extractf128_ps(q0, 1)));
  __m256 q1 = _mm256_hadd_ps(_mm256_hadd_ps(x[4], x[5]), _mm256_hadd_ps(x[6], x[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0, q1, 0x20), _mm256_permute2f128_ps(q0, q1, 0x31));
}

AVX2_INLINE void rows_nt(const int R, const int CN, const gemm_params *p, const gemm_store *st,
                         int64_t m0, int64_t n0, int64_t n1) {
  const int64_t K = p->K;
  for (int64_t n = n0; n < n1; n += CN) {
    int cols = (int)(n1 - n < CN ? n1 - n : CN);
    const float *b[8];
#pragma GCC unroll 8
    for (int j = 0; j < CN; j++) b[j] = p->B + (n + (j < cols ? j : 0)) * p->ldb;
    __m256 acc[3][8];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) acc[r][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
      __m256 av[3];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) av[r] = _mm256_loadu_ps(p->A + (m0 + r) * p->lda + k);
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) {
        __m256 bv = _mm256_loadu_ps(b[j] + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]);
      }
    }
    if (k < K) {
      __m256i km = avx2_mask(K - k);
      __m256 av[3];
#pragma GCC unroll 4
      for (int r = 0; r < R; r++) av[r] = _mm256_maskload_ps(p->A + (m0 + r) * p->lda + k, km);
#pragma GCC unroll 8
      for (int j = 0; j < CN; j++) {
        __m256 bv = _mm256_maskload_ps(b[j] + k, km);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
      float rb = st->bias_kind == GEMM_BIAS_ROW ? st->bias[m0 + r] : 0.f;
      store_part(sums_of(CN, acc[r]), p->C + (m0 + r) * p->ldc + n, cols, st,
                 st->bias_kind == GEMM_BIAS_COL ? st->bias + n : NULL, rb);
    }
  }
}

/* Register budget (16 ymm): R*W accumulators + W B vectors + 1 broadcast
 * (dot form: R*CN accumulators + R A vectors + 1 B vector). */
SMELT_TARGET_AVX2 static void group_nn(int R, const gemm_params *p, const gemm_store *st,
                                       int64_t m0, int64_t n0, int64_t n1) {
  switch (R) {
    case 1: rows_stream(1, p, st, m0, n0, n1); break;
    case 2: rows_stream(2, p, st, m0, n0, n1); break;
    case 3: rows_stream(3, p, st, m0, n0, n1); break;
    case 4: rows_nn(4, 2, p, st, m0, n0, n1); break;
    case 5: rows_nn(5, 2, p, st, m0, n0, n1); break;
    case 6: rows_nn(6, 2, p, st, m0, n0, n1); break;
    default: break;
  }
}

SMELT_TARGET_AVX2 static void group_nt(int R, const gemm_params *p, const gemm_store *st,
                                       int64_t m0, int64_t n0, int64_t n1) {
  switch (R) {
    case 1: rows_nt(1, 8, p, st, m0, n0, n1); break;
    case 2: rows_nt(2, 4, p, st, m0, n0, n1); break;
    default: break;
  }
}

SMELT_TARGET_AVX2
void f32_gemm_smallm_avx2(const gemm_params *p, int64_t n0, int64_t n1) {
  const gemm_epilogue *ep = &p->epilogue;
  gemm_store st = {p->alpha, p->beta, ep->bias_kind, ep->bias, ep->act, ep->clip_lo, ep->clip_hi, NULL, 0};
  int group = p->trans_b ? 2 : 6;
  for (int64_t m0 = 0; m0 < p->M; m0 += group) {
    int R = (int)(p->M - m0 < group ? p->M - m0 : group);
    if (p->trans_b) group_nt(R, p, &st, m0, n0, n1);
    else group_nn(R, p, &st, m0, n0, n1);
  }
}
#endif
