/* The weight-only bf16 and fp16 GEMMs (kernels/wbf16.h) on every ISA path
 * this machine has (scalar, AVX2 (+F16C for fp16)), against the fp32 product
 * in double, on awkward
 * shapes: M 1..7 (the panel kernel's row groups), 16 and 17/40 (the widened
 * fp32 path past WBF16_SMALL_M), N off the 16-column panel and the 8-lane
 * vector, K odd and 1; B plain and transposed; alpha, bias, accumulation;
 * one thread and a pool of 2.
 *   - against the product of the bf16-rounded weights: fp32 rounding only
 *     (4 (K+4) eps of sum |a b|);
 *   - against the fp32 weights: within 2^-8 sum |a b| (the weights' rounding,
 *     at most half a bf16 step each) plus that fp32 slack; fp16: 2^-11 sum
 *     |a b| plus 2^-25 sum |a| (a subnormal weight's absolute step);
 *   - many rows also through the panel kernel (panels_only: what runs when
 *     the widened copy does not fit);
 *   - the packer rounds to nearest even (ties included) and keeps NaN, whose
 *     column's outputs are NaN (both formats). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/isa.h"
#include "kernels/wbf16.h"
#include "parallel/pool.h"

#define TEST_RNG_SEED 0x51ed2701f3a5c9b7ull
#include "test_rng.h"

static wb16_format fmt; /* the format under test */

static float round_w(float x) {
  if (fmt == WB16_F16) return f16_to_f32(f32_to_f16(x));
  uint16_t h = f32_to_bf16(x);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void pack_view(smelt_pool *pool, bool tb, int64_t K, int64_t N, const float *B, void *blob, wbf16_weights *w) {
  if (fmt == WB16_F16) {
    wf16_pack_b(pool, tb, K, N, B, blob);
    wf16_weights_view(K, N, blob, w);
  } else {
    wbf16_pack_b(pool, tb, K, N, B, blob);
    wbf16_weights_view(K, N, blob, w);
  }
}

static int n_bad;

static void run_case(isa_level isa, smelt_pool *pool, int64_t M, int64_t N, int64_t K, bool tb, int i) {
  float alpha = i % 3 == 2 ? -0.5f : 1.f;
  bool use_bias = i % 2 == 0, acc = i % 4 == 1;
  int64_t lda = K + (i % 3 == 1 ? 3 : 0), ldc = N + (i % 5 == 2 ? 5 : 0);
  float *A = malloc(sizeof(float) * (size_t)(M * lda)), *B = malloc(sizeof(float) * (size_t)(K * N));
  float *bias = malloc(sizeof(float) * (size_t)N), *C = malloc(sizeof(float) * (size_t)(M * ldc));
  float *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
  void *blob = tensor_data_alloc(wbf16_weights_bytes(K, N));
  if (!A || !B || !bias || !C || !C0 || !blob) {
    CHECK(!"out of memory");
    goto done;
  }
  for (int64_t x = 0; x < M * lda; x++) A[x] = frand();
  for (int64_t x = 0; x < K * N; x++) B[x] = frand() * 3.f;
  for (int64_t x = 0; x < N; x++) bias[x] = frand();
  for (int64_t x = 0; x < M * ldc; x++) C0[x] = C[x] = frand();
  wbf16_weights w;
  pack_view(pool, tb, K, N, B, blob, &w);
  wbf16_args args = {.M = M, .A = A, .lda = lda, .w = &w, .alpha = alpha, .bias = use_bias ? bias : NULL,
                     .accumulate = acc, .C = C, .ldc = ldc, .panels_only = i % 7 == 3};
  CHECK_OK(wbf16_run(pool, isa, &args));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < ldc; n++) {
      float got = C[m * ldc + n];
      if (n >= N) { /* the stride gap is never written */
        n_bad += memcmp(&got, &C0[m * ldc + n], sizeof got) != 0;
        continue;
      }
      double ref_r = 0, ref = 0, mag = 0, amag = 0;
      for (int64_t k = 0; k < K; k++) {
        double a = A[m * lda + k], b = tb ? B[n * K + k] : B[k * N + n];
        ref += a * b, ref_r += a * round_w((float)b), mag += fabs(a * b), amag += fabs(a);
      }
      double base = (use_bias ? bias[n] : 0.) + (acc ? C0[m * ldc + n] : 0.);
      ref = alpha * ref + base, ref_r = alpha * ref_r + base;
      double slack = 4.0 * (double)(K + 4) * 1.2e-7 * (fabs(alpha) * mag + fabs(base) + 1.0);
      double wstep = fmt == WB16_F16 ? fabs(alpha) * (mag / 2048.0 + amag * 0x1p-25) : fabs(alpha) * mag / 256.0;
      bool ok = fabs(got - ref_r) <= slack && fabs(got - ref) <= wstep + slack;
      if (!ok && n_bad < 5)
        fprintf(stderr, "  %s %s M=%lld N=%lld K=%lld tb=%d case %d [%lld][%lld]: got %g, rounded-weight ref %g, ref %g\n",
                fmt == WB16_F16 ? "fp16" : "bf16", isa_name(isa), (long long)M, (long long)N, (long long)K, tb, i, (long long)m, (long long)n, got,
                ref_r, ref);
      n_bad += !ok;
    }
done:
  free(A), free(B), free(bias), free(C), free(C0);
  tensor_data_free(blob);
}

