/* The pointwise route (kernels/conv.h: conv_pointwise_run, a 1x1 conv on X
 * in place with the epilogue fused) against a double reference, on every
 * ISA path the machine has (through the isa argument), with and without a
 * thread pool (1 and 2 threads), over shapes that break its tiling: input
 * channels 1, 3, 16, 17, 24, 64; output channels off the panel height;
 * the transposed route (conv_pointwise_t_run) with and without W^T packed;
 * the route over W packed once (conv_pointwise_run_packed, directly and
 * through conv2d_prepare / conv2d_run_ep);
 * on both its tiles (row groups, channel vectors);
 * planes 1x1, 1x2, 7x7, 14x14, 13x17 and one longer than a pixel block; batch 2; with
 * and without bias, residual and clamp.  Canaries after Y catch writes
 * past the end.  Error bound as in test_conv_kernels.c:
 * |got - want| <= 2e-6 * (sum |x w| + |b| + |res|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/conv.h"
#include "kernels/conv_kernels.h"
#include "kernels/gemm.h"
#include "util/err.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / (double)(1ull << 52) - 1.0);
}

static void fill(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = urand();
}

#define CANARY 8
static double worst;

/* route 0: conv_pointwise_run; 1: conv_pointwise_t_run over W^T packed
 * for the ISA (none on scalar: the GEMM packs it per call); 2: the same
 * with no packed W^T at all; 3: conv_pointwise_run_packed over W packed by
 * conv_pointwise_pack (canaries after the packed panels: the pack writes
 * exactly conv_pointwise_packed_floats) on the row-group tile; 5: the same
 * on the channel-vector tile; 4: the same through conv2d_prepare /
 * conv2d_run_ep (CONV_ALGO_POINTWISE), as the op runs it. */
