/* Portable GEMM: row by row, no packing.  The fallback on machines without
 * AVX2, when packing memory cannot be allocated, and the plain reference the
 * fast paths are checked against. */
#include <string.h>

#include "kernels/gemm_kernels.h"

static void gemm_rows(void *vctx, int64_t m0, int64_t m1) {
  const gemm_params *j = vctx;
  const gemm_epilogue *ep = &j->epilogue;
  for (int64_t m = m0; m < m1; m++) {
    float *c = j->C + m * j->ldc;
    if (j->beta == 0.f) memset(c, 0, sizeof(float) * (size_t)j->N);
    else if (j->beta != 1.f)
      for (int64_t n = 0; n < j->N; n++) c[n] *= j->beta;
    for (int64_t k = 0; k < j->K; k++) {
      float a = j->alpha * (j->trans_a ? j->A[k * j->lda + m] : j->A[m * j->lda + k]);
      if (!j->trans_b) {
        const float *b = j->B + k * j->ldb;
        for (int64_t n = 0; n < j->N; n++) c[n] += a * b[n];
      } else {
        for (int64_t n = 0; n < j->N; n++) c[n] += a * j->B[n * j->ldb + k];
      }
    }
    if (ep->bias_kind == GEMM_BIAS_NONE && ep->act == GEMM_ACT_NONE) continue;
    for (int64_t n = 0; n < j->N; n++) {
      float x = c[n];
      if (ep->bias_kind == GEMM_BIAS_COL) x += ep->bias[n];
      else if (ep->bias_kind == GEMM_BIAS_ROW) x += ep->bias[m];
      c[n] = gemm_act_apply(x, ep->act, ep->clip_lo, ep->clip_hi);
    }
  }
}

void gemm_f32_scalar(smelt_pool *pool, const gemm_params *p) {
  int64_t work = p->N * p->K;
  int64_t grain = work > 0 ? (int64_t)(65536 / work) + 1 : p->M;
  pool_parallel_for(pool, p->M, grain, gemm_rows, (void *)p);
}
