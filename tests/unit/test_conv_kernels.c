/* The fast conv and pool kernels (kernels/conv.h, kernels/pool2d.h) against
 * double-precision reference loops written here, on every ISA path the
 * machine has (forced through the kernels' isa argument, not SMELT_ISA) and
 * every algorithm that applies, over shapes that break the tilings: sizes
 * 1, primes, just off the vector and panel widths, stride 2 and 3,
 * dilation, asymmetric pads, groups, depthwise (row and blocked forms,
 * 3x3, 5x5, 7x7), batch > 1; on the calling thread alone and on pools of 3
 * and 2 threads; and the prepared weights wrapped again as from a saved
 * copy.
 *
 * Error measure: |got - want| / (sum over the window of |x w| + |b| + 1e-30),
 * the bound a dot product's rounding error scales with.  Worst values seen
 * (printed at the end): 2.4e-7 direct, 1.4e-7 depthwise, 2.0e-7 F(2,3),
 * 2.2e-6 F(4,3); allowed: 2e-6, 2e-5 and 1e-4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/conv.h"
#include "ops/conv_registry.h"
#include "kernels/conv_internal.h"
#include "kernels/pool2d.h"
#include "ops/op_cache.h"
#include "util/err.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / (double)(1ull << 52) - 1.0);
}

static void fill(float *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = urand();
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  int64_t span = in + p0 + p1 - ((k - 1) * d + 1);
  return span < 0 ? 0 : span / s + 1;
}

/* want[i] and scale[i] (sum |x w| + |b|) for every output. */
static void ref_conv(const conv2d_desc *d, const float *X, const float *W, const float *B,
                     double *want, double *scale) {
  int64_t Cg = d->C / d->G, Mg = d->M / d->G;
  for (int64_t n = 0; n < d->N; n++)
    for (int64_t m = 0; m < d->M; m++)
      for (int64_t oh = 0; oh < d->OH; oh++)
        for (int64_t ow = 0; ow < d->OW; ow++) {
          double acc = B ? B[m] : 0, mag = B ? fabs(B[m]) : 0;
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < d->KH; kh++)
              for (int64_t kw = 0; kw < d->KW; kw++) {
                int64_t ih = oh * d->sh - d->pt + kh * d->dh, iw = ow * d->sw - d->pl + kw * d->dw;
                if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
                double x = X[((n * d->C + (m / Mg) * Cg + c) * d->H + ih) * d->W + iw];
                double w = W[((m * Cg + c) * d->KH + kh) * d->KW + kw];
                acc += x * w;
                mag += fabs(x * w);
              }
          int64_t i = ((n * d->M + m) * d->OH + oh) * d->OW + ow;
          want[i] = acc;
          scale[i] = mag + 1e-30;
        }
}

static double worst[CONV_ALGO_COUNT];

static double algo_tol(conv_algo a) {
  return a == CONV_ALGO_WINO4 ? 1e-4 : a == CONV_ALGO_WINO2 ? 2e-5 : 2e-6;
}

/* conv2d_run_ep: Y = clamp(conv + B + residual) against the reference,
 * with a NaN in the residual passing through the clamp; once with a
 * residual and both bounds, once with only a lower bound (Relu). */
static void check_epilogue(const conv2d_desc *d, smelt_pool *pool, const conv2d_weights *pw,
                           const float *X, const float *B, float *Y, const double *want,
                           const double *scale, conv_algo algo) {
  double tol = algo_tol(algo);
  int64_t ny = d->N * d->M * d->OH * d->OW;
  float *R = malloc(sizeof(float) * (size_t)(ny + 1));
  fill(R, ny);
  if (ny > 2) R[ny / 2] = NAN;
  for (int v = 0; v < 2; v++) {
    conv2d_epilogue ep = {v ? NULL : R, v ? 0.f : -0.5f, v ? INFINITY : 0.75f};
    for (int64_t i = 0; i < ny; i++) Y[i] = NAN;
    CHECK_OK(conv2d_run_ep(pool, d, pw, X, B, &ep, Y));
    for (int64_t i = 0; i < ny; i++) {
      double r = ep.residual ? R[i] : 0, t = want[i] + r;
      double c = isnan(t) ? t : t < ep.lo ? ep.lo : t > ep.hi ? ep.hi : t;
      bool ok = isnan(c) ? isnan(Y[i]) : fabs(Y[i] - c) <= tol * (scale[i] + fabs(r));
      if (!ok) {
        fprintf(stderr, "%s epilogue %d: element %lld is %.9g, expected %.9g (C%lld %lldx%lld k%lldx%lld s%lld)\n",
                conv_algo_name(algo), v, (long long)i, Y[i], c, (long long)d->C,
                (long long)d->H, (long long)d->W, (long long)d->KH, (long long)d->KW, (long long)d->sh);
        CHECK(0);
        break;
      }
    }
  }
  free(R);
}

/* The prepared floats saved and wrapped again (a cache entry mapped from
 * disk: conv2d_weights_wrap, which rebuilds what is not saved, such as the
 * depthwise blocked weights) give the same outputs. */
static void check_wrapped(const conv2d_desc *d, smelt_pool *pool, const conv2d_weights *pw, conv_algo algo,
                          isa_level isa, const float *X, const float *B, float *Y, const double *want,
                          const double *scale) {
  int64_t n = 0, ny = d->N * d->M * d->OH * d->OW;
  const float *saved = conv2d_weights_data(pw, &n);
  conv2d_weights *w2 = NULL;
  CHECK(conv2d_weights_wrap(d, algo, isa, saved, n + 1, &w2) != SMELT_OK && !w2);
  CHECK_OK(conv2d_weights_wrap(d, algo, isa, saved, n, &w2));
  if (!w2) return;
  for (int64_t i = 0; i < ny; i++) Y[i] = NAN;
  CHECK_OK(conv2d_run(pool, d, w2, X, B, Y));
  double e = 0;
  for (int64_t i = 0; i < ny; i++) {
    double r = fabs(Y[i] - want[i]) / scale[i];
    if (!(r <= e)) e = r;
  }
  if (!(e <= algo_tol(algo))) fprintf(stderr, "%s/%s wrapped: error %.3g\n", conv_algo_name(algo), isa_name(isa), e);
  CHECK(e <= algo_tol(algo));
  conv2d_weights_free(w2);
}

