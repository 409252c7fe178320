/* The int8 GEMM (kernels/qgemm.h) on every ISA path this machine has
 * (scalar, and AVX2 where the CPU has it; AVX-512 machines run the AVX2
 * kernel), on awkward shapes (1, primes, odd K, sizes off the 6 x 16 tile
 * and the 8-column panel), B plain and transposed, with alpha, bias and
 * accumulation, on one thread and on a pool:
 *   - exactness: C equals alpha * sa * sb * sum(qa qb) + bias (+ C), the
 *     integer sum taken in int64 here (1e-5 relative: only the fp32
 *     epilogue rounds);
 *   - accuracy against the fp32 product: |C - ref| <= alpha * sum_k (|a| sb/2
 *     + |b| sa/2 + sa sb / 4) (each quantized side is off by at most half
 *     its step) plus 1e-5 of the magnitudes for fp32 rounding;
 *   - the quantization itself: values in [-127, 127], 127 reached by each
 *     row's largest element, all-zero rows give scale 0 and C = bias, a row
 *     with NaN gives NaN outputs in that row only;
 *   - the two row quantizers agree, and K past QGEMM_MAX_K is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "kernels/qgemm.h"
#include "runtime/pool.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "test_rng.h"

typedef struct qcase {
  int64_t M, K, N;
  bool tb, bias, acc;
  float alpha;
} qcase;

static float *randn(int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; x && i < n; i++) x[i] = frand();
  return x;
}

static void run_case(isa_level isa, smelt_pool *pool, const qcase *q) {
  int64_t M = q->M, K = q->K, N = q->N, lq = qgemm_row_len(K);
  float *A = randn(M * K), *B = randn(K * N), *bias = randn(N), *C = randn(M * N), *C0 = malloc(sizeof(float) * (size_t)(M * N));
  if (M > 2) memset(A + K, 0, sizeof(float) * (size_t)K); /* row 1: all zero */
  void *blob = tensor_data_alloc(qgemm_weights_bytes(K, N));
  int16_t *qa = malloc(sizeof(int16_t) * (size_t)(M * lq));
  float *sa = malloc(sizeof(float) * (size_t)M);
  if (!A || !B || !bias || !C || !C0 || !blob || !qa || !sa) {
    CHECK(!"out of memory");
    goto done;
  }
  memcpy(C0, C, sizeof(float) * (size_t)(M * N));
  qgemm_weights w;
  qgemm_quantize_b(pool, q->tb, K, N, B, blob);
  qgemm_weights_view(K, N, blob, &w);
  qgemm_quantize_a(pool, isa, M, K, A, K, qa, sa);
  qgemm_args args = {.M = M, .qa = qa, .sa = sa, .w = &w, .alpha = q->alpha, .bias = q->bias ? bias : NULL,
                     .accumulate = q->acc, .C = C, .ldc = N};
  qgemm_run(pool, isa, &args);
  int bad_exact = 0, bad_bound = 0, bad_q = 0;
  for (int64_t m = 0; m < M; m++) {
    int16_t qmax = 0;
    for (int64_t k = 0; k < K; k++) {
      int16_t v = qa[m * lq + k];
      bad_q += v < -127 || v > 127;
      qmax = (int16_t)(abs(v) > qmax ? abs(v) : qmax);
    }
    bool zero_row = M > 2 && m == 1;
    bad_q += zero_row ? (sa[m] != 0.f || qmax != 0) : qmax != 127;
    for (int64_t n = 0; n < N; n++) {
      int64_t isum = 0;
      double ref = 0, mag = 0, bound = 0, sb = w.scale[n];
      for (int64_t k = 0; k < K; k++) {
        double a = A[m * K + k], b = q->tb ? B[n * K + k] : B[k * N + n];
        int16_t qb = w.w[n / QGEMM_NR * (lq / 2) * 2 * QGEMM_NR + k / 2 * 2 * QGEMM_NR + n % QGEMM_NR * 2 + k % 2];
        isum += (int64_t)qa[m * lq + k] * qb;
        ref += a * b, mag += fabs(a * b);
        bound += fabs(a) * sb / 2 + fabs(b) * sa[m] / 2 + sa[m] * sb / 4;
      }
      double extra = (q->bias ? bias[n] : 0) + (q->acc ? C0[m * N + n] : 0);
      double exact = q->alpha * (double)sa[m] * sb * (double)isum + extra, got = C[m * N + n];
      double scale = fabs(q->alpha) * mag + fabs(extra) + 1e-6;
      if (!(fabs(got - exact) <= 1e-5 * scale)) bad_exact++;
      if (!(fabs(got - (q->alpha * ref + extra)) <= fabs(q->alpha) * bound * 1.001 + 1e-5 * scale)) bad_bound++;
      if (zero_row && got != (float)extra && !q->acc) bad_exact++;
    }
  }
  if (bad_exact || bad_bound || bad_q)
    fprintf(stderr, "isa %s M %lld K %lld N %lld tb %d: %d inexact, %d past the bound, %d bad quantized\n",
            isa_name(isa), (long long)M, (long long)K, (long long)N, q->tb, bad_exact, bad_bound, bad_q);
  CHECK(bad_exact == 0);
  CHECK(bad_bound == 0);
  CHECK(bad_q == 0);
