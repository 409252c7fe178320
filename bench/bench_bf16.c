/* bf16 GEMM benchmark: GFLOP/s of the fp32 GEMM (B packed ahead, as a
 * session packs a constant weight), the bf16 weight-only GEMM
 * (kernels/wbf16.h: what --precision bf16 runs without AVX512_BF16) and the
 * bf16 compute GEMM (kernels/bf16dp.h, vdpbf16ps), on transformer-sized
 * products, at 1 and N threads, with each bf16 result's largest error
 * against fp32's (absolute, and as a fraction of max |C|).  All weights are
 * prepared outside the timing; the kernels take turns run by run (median
 * of --reps after a warm-up), so load from elsewhere hits them alike.
 *
 * usage: bench_bf16 [--threads 1,N] [--shapes MxNxK,...] [--reps R] [--scalar]
 *   default threads: 1 and every core; default shapes (M,N,K) = (128,768,768)
 *   (128,3072,768) (128,768,3072) (512,1024,1024) (2048,2048,2048).
 *   Without AVX512_BF16 (or under SMELT_ISA=avx2) the bf16 compute column
 *   says n/a; --scalar runs it with the scalar tile kernel there (slow: a
 *   check of the driver, not a speed).  About 30 s on a 16-core AVX-512
 *   machine. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "kernels/wbf16.h"
#include "parallel/pool.h"

typedef struct shape { int64_t M, N, K; } shape;

enum { K_F32, K_WBF16, K_DP, K_COUNT };

typedef struct ctx {
  smelt_pool *pool;
  isa_level isa;
  shape s;
  const float *A, *B;
  gemm_packed *pre;
  wbf16_weights wb;
  bf16dp_weights dp;
  bf16dp_tile_fn tile;
  float *C[K_COUNT];
} ctx;

static int run_one(ctx *x, int k) {
  if (k == K_F32) {
    gemm_params p = gemm_params_default();
    p.M = x->s.M, p.N = x->s.N, p.K = x->s.K, p.A = x->A, p.lda = x->s.K, p.B = x->B, p.ldb = x->s.N;
    p.C = x->C[k], p.ldc = x->s.N, p.packed_b = x->pre;
    return gemm_f32_ex(x->pool, &p) != SMELT_OK;
  }
  if (k == K_WBF16) {
    wbf16_args a = {.M = x->s.M, .A = x->A, .lda = x->s.K, .w = &x->wb, .alpha = 1.f, .C = x->C[k], .ldc = x->s.N};
    return wbf16_run(x->pool, x->isa, &a) != SMELT_OK;
  }
  bf16dp_args a = {.M = x->s.M, .A = x->A, .lda = x->s.K, .w = &x->dp, .alpha = 1.f, .C = x->C[k], .ldc = x->s.N,
                   .tile = x->tile};
  return bf16dp_run(x->pool, x->isa, &a) != SMELT_OK;
}

static int parse_list(const char *s, int64_t *out, int max) {
  int n = 0;
  while (s && *s && n < max) {
    out[n++] = strtoll(s, (char **)&s, 10);
    if (*s == ',' || *s == 'x') s++;
  }
  return n;
}

int main(int argc, char **argv) {
  int64_t th[8] = {1, pool_machine_cores()};
  int n_th = th[1] > 1 ? 2 : 1, reps = 7;
  shape shapes[16] = {{128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}, {512, 1024, 1024}, {2048, 2048, 2048}};
  int n_sh = 5;
  bool scalar = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_th = parse_list(argv[++i], th, 8);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--scalar")) scalar = true;
    else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
      int64_t v[48];
      int n = parse_list(argv[++i], v, 48);
      n_sh = n / 3;
      for (int j = 0; j < n_sh; j++) shapes[j] = (shape){v[3 * j], v[3 * j + 1], v[3 * j + 2]};
    } else {
      fprintf(stderr, "usage: bench_bf16 [--threads 1,N] [--shapes MxNxK,...] [--reps R] [--scalar]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  isa_level isa = isa_active();
  bool hw = bf16dp_hw(isa), dp_on = hw || scalar;
  printf("isa %s, AVX512_BF16 %s (bf16-dp %s), %d cores, median of %d\n", isa_name(isa),
         isa_has_avx512bf16() ? "yes" : "no", hw ? "AVX-512 BF16 kernel" : scalar ? "scalar kernel (--scalar)" : "n/a",
         pool_machine_cores(), reps);
  printf("%5s %5s %5s %3s | %9s %9s %9s | %7s %7s | %10s %10s %10s %10s\n", "M", "N", "K", "thr", "fp32", "bf16-w",
         "bf16-dp", "dp/fp32", "dp/w", "err-w", "err-w/max", "err-dp", "err-dp/max");
  for (int si = 0; si < n_sh; si++) {
    shape s = shapes[si];
    float *A = malloc(sizeof(float) * (size_t)(s.M * s.K)), *B = malloc(sizeof(float) * (size_t)(s.K * s.N));
    if (!A || !B) return 1;
    srand(1);
    for (int64_t i = 0; i < s.M * s.K; i++) A[i] = (float)rand() / RAND_MAX * 2.f - 1.f;
    for (int64_t i = 0; i < s.K * s.N; i++) B[i] = (float)rand() / RAND_MAX * 2.f - 1.f;
    void *wb = tensor_data_alloc(wbf16_weights_bytes(s.K, s.N)), *dp = tensor_data_alloc(bf16dp_weights_bytes(s.K, s.N));
    for (int ti = 0; ti < n_th; ti++) {
      smelt_pool *pool = NULL;
      if (th[ti] > 1 && pool_create((int)th[ti], &pool) != SMELT_OK) return 1;
      ctx x = {.pool = pool, .isa = isa, .s = s, .A = A, .B = B, .tile = hw ? NULL : bf16dp_tile_scalar};
      if (gemm_pack_b_prepare(pool, isa, false, s.K, s.N, B, s.N, &x.pre) != SMELT_OK) return 1;
      wbf16_pack_b(pool, false, s.K, s.N, B, wb);
      wbf16_weights_view(s.K, s.N, wb, &x.wb);
      bf16dp_pack_b(pool, false, s.K, s.N, B, dp);
      bf16dp_weights_view(s.K, s.N, dp, &x.dp);
      for (int k = 0; k < K_COUNT; k++) x.C[k] = calloc((size_t)(s.M * s.N), sizeof(float));
      double *t[K_COUNT];
      for (int k = 0; k < K_COUNT; k++) t[k] = calloc((size_t)reps, sizeof(double));
      for (int r = -1; r < reps; r++) /* -1: warm-up */
        for (int k = 0; k < K_COUNT; k++) {
          if (k == K_DP && !dp_on) continue;
          double t0 = now_s();
          if (run_one(&x, k)) return 1;
          if (r >= 0) t[k][r] = now_s() - t0;
        }
      double gf[K_COUNT], cmax = 0, err[K_COUNT] = {0};
      for (int k = 0; k < K_COUNT; k++) {
        qsort(t[k], (size_t)reps, sizeof(double), cmp_double);
        gf[k] = k == K_DP && !dp_on ? NAN : 2.0 * (double)s.M * (double)s.N * (double)s.K / t[k][reps / 2] * 1e-9;
      }
      for (int64_t i = 0; i < s.M * s.N; i++) {
        cmax = fmax(cmax, fabs(x.C[K_F32][i]));
        for (int k = 1; k < K_COUNT; k++) err[k] = fmax(err[k], fabs(x.C[k][i] - x.C[K_F32][i]));
      }
      if (!dp_on) err[K_DP] = NAN;
      printf("%5lld %5lld %5lld %3lld | %9.1f %9.1f %9.1f | %7.2f %7.2f | %10.3g %10.3g %10.3g %10.3g\n",
             (long long)s.M, (long long)s.N, (long long)s.K, (long long)th[ti], gf[K_F32], gf[K_WBF16], gf[K_DP],
             gf[K_DP] / gf[K_F32], gf[K_DP] / gf[K_WBF16], err[K_WBF16], err[K_WBF16] / cmax, err[K_DP],
             err[K_DP] / cmax);
      fflush(stdout);
      for (int k = 0; k < K_COUNT; k++) free(x.C[k]), free(t[k]);
      gemm_packed_free(x.pre);
      pool_free(pool);
    }
    tensor_data_free(wb), tensor_data_free(dp);
    free(A), free(B);
  }
  printf("GFLOP/s (2MNK / median time); dp/fp32, dp/w: speed ratios; err: max |C - C_fp32| (over max |C_fp32|)\n");
  return 0;
}
