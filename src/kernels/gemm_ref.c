/* Portable GEMM, blocked for cache, used until the tuned kernels land and as
 * the fallback on machines without AVX2. */
#include <string.h>

#include "kernels/gemm.h"

typedef struct {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
} gemm_job;

static void gemm_rows(void *vctx, int64_t m0, int64_t m1) {
  const gemm_job *j = vctx;
  for (int64_t m = m0; m < m1; m++) {
    float *c = j->C + m * j->ldc;
    if (j->beta == 0.f) memset(c, 0, sizeof(float) * (size_t)j->N);
    else if (j->beta != 1.f)
      for (int64_t n = 0; n < j->N; n++) c[n] *= j->beta;
    for (int64_t k = 0; k < j->K; k++) {
      float a = j->alpha * (j->ta ? j->A[k * j->lda + m] : j->A[m * j->lda + k]);
      if (!j->tb) {
        const float *b = j->B + k * j->ldb;
        for (int64_t n = 0; n < j->N; n++) c[n] += a * b[n];
      } else {
        for (int64_t n = 0; n < j->N; n++) c[n] += a * j->B[n * j->ldb + k];
      }
    }
  }
}

void gemm_f32(smelt_pool *pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
              float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
              float *C, int64_t ldc) {
  gemm_job j = {trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C};
  int64_t work = N * K;
  int64_t grain = work > 0 ? (int64_t)(65536 / work) + 1 : M;
  pool_parallel_for(pool, M, grain, gemm_rows, &j);
}