done:
  free(A), free(B), free(bias), free(C), free(C0), free(qa), free(sa);
  tensor_data_free(blob);
}

static void nan_row(isa_level isa) {
  int64_t M = 3, K = 5, N = 9;
  float *A = randn(M * K), *B = randn(K * N), C[27];
  void *blob = tensor_data_alloc(qgemm_weights_bytes(K, N));
  int16_t qa[3 * 6];
  float sa[3];
  A[K + 2] = NAN;
  qgemm_weights w;
  qgemm_quantize_b(NULL, false, K, N, B, blob);
  qgemm_weights_view(K, N, blob, &w);
  qgemm_quantize_a(NULL, isa, M, K, A, K, qa, sa);
  qgemm_args args = {.M = M, .qa = qa, .sa = sa, .w = &w, .alpha = 1.f, .C = C, .ldc = N};
  qgemm_run(NULL, isa, &args);
  for (int64_t n = 0; n < N; n++) {
    CHECK(isnan(C[N + n]));
    CHECK(!isnan(C[n]) && !isnan(C[2 * N + n]));
  }
  free(A), free(B);
  tensor_data_free(blob);
}

static void rows_agree(void) {
  if (isa_detect() < ISA_AVX2) return;
  for (int64_t K = 1; K < 70; K += 3) {
    float *a = randn(K);
    int16_t q1[72], q2[72];
    float s1, s2;
    a[K / 2] *= 3.7f;
    qgemm_quantize_row_scalar(K, a, q1, &s1);
    qgemm_quantize_row_avx2(K, a, q2, &s2);
    CHECK(s1 == s2);
    int diff = 0;
    for (int64_t k = 0; k < K; k++) diff += q1[k] != q2[k];
    CHECK(diff == 0);
    free(a);
  }
}

int main(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 5},     {2, 3, 17},  {7, 13, 9},  {6, 16, 16},
                                      {13, 31, 37}, {5, 64, 8},   {33, 127, 65}, {1, 769, 11}, {50, 256, 100},
                                      {97, 2, 129}, {4, 1024, 24}};
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  isa_level levels[] = {ISA_SCALAR, ISA_AVX2};
  for (int l = 0; l < 2; l++) {
    if (levels[l] > isa_detect()) continue;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
      qcase q = {shapes[i][0], shapes[i][1], shapes[i][2], i % 2 == 1, i % 3 != 0, i % 4 == 2, i % 5 == 3 ? -0.5f : 1.f};
      run_case(levels[l], i % 2 ? pool : NULL, &q);
    }
    nan_row(levels[l]);
  }
  rows_agree();
  CHECK(qgemm_weights_bytes(QGEMM_MAX_K + 1, 4) == 0);
  CHECK(qgemm_weights_bytes(0, 4) == 0 && qgemm_weights_bytes(4, 0) == 0);
  CHECK(qgemm_weights_bytes(QGEMM_MAX_K, 4) > 0);
  pool_free(pool);
  return test_report("test_qgemm");
}