static void check_route(smelt_pool *pool, int route, int64_t N, int64_t C, int64_t M, int64_t S) {
  int64_t nx = N * C * S, ny = N * M * S;
  float *X = malloc(sizeof(float) * (size_t)nx), *W = malloc(sizeof(float) * (size_t)(M * C));
  float *B = malloc(sizeof(float) * (size_t)M), *R = malloc(sizeof(float) * (size_t)ny);
  float *Y = malloc(sizeof(float) * (size_t)(ny + CANARY));
  double *want = malloc(sizeof(double) * (size_t)ny), *mag = malloc(sizeof(double) * (size_t)ny);
  fill(X, nx), fill(W, M * C), fill(B, M), fill(R, ny);
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t p = 0; p < S; p++) {
        double acc = 0, a = 0;
        for (int64_t c = 0; c < C; c++) {
          double t = (double)W[m * C + c] * X[(n * C + c) * S + p];
          acc += t, a += fabs(t);
        }
        want[(n * M + m) * S + p] = acc;
        mag[(n * M + m) * S + p] = a + 1e-30;
      }
  for (int isa = 0; isa <= (int)isa_detect(); isa++)
    for (int v = 0; v < 8; v++) {
      bool bias = v & 1, res = v & 2, clamp = v & 4;
      conv2d_epilogue ep = {res ? R : NULL, clamp ? -0.5f : -INFINITY, clamp ? 0.75f : INFINITY};
      for (int64_t i = 0; i < ny + CANARY; i++) Y[i] = 1234.5f;
      if (route == 0) {
        CHECK_OK(conv_pointwise_run(pool, (isa_level)isa, N, C, M, S, X, W, bias ? B : NULL,
                                    v & 6 ? &ep : NULL, Y));
      } else if (route == 3 || route == 5) {
        const conv_kernels *k = conv_kernels_get((isa_level)isa);
        int pw = route == 5 ? k->pmr : k->prows;
        CHECK(pw != k->pmr || k->pmr != k->prows); /* two distinct tiles */
        int64_t np = conv_pointwise_packed_floats(pw, C, M);
        CHECK(np >= M * C && np < (M + pw) * C && np % (pw * C) == 0);
        float *wp = malloc(sizeof(float) * (size_t)(np + CANARY));
        for (int i = 0; i < CANARY; i++) wp[np + i] = 99.f;
        conv_pointwise_pack(pw, C, M, W, wp);
        for (int i = 0; i < CANARY; i++) CHECK(wp[np + i] == 99.f);
        CHECK_OK(conv_pointwise_run_packed(pool, (isa_level)isa, pw, N, C, M, S, X, wp, bias ? B : NULL,
                                           v & 6 ? &ep : NULL, Y));
        free(wp);
      } else if (route == 4) {
        /* a plane of S pixels as S x 1 */
        conv2d_desc d = {.N = N, .C = C, .H = S, .W = 1, .M = M, .G = 1, .KH = 1, .KW = 1, .OH = S, .OW = 1,
                         .sh = 1, .sw = 1, .dh = 1, .dw = 1};
        conv2d_weights *pw = NULL;
        CHECK(conv2d_supports(&d, CONV_ALGO_POINTWISE));
        CHECK_OK(conv2d_prepare(pool, &d, CONV_ALGO_POINTWISE, (isa_level)isa, W, &pw));
        CHECK_OK(conv2d_run_ep(pool, &d, pw, X, bias ? B : NULL, v & 6 ? &ep : NULL, Y));
        conv2d_weights_free(pw);
      } else {
        gemm_packed *wt = NULL;
        if (route == 1) CHECK_OK(gemm_pack_b_prepare(pool, (isa_level)isa, true, C, M, W, C, &wt));
        CHECK_OK(conv_pointwise_t_run(pool, (isa_level)isa, N, C, M, S, X, W, wt, bias ? B : NULL,
                                      v & 6 ? &ep : NULL, Y));
        gemm_packed_free(wt);
      }
      for (int64_t i = 0; i < ny; i++) {
        int64_t m = i / S % M;
        double b = bias ? B[m] : 0, r = res ? R[i] : 0, t = want[i] + b + r;
        double c = t < ep.lo ? ep.lo : t > ep.hi ? ep.hi : t;
        double e = fabs(Y[i] - c) / (mag[i] + fabs(b) + fabs(r));
        if (e > worst) worst = e;
        if (!(e <= 2e-6)) {
          fprintf(stderr, "route %d %s N%lld C%lld M%lld S%lld case %d: element %lld is %.9g, expected %.9g\n",
                  route, isa_name((isa_level)isa), (long long)N, (long long)C, (long long)M, (long long)S, v,
                  (long long)i, Y[i], c);
          CHECK(0);
          break;
        }
      }
      for (int i = 0; i < CANARY; i++) CHECK(Y[ny + i] == 1234.5f);
    }
  free(X), free(W), free(B), free(R), free(Y), free(want), free(mag);
}

static void check_shape(smelt_pool *pool, int64_t N, int64_t C, int64_t M, int64_t S) {
  check_route(pool, 0, N, C, M, S);
  check_route(pool, 3, N, C, M, S);
  check_route(pool, 5, N, C, M, S);
}

/* The transposed route: pixels as the GEMM's rows (MR 6 at AVX2, 8 at
 * AVX-512) and channels its columns, off both tile sizes and the vector
 * width; a K past the GEMM's K block (256). */
static void t_cases(smelt_pool *pool) {
  static const int64_t Cs[] = {1, 3, 17, 300};
  static const int64_t Ms[] = {1, 5, 17, 40};
  static const int64_t Ss[] = {1, 7 * 7, 13 * 17};
  for (size_t c = 0; c < sizeof Cs / sizeof *Cs; c++)
    for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
      for (size_t s = 0; s < sizeof Ss / sizeof *Ss; s++)
        for (int route = 1; route <= 2; route++) check_route(pool, route, 1, Cs[c], Ms[m], Ss[s]);
  check_route(pool, 1, 2, 24, 33, 7 * 7);
  check_route(pool, 1, 1, 160, 96, 7 * 7);
}

