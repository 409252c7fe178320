/* AVX2 small-M GEMM over B packed ahead (gemm_kernels.h,
 * gemm_smallm_packed_fn): rows of A read in place, B's 16-wide packed
 * panels (kc x 16 floats each, the packed path's layout) read front to
 * back, so a decode step's GEMV streams its weights as long contiguous runs
 * instead of walking B's rows a page apart.  Partial sums for the panels go
 * to a small buffer in L1 between K blocks. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

/* R rows x 16 columns over one panel; R == 1 splits the sum over even and
 * odd k (four chains instead of two keep the FMA latency hidden). */
AVX2_INLINE void panel_rows(const int R, int64_t kc, const float *a, int64_t sam, int64_t sak, const float *b,
                            float *acc, int64_t ldacc, bool first) {
  __m256 c[6][2], d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    c[r][0] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc + r * ldacc);
    c[r][1] = first ? _mm256_setzero_ps() : _mm256_load_ps(acc + r * ldacc + 8);
  }
  int64_t k = 0;
  if (R == 1)
    for (; k + 2 <= kc; k += 2, b += 32) {
      __m256 a0 = _mm256_broadcast_ss(a + k * sak), a1 = _mm256_broadcast_ss(a + (k + 1) * sak);
      c[0][0] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b), c[0][0]);
      c[0][1] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + 8), c[0][1]);
      d0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + 16), d0);
      d1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + 24), d1);
    }
  for (; k < kc; k++, b += 16) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
      __m256 ar = _mm256_broadcast_ss(a + r * sam + k * sak);
      c[r][0] = _mm256_fmadd_ps(ar, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(ar, b1, c[r][1]);
    }
  }
  if (R == 1) {
    c[0][0] = _mm256_add_ps(c[0][0], d0);
    c[0][1] = _mm256_add_ps(c[0][1], d1);
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; r++) {
    _mm256_store_ps(acc + r * ldacc, c[r][0]);
    _mm256_store_ps(acc + r * ldacc + 8, c[r][1]);
  }
}

AVX2_INLINE void panels_rows(const int R, int64_t kc, const float *a, int64_t sam, int64_t sak, const float *b,
                             int64_t n_panels, int64_t panel_stride, float *acc, int64_t ldacc, bool first) {
  for (int64_t i = 0; i < n_panels; i++) panel_rows(R, kc, a, sam, sak, b + i * panel_stride, acc + 16 * i, ldacc, first);
}

SMELT_TARGET_AVX2
void f32_gemm_smallm_packed_avx2(int rows, int64_t kc, const float *a, int64_t sam, int64_t sak, const float *b,
                                 int64_t n_panels, int64_t panel_stride, float *acc, int64_t ldacc, bool first) {
  switch (rows) {
    case 1: panels_rows(1, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    case 2: panels_rows(2, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    case 3: panels_rows(3, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    case 4: panels_rows(4, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    case 5: panels_rows(5, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    case 6: panels_rows(6, kc, a, sam, sak, b, n_panels, panel_stride, acc, ldacc, first); break;
    default: break;
  }
}

/* The stored tile: C = act(alpha*acc + beta*C + bias) for `cols` columns of
 * `rows` rows (acc rows at stride ldacc, 32-byte aligned). */
SMELT_TARGET_AVX2
void f32_gemm_smallm_store_avx2(const gemm_params *p, int64_t m0, int rows, int64_t n0, int64_t cols,
                                const float *acc, int64_t ldacc) {
  const gemm_epilogue *ep = &p->epilogue;
  gemm_store st = {p->alpha, p->beta, ep->bias_kind, ep->bias, ep->act, ep->clip_lo, ep->clip_hi, NULL, 0};
  for (int r = 0; r < rows; r++) {
    float *c = p->C + (m0 + r) * p->ldc + n0;
    float rb = ep->bias_kind == GEMM_BIAS_ROW ? ep->bias[m0 + r] : 0.f;
    const float *cb = ep->bias_kind == GEMM_BIAS_COL ? ep->bias + n0 : NULL;
    int64_t n = 0;
    for (; n + 8 <= cols; n += 8) avx2_store(_mm256_load_ps(acc + r * ldacc + n), c + n, &st, cb ? cb + n : NULL, rb);
    if (n < cols) {
      float tc[8] = {0}, tb[8] = {0};
      int64_t left = cols - n;
      if (st.beta != 0.f) memcpy(tc, c + n, sizeof(float) * (size_t)left);
      if (cb) memcpy(tb, cb + n, sizeof(float) * (size_t)left);
      avx2_store(_mm256_load_ps(acc + r * ldacc + n), tc, &st, tb, rb);
      memcpy(c + n, tc, sizeof(float) * (size_t)left);
    }
  }
}
#endif