static void check_conv(const conv2d_desc *d, smelt_pool *pool) {
  int64_t nx = d->N * d->C * d->H * d->W, nw = d->M * (d->C / d->G) * d->KH * d->KW;
  int64_t ny = d->N * d->M * d->OH * d->OW;
  float *X = malloc(sizeof(float) * (size_t)(nx + 1)), *W = malloc(sizeof(float) * (size_t)(nw + 1));
  float *B = malloc(sizeof(float) * (size_t)(d->M + 1)), *Y = malloc(sizeof(float) * (size_t)(ny + 1));
  double *want = malloc(sizeof(double) * (size_t)(ny + 1)), *scale = malloc(sizeof(double) * (size_t)(ny + 1));
  fill(X, nx), fill(W, nw), fill(B, d->M);
  bool bias = d->M % 2 == 1;
  ref_conv(d, X, W, bias ? B : NULL, want, scale);
  static const conv_algo algos[] = {CONV_ALGO_DIRECT, CONV_ALGO_CHANVEC, CONV_ALGO_DEPTHWISE, CONV_ALGO_WINO2,
                                    CONV_ALGO_WINO4, CONV_ALGO_DIRECT_CV};
  for (int isa = 0; isa <= (int)isa_detect(); isa++)
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++) {
      if (!conv2d_supports(d, algos[a])) continue;
      conv2d_weights *pw = NULL;
      CHECK_OK(conv2d_prepare(pool, d, algos[a], (isa_level)isa, W, &pw));
      if (!pw) continue;
      for (int64_t i = 0; i < ny; i++) Y[i] = NAN;
      CHECK_OK(conv2d_run(pool, d, pw, X, bias ? B : NULL, Y));
      double e = 0;
      for (int64_t i = 0; i < ny; i++) {
        double r = fabs(Y[i] - want[i]) / scale[i];
        if (!(r <= e)) e = r; /* NaN counts as worst */
      }
      if (!(e <= algo_tol(algos[a]))) {
        fprintf(stderr,
                "%s/%s: error %.3g for N%lld C%lld %lldx%lld M%lld G%lld k%lldx%lld s%lld,%lld "
                "d%lld,%lld p%lld,%lld out %lldx%lld\n",
                conv_algo_name(algos[a]), isa_name((isa_level)isa), e, (long long)d->N,
                (long long)d->C, (long long)d->H, (long long)d->W, (long long)d->M,
                (long long)d->G, (long long)d->KH, (long long)d->KW, (long long)d->sh,
                (long long)d->sw, (long long)d->dh, (long long)d->dw, (long long)d->pt,
                (long long)d->pl, (long long)d->OH, (long long)d->OW);
        CHECK(0);
      }
      if (e > worst[algos[a]]) worst[algos[a]] = e;
      check_epilogue(d, pool, pw, X, bias ? B : NULL, Y, want, scale, algos[a]);
      check_wrapped(d, pool, pw, algos[a], (isa_level)isa, X, bias ? B : NULL, Y, want, scale);
      conv2d_weights_free(pw);
    }
  free(X), free(W), free(B), free(Y), free(want), free(scale);
}

static conv2d_desc mk(int64_t N, int64_t C, int64_t H, int64_t W, int64_t M, int64_t G,
                      int64_t KH, int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                      int64_t pt, int64_t pl, int64_t pb, int64_t pr) {
  conv2d_desc d = {N, C, H, W, M, G, KH, KW, 0, 0, sh, sw, dh, dw, pt, pl, 0, 0};
  d.OH = out_size(H, KH, sh, dh, pt, pb);
  d.OW = out_size(W, KW, sw, dw, pl, pr);
  return d;
}

