/* The bf16 compute GEMM (kernels/bf16dp.h) through its portable parts: the
 * pair packing of B and A, the driver and the scalar tile kernel (the
 * AVX-512 BF16 kernel against the scalar one: test_bf16dp_avx512.c).
 *   - layout: pair j of B's panel row p is b[2p][j] | b[2p+1][j] << 16,
 *     K odd pads the last high half with 0, N pads columns with 0; A's tile
 *     the same by rows, rows past M 0; the rounding is f32_to_bf16's
 *     (nearest even, ties, NaN kept quiet, infinities) bit for bit;
 *   - the product on awkward shapes, M 1..37 (12-row tiles and their
 *     edges), N 1..70 (off the 32-column panel), K 1..67 odd and even, B
 *     plain and transposed, alpha, bias, accumulation, row strides, on 1, 2
 *     and 3 threads, and once with A in several blocks (K 4001):
 *       against the double-precision product of the bf16-rounded operands
 *       within the fp32 sums' rounding, 4 (K + 4) 2^-24 sum |a b|;
 *       against the fp32 operands within the two roundings,
 *       (2^-7 + 2^-16) sum |a b| (bf16dp.h's bound) plus that slack;
 *   - selection: the registry's entry for bf16 weights with many rows is
 *     the dot-product kernel where SMELT_BF16DP=1 and the fp32 GEMM over the
 *     fp32 weight packed once where SMELT_BF16DP=0 (fp16 weights: always);
 *     few rows take the weight-only one; unset, it follows the CPU
 *     (AVX512_BF16 at the avx512 level) and SMELT_ISA=avx2 never picks it;
 *   - a session (models/mlp, batch 40: three Gemms of 40 rows) at precision
 *     bf16 with SMELT_BF16DP=1, eager and default mode, against fp32: within
 *     2% of the output's largest magnitude (each layer off by at most 2^-7
 *     sum |a b|), cosine >= 0.9999, and not the SMELT_BF16DP=0 result,
 *     which is fp32's (within 1e-5 of its largest magnitude: no weight
 *     rounded, ops/gemm_bf16.h's gemm_half_as_f32_for); with the cache
 *     on, the pairs stored by one session and mapped by the next give the
 *     same result bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "parallel/pool.h"
#include "runtime/gemm_registry.h"
#include "smelt.h"

#define TEST_RNG_SEED 0x3c6ef372fe94f82bull
#include "test_rng.h"

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static void layout(void) {
  /* B 3 x 2 (K odd), plain and transposed; A 2 rows of K 3 */
  const float B[6] = {1.5f, -2.f, 3.25f, 0.1f, -7.f, 1e-3f}; /* b[k][n] = B[k * 2 + n] */
  float Bt[6];
  for (int k = 0; k < 3; k++)
    for (int n = 0; n < 2; n++) Bt[n * 3 + k] = B[k * 2 + n];
  CHECK(bf16dp_weights_bytes(3, 2) == 4 * 2 * 32);
  CHECK(bf16dp_weights_bytes(0, 2) == 0);
  for (int tb = 0; tb < 2; tb++) {
    uint32_t *blob = tensor_data_alloc(bf16dp_weights_bytes(3, 2));
    bf16dp_weights w;
    bf16dp_pack_b(NULL, tb, 3, 2, tb ? Bt : B, blob);
    bf16dp_weights_view(3, 2, blob, &w);
    CHECK(w.Kp == 2 && w.Np == 32 && w.w == blob);
    for (int p = 0; p < 2; p++)
      for (int j = 0; j < 32; j++) {
        uint32_t lo = j < 2 ? f32_to_bf16(B[2 * p * 2 + j]) : 0;
        uint32_t hi = j < 2 && 2 * p + 1 < 3 ? f32_to_bf16(B[(2 * p + 1) * 2 + j]) : 0;
        CHECK(blob[p * 32 + j] == (lo | hi << 16));
      }
    tensor_data_free(blob);
  }
  const float A[2 * 4] = {1.f, 2.f, 3.f, 99.f, -4.f, 5.f, 6.f, 99.f}; /* lda 4 */
  uint32_t tile[2 * BF16DP_MR];
  memset(tile, 0xab, sizeof tile);
  bf16dp_pack_a_tile(2, 3, A, 4, tile);
  for (int r = 0; r < BF16DP_MR; r++) {
    uint32_t p0 = r < 2 ? (uint32_t)f32_to_bf16(A[r * 4]) | (uint32_t)f32_to_bf16(A[r * 4 + 1]) << 16 : 0;
    uint32_t p1 = r < 2 ? f32_to_bf16(A[r * 4 + 2]) : 0;
    CHECK(tile[r] == p0);
    CHECK(tile[BF16DP_MR + r] == p1);
  }
  /* rounding: ties to even, NaN, infinities, random bit patterns */
  float v[64];
  uint32_t bits[8] = {0x3f808000u, 0x3f818000u, 0x3f807fffu, 0x7fc00001u, 0xff800001u, 0x7f800000u, 0xff7fffffu,
                      0x00000001u};
  for (int i = 0; i < 64; i++) {
    uint32_t u = i < 8 ? bits[i] : rng() ^ rng() << 16;
    memcpy(&v[i], &u, sizeof u);
  }
  uint32_t t[32 * BF16DP_MR];
  bf16dp_pack_a_tile(1, 64, v, 64, t);
  int bad = 0;
  for (int q = 0; q < 32; q++)
    bad += t[q * BF16DP_MR] != ((uint32_t)f32_to_bf16(v[2 * q]) | (uint32_t)f32_to_bf16(v[2 * q + 1]) << 16);
  CHECK(bad == 0);
}

