/* The int4 weight GEMM (kernels/q4gemm.h) on each ISA path this machine has
 * (scalar; AVX2 where the CPU has it), on awkward shapes (K not a multiple
 * of 32: a padded last group; N odd and off the 16-column panel; M 1..20,
 * past Q4_SMALL_M the dequantized fp32 path), B plain and transposed, with
 * alpha, bias and accumulation, on one thread and on a pool:
 *   - exactness of the int8 x int4 kernel: C equals alpha * sum_g da s
 *     (sum qa q - 8 sum qa) + bias (+ C) computed here in double from the
 *     quantized values (1e-5 of the magnitudes: only fp32 rounding);
 *   - the many-rows path equals alpha * A W^ + bias with W^ the dequantized
 *     weights (fp32 rounding only);
 *   - accuracy against the fp32 product: |C - ref| <= alpha * sum_k (|a| |s|
 *     + |w^| da / 2) (each weight off by at most its step |s| (a clipped
 *     value), each activation by half of its step da);
 *   - the asymmetric form (codes, scales and m written with q4gemm_set, as
 *     MatMulNBits with zero points) against its definition;
 *   - the activations' codes in -127..127 with a group's max at +-127, and a
 *     row holding NaN gives NaN in that row only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "kernels/q4gemm.h"
#include "parallel/pool.h"

#define TEST_RNG_SEED 0x51ab3779b97f4a7cull
#include "test_rng.h"

static float *randn(int64_t n) {
  float *x = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; x && i < n; i++) x[i] = frand();
  return x;
}

typedef struct qcase {
  int64_t M, K, N;
  bool tb, bias, acc, asym, small_only;
  float alpha;
} qcase;

static void run_case(isa_level isa, smelt_pool *pool, const qcase *q) {
  int64_t M = q->M, K = q->K, N = q->N;
  float *A = randn(M * K), *B = randn(K * N), *bias = randn(N), *C = randn(M * N);
  float *C0 = malloc(sizeof(float) * (size_t)(M * N));
  void *blob = tensor_data_alloc(q4gemm_weights_bytes(K, N, q->asym));
  void *qa = tensor_data_alloc(q4gemm_rows_bytes(M, K));
  if (!A || !B || !bias || !C || !C0 || !blob || !qa) {
    CHECK(!"out of memory");
    return;
  }
  if (M > 2) memset(A + K, 0, sizeof(float) * (size_t)K); /* row 1: all zero */
  memcpy(C0, C, sizeof(float) * (size_t)(M * N));
  q4gemm_weights w;
  q4gemm_weights_view(K, N, q->asym, blob, &w);
  if (q->asym) { /* random codes, scales and m, as MatMulNBits gives them */
    q4gemm_clear(&w, blob);
    for (int64_t n = 0; n < N; n++)
      for (int64_t g = 0; g < w.Kg; g++) {
        uint8_t c[Q4_GROUP];
        for (int i = 0; i < Q4_GROUP; i++) c[i] = (uint8_t)(rng() % 16);
        q4gemm_set(&w, blob, n, g, c, 0.1f * frand(), 0.5f * frand());
      }
  } else {
    float *Bt = malloc(sizeof(float) * (size_t)(K * N)); /* the stored form: N x K with tb */
    for (int64_t k = 0; k < K; k++)
      for (int64_t n = 0; n < N; n++) Bt[q->tb ? n * K + k : k * N + n] = B[k * N + n];
    q4gemm_quantize_b(pool, q->tb, K, N, Bt, blob);
    free(Bt);
  }
  q4gemm_quantize_a(M, K, A, K, qa);
  q4gemm_args a = {.M = M, .A = A, .lda = K, .w = &w, .alpha = q->alpha, .bias = q->bias ? bias : NULL,
                   .accumulate = q->acc, .C = C, .ldc = N, .small_only = q->small_only};
  CHECK_OK(q4gemm_run(pool, isa, &a));
  bool small = M <= Q4_SMALL_M || q->small_only;
  int bad_exact = 0, bad_bound = 0, bad_q = 0;
  for (int64_t m = 0; m < M; m++) {
    q4gemm_row r = q4gemm_row_at(qa, M, K, m);
    for (int64_t g = 0; g < w.Kg; g++) {
      int amax = 0, s = 0;
      for (int i = 0; i < Q4_GROUP; i++) {
        int v = r.q[g * Q4_GROUP + i];
        bad_q += v < -127 || v > 127 || (g * Q4_GROUP + i >= K && v != 0);
        amax = abs(v) > amax ? abs(v) : amax;
        s += v;
      }
      bad_q += s != r.sum[g] || (r.da[g] > 0.f && amax != 127) || (r.da[g] == 0.f && amax != 0);
    }
    for (int64_t n = 0; n < N; n++) {
      double exact = 0, deq = 0, mag = 0, fp = 0, bound = 0;
      for (int64_t g = 0; g < w.Kg; g++) {
        double dot = 0;
        for (int i = 0; i < Q4_GROUP && g * Q4_GROUP + i < K; i++) {
          int64_t k = g * Q4_GROUP + i;
          double wq = q4gemm_weight_at(&w, k, n), av = A[m * K + k];
          dot += (double)r.q[k] * wq;
          deq += av * wq;
          mag += fabs(av * wq);
          fp += av * B[k * N + n];
        }
        exact += r.da[g] * dot;
        if (!q->asym) {
          double smax = 0; /* the group's step: its largest |x| / 8 */
          for (int i = 0; i < Q4_GROUP && g * Q4_GROUP + i < K; i++)
            smax = fmax(smax, fabs(B[(g * Q4_GROUP + i) * N + n]) / 8);
          for (int i = 0; i < Q4_GROUP && g * Q4_GROUP + i < K; i++) {
            int64_t k = g * Q4_GROUP + i;
            bound += fabs(A[m * K + k]) * smax + fabs(q4gemm_weight_at(&w, k, n)) * r.da[g] / 2;
          }
        }
      }
      double base = (q->bias ? bias[n] : 0) + (q->acc ? C0[m * N + n] : 0), got = C[m * N + n];
      double want = q->alpha * (small ? exact : deq) + base;
      double tol = 1e-5 * (fabs(q->alpha) * (mag + bound) + fabs(base)) + 1e-6;
      bad_exact += !(fabs(got - want) <= tol);
      if (!q->asym)
        bad_bound += !(fabs(got - (q->alpha * fp + base)) <= fabs(q->alpha) * bound * (1 + 1e-4) + tol);
    }
  }
  if (bad_exact || bad_bound || bad_q)
    fprintf(stderr, "%s M %lld K %lld N %lld tb %d asym %d small %d: %d off the exact, %d past the bound, %d bad codes\n",
            isa_name(isa), (long long)M, (long long)K, (long long)N, q->tb, q->asym, small, bad_exact, bad_bound,
            bad_q);
  CHECK(bad_exact == 0);
  CHECK(bad_bound == 0);
  CHECK(bad_q == 0);
  free(A), free(B), free(bias), free(C), free(C0);
  tensor_data_free(blob);
  tensor_data_free(qa);
}

