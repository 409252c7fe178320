/* The int8 GEMM (kernels/qgemm.h) on every ISA path this machine has
 * (scalar, AVX2 where the CPU has it, the AVX512_VNNI kernels where it has
 * that), on awkward shapes (1, primes, odd K, sizes off the 6 x 16 and
 * 8 x 32 tiles and the 8-column panel), B plain and transposed, with alpha, bias and
 * accumulation, on one thread and on a pool:
 *   - exactness: C equals alpha * sa * sb * (sum(qa qb) - za colsum) + bias
 *     (+ C), the integer sums taken in int64 here (1e-5 relative: only the
 *     fp32 epilogue rounds);
 *   - accuracy against the fp32 product: |C - ref| <= alpha * sum_k (|a| sb/2
 *     + |b| sa/2 + sa sb / 4) (each quantized side is off by at most half
 *     its step) plus 1e-5 of the magnitudes for fp32 rounding;
 *   - the quantization itself: A's values in [0, L] (L = qgemm_a_levels: 255
 *     on the VNNI kernels, else 127), the row's minimum at 0 and its maximum
 *     at L - 1 or L (the zero point's rounding), the weights'
 *     column sums, all-zero rows give scale 0 and C = bias, a row with NaN
 *     gives NaN outputs in that row only;
 *   - the two row quantizers agree, and K past QGEMM_MAX_K is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "kernels/qgemm.h"
#include "parallel/pool.h"

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
  uint8_t *qa = malloc((size_t)(M * lq));
  float *sa = malloc(sizeof(float) * (size_t)M);
  int32_t *za = malloc(sizeof(int32_t) * (size_t)M);
  if (!A || !B || !bias || !C || !C0 || !blob || !qa || !sa || !za) {
    CHECK(!"out of memory");
    goto done;
  }
  memcpy(C0, C, sizeof(float) * (size_t)(M * N));
  qgemm_weights w;
  qgemm_quantize_b(pool, q->tb, K, N, B, blob);
  qgemm_weights_view(K, N, blob, &w);
  qgemm_quantize_a(pool, isa, M, K, A, K, qa, sa, za);
  for (int64_t n = 0; n < N; n++) {
    int64_t cs = 0;
    for (int64_t k = 0; k < K; k++) cs += w.w[n / QGEMM_NR * (lq / 4) * 32 + k / 4 * 32 + n % QGEMM_NR * 4 + k % 4];
    CHECK(cs == w.colsum[n]);
  }
  qgemm_args args = {.M = M, .qa = qa, .sa = sa, .za = za, .w = &w, .alpha = q->alpha, .bias = q->bias ? bias : NULL,
                     .accumulate = q->acc, .C = C, .ldc = N};
  qgemm_run(pool, isa, &args);
  int bad_exact = 0, bad_bound = 0, bad_q = 0, L = qgemm_a_levels(isa, K);
  CHECK(L == (isa_avx512vnni_at(isa) ? 255 : 127));
  for (int64_t m = 0; m < M; m++) {
    int qmax = 0, qmin = 255;
    for (int64_t k = 0; k < K; k++) {
      int v = qa[m * lq + k];
      bad_q += v > L;
      qmax = v > qmax ? v : qmax, qmin = v < qmin ? v : qmin;
    }
    bool zero_row = M > 2 && m == 1, both_signs = false;
    for (int64_t k = 1; k < K; k++) both_signs |= A[m * K + k] * A[m * K] < 0;
    bad_q += zero_row ? (sa[m] != 0.f || qmax != 0 || za[m] != 0) : both_signs && (qmax < L - 1 || qmin != 0);
    for (int64_t n = 0; n < N; n++) {
      int64_t isum = 0;
      double ref = 0, mag = 0, bound = 0, sb = w.scale[n];
      for (int64_t k = 0; k < K; k++) {
        double a = A[m * K + k], b = q->tb ? B[n * K + k] : B[k * N + n];
        int8_t qb = w.w[n / QGEMM_NR * (lq / 4) * 32 + k / 4 * 32 + n % QGEMM_NR * 4 + k % 4];
        isum += (int64_t)qa[m * lq + k] * qb;
        ref += a * b, mag += fabs(a * b);
        bound += fabs(a) * sb / 2 + fabs(b) * sa[m] / 2 + sa[m] * sb / 4;
      }
      double extra = (q->bias ? bias[n] : 0) + (q->acc ? C0[m * N + n] : 0);
      isum -= (int64_t)za[m] * w.colsum[n];
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
  free(A), free(B), free(bias), free(C), free(C0), free(qa), free(sa), free(za);
  tensor_data_free(blob);
}

static void nan_row(isa_level isa) {
  int64_t M = 3, K = 5, N = 9;
  float *A = randn(M * K), *B = randn(K * N), C[27];
  void *blob = tensor_data_alloc(qgemm_weights_bytes(K, N));
  uint8_t qa[3 * 8];
  float sa[3];
  int32_t za[3];
  A[K + 2] = NAN;
  qgemm_weights w;
  qgemm_quantize_b(NULL, false, K, N, B, blob);
  qgemm_weights_view(K, N, blob, &w);
  qgemm_quantize_a(NULL, isa, M, K, A, K, qa, sa, za);
  qgemm_args args = {.M = M, .qa = qa, .sa = sa, .za = za, .w = &w, .alpha = 1.f, .C = C, .ldc = N};
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
  for (int levels = 127; levels <= 255; levels += 128)
    for (int64_t K = 1; K < 72; K += 3) {
      float *a = randn(K);
      uint8_t q1[72], q2[72];
      float s1, s2;
      int32_t z1, z2;
      a[K / 2] *= 3.7f;
      qgemm_quantize_row_scalar(K, a, levels, q1, &s1, &z1);
      qgemm_quantize_row_avx2(K, a, levels, q2, &s2, &z2);
      CHECK(s1 == s2 && z1 == z2);
      int diff = 0, top = 0;
      float hi = 0.f;
      for (int64_t k = 0; k < K; k++)
        diff += q1[k] != q2[k], top = q1[k] > top ? q1[k] : top, hi = a[k] > hi ? a[k] : hi;
      CHECK(diff == 0);
      CHECK(top <= levels && (hi == 0.f || top >= levels - 1)); /* a positive maximum reaches the top */
      free(a);
    }
}

int main(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 5},     {2, 3, 17},  {7, 13, 9},  {6, 16, 16},
                                      {13, 31, 37}, {5, 64, 8},   {33, 127, 65}, {1, 769, 11}, {50, 256, 100},
                                      {97, 2, 129}, {4, 1024, 24}, {8, 32, 32},  {9, 40, 33},   {17, 65, 72},
                                      {16, 100, 57}, {5, 9, 24},   {12, 64, 96}, {25, 44, 40},
                                      /* M <= QGEMM_GEMV_M (one panel per call, K groups not a multiple of
                                       * the unroll), the last two big enough to be split across threads */
                                      {1, 5, 9},    {2, 15, 17},  {3, 13, 70},  {4, 17, 130}, {3, 3, 1},
                                      {1, 1030, 2049}, {2, 1031, 1025}};
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  isa_level levels[] = {ISA_SCALAR, ISA_AVX2, ISA_AVX512};
  for (int l = 0; l < 3; l++) {
    if (levels[l] > isa_detect() || (levels[l] == ISA_AVX512 && !isa_has_avx512vnni())) continue;
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