static int n_bad;

static void run_case(smelt_pool *pool, int64_t M, int64_t N, int64_t K, bool tb, int i) {
  float alpha = i % 3 == 2 ? -0.5f : 1.f;
  bool use_bias = i % 2 == 0, acc = i % 4 == 1;
  int64_t lda = K + (i % 3 == 1 ? 3 : 0), ldc = N + (i % 5 == 2 ? 5 : 0);
  float *A = malloc(sizeof(float) * (size_t)(M * lda)), *B = malloc(sizeof(float) * (size_t)(K * N));
  float *bias = malloc(sizeof(float) * (size_t)N), *C = malloc(sizeof(float) * (size_t)(M * ldc));
  float *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
  void *blob = tensor_data_alloc(bf16dp_weights_bytes(K, N));
  for (int64_t j = 0; j < M * lda; j++) A[j] = frand() * 3.f;
  for (int64_t j = 0; j < K * N; j++) B[j] = frand();
  for (int64_t j = 0; j < N; j++) bias[j] = frand();
  for (int64_t j = 0; j < M * ldc; j++) C[j] = C0[j] = frand();
  bf16dp_weights w;
  bf16dp_pack_b(pool, tb, K, N, B, blob);
  bf16dp_weights_view(K, N, blob, &w);
  bf16dp_args a = {.M = M, .A = A, .lda = lda, .w = &w, .alpha = alpha, .bias = use_bias ? bias : NULL,
                   .accumulate = acc, .C = C, .ldc = ldc, .tile = bf16dp_tile_scalar};
  CHECK_OK(bf16dp_run(pool, ISA_SCALAR, &a));
  int bad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < ldc; n++) {
      float got = C[m * ldc + n];
      if (n >= N) { /* past the product's columns: untouched */
        bad += got != C0[m * ldc + n];
        continue;
      }
      double s_r = 0, s = 0, mag = 0;
      for (int64_t k = 0; k < K; k++) {
        float av = A[m * lda + k], bv = tb ? B[n * K + k] : B[k * N + n];
        s_r += (double)bf(av) * bf(bv);
        s += (double)av * bv;
        mag += fabs((double)av * bv);
      }
      double base = (use_bias ? bias[n] : 0.) + (acc ? C0[m * ldc + n] : 0.);
      double slack = 4.0 * (double)(K + 4) * 0x1p-24 * (fabs(alpha) * mag + fabs(base)) + 1e-30;
      double e_r = fabs(got - (alpha * s_r + base)), e = fabs(got - (alpha * s + base));
      bool ok = e_r <= slack && e <= fabs(alpha) * (0x1p-7 + 0x1p-16) * mag + slack;
      if (!ok && n_bad++ < 5)
        fprintf(stderr, "M %lld N %lld K %lld tb %d case %d: C[%lld][%lld] = %.9g, bf16 ref %.9g (err %.3g, slack %.3g), "
                "fp32 ref %.9g\n", (long long)M, (long long)N, (long long)K, tb, i, (long long)m, (long long)n, got,
                alpha * s_r + base, e_r, slack, alpha * s + base);
      bad += !ok;
    }
  CHECK(bad == 0);
  tensor_data_free(blob);
  free(A), free(B), free(bias), free(C), free(C0);
}