static void conv_cases(smelt_pool *pool) {
  /* fixed awkward cases */
  conv2d_desc cs[] = {
      mk(0, 3, 5, 5, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),        /* empty batch */
      mk(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),        /* one element */
      mk(1, 3, 13, 17, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),      /* primes, padded 3x3 */
      mk(2, 17, 11, 7, 33, 1, 3, 3, 1, 1, 1, 1, 0, 2, 2, 0),     /* asymmetric pads */
      mk(1, 16, 9, 9, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),      /* exact vector widths */
      mk(1, 15, 8, 31, 17, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),     /* one off */
      mk(1, 8, 15, 15, 12, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),     /* stride 2 */
      mk(1, 5, 14, 19, 7, 1, 3, 3, 3, 2, 1, 1, 0, 1, 2, 0),      /* stride 3x2 */
      mk(1, 6, 12, 12, 9, 1, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2),      /* dilation 2 */
      mk(1, 4, 11, 13, 6, 1, 3, 2, 2, 1, 2, 3, 1, 0, 0, 3),      /* dilation with stride */
      mk(1, 3, 23, 23, 8, 1, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3),      /* resnet stem, small */
      mk(1, 6, 10, 10, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),      /* groups */
      mk(2, 12, 9, 11, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),    /* depthwise */
      mk(1, 10, 17, 9, 10, 10, 5, 3, 2, 2, 1, 2, 2, 1, 1, 2),    /* depthwise s2, dilated */
      mk(1, 7, 9, 9, 14, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),       /* channel multiplier 2 */
      mk(1, 20, 6, 6, 24, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),      /* 1x1 */
      mk(1, 20, 13, 11, 128, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),   /* Winograd, panels split by thread */
      mk(2, 9, 10, 12, 192, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),    /* ... in a batch, 3 panels at AVX-512 */
      mk(1, 20, 7, 9, 24, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),      /* 1x1 stride 2 */
      mk(1, 9, 1, 37, 5, 1, 1, 5, 1, 2, 1, 1, 0, 2, 0, 1),       /* 1-D */
      mk(1, 70, 7, 7, 67, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),      /* > one panel, 7x7 */
      /* Winograd split by panels where a thread's U is past its L2 but
       * every tile row is one item (conv_wino_plan_of), 2 threads */
      mk(1, 300, 7, 7, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 144, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 33, 29, 30, 65, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),    /* many tiles */
      /* Winograd split by tile rows, a row shared by two threads split by
       * its panels (F(4x4): 7 tile rows of 2 panels at AVX-512, 8 at AVX2) */
      mk(1, 128, 28, 28, 128, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 4, 2, 3, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),        /* output smaller than a tile */
      mk(3, 5, 6, 5, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),        /* batch 3 */
      mk(1, 2, 5, 5, 3, 1, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0),        /* no pad, 3x3 out */
      /* depthwise 3x3: narrow planes run wide, wider ones row by row */
      mk(2, 5, 7, 7, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),        /* 7x7 (mobilenet's last) */
      mk(1, 19, 57, 57, 19, 19, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),   /* stride 2, odd size */
      /* blocked (vl channels at a time): a partial channel block, planes
       * 14 and 28 wide, stride 2 down to 28 and 57, 5x5 dilated taps */
      mk(2, 19, 14, 14, 19, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 9, 28, 28, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 17, 56, 56, 17, 17, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1),
      mk(1, 3, 113, 113, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      mk(1, 11, 15, 13, 11, 11, 5, 5, 1, 2, 2, 1, 4, 1, 2, 3),
      mk(1, 3, 40, 70, 3, 3, 3, 3, 1, 1, 1, 1, 0, 1, 2, 0),      /* asymmetric pads, long rows */
      mk(1, 2, 300, 13, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),     /* tall: several wide blocks */
      mk(1, 3, 33, 31, 3, 3, 3, 3, 2, 1, 1, 1, 1, 0, 0, 1),      /* strides 2x1 */
      mk(1, 4, 15, 17, 4, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2),      /* dilation 2 */
      mk(1, 6, 9, 16, 6, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),       /* 1x1 depthwise */
      /* 3x3 rows through the ring (dw3_plane: rows of >= 48 outputs at
       * stride 1, >= 40 at stride 2): TF-style pads (bottom/right only) to
       * 48 outputs, rows of whole vectors in a batch of 2, pads of 2 whose
       * first and last windows hold two rows of padding, one row, odd
       * widths; (1, 3, 113, 113) and (1, 3, 40, 70) above take it too */
      mk(1, 5, 96, 97, 5, 5, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1),
      mk(2, 4, 9, 64, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 3, 20, 95, 3, 3, 3, 3, 2, 2, 1, 1, 2, 2, 2, 2),
      mk(1, 2, 1, 50, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 3, 7, 81, 3, 3, 3, 3, 1, 1, 1, 1, 2, 0, 0, 2),
      /* 3x3 taps read in place (dw3d_plane: stride 2 to rows of 12..128
       * outputs at AVX-512, 24..64 at AVX2; stride 1 to 32..128 at
       * AVX-512): the left and right padding masked, TF-style pads
       * (bottom/right only), pads of 2 (whole padding rows and columns),
       * a row of exactly 8 vectors, a partial last vector, batch 2, and
       * stride 1 past 128 outputs (the ring) */
      mk(1, 5, 29, 30, 5, 5, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1),
      mk(2, 3, 23, 57, 3, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      mk(1, 2, 9, 50, 2, 2, 3, 3, 2, 2, 1, 1, 2, 2, 2, 2),
      mk(1, 3, 10, 33, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 2, 4, 45, 2, 2, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2),
      mk(1, 2, 5, 128, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 3, 40, 81, 3, 3, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1),
      mk(1, 2, 6, 150, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* both row forms in bands of output rows, one per thread (from 8
       * rows a thread): uneven bands, a top pad of 2 moved by each band's
       * first row, batch 2, the ring's wide rows */
      mk(1, 3, 37, 40, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(2, 2, 51, 30, 2, 2, 3, 3, 2, 2, 1, 1, 2, 0, 0, 1),
      mk(1, 2, 33, 150, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* blocked, several output pixels at a time (dw_blk) and its tail:
       * 5x5 stride 2 (mnasnet, efficientnet) to odd planes, 5x5 stride 1
       * on 14 and 7 with a partial channel block, 3x3 with an odd width,
       * 7x7 (convnext); the row form's four-vector sums over a wide 5x5 row */
      mk(1, 21, 29, 29, 21, 21, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2),
      mk(1, 27, 14, 14, 27, 27, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2),
      mk(2, 13, 7, 7, 13, 13, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2),
      mk(1, 10, 9, 9, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 11, 14, 14, 11, 11, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3),
      mk(1, 3, 12, 75, 3, 3, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2),
      /* planes of fewer floats than a vector, and of one more: the blocked
       * output's last partial vector stored masked or whole */
      mk(1, 10, 2, 3, 10, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(2, 9, 3, 3, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 18, 17, 17, 18, 18, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* direct_out: a 3-channel stem over many tiles and chunks; taps
       * dilated past a vector (12 dropped columns a row, tiles that start
       * or end in them); rows of fewer outputs than a vector */
      mk(1, 3, 61, 67, 10, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      mk(1, 4, 9, 30, 6, 1, 1, 3, 1, 1, 1, 6, 0, 0, 0, 0),
      mk(2, 8, 5, 3, 9, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* chanvec: whole and partial channel vectors per group, rows cut
       * into tiles (13 -> 7 + 6, 29 -> 3 tiles at AVX2), stride 2,
       * dilation, a 1-D signal */
      mk(1, 48, 7, 7, 48, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(2, 30, 13, 13, 60, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 32, 15, 29, 32, 2, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1),
      mk(1, 12, 11, 11, 36, 2, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2),
      mk(1, 16, 1, 40, 16, 2, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2),
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) check_conv(&cs[i], pool);
  /* random small shapes */
  for (int r = 0; r < 40; r++) {
    int64_t G = 1 + (rng % 3 == 0) * (1 + rng % 3);
    int64_t C = G * (1 + (int64_t)(rng >> 8) % 9), M = G * (1 + (int64_t)(rng >> 16) % 11);
    int64_t KH = 1 + (rng >> 24) % 4, KW = 1 + (rng >> 28) % 4, sh = 1 + (rng >> 32) % 3,
            sw = 1 + (rng >> 34) % 3, dh = 1 + (rng >> 36) % 2, dw = 1 + (rng >> 38) % 2;
    int64_t H = (KH - 1) * dh + 1 + (int64_t)(rng >> 40) % 12, W = (KW - 1) * dw + 1 + (int64_t)(rng >> 44) % 20;
    int64_t pt = (rng >> 48) % 3, pl = (rng >> 50) % 3, pb = (rng >> 52) % 3, pr = (rng >> 54) % 3;
    if (r % 5 == 0) KH = KW = 3, sh = sw = dh = dw = 1, G = 1, C = 1 + (int64_t)(rng >> 20) % 40;
    conv2d_desc d = mk(1 + r % 2, C, H, W, M, G, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr);
    check_conv(&d, pool);
    urand();
  }
}

/* ---- pooling ---- */

static void ref_pool(const pool2d_desc *d, const float *X, double *want) {
  for (int64_t q = 0; q < d->N * d->C; q++)
    for (int64_t oh = 0; oh < d->OH; oh++)
      for (int64_t ow = 0; ow < d->OW; ow++) {
        double acc = d->is_max ? -INFINITY : 0;
        int64_t valid = 0, padded_h = 0, padded_w = 0;
        for (int64_t kh = 0; kh < d->KH; kh++) {
          int64_t ih = oh * d->sh - d->pt + kh * d->dh;
          if (ih < d->H + d->pb) padded_h++;
          for (int64_t kw = 0; kw < d->KW; kw++) {
            int64_t iw = ow * d->sw - d->pl + kw * d->dw;
            if (kh == 0 && iw < d->W + d->pr) padded_w++;
            if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) continue;
            double x = X[(q * d->H + ih) * d->W + iw];
            valid++;
            if (d->is_max) acc = x > acc ? x : acc;
            else acc += x;
          }
        }
        if (!d->is_max)
          acc = valid ? acc / (double)(d->count_pad ? padded_h * padded_w : valid) : NAN;
        want[(q * d->OH + oh) * d->OW + ow] = acc;
      }
}

static void check_pool(pool2d_desc d, smelt_pool *pool) {
  int64_t nx = d.N * d.C * d.H * d.W, ny;
  d.OH = out_size(d.H, d.KH, d.sh, d.dh, d.pt, d.pb);
  d.OW = out_size(d.W, d.KW, d.sw, d.dw, d.pl, d.pr);
  ny = d.N * d.C * d.OH * d.OW;
  float *X = malloc(sizeof(float) * (size_t)(nx + 1)), *Y = malloc(sizeof(float) * (size_t)(ny + 1));
  double *want = malloc(sizeof(double) * (size_t)(ny + 1));
  fill(X, nx);
  if (nx > 3) X[nx / 2] = NAN; /* max ignores NaN, average propagates it */
  ref_pool(&d, X, want);
  for (int isa = 0; isa <= (int)isa_detect(); isa++) {
    for (int64_t i = 0; i < ny; i++) Y[i] = 12345.f;
    CHECK_OK(pool2d_f32(pool, &d, (isa_level)isa, X, Y));
    for (int64_t i = 0; i < ny; i++) {
      bool ok = isnan(want[i]) ? isnan(Y[i]) : d.is_max ? Y[i] == (float)want[i]
                                                      : fabs(Y[i] - want[i]) <= 1e-6;
      if (!ok) {
        fprintf(stderr, "pool %s/%s: element %lld is %.9g, expected %.9g\n",
                d.is_max ? "max" : "avg", isa_name((isa_level)isa), (long long)i, Y[i], want[i]);
        CHECK(0);
        break;
      }
    }
  }
  free(X), free(Y), free(want);
}

static void pool_cases(smelt_pool *pool) {
  for (int mx = 0; mx < 2; mx++)
    for (int cp = 0; cp < 2; cp++) {
      pool2d_desc base = {.N = 1, .C = 3, .H = 13, .W = 17, .KH = 3, .KW = 3, .sh = 2, .sw = 2,
                          .dh = 1, .dw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1,
                          .is_max = mx, .count_pad = cp};
      check_pool(base, pool);
      pool2d_desc v = base;
      v.H = 56, v.W = 56, v.C = 4; /* resnet's maxpool, smaller */
      check_pool(v, pool);
      v = base, v.KH = 2, v.KW = 5, v.sh = 1, v.sw = 3, v.pt = 0, v.pl = 2, v.pb = 1, v.pr = 0;
      check_pool(v, pool);
      v = base, v.dh = 2, v.dw = 3, v.pb = 3, v.pr = 2; /* dilation, ceil_mode-like overhang */
      check_pool(v, pool);
      v = base, v.H = 1, v.KH = 1, v.sh = 1, v.pt = v.pb = 0, v.W = 31; /* 1-D */
      check_pool(v, pool);
      v = base, v.N = 2, v.H = 7, v.W = 7, v.KH = 7, v.KW = 7, v.sh = v.sw = 1, v.pt = v.pl = 0,
      v.pb = v.pr = 0;
      check_pool(v, pool);
      v = base, v.C = 2, v.H = v.W = 111, v.pt = v.pl = 0, v.pb = v.pr = 1; /* squeezenet's, ceil_mode */
      check_pool(v, pool);
      v = base, v.H = 4, v.W = 4, v.KH = 3, v.KW = 3, v.sh = v.sw = 3, v.pt = v.pl = 2,
      v.pb = v.pr = 2; /* windows entirely in the padding */
      check_pool(v, pool);
      /* 3 taps at stride 2 (max_pool_row_k3s2): rows of 1..3 values, wide begin pads, a
       * window past the end and wholly in the padding, a row longer than two vectors */
      for (int64_t w = 1; w <= 3; w++) {
        v = base, v.W = w, v.pl = 2, v.pr = 2;
        check_pool(v, pool);
      }
      v = base, v.H = 5, v.W = 37, v.pt = v.pl = 0, v.pb = v.pr = 3;
      check_pool(v, pool);
      v = base, v.H = 6, v.W = 40, v.pt = v.pl = 2, v.pb = v.pr = 2; /* 2 pads before two output vectors */
      check_pool(v, pool);
      /* outputs of at most a vector (max: the blocked form), channels that
       * leave the last block partly empty: squeezenet's 27x27 -> 13x13 (ceil
       * overhang), 2x2/2, 5x5/1 with pads, batch 2, a row of one output */
      v = base, v.C = 19, v.H = v.W = 27, v.pt = v.pl = 0, v.pb = v.pr = 1;
      check_pool(v, pool);
      v = base, v.N = 2, v.C = 33, v.H = v.W = 14, v.KH = v.KW = 2, v.pt = v.pl = v.pb = v.pr = 0;
      check_pool(v, pool);
      v = base, v.C = 17, v.H = 9, v.W = 8, v.KH = v.KW = 5, v.sh = v.sw = 1, v.pt = v.pl = v.pb = v.pr = 2;
      check_pool(v, pool);
      v = base, v.C = 5, v.H = 6, v.W = 2, v.pt = v.pl = 0, v.pb = v.pr = 0;
      check_pool(v, pool);
      /* 3x3/2 a plane per call (max_pool_plane_k3s2): output rows of
       * exactly 1, 2 and 3 vectors and one past them (15, 16, 32, 48, 49
       * outputs), begin pads of 0-2, a ceil overhang, planes of 2-4 rows
       * (windows cut by both pads), a window in the padding only */
      {
        static const int64_t geo[][5] = {{31, 31, 0, 0, 0}, {33, 9, 0, 0, 0}, {64, 64, 1, 1, 1},
                                         {96, 7, 1, 1, 1},  {97, 6, 0, 0, 0}, {95, 3, 1, 1, 2},
                                         {40, 2, 2, 2, 2},  {17, 4, 2, 0, 3},
                                         /* taller planes, the row form's 50 outputs a row */
                                         {101, 53, 0, 0, 1}, {70, 41, 1, 2, 0}, {33, 37, 1, 1, 1}};
        for (size_t g = 0; g < sizeof geo / sizeof *geo; g++) {
          v = base, v.C = 3, v.W = geo[g][0], v.H = geo[g][1], v.pl = v.pr = geo[g][2], v.pt = geo[g][3];
          v.pb = geo[g][4];
          check_pool(v, pool);
        }
      }
    }
  /* global average: planes of 1, 49, 37 and 1000 values */
  int64_t sizes[] = {1, 49, 37, 1000, 4099};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    int64_t S = sizes[s], P = 5;
    float *X = malloc(sizeof(float) * (size_t)(S * P)), Y[5];
    fill(X, S * P);
    for (int isa = 0; isa <= (int)isa_detect(); isa++) {
      global_avg_f32(pool, (isa_level)isa, P, S, X, Y);
      for (int64_t p = 0; p < P; p++) {
        double want = 0;
        for (int64_t i = 0; i < S; i++) want += X[p * S + i];
        want /= (double)S;
        CHECK(fabs(Y[p] - want) <= 1e-6);
      }
    }
    free(X);
  }
}

/* ---- the session cache ---- */

static int freed;
static void count_free(void *p) {
  freed++;
  free(p);
}

static void cache_cases(void) {
  op_cache c = {0};
  int k1 = 1, k2 = 2;
  CHECK(op_cache_find(&c, &k1, sizeof k1) == NULL);
  int *a = malloc(sizeof(int)), *b = malloc(sizeof(int)), *e = malloc(sizeof(int));
  CHECK(op_cache_add(&c, &k1, sizeof k1, a, count_free) == a);
  CHECK(op_cache_find(&c, &k1, sizeof k1) == a);
  CHECK(op_cache_add(&c, &k1, sizeof k1, b, count_free) == a); /* a racer's copy is dropped */
  CHECK(freed == 1);
  CHECK(op_cache_add(&c, &k2, sizeof k2, e, count_free) == e);
  CHECK(op_cache_find(&c, &k2, sizeof k2) == e && op_cache_find(&c, &k1, sizeof k1) == a);
  CHECK(op_cache_add(NULL, &k1, sizeof k1, NULL, NULL) == NULL);
  op_cache_free_all(&c, 1);
  CHECK(freed == 3);
}

/* geometry the phase-split kernels refuse (the op falls back to im2col /
 * the reference) instead of sizing buffers from it */
static void guard_cases(void) {
  conv2d_desc d = mk(1, 4, 9, 9, 4, 1, 3, 3, 1000000000, 1000000000, 1, 1, 0, 0, 0, 0);
  CHECK(d.OH == 1 && !conv2d_supports(&d, CONV_ALGO_DIRECT));
  CHECK(conv_select_desc(&d, ISA_AVX512, 2, CONV_ALGO_DIRECT, true) == CONV_ALGO_IM2COL);
  d = mk(1, 4, 9, 9, 4, 1, 3, 3, 1, 1, 1000000000, 1, 0, 0, 1000000000 * 2LL, 0);
  CHECK(!conv2d_supports(&d, CONV_ALGO_DIRECT));
  pool2d_desc p = {.N = 1, .C = 1, .H = 5, .W = 5, .KH = 2, .KW = 2, .OH = 1, .OW = 1,
                   .sh = 1 << 30, .sw = 1, .dh = 1, .dw = 1, .is_max = true};
  CHECK(!pool2d_supports(&p));
  p.sh = 2;
  CHECK(pool2d_supports(&p));
}

/* The cost model charges the direct driver's per-chunk fill of the plane
 * rows: a long 1-D signal (one row of 512 channels x 3200 samples, far past
 * the cache) is refilled for every chunk of tiles, so im2col wins there and
 * for a 1x1 stride-2 projection (four phases filled to read one); a grouped
 * 3x3 (32 groups, small rows) keeps the direct path.  Measured one thread,
 * AVX2: wav2vec2's 512->512 k3 s2 over 3199 samples 142 ms direct vs 43
 * im2col; resnet50's 256->512 1x1 s2 at 56x56 6.7 vs 3.7 ms; resnext50's
 * 128-channel G32 3x3 at 56x56 0.81 direct vs 1.75 im2col. */
static void select_cases(void) {
  conv2d_desc wave = mk(1, 512, 1, 3199, 512, 1, 1, 3, 1, 2, 1, 1, 0, 0, 0, 0);
  conv2d_desc proj = mk(1, 256, 56, 56, 512, 1, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0);
  conv2d_desc grouped = mk(1, 128, 56, 56, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  for (int t = 1; t <= 2; t++) {
    CHECK(conv_select_desc(&wave, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_IM2COL);
    CHECK(conv_select_desc(&proj, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_IM2COL);
    CHECK(conv_select_desc(&grouped, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT);
  }
  /* chanvec (AVX2; conv_select.c: chanvec_suits): grouped convs of whole
   * vectors of output channels per group over rows under two vectors
   * (regnet's 440ch G55 at 7x7, resnext50's 1024ch G32 3x3/2 to 14x14);
   * wider rows and 4 channels a group stay direct */
  conv2d_desc rg7 = mk(1, 440, 7, 7, 440, 55, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc rx14 = mk(1, 1024, 28, 28, 1024, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
  conv2d_desc rx28 = mk(1, 256, 28, 28, 256, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc g4_7 = mk(1, 128, 7, 7, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  if (isa_detect() >= ISA_AVX2)
    for (int t = 1; t <= 2; t++) {
      CHECK(conv_select_desc(&rg7, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_CHANVEC);
      CHECK(conv_select_desc(&rx14, ISA_AVX2, t, CONV_ALGO_AUTO, false) == CONV_ALGO_CHANVEC);
      CHECK(conv_select_desc(&rx28, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT);
      CHECK(conv_select_desc(&g4_7, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT);
      CHECK(conv_select_desc(&grouped, ISA_AVX2, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT);
    }
  /* a tall plane (a group's copy past 1 Mi floats) stays direct, which cuts it into chunks */
  conv2d_desc tall = mk(1, 64, 40000, 7, 64, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  if (isa_detect() >= ISA_AVX2) CHECK(conv_select_desc(&tall, ISA_AVX2, 2, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT);
  CHECK(conv_select_desc(&rg7, ISA_SCALAR, 1, CONV_ALGO_AUTO, true) != CONV_ALGO_CHANVEC);
  CHECK(conv_select_desc(&rg7, ISA_SCALAR, 1, CONV_ALGO_CHANVEC, true) == CONV_ALGO_CHANVEC);
  /* AVX-512 (the cost model reads the AVX-512 table only where the CPU has
   * it): resnet50's stride-2 3x3 layers to 7x7 and 14x14 and its 3x3 at 7x7
   * go to direct-cv (no lane spent past a row's end: 1.2-1.45x the direct
   * kernel on the 2-core Emerald Rapids, which was itself 1.1x (1 thread)
   * to 2.4x (16 threads) faster than im2col on a 16-core Xeon); the 3x3 at
   * 7x7 at 1 thread is checked below (Winograd or direct-cv by the core's
   * FMA width).  AVX2 takes direct-cv for the 7x7
   * stride-2 one too (1.2x the direct kernel). */
  conv2d_desc s2_7 = mk(1, 512, 14, 14, 512, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
  conv2d_desc s1_7 = mk(1, 512, 7, 7, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc s2_14 = mk(1, 256, 28, 28, 256, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
  if (isa_detect() >= ISA_AVX2) CHECK(conv_select_desc(&s2_7, ISA_AVX2, 1, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT_CV);
  if (isa_detect() >= ISA_AVX512)
    for (int t = 1; t <= 16; t *= 16) {
      CHECK(conv_select_desc(&s2_7, ISA_AVX512, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT_CV);
      CHECK(conv_select_desc(&s2_14, ISA_AVX512, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT_CV);
      CHECK(t == 1 || conv_select_desc(&s1_7, ISA_AVX512, t, CONV_ALGO_AUTO, true) == CONV_ALGO_DIRECT_CV);
    }
  /* squeezenet's 16 -> 64 3x3 at 55x55 and 64 -> 256 at 13x13 stay on
   * Winograd at 2 threads as at 1 (the tiles' scratch priced at each
   * core's own rate): 2 threads, hot, F(4) 0.205 ms against the direct
   * kernel's 0.247; F(2) 0.169 against direct-cv's 0.189 */
  conv2d_desc sq55 = mk(1, 16, 55, 55, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc sq13 = mk(1, 64, 13, 13, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  /* Products of few tiles (under 24) are priced as too short for the
   * kernel on full-width cores only (conv_select.c's cm_wino): on cores
   * with 256-bit FMA units (isa_fma_256bit: Zen 4) one thread takes F(4x4)
   * for squeezenet's 13x13 layers (16 tiles; 48 -> 192 alone 0.12 ms
   * against direct-cv's 0.26, 64 -> 256 0.24 against F(2x2)'s 0.27) and
   * Winograd for resnet's 512 -> 512 at 7x7 (1.32-1.50 ms against
   * direct-cv's 2.36 in resnet18); elsewhere F(2x2) and direct-cv, as
   * measured on the Emerald Rapids. */
  conv2d_desc sq13s = mk(1, 48, 13, 13, 192, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  bool narrow = isa_fma_256bit();
  if (isa_detect() >= ISA_AVX512)
    for (int t = 1; t <= 2; t++) {
      CHECK(conv_select_desc(&sq55, ISA_AVX512, t, CONV_ALGO_AUTO, true) == CONV_ALGO_WINO4);
      CHECK(conv_select_desc(&sq13, ISA_AVX512, t, CONV_ALGO_AUTO, true) ==
            (narrow && t == 1 ? CONV_ALGO_WINO4 : CONV_ALGO_WINO2));
    }
  /* resnet50's 3x3 at 14x14 and 7x7 on two threads: on 256-bit FMA units
   * (AVX-512 priced at AVX2's rate) F(4x4) and F(2x2), each split by
   * panels (2-core Zen 4, in the model: 0.54-0.60 ms against F(2x2)'s
   * 0.62, 0.86-0.89 against direct-cv's 1.2-1.55); full-width cores keep
   * the products of 16 tiles priced short */
  conv2d_desc r14 = mk(1, 256, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  if (isa_detect() >= ISA_AVX512 && narrow) {
    CHECK(conv_select_desc(&r14, ISA_AVX512, 2, CONV_ALGO_AUTO, true) == CONV_ALGO_WINO4);
    CHECK(conv_select_desc(&s1_7, ISA_AVX512, 2, CONV_ALGO_AUTO, true) == CONV_ALGO_WINO2);
  }
  if (isa_detect() >= ISA_AVX512) {
    conv_algo s1_7_1t = conv_select_desc(&s1_7, ISA_AVX512, 1, CONV_ALGO_AUTO, true);
    conv_algo sq13s_1t = conv_select_desc(&sq13s, ISA_AVX512, 1, CONV_ALGO_AUTO, true);
    CHECK(narrow ? s1_7_1t == CONV_ALGO_WINO2 || s1_7_1t == CONV_ALGO_WINO4 : s1_7_1t == CONV_ALGO_DIRECT_CV);
    CHECK(narrow ? sq13s_1t == CONV_ALGO_WINO4 : sq13s_1t == CONV_ALGO_DIRECT_CV);
  }
}

/* Every (image, tile row, panel) unit of a plan in exactly one item, each
 * item within rc rows and pc panels; returns the busiest thread's units
 * over its home range (kmax items). */
static int64_t wino_cover(const conv_wino_plan *p, int64_t N, int threads) {
  int64_t kmax = conv_wino_kmax(p, N, threads), units = N * p->TH * p->np, busiest = 0;
  unsigned char *seen = calloc((size_t)units, 1);
  CHECK(kmax >= 1);
  for (int s = 0; s < threads; s++) {
    int64_t mine = 0;
    for (int64_t it = s * kmax; it < (s + 1) * kmax; it++) {
      conv_wino_piece pc;
      if (!conv_wino_piece_of(p, N, threads, kmax, it, &pc)) continue;
      CHECK(pc.n >= 0 && pc.n < N && pc.r0 >= 0 && pc.r0 < pc.r1 && pc.r1 <= p->TH && pc.r1 - pc.r0 <= p->rc);
      CHECK(pc.p0 >= 0 && pc.p0 < pc.p1 && pc.p1 <= p->np && pc.p1 - pc.p0 <= p->pc);
      for (int64_t r = pc.r0; r < pc.r1; r++)
        for (int64_t q = pc.p0; q < pc.p1; q++) seen[(pc.n * p->TH + r) * p->np + q]++;
      mine += (pc.r1 - pc.r0) * (pc.p1 - pc.p0);
    }
    if (mine > busiest) busiest = mine;
  }
  for (int64_t u = 0; u < units; u++) CHECK(seen[u] == 1);
  CHECK(!conv_wino_piece_of(p, N, threads, kmax, kmax * threads, &(conv_wino_piece){0}));
  free(seen);
  return busiest;
}

/* The Winograd driver's plan (conv_wino_plan_of), its items and their
 * balance: U past a thread's L2 share over one chunk of tile rows is split
 * by panels; split by tile rows, each thread takes an even share of the
 * (row, panel) units, splitting a row by its panels where the rows do
 * not divide (resnet50's 128 -> 128 at 28x28 on F(4x4): 7 tile rows of 2
 * panels, 3.5 rows a thread). */
static void wino_plan_cases(void) {
  for (int isa = ISA_AVX2; isa <= (int)isa_detect(); isa++) {
    const conv_kernels *k = conv_kernels_get((isa_level)isa);
    conv2d_desc r14 = mk(1, 256, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
    conv_wino_plan p;
    conv_wino_plan_of(&r14, k, 4, 2, &p);
    CHECK(p.pmajor && p.rc == p.TH && p.pc * 2 == p.np);
    CHECK(conv_wino_balance(&p, 1, 2) == 1.0);
    conv_wino_plan_of(&r14, k, 4, 1, &p);
    CHECK(!p.pmajor);
    conv2d_desc r28 = mk(1, 128, 28, 28, 128, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
    conv2d_desc r56 = mk(1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int t = 1; t <= 3; t++) {
      conv_wino_plan_of(&r28, k, 4, t, &p);
      CHECK(wino_cover(&p, 1, t) == conv_cdiv(p.TH * p.np, t));
      conv_wino_plan_of(&r56, k, 4, t, &p);
      CHECK(wino_cover(&p, 1, t) == conv_cdiv(p.TH * p.np, t));
    }
  }
  conv_wino_plan q = {.TH = 7, .np = 4, .rc = 4, .pc = 2, .pmajor = false};
  CHECK(conv_wino_balance(&q, 1, 2) == 1.0); /* 3.5 rows each, row 3 split by its panels */
  CHECK(wino_cover(&q, 1, 2) == 14);
  { /* whole rows first, the partial row last, on both threads (a thread's
     * first item reads its panels of U from memory) */
    int64_t kmax = conv_wino_kmax(&q, 1, 2);
    conv_wino_piece a, b, c;
    CHECK(conv_wino_piece_of(&q, 1, 2, kmax, 0, &a) && a.r0 == 0 && a.r1 == 3 && a.p0 == 0 && a.p1 == 2);
    CHECK(conv_wino_piece_of(&q, 1, 2, kmax, kmax, &b) && b.r0 == 4 && b.r1 == 7 && b.p0 == 0 && b.p1 == 2);
    CHECK(conv_wino_piece_of(&q, 1, 2, kmax, 2 * kmax - 1, &c) && c.r0 == 3 && c.r1 == 4 && c.p0 == 2 && c.p1 == 4);
  }
  CHECK(conv_wino_balance(&q, 1, 1) == 1.0);
  CHECK(wino_cover(&q, 1, 1) == 28);
  CHECK(fabs(conv_wino_balance(&q, 1, 3) - 28.0 / 3 / 10) < 1e-12); /* 9 | 9 | 10 units */
  CHECK(wino_cover(&q, 1, 3) == 10);
  CHECK(wino_cover(&q, 3, 2) == 42);
  q = (conv_wino_plan){.TH = 5, .np = 3, .rc = 2, .pc = 1, .pmajor = false};
  for (int t = 1; t <= 5; t++) CHECK(wino_cover(&q, 2, t) == conv_cdiv(30, t));
  q = (conv_wino_plan){.TH = 7, .np = 4, .rc = 4, .pc = 2, .pmajor = true};
  /* each thread a panel chunk over every row chunk: 8 + 6 | 8 + 6 */
  CHECK(conv_wino_balance(&q, 1, 2) == 1.0);
  CHECK(wino_cover(&q, 1, 2) == 14);
  q.np = 3, q.pc = 1, q.rc = 7; /* three panel chunks over 2 threads: 2 | 1, then 3 | 3 over two images */
  CHECK(fabs(conv_wino_balance(&q, 1, 2) - 0.75) < 1e-12);
  CHECK(conv_wino_balance(&q, 2, 2) == 1.0);
  CHECK(wino_cover(&q, 2, 2) == 21);
}

/* The direct driver's split over 2 threads: the busiest thread's share of
 * the items stays within 8% of half, also for the 3-channel stems (K = 27,
 * where the output's store costs about as much as the multiply-adds),
 * which the split once costed at a third of their time and cut into 5 or
 * 7 items (3:2, 4:3). */
static void split_cases(void) {
  conv2d_desc cs[] = {
      mk(1, 3, 224, 224, 32, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1), /* mobilenet, mnasnet */
      mk(1, 3, 224, 224, 64, 1, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0), /* squeezenet */
      mk(1, 3, 224, 224, 64, 1, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3), /* resnet */
      mk(1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
    for (int isa = 0; isa <= (int)isa_detect(); isa++) {
      int64_t n = conv_direct_items(&cs[i], (isa_level)isa, 2);
      double busiest = (double)((n + 1) / 2) / (double)n;
      if (!(busiest <= 0.54)) fprintf(stderr, "case %zu/%s: %lld items\n", i, isa_name((isa_level)isa), (long long)n);
      CHECK(busiest <= 0.54);
    }
}

int main(void) {
  smelt_pool *pool = NULL, *pool2 = NULL;
  CHECK_OK(pool_create(3, &pool));
  CHECK_OK(pool_create(2, &pool2));
  conv_cases(NULL);
  conv_cases(pool);
  conv_cases(pool2); /* two threads, as the benchmarks run */
  pool_cases(NULL);
  pool_cases(pool);
  pool_cases(pool2); /* two threads, as the benchmarks run */
  pool_free(pool2);
  cache_cases();
  guard_cases();
  select_cases();
  split_cases();
  wino_plan_cases();
  pool_free(pool);
  printf("worst error / sum|xw|: chanvec %.2g direct-cv %.2g\n", worst[CONV_ALGO_CHANVEC],
         worst[CONV_ALGO_DIRECT_CV]);
  printf("worst error / sum|xw|: direct %.2g depthwise %.2g winograd2 %.2g winograd4 %.2g\n",
         worst[CONV_ALGO_DIRECT], worst[CONV_ALGO_DEPTHWISE], worst[CONV_ALGO_WINO2],
         worst[CONV_ALGO_WINO4]);
  return test_report("test_conv_kernels");
}
