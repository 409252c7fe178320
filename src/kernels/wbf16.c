/* Weight-only bf16 / fp16 GEMM: packing, the scalar kernels and the driver
 * (see wbf16.h).  The AVX2 kernels are x86/wbf16_avx2.c. */
#include "kernels/wbf16.h"

#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "util/err.h"

#define WBF16_MAX_DIM ((int64_t)1 << 40)
#define WBF16_MIN_PARALLEL_BYTES (256 << 10) /* weight bytes below which one thread runs it */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

size_t wbf16_weights_bytes(int64_t K, int64_t N) {
  if (K <= 0 || N <= 0 || K > WBF16_MAX_DIM / N) return 0;
  return sizeof(uint16_t) * (size_t)(K * round_up(N, WBF16_NR));
}

void wbf16_weights_view(int64_t K, int64_t N, const void *blob, wbf16_weights *out) {
  out->K = K, out->N = N, out->Np = round_up(N, WBF16_NR);
  out->w = blob;
  out->fmt = WB16_BF16;
}

typedef struct pack_job {
  wb16_format fmt;
  bool trans_b;
  int64_t K, N;
  const float *B;
  uint16_t *w;
} pack_job;

static void pack_panels(void *ctx, int64_t p0, int64_t p1) {
  const pack_job *j = ctx;
  for (int64_t p = p0; p < p1; p++) {
    uint16_t *d = j->w + p * j->K * WBF16_NR;
    for (int64_t k = 0; k < j->K; k++, d += WBF16_NR)
      for (int c = 0; c < WBF16_NR; c++) {
        int64_t n = p * WBF16_NR + c;
        float v = n >= j->N ? 0.f : j->trans_b ? j->B[n * j->K + k] : j->B[k * j->N + n];
        d[wb16_pos(j->fmt, c)] = j->fmt == WB16_F16 ? f32_to_f16(v) : f32_to_bf16(v);
      }
  }
}

static void pack(smelt_pool *pool, wb16_format fmt, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  pack_job j = {fmt, trans_b, K, N, B, blob};
  pool_parallel_for(pool, round_up(N, WBF16_NR) / WBF16_NR, 1, pack_panels, &j);
}

void wbf16_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  pack(pool, WB16_BF16, trans_b, K, N, B, blob);
}

void wf16_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  pack(pool, WB16_F16, trans_b, K, N, B, blob);
}

void wf16_weights_view(int64_t K, int64_t N, const void *blob, wbf16_weights *out) {
  wbf16_weights_view(K, N, blob, out);
  out->fmt = WB16_F16;
}

static float widen(wb16_format f, uint16_t h) {
  if (f == WB16_F16) return f16_to_f32(h);
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

static void panel_scalar(wb16_format f, int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                         float acc[6][WBF16_NR]) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < WBF16_NR; c++) {
      float s = 0.f;
      for (int64_t k = 0; k < K; k++) s += A[r * lda + k] * widen(f, panel[k * WBF16_NR + wb16_pos(f, c)]);
      acc[r][c] = s;
    }
}

void wbf16_panel_scalar(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                        float acc[6][WBF16_NR]) {
  panel_scalar(WB16_BF16, rows, K, A, lda, panel, acc);
}

void wf16_panel_scalar(int rows, int64_t K, const float *A, int64_t lda, const uint16_t *panel,
                       float acc[6][WBF16_NR]) {
  panel_scalar(WB16_F16, rows, K, A, lda, panel, acc);
}

typedef struct run_job {
  const wbf16_args *a;
  wbf16_panel_fn panel;
} run_job;