static void products(smelt_pool *pools[3]) {
  static const int64_t Ms[] = {1, 2, 5, 11, 12, 13, 24, 37};
  static const int64_t Ns[] = {1, 7, 31, 32, 33, 64, 70};
  static const int64_t Ks[] = {1, 2, 3, 16, 31, 64, 67};
  int i = 0;
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, i++)
        run_case(pools[i % 3], Ms[mi], Ns[ni], Ks[ki], i % 7 == 3, i);
  /* A in several blocks (at most 1 MiB of pairs each: 250 rows at K 4001 in 3 blocks of 84) */
  run_case(pools[1], 250, 33, 4001, false, 1);
  run_case(pools[2], 131, 40, 4001, true, 2);
}

static void selection(void) {
  smelt_dtype f = SMELT_F32;
  const char *dp = "kernels/bf16dp.h", *wo = "kernels/wbf16.h", *f32 = "fp32 weight packed once";
  setenv("SMELT_BF16DP", "1", 1);
  const gemm_kernel *k = gemm_kernel_select(f, f, IR_QUANT_BF16, f, GEMM_W_BF16, ISA_AVX2, GEMM_SHAPE_LARGE);
  CHECK(k && strstr(k->name, dp));
  k = gemm_kernel_select(f, f, IR_QUANT_BF16, f, GEMM_W_BF16, ISA_AVX2, GEMM_SHAPE_SMALL_M);
  CHECK(k && strstr(k->name, wo));
  k = gemm_kernel_select(f, f, IR_QUANT_F16, f, GEMM_W_F16, ISA_AVX2, GEMM_SHAPE_LARGE); /* fp16 weights: never; fp32 packed */
  CHECK(k && !strstr(k->name, dp) && strstr(k->name, f32));
  k = gemm_kernel_select(f, f, IR_QUANT_F16, f, GEMM_W_F16, ISA_AVX2, GEMM_SHAPE_SMALL_M);
  CHECK(k && strstr(k->name, wo));
  setenv("SMELT_BF16DP", "0", 1); /* no bf16 arithmetic: many rows in fp32 over the fp32 weight packed once */
  k = gemm_kernel_select(f, f, IR_QUANT_BF16, f, GEMM_W_BF16, ISA_AVX512, GEMM_SHAPE_LARGE);
  CHECK(k && strstr(k->name, f32));
  k = gemm_kernel_select(f, f, IR_QUANT_BF16, f, GEMM_W_BF16, ISA_AVX512, GEMM_SHAPE_GEMV);
  CHECK(k && strstr(k->name, wo));
  unsetenv("SMELT_BF16DP");
  k = gemm_kernel_select(f, f, IR_QUANT_BF16, f, GEMM_W_BF16, ISA_AVX512, GEMM_SHAPE_LARGE);
  CHECK(k && strstr(k->name, bf16dp_hw(ISA_AVX512) ? dp : f32));
  CHECK(!bf16dp_hw(ISA_AVX2) && !bf16dp_hw(ISA_SCALAR));
  CHECK(!bf16dp_wanted(ISA_AVX2));
  CHECK(bf16dp_tile_for(ISA_AVX2) == bf16dp_tile_scalar);
  printf("AVX512_BF16 on this CPU: %s\n", isa_has_avx512bf16() ? "yes" : "no");
}

#define SB 40
#define IN 64
#define OUT 10

static smelt_status run_mlp(const smelt_model *m, smelt_mode mode, smelt_precision p, const float *x, float *y) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = mode, o.precision = p, o.threads = 2, o.dims = "batch=40";
  smelt_session *s = NULL;
  smelt_status st = smelt_session_create(m, &o, &s);
  if (st) return st;
  smelt_tensor in = {.name = "x", .dtype = SMELT_F32, .rank = 2, .dims = {SB, IN}, .data = (void *)x,
                     .nbytes = sizeof(float) * SB * IN};
  smelt_tensor out = {.name = "y", .dtype = SMELT_F32, .rank = 2, .dims = {SB, OUT}, .data = y,
                      .nbytes = sizeof(float) * SB * OUT};
  st = smelt_session_run(s, &in, 1, &out, 1);
  smelt_session_free(s);
  return st;
}

