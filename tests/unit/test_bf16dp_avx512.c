/* The AVX512_BF16 tile kernel of the bf16 compute GEMM
 * (kernels/x86/bf16dp_avx512.c) against the scalar one (kernels/bf16dp.c),
 * which sums each lane's pairs in the order of VDPBF16PS's pseudocode (high
 * halves' product, then low halves', each rounded to fp32; the products of
 * two bf16 are exact).  Skipped (exit 77) on a CPU without AVX512_BF16; it
 * must run on one.
 *   - each tile shape, rows 1..12 x cols 1..32, kp 1, 2, 7, 384, with and
 *     without bias, alpha 1 / -0.5, writing or accumulating into C (ldc
 *     past the columns: what lies beyond them must stay as it was);
 *   - A's tiles packed by vcvtne2ps2bf16 (bf16dp_pack_a_tile_avx512) word
 *     for word as the scalar packing, K 1..70 and 768, rows 1..12, with
 *     infinities, NaN and -0; a denormal becomes 0 (the kernel flushes it);
 *   - the whole driver (bf16dp_run) on awkward shapes, 1 and 3 threads
 *     (its AVX-512 runs pack A so and prefetch the next weight panel);
 *   - inputs are normal numbers, so the instruction's flushing of denormal
 *     inputs and results changes nothing: expected bit for bit; the check
 *     allows the fp32 sums' rounding, 2 (kp + 2) 2^-24 (|alpha| sum |a b| +
 *     |bias| + |C|), in case a CPU orders the two products otherwise, and
 *     prints the largest difference and how many values were not identical.
 *   - anywhere: under SMELT_ISA=avx2 (and scalar) the AVX-512 kernel is
 *     never chosen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "parallel/pool.h"

#define TEST_RNG_SEED 0x9b05688c2b3e6c1full
#include "test_rng.h"

static double max_err, max_rel;
static long n_values, n_inexact, n_bad;

/* got vs want (the scalar kernel's), with mag the value's scale. */
static void compare(float got, float want, double mag, int64_t kp, const char *what) {
  n_values++;
  if (got == want || (isnan(got) && isnan(want))) return;
  n_inexact++;
  double e = fabs((double)got - want), tol = 2.0 * (double)(kp + 2) * 0x1p-24 * mag + 1e-30;
  if (e > max_err) max_err = e;
  if (e / (mag + 1e-30) > max_rel) max_rel = e / (mag + 1e-30);
  if (!(e <= tol) && n_bad++ < 8) fprintf(stderr, "%s: got %.9g, scalar %.9g (diff %.3g, allowed %.3g)\n", what, got, want, e, tol);
}

static void tiles(void) {
  static const int64_t kps[] = {1, 2, 7, 384};
  for (size_t ki = 0; ki < sizeof kps / sizeof *kps; ki++) {
    int64_t kp = kps[ki];
    uint32_t *a = malloc(sizeof(uint32_t) * (size_t)(kp * BF16DP_MR)), *b = malloc(sizeof(uint32_t) * (size_t)(kp * BF16DP_NR));
    float bias[BF16DP_NR], A[BF16DP_MR * 2], B2[2 * BF16DP_NR];
    for (int64_t q = 0; q < kp; q++) { /* pairs from random fp32 in [-1, 1] rounded as the packers do */
      for (int i = 0; i < BF16DP_MR * 2; i++) A[i] = frand();
      for (int i = 0; i < 2 * BF16DP_NR; i++) B2[i] = frand();
      for (int r = 0; r < BF16DP_MR; r++)
        a[q * BF16DP_MR + r] = (uint32_t)f32_to_bf16(A[2 * r]) | (uint32_t)f32_to_bf16(A[2 * r + 1]) << 16;
      for (int j = 0; j < BF16DP_NR; j++)
        b[q * BF16DP_NR + j] = (uint32_t)f32_to_bf16(B2[j]) | (uint32_t)f32_to_bf16(B2[BF16DP_NR + j]) << 16;
    }
    for (int j = 0; j < BF16DP_NR; j++) bias[j] = frand();
    enum { LDC = BF16DP_NR + 3 };
    float C0[BF16DP_MR * LDC], Cs[BF16DP_MR * LDC], Cv[BF16DP_MR * LDC];
    for (int i = 0; i < BF16DP_MR * LDC; i++) C0[i] = frand();
    for (int rows = 1; rows <= BF16DP_MR; rows++)
      for (int cols = 1; cols <= BF16DP_NR; cols++)
        for (int v = 0; v < 4; v++) {
          bf16dp_epi e = {v & 1 ? -0.5f : 1.f, v & 2 ? bias : NULL, (v + rows + cols) % 3 == 0};
          memcpy(Cs, C0, sizeof Cs), memcpy(Cv, C0, sizeof Cv);
          bf16dp_tile_scalar(rows, cols, kp, a, b, &e, Cs, LDC);
          bf16dp_tile_avx512(rows, cols, kp, a, b, &e, Cv, LDC);
          for (int r = 0; r < BF16DP_MR; r++)
            for (int c = 0; c < LDC; c++) {
              int i = r * LDC + c;
              if (r >= rows || c >= cols) {
                CHECK(Cv[i] == C0[i]); /* outside the tile: untouched */
                continue;
              }
              double mag = 0;
              for (int64_t q = 0; q < kp; q++)
                for (int h = 0; h < 2; h++)
                  mag += fabs((double)bf16_to_f32((uint16_t)(a[q * BF16DP_MR + r] >> 16 * h)) *
                              bf16_to_f32((uint16_t)(b[q * BF16DP_NR + c] >> 16 * h)));
              mag = fabs(e.alpha) * mag + (e.bias ? fabs(bias[c]) : 0) + (e.accumulate ? fabs(C0[i]) : 0);
              compare(Cv[i], Cs[i], mag, kp, "tile");
            }
        }
    free(a), free(b);
  }
}

