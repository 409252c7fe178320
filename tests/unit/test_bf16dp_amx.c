/* The AMX driver of the bf16 compute GEMM (kernels/x86/bf16dp_amx.c)
 * against the same product through the scalar tile kernel (bf16dp_run with
 * tile = bf16dp_tile_scalar).  Skipped (exit 77) where the CPU or the OS
 * offers no AMX; it must run on a CPU that does (Sapphire Rapids and later).
 *   - shapes around the 32 x 32 items and the 16-pair K steps: M 1..130, N
 *     1..100 (panels padded to 32), K 32..768 and odd K = 2 Kp - 1, with
 *     and without bias, alpha 1 / -0.75, writing or accumulating into C
 *     (ldc past N: what lies beyond must stay as it was), 1 and 3 threads;
 *   - TDPBF16PS sums its pairs in an order of its own, so the check allows
 *     the fp32 sums' rounding, 2 (Kp + 2) 2^-24 (|alpha| sum |a b| + |bias| +
 *     |C|), with a and b the bf16-rounded operands, and prints the largest
 *     difference;
 *   - bf16dp_run with no tile kernel named takes the AMX driver where it
 *     suits (the same result as bf16dp_amx_run), and Kp not a multiple of
 *     16 is refused by bf16dp_amx_suits;
 *   - anywhere: under an isa below avx512, or SMELT_AMX=0, AMX is never
 *     chosen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "parallel/pool.h"

#define TEST_RNG_SEED 0x5d1b0a77e3c2f419ull
#include "test_rng.h"

static double max_err;
static long n_values, n_bad;

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static void one(smelt_pool *pool, int64_t M, int64_t N, int64_t K, bool bias_on, float alpha, bool acc) {
  int64_t lda = K + 1, ldc = N + 2;
  float *A = malloc(sizeof(float) * (size_t)(M * lda)), *B = malloc(sizeof(float) * (size_t)(K * N));
  float *bias = malloc(sizeof(float) * (size_t)N), *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
  float *Ca = malloc(sizeof(float) * (size_t)(M * ldc)), *Cs = malloc(sizeof(float) * (size_t)(M * ldc));
  void *blob = malloc(bf16dp_weights_bytes(K, N));
  CHECK(A && B && bias && C0 && Ca && Cs && blob);
  if (!A || !B || !bias || !C0 || !Ca || !Cs || !blob) goto done;
  for (int64_t i = 0; i < M * lda; i++) A[i] = frand();
  for (int64_t i = 0; i < K * N; i++) B[i] = frand();
  for (int64_t i = 0; i < N; i++) bias[i] = frand();
  for (int64_t i = 0; i < M * ldc; i++) C0[i] = frand();
  bf16dp_pack_b(pool, false, K, N, B, blob);
  bf16dp_weights w;
  bf16dp_weights_view(K, N, blob, &w);
  bf16dp_args args = {.M = M, .A = A, .lda = lda, .w = &w, .alpha = alpha, .bias = bias_on ? bias : NULL,
                      .accumulate = acc, .ldc = ldc};
  memcpy(Ca, C0, sizeof(float) * (size_t)(M * ldc));
  memcpy(Cs, C0, sizeof(float) * (size_t)(M * ldc));
  CHECK(bf16dp_amx_suits(ISA_AVX512, &w));
  args.C = Ca;
  CHECK_OK(bf16dp_amx_run(pool, &args));
  args.C = Cs;
  args.tile = bf16dp_tile_scalar;
  CHECK_OK(bf16dp_run(pool, ISA_AVX512, &args));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < ldc; n++) {
      float got = Ca[m * ldc + n], want = Cs[m * ldc + n];
      n_values++;
      if (n >= N) { /* past the columns: untouched */
        if (got != C0[m * ldc + n] && n_bad++ < 8) fprintf(stderr, "M%lld N%lld K%lld: C[%lld][%lld] past N changed\n",
                                                          (long long)M, (long long)N, (long long)K, (long long)m, (long long)n);
        continue;
      }
      double mag = fabs(bias_on ? bias[n] : 0.0) + (acc ? fabs(C0[m * ldc + n]) : 0.0);
      for (int64_t k = 0; k < K; k++) mag += fabs((double)alpha * bf(A[m * lda + k]) * bf(B[k * N + n]));
      double e = fabs((double)got - want), tol = 2.0 * (double)(w.Kp + 2) * 0x1p-24 * mag + 1e-30;
      if (e > max_err) max_err = e;
      if (!(e <= tol) && n_bad++ < 8)
        fprintf(stderr, "M%lld N%lld K%lld: C[%lld][%lld] AMX %.9g, scalar %.9g (diff %.3g, allowed %.3g)\n",
                (long long)M, (long long)N, (long long)K, (long long)m, (long long)n, got, want, e, tol);
    }
  /* the driver with no tile named takes AMX here: the same values */
  memcpy(Cs, C0, sizeof(float) * (size_t)(M * ldc));
  args.C = Cs;
  args.tile = NULL;
  CHECK_OK(bf16dp_run(pool, ISA_AVX512, &args));
  CHECK(!memcmp(Cs, Ca, sizeof(float) * (size_t)(M * ldc)));
done:
  free(A), free(B), free(bias), free(C0), free(Ca), free(Cs), free(blob);
}

int main(void) {
  if (!bf16dp_amx_hw(ISA_AVX512)) {
    /* nothing can run here; what must hold anyway: */
    bf16dp_weights w = {.K = 64, .N = 32, .Kp = 32, .Np = 32};
    CHECK(!bf16dp_amx_suits(ISA_AVX2, &w) && !bf16dp_amx_suits(ISA_SCALAR, &w));
    printf("test_bf16dp_amx: this CPU/OS offers no AMX: skipped\n");
    return test_report("test_bf16dp_amx") ? 1 : 77;
  }
  bf16dp_weights odd = {.K = 40, .N = 32, .Kp = 20, .Np = 32};
  CHECK(!bf16dp_amx_suits(ISA_AVX512, &odd));
  CHECK(!bf16dp_amx_suits(ISA_AVX2, &(bf16dp_weights){.K = 64, .N = 32, .Kp = 32, .Np = 32}));
  smelt_pool *pool3 = NULL;
  CHECK_OK(pool_create(3, &pool3));
  static const int64_t Ms[] = {1, 5, 16, 31, 32, 33, 130};
  static const int64_t Ns[] = {1, 17, 32, 70, 100};
  static const int64_t Ks[] = {32, 31, 64, 96, 63, 768};
  int c = 0;
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, c++) {
        if (Ks[ki] == 768 && Ms[mi] * Ns[ni] > 2000) continue; /* the reference sums are O(MNK) */
        one(c % 2 ? pool3 : NULL, Ms[mi], Ns[ni], Ks[ki], c % 3 != 0, c % 4 == 1 ? -0.75f : 1.f, c % 5 == 2);
      }
  setenv("SMELT_AMX", "0", 1);
  CHECK(!bf16dp_amx_hw(ISA_AVX512));
  unsetenv("SMELT_AMX");
  pool_free(pool3);
  printf("AMX vs scalar: %ld values, %ld past the tolerance; largest difference %.3g\n", n_values, n_bad, max_err);
  CHECK(n_bad == 0);
  return test_report("test_bf16dp_amx");
}