static void rounding_and_nan(isa_level isa) {
  /* bf16 (8 significant bits): 1 + 2^-8 is halfway between 1 and 1 + 2^-7:
   * even is 1; 1 + 3*2^-8 -> 1 + 2^-6.  fp16 (11 bits): the same one step
   * of 2^-10 further down. */
  float h = fmt == WB16_F16 ? 1.f / 2048 : 1.f / 256;
  float B[2 * 3] = {1.f + h, 1.f + 3.f * h, NAN, 2.f, -1.f, 0.5f};
  void *blob = tensor_data_alloc(wbf16_weights_bytes(2, 3));
  if (!blob) return;
  wbf16_weights w;
  pack_view(NULL, false, 2, 3, B, blob, &w);
  float A[2] = {1.f, 0.f}, C[3];
  wbf16_args args = {.M = 1, .A = A, .lda = 2, .w = &w, .alpha = 1.f, .C = C, .ldc = 3};
  CHECK_OK(wbf16_run(NULL, isa, &args));
  CHECK(C[0] == 1.f);
  CHECK(C[1] == 1.f + 4.f * h);
  CHECK(isnan(C[2]));
  tensor_data_free(blob);
}

int main(void) {
  static const int64_t MS[] = {1, 2, 3, 4, 5, 6, 7, 16, 17, 40}, NS[] = {1, 8, 15, 16, 17, 33, 100},
                       KS[] = {1, 2, 3, 7, 64, 257};
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(2, &pool));
  isa_level levels[] = {ISA_SCALAR, ISA_AVX2};
  for (int f = 0; f < 2; f++)
  for (int l = 0; l < 2; l++) {
    fmt = f ? WB16_F16 : WB16_BF16;
    if (levels[l] > isa_detect()) continue;
    n_bad = 0;
    int i = 0;
    for (int mi = 0; mi < 10; mi++)
      for (int ni = 0; ni < 7; ni++)
        for (int ki = 0; ki < 6; ki++, i++) run_case(levels[l], i % 2 ? pool : NULL, MS[mi], NS[ni], KS[ki], i % 3 == 0, i);
    /* big enough to be split across the pool's threads */
    run_case(levels[l], pool, 1, 1001, 300, false, 1);
    run_case(levels[l], pool, 3, 999, 301, true, 2);
    CHECK(n_bad == 0);
    rounding_and_nan(levels[l]);
    printf("%s %s: %d cases, %s\n", f ? "fp16" : "bf16", isa_name(levels[l]), i + 2, n_bad ? "FAILED" : "ok");
  }
  pool_free(pool);
  return test_report("wbf16");
}