static void cases(smelt_pool *pool) {
  static const int64_t Cs[] = {1, 3, 16, 17, 24, 64, 200};
  static const int64_t Ms[] = {1, 3, 5, 17, 40, 67};
  static const int64_t Ss[] = {1, 2, 7 * 7, 14 * 14, 13 * 17, 30 * 31};
  for (size_t c = 0; c < sizeof Cs / sizeof *Cs; c++)
    for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
      for (size_t s = 0; s < sizeof Ss / sizeof *Ss; s++) check_shape(pool, 1, Cs[c], Ms[m], Ss[s]);
  check_shape(pool, 2, 17, 9, 13 * 17);
  check_shape(pool, 2, 24, 144, 56 * 56);
  check_shape(pool, 1, 24, 144, 47 * 53); /* an expansion's pixel blocks evened out: 2 of 1248 and 1243 */
  check_shape(pool, 1, 384, 66, 14 * 14); /* the small-plane route: C past 64 */
  check_shape(pool, 2, 257, 33, 13 * 17);
  check_route(pool, 4, 2, 17, 9, 13 * 17);
  check_route(pool, 4, 1, 384, 66, 14 * 14);
  check_route(pool, 4, 1, 300, 70, 7 * 7);
}

static void guard_cases(void) {
  float x = 1, w = 1, y = 0;
  CHECK(conv_pointwise_run(NULL, ISA_SCALAR, 1, 0, 1, 1, &x, &w, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  CHECK(conv_pointwise_run(NULL, ISA_SCALAR, 1, 1, 1, -1, &x, &w, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  CHECK_OK(conv_pointwise_run(NULL, ISA_SCALAR, 0, 1, 1, 1, &x, &w, NULL, NULL, &y));
  CHECK(y == 0);
  CHECK(conv_pointwise_suits(16, 96, 112 * 112) && !conv_pointwise_suits(0, 96, 1));
  CHECK(conv_pointwise_suits(144, 24, 56 * 56) && !conv_pointwise_suits(96, 576, 28 * 28));
  CHECK(!conv_pointwise_suits(256, 64, 56 * 56));
  /* small planes with a small weight; not 7x7, not weights past L2, not 28x28 */
  CHECK(conv_pointwise_suits(96, 576, 14 * 14) && conv_pointwise_suits(576, 96, 14 * 14));
  CHECK(conv_pointwise_suits(384, 64, 13 * 13) && conv_pointwise_suits(256, 32, 27 * 27));
  CHECK(!conv_pointwise_suits(576, 160, 7 * 7) && !conv_pointwise_suits(512, 1000, 13 * 13));
  CHECK(!conv_pointwise_suits(512, 128, 28 * 28) && !conv_pointwise_suits(1024, 256, 14 * 14));
  /* AVX-512 takes every plane from 7x7 up; smaller ones and AVX2 keep the rule above */
  CHECK(conv_pointwise_route(ISA_AVX512, 1024, 256, 14 * 14) && conv_pointwise_route(ISA_AVX512, 512, 128, 28 * 28));
  CHECK(conv_pointwise_route(ISA_AVX512, 2048, 512, 7 * 7) && !conv_pointwise_route(ISA_AVX512, 2048, 512, 6 * 6));
  CHECK(!conv_pointwise_route(ISA_AVX2, 1024, 256, 14 * 14) && !conv_pointwise_route(ISA_AVX2, 2048, 512, 7 * 7));
  CHECK(conv_pointwise_route(ISA_AVX2, 16, 96, 112 * 112) && !conv_pointwise_route(ISA_AVX512, 0, 96, 112 * 112));
  /* the transposed route: 7x7, not 14x14; none without a packed GEMM */
  CHECK(!conv_pointwise_t_suits(ISA_SCALAR, 320, 1280, 7 * 7));
  if (isa_detect() >= ISA_AVX2)
    CHECK(conv_pointwise_t_suits(ISA_AVX2, 320, 1280, 7 * 7) && !conv_pointwise_t_suits(ISA_AVX2, 96, 576, 14 * 14));
  CHECK(conv_pointwise_t_run(NULL, ISA_SCALAR, 1, 0, 1, 1, &x, &w, NULL, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  int rows = conv_kernels_get(ISA_SCALAR)->prows;
  CHECK(conv_pointwise_run_packed(NULL, ISA_SCALAR, rows, 1, 0, 1, 1, &x, &w, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  /* a panel width neither tile reads */
  CHECK(conv_pointwise_run_packed(NULL, ISA_SCALAR, rows + 1, 1, 1, 1, 1, &x, &w, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  CHECK(conv_pointwise_run_packed(NULL, ISA_SCALAR, 0, 1, 1, 1, 1, &x, &w, NULL, NULL, &y) ==
        SMELT_ERR_INVALID_ARGUMENT);
  /* the panels follow the shape: two vectors of channels on AVX-512 up to
   * 14x14, on AVX2 up to 8x8, over 64 input channels or more, where the
   * row-group tile wastes lanes and the last panel few channels */
  if (isa_detect() >= ISA_AVX512) {
    const conv_kernels *k = conv_kernels_get(ISA_AVX512);
    CHECK(conv_pointwise_panel(ISA_AVX512, 1024, 256, 14 * 14) == k->pmr);
    CHECK(conv_pointwise_panel(ISA_AVX512, 64, 160, 7 * 7) == k->pmr);
    CHECK(conv_pointwise_panel(ISA_AVX512, 1024, 256, 28 * 28) == k->prows);
    CHECK(conv_pointwise_panel(ISA_AVX512, 32, 160, 7 * 7) == k->prows);
    CHECK(conv_pointwise_panel(ISA_AVX512, 256, 48, 13 * 13) == k->prows);  /* squeezenet */
    CHECK(conv_pointwise_panel(ISA_AVX512, 512, 1000, 13 * 13) == k->prows); /* 0.94 of the lanes used */
    CHECK(conv_pointwise_panel(ISA_AVX512, 576, 48, 14 * 14) == k->prows);   /* 48 of 64 channels */
  }
  if (isa_detect() >= ISA_AVX2) {
    const conv_kernels *k = conv_kernels_get(ISA_AVX2);
    CHECK(conv_pointwise_panel(ISA_AVX2, 960, 160, 7 * 7) == k->pmr);
    CHECK(conv_pointwise_panel(ISA_AVX2, 960, 160, 14 * 14) == k->prows);
  }
  CHECK(conv_pointwise_panel(ISA_SCALAR, 960, 160, 7 * 7) == conv_kernels_get(ISA_SCALAR)->prows);
  /* the packed form takes 1x1, stride 1, unpadded, one group only */
  conv2d_desc d = {.N = 1, .C = 4, .H = 5, .W = 5, .M = 8, .G = 1, .KH = 1, .KW = 1, .OH = 5, .OW = 5,
                   .sh = 1, .sw = 1, .dh = 1, .dw = 1};
  CHECK(conv2d_supports(&d, CONV_ALGO_POINTWISE));
  d.G = 2;
  CHECK(!conv2d_supports(&d, CONV_ALGO_POINTWISE));
  d.G = 1, d.sh = 2, d.OH = 3;
  CHECK(!conv2d_supports(&d, CONV_ALGO_POINTWISE));
  d.sh = 1, d.OH = 5, d.KW = 3, d.pl = 1;
  CHECK(!conv2d_supports(&d, CONV_ALGO_POINTWISE));
}

int main(void) {
  smelt_pool *p1 = NULL, *p2 = NULL;
  CHECK_OK(pool_create(1, &p1));
  CHECK_OK(pool_create(2, &p2));
  cases(NULL);
  cases(p1);
  cases(p2);
  t_cases(NULL);
  t_cases(p2);
  guard_cases();
  pool_free(p1);
  pool_free(p2);
  printf("worst error / sum|xw|: pointwise %.2g\n", worst);
  return test_report("test_conv_pointwise");
}