static void pack_a(void) {
  enum { LDA = 800 };
  float *A = malloc(sizeof(float) * BF16DP_MR * LDA);
  uint32_t *ts = malloc(sizeof(uint32_t) * BF16DP_MR * LDA), *tv = malloc(sizeof(uint32_t) * BF16DP_MR * LDA);
  for (int64_t K = 1; K <= 768; K = K < 70 ? K + 1 : K + 698) { /* 1 .. 70, 768 */
    for (int64_t j = 0; j < BF16DP_MR * LDA; j++) A[j] = frand() * 3.f;
    A[0] = INFINITY, A[LDA + 1] = -INFINITY, A[2 * LDA] = NAN, A[K - 1] = -0.f;
    for (int rows = 1; rows <= BF16DP_MR; rows += K % 5 + 1) {
      int64_t kp = (K + 1) / 2;
      memset(ts, 0xab, sizeof(uint32_t) * (size_t)(kp * BF16DP_MR));
      memset(tv, 0xcd, sizeof(uint32_t) * (size_t)(kp * BF16DP_MR));
      bf16dp_pack_a_tile(rows, K, A, LDA, ts);
      bf16dp_pack_a_tile_avx512(rows, K, A, LDA, tv);
      bool same = !memcmp(ts, tv, sizeof(uint32_t) * (size_t)(kp * BF16DP_MR));
      CHECK(same);
      if (!same) fprintf(stderr, "pack_a: K %lld rows %d differ\n", (long long)K, rows);
    }
  }
  A[0] = 1e-40f, A[1] = -1e-39f; /* denormals: 0 with the sign (the kernel would flush them) */
  bf16dp_pack_a_tile_avx512(1, 2, A, LDA, tv);
  CHECK((tv[0] & 0x7fff7fffu) == 0);
  free(A), free(ts), free(tv);
}

static void driver(smelt_pool *pool, int64_t M, int64_t N, int64_t K, bool tb, int i) {
  float alpha = i % 2 ? -0.5f : 1.f;
  bool acc = i % 3 == 1;
  float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
  float *bias = malloc(sizeof(float) * (size_t)N), *Cs = malloc(sizeof(float) * (size_t)(M * N));
  float *Cv = malloc(sizeof(float) * (size_t)(M * N));
  void *blob = tensor_data_alloc(bf16dp_weights_bytes(K, N));
  for (int64_t j = 0; j < M * K; j++) A[j] = frand() * 2.f;
  for (int64_t j = 0; j < K * N; j++) B[j] = frand();
  for (int64_t j = 0; j < N; j++) bias[j] = frand();
  for (int64_t j = 0; j < M * N; j++) Cs[j] = Cv[j] = frand();
  bf16dp_weights w;
  bf16dp_pack_b(pool, tb, K, N, B, blob);
  bf16dp_weights_view(K, N, blob, &w);
  bf16dp_args a = {.M = M, .A = A, .lda = K, .w = &w, .alpha = alpha, .bias = i % 2 ? NULL : bias,
                   .accumulate = acc, .C = Cs, .ldc = N, .tile = bf16dp_tile_scalar};
  CHECK_OK(bf16dp_run(pool, ISA_AVX512, &a));
  a.C = Cv, a.tile = bf16dp_tile_for(ISA_AVX512); /* the AVX-512 tile (with no tile named, AMX may take it) */
  CHECK_OK(bf16dp_run(pool, ISA_AVX512, &a));
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double mag = 0;
      for (int64_t k = 0; k < K; k++) mag += fabs((double)A[m * K + k] * (tb ? B[n * K + k] : B[k * N + n]));
      compare(Cv[m * N + n], Cs[m * N + n], fabs(alpha) * mag * 1.01 + 4.0, (K + 1) / 2, "driver");
    }
  tensor_data_free(blob);
  free(A), free(B), free(bias), free(Cs), free(Cv);
}

int main(void) {
  /* anywhere: capped levels never get the AVX-512 kernel */
  setenv("SMELT_ISA", "avx2", 1);
  CHECK(!bf16dp_hw(isa_active()));
  CHECK(bf16dp_tile_for(isa_active()) == bf16dp_tile_scalar);
  setenv("SMELT_ISA", "scalar", 1);
  CHECK(!bf16dp_hw(isa_active()));
  unsetenv("SMELT_ISA");
  if (!bf16dp_hw(isa_active())) {
    test_skip("test_bf16dp_avx512", "this CPU has no AVX512_BF16 (or SMELT_ISA caps it below avx512)");
    return test_report("test_bf16dp_avx512");
  }
  CHECK(bf16dp_tile_for(isa_active()) == bf16dp_tile_avx512);
  tiles();
  pack_a();
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  static const int64_t Ms[] = {1, 5, 12, 13, 37, 128};
  static const int64_t Ns[] = {1, 17, 32, 33, 70};
  static const int64_t Ks[] = {1, 2, 31, 67, 768};
  int i = 0;
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, i++)
        driver(i % 2 ? pool : NULL, Ms[mi], Ns[ni], Ks[ki], i % 4 == 3, i);
  pool_free(pool);
  printf("AVX512_BF16 vs scalar: %ld values, %ld not bit-identical, %ld past the tolerance; largest difference %.3g "
         "(%.3g of its scale)\n", n_values, n_inexact, n_bad, max_err, max_rel);
  CHECK(n_bad == 0);
  return test_report("test_bf16dp_avx512");
}