static void nan_row(isa_level isa, int64_t M) {
  int64_t K = 40, N = 19;
  float *A = randn(M * K), *B = randn(K * N), *C = randn(M * N);
  void *blob = tensor_data_alloc(q4gemm_weights_bytes(K, N, false));
  q4gemm_weights w;
  q4gemm_weights_view(K, N, false, blob, &w);
  q4gemm_quantize_b(NULL, false, K, N, B, blob);
  A[K + 33] = NAN;
  q4gemm_args a = {.M = M, .A = A, .lda = K, .w = &w, .alpha = 1.f, .C = C, .ldc = N};
  CHECK_OK(q4gemm_run(NULL, isa, &a));
  int bad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) bad += m == 1 ? !isnan(C[m * N + n]) : isnan(C[m * N + n]);
  CHECK(bad == 0);
  free(A), free(B), free(C);
  tensor_data_free(blob);
}

int main(void) {
  static const int64_t shapes[][3] = {{1, 1, 1},   {1, 31, 5},   {2, 32, 17},  {3, 33, 16},   {4, 100, 33},
                                      {5, 64, 7},  {1, 768, 48}, {7, 95, 31},  {16, 65, 18},  {17, 63, 15},
                                      {20, 129, 130}, {1, 1030, 2049}, {2, 1031, 1025}, {18, 300, 257}};
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(2, &pool));
  isa_level levels[] = {ISA_SCALAR, ISA_AVX2};
  for (int l = 0; l < 2; l++) {
    if (levels[l] > isa_detect()) {
      test_skip("test_q4gemm", "AVX2 not on this CPU");
      continue;
    }
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
      for (int asym = 0; asym < 2; asym++) {
        qcase q = {shapes[i][0], shapes[i][1], shapes[i][2], i % 2 == 1, i % 3 != 0, i % 4 == 2, asym,
                   i % 5 == 4, i % 5 == 3 ? -0.5f : 1.f};
        run_case(levels[l], (i + (size_t)asym) % 2 ? pool : NULL, &q);
      }
    nan_row(levels[l], 3);
  }
  CHECK(q4gemm_weights_bytes(0, 4, false) == 0 && q4gemm_weights_bytes(4, 0, true) == 0);
  CHECK(q4gemm_weights_bytes(33, 17, false) == 2 * 2 * 320 && q4gemm_weights_bytes(33, 17, true) == 2 * 2 * 384);
  pool_free(pool);
  return test_report("test_q4gemm");
}