static void session(void) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(SMELT_SOURCE_DIR "/models/mlp/model.onnx", &m)); /* in the repo: missing fails */
  if (!m) return;
  static float x[SB * IN], ref[SB * OUT], y[SB * OUT], yw[SB * OUT], ye[SB * OUT];
  for (int i = 0; i < SB * IN; i++) x[i] = sinf(0.37f * (float)i) * 2.f;
  CHECK_OK(run_mlp(m, SMELT_MODE_EAGER, SMELT_PRECISION_FP32, x, ref));
  for (int mode = 0; mode < 2; mode++) {
    smelt_mode md = mode ? SMELT_MODE_DEFAULT : SMELT_MODE_EAGER;
    setenv("SMELT_BF16DP", "0", 1);
    CHECK_OK(run_mlp(m, md, SMELT_PRECISION_BF16, x, yw));
    setenv("SMELT_BF16DP", "1", 1);
    CHECK_OK(run_mlp(m, md, SMELT_PRECISION_BF16, x, y));
    double ymax = 0, err = 0, ab = 0, aa = 0, bb = 0;
    int same_w = 0;
    for (int i = 0; i < SB * OUT; i++) {
      ymax = fmax(ymax, fabs(ref[i]));
      err = fmax(err, fabs(y[i] - ref[i]));
      ab += (double)y[i] * ref[i], aa += (double)y[i] * y[i], bb += (double)ref[i] * ref[i];
      same_w += y[i] == yw[i];
    }
    double cos = ab / sqrt(aa * bb), err_w = 0;
    for (int i = 0; i < SB * OUT; i++) err_w = fmax(err_w, fabs(yw[i] - ref[i]));
    printf("mode %s: bf16 compute max abs error %.3g of max |y| %.3g, cosine %.7f, %d of %d outputs equal to "
           "the no-bf16-arithmetic run's (fp32 weights for 40 rows: %.3g from fp32)\n", smelt_mode_name(md), err,
           ymax, cos, same_w, SB * OUT, err_w);
    CHECK(err <= 0.02 * ymax);
    CHECK(cos >= 0.9999);
    CHECK(same_w < SB * OUT / 2); /* the bf16 compute kernel ran */
    CHECK(err_w <= 1e-5 * ymax);  /* gemm_half_as_f32_for: fp32 as fp32 runs it, no weight rounded */
    if (mode == 1) memcpy(ye, y, sizeof y); /* default mode's bf16 compute result, for the cache below */
  }
  /* through the prep store (compiled modes): the first session packs the
   * pairs into the cache, the second maps them; both as without a cache,
   * bit for bit */
  const char *tmp = getenv("TMPDIR");
  char dir[512];
  snprintf(dir, sizeof dir, "%s/smelt-test-bf16dp-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir)) {
    setenv("SMELT_CACHE_DIR", dir, 1);
    unsetenv("SMELT_CACHE");
    for (int pass = 0; pass < 2; pass++) {
      CHECK_OK(run_mlp(m, SMELT_MODE_DEFAULT, SMELT_PRECISION_BF16, x, y));
      CHECK(!memcmp(y, ye, sizeof y));
    }
    setenv("SMELT_CACHE", "off", 1);
    unsetenv("SMELT_CACHE_DIR");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  } else {
    CHECK(!"mkdtemp");
  }
  unsetenv("SMELT_BF16DP");
  smelt_model_free(m);
}

int main(void) {
  setenv("SMELT_CACHE", "off", 1);
  smelt_pool *pools[3] = {NULL, NULL, NULL};
  CHECK_OK(pool_create(2, &pools[1]));
  CHECK_OK(pool_create(3, &pools[2]));
  layout();
  products(pools);
  CHECK(n_bad == 0);
  selection();
  session();
  pool_free(pools[1]);
  pool_free(pools[2]);
  return test_report("test_bf16dp");
}