/* Panels [p0, p1): all rows, in groups of up to 6 (as even as they split). */
static void run_panels(void *ctx, int64_t p0, int64_t p1) {
  const run_job *j = ctx;
  const wbf16_args *a = j->a;
  const wbf16_weights *w = a->w;
  float acc[6][WBF16_NR];
  int64_t groups = (a->M + 5) / 6;
  for (int64_t p = p0; p < p1; p++) {
    if (pool_stopping()) return;
    int64_t n0 = p * WBF16_NR, cols = w->N - n0 < WBF16_NR ? w->N - n0 : WBF16_NR;
    for (int64_t g = 0, m0 = 0; g < groups; g++) {
      int R = (int)((a->M - m0) / (groups - g));
      j->panel(R, w->K, a->A + m0 * a->lda, a->lda, w->w + p * w->K * WBF16_NR, acc);
      for (int r = 0; r < R; r++) {
        float *c = a->C + (m0 + r) * a->ldc + n0;
        for (int64_t n = 0; n < cols; n++) {
          float v = a->alpha * acc[r][n] + (a->bias ? a->bias[n0 + n] : 0.f);
          c[n] = a->accumulate ? c[n] + v : v;
        }
      }
      m0 += R;
    }
  }
}

typedef struct widen_job {
  const wbf16_weights *w;
  float *B; /* K x N */
} widen_job;

static void widen_panels(void *ctx, int64_t p0, int64_t p1) {
  const widen_job *j = ctx;
  const wbf16_weights *w = j->w;
  for (int64_t p = p0; p < p1; p++) {
    const uint16_t *s = w->w + p * w->K * WBF16_NR;
    int64_t n0 = p * WBF16_NR, cols = w->N - n0 < WBF16_NR ? w->N - n0 : WBF16_NR;
    for (int64_t k = 0; k < w->K; k++, s += WBF16_NR)
      for (int64_t c = 0; c < cols; c++) j->B[k * w->N + n0 + c] = widen(w->fmt, s[wb16_pos(w->fmt, (int)c)]);
  }
}

smelt_status wbf16_run(smelt_pool *pool, isa_level isa, const wbf16_args *a) {
  const wbf16_weights *w = a->w;
  if (a->M <= 0 || w->N <= 0) return SMELT_OK;
  int64_t panels = w->Np / WBF16_NR;
  size_t bytes = sizeof(float) * (size_t)(w->K * w->N);
  bool widen_it = a->M > WBF16_SMALL_M && !a->panels_only;
  float *B = widen_it ? tensor_data_alloc(bytes) : NULL;
  if (widen_it && !B) err_clear(); /* over the memory budget: the panel kernel, slower */
  if (B) { /* many rows: the fp32 GEMM over a widened copy */
    widen_job wj = {w, B};
    pool_parallel_for(pool, panels, 1, widen_panels, &wj);
    gemm_params p = gemm_params_default();
    p.M = a->M, p.N = w->N, p.K = w->K, p.alpha = a->alpha, p.beta = a->accumulate ? 1.f : 0.f;
    p.A = a->A, p.lda = a->lda, p.B = B, p.ldb = w->N, p.C = a->C, p.ldc = a->ldc;
    if (a->bias) p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = a->bias;
    smelt_status s = gemm_f32_isa(pool, &p, isa);
    tensor_data_free(B);
    return s;
  }
  bool f16 = w->fmt == WB16_F16;
  run_job j = {a, f16 ? wf16_panel_scalar : wbf16_panel_scalar};
#ifdef SMELT_X86
  if (isa >= ISA_AVX2 && (!f16 || isa_has_f16c())) j.panel = f16 ? wf16_panel_avx2 : wbf16_panel_avx2;
#else
  (void)isa;
#endif
  bool big = 2.0 * (double)w->K * (double)w->Np >= WBF16_MIN_PARALLEL_BYTES;
  int threads = big ? pool_threads(pool) : 1;
  /* a few runs of panels per thread, each a contiguous stretch of the weight */
  int64_t grain = (panels + 4 * threads - 1) / (4 * threads);
  pool_parallel_for(threads > 1 ? pool : NULL, panels, grain, run_panels, &j);
  return SMELT_OK;
}
