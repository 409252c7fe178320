/* The bf16 convolution (kernels/conv_bf16.h) against a double reference
 * over the same bf16-rounded operands, through conv2d_prepare(CONV_ALGO_BF16)
 * and conv2d_run_ep:
 *   - awkward shapes: C 16..70 (pairs padded to 32), M 1..70 (blocks of 32),
 *     planes whose flat positions do not fill the 32-position items, 3x3 pad
 *     1, strides (2,2) and (2,1) (phase planes, unused phases), 1x1 stride 2,
 *     2x3 kernels with dilation 2 and uneven pads, a 1-D conv, batch 2; with
 *     and without bias, a residual and a clamp; 1 and 3 threads;
 *   - both operands are rounded to bf16 and the products summed in fp32, so
 *     the check allows the fp32 sums' rounding, 2 (K/2 + 2) 2^-24 (sum |w x|
 *     + |b| + |residual|) with w, x the rounded operands (a wrong tap, pair or
 *     position is off by far more), and every output is written (Y starts as
 *     NaN);
 *   - the scalar block kernel everywhere (weights prepared for avx2), both
 *     vdpbf16ps kernels where the CPU has AVX512_BF16 (SMELT_AMX=0): the
 *     position-vector one and the channel-vector one (x86/conv_bf16_mv.c,
 *     SMELT_CONV_BF16_MV forcing each: np 4..8, channel blocks of 48, 32
 *     and 16, rows past M, several item groups), Winograd F(2x2) on every
 *     3x3 stride-1 shape (SMELT_CONV_BF16_WINO=1: against a reference over
 *     the same rounded V and U, and coarsely against the exact
 *     convolution; over a channels-last input V fused into the items where
 *     the plane has as many tiles as M channels, then never fused) and the pick by shape, and the AMX driver where the CPU and OS offer AMX (the output says which did
 *     not run);
 *   - the gathered form for fewer than 16 channels (7x7 / 3x3 stride-2 stems,
 *     a dilated 2x3, a 1-D conv), and on channel vectors the stride-2
 *     stems' paired-columns form (conv_bf16_colpair: 7x7, 3x3, 4x4, 2x5,
 *     rows past its 32-column loads; once more with it off); conv_bf16_shape refuses groups, 1x1 convs
 *     over fewer than 16 channels and fewer than 16 channel-taps;
 *     SMELT_CONV_BF16 turns the path on and off; SMELT_CONV=bf16 is not a
 *     request (bf16 changes the numerics: only a node's precision asks);
 *   - end to end, squeezenet (../shared/models) at precision bf16 with the
 *     path forced: the autocast pass marks its 1-group convolutions with 16+
 *     channels, the output's cosine to fp32 is >= 0.9999 and it is not
 *     fp32's (the bf16 kernel ran); fp32 stays bitwise fp32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "kernels/conv_bf16.h"
#include "ops/conv_registry.h"
#include "parallel/pool.h"
#include "smelt.h"
#include "util/err.h"

#define TEST_RNG_SEED 0x3c0a1fb27d9e6a51ull
#include "test_rng.h"

static long n_values, n_bad;
static double max_err;

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static isa_level path_isa; /* the level the weights are prepared for: it picks the path */
static long n_wino;        /* outputs checked against the Winograd reference */

/* The Winograd F(2x2, 3x3) form's output (n, m, oh, ow) before bias,
 * residual and clamp, in double over the same bf16 points the kernel
 * rounds: V = B^T d B per channel in float (columns, then rows, the
 * kernel's order), U = conv_bf16_wino_u; *mag gets sum |A coefficient V U|
 * over the terms. */
static double wino_ref(const conv2d_desc *d, const float *X, const float *W, int64_t n, int64_t m, int64_t oh,
                       int64_t ow, double *mag) {
  static const double AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
  int64_t ty = oh / 2, tx = ow / 2, a = oh % 2, b = ow % 2;
  double y = 0;
  *mag = 0;
  for (int64_t c = 0; c < d->C; c++) {
    float p[4][4], u[4][4], v[4][4];
    for (int r = 0; r < 4; r++)
      for (int k = 0; k < 4; k++) {
        int64_t ih = 2 * ty + r - d->pt, iw = 2 * tx + k - d->pl;
        p[r][k] = ih >= 0 && ih < d->H && iw >= 0 && iw < d->W ? X[((n * d->C + c) * d->H + ih) * d->W + iw] : 0.f;
      }
    for (int r = 0; r < 4; r++)
      u[r][0] = p[r][0] - p[r][2], u[r][1] = p[r][1] + p[r][2], u[r][2] = p[r][2] - p[r][1], u[r][3] = p[r][1] - p[r][3];
    for (int k = 0; k < 4; k++)
      v[0][k] = u[0][k] - u[2][k], v[1][k] = u[1][k] + u[2][k], v[2][k] = u[2][k] - u[1][k], v[3][k] = u[1][k] - u[3][k];
    for (int r = 0; r < 4; r++)
      for (int s = 0; s < 4; s++) {
        double co = AT[a][r] * AT[b][s];
        if (co == 0) continue;
        double t = co * bf(v[r][s]) * bf16_to_f32(conv_bf16_wino_u(W + (m * d->C + c) * 9, r * 4 + s));
        y += t, *mag += fabs(t);
      }
  }
  return y;
}

static long n_cl; /* outputs checked with channels-last operands */

/* [N][C][S] <-> [N][S][C] */
static void to_cl(const uint16_t *x, int64_t N, int64_t C, int64_t S, uint16_t *y, bool back) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t p = 0; p < S; p++) {
        size_t a = (size_t)((n * C + c) * S + p), b = (size_t)((n * S + p) * C + c);
        if (back) y[a] = x[b];
        else y[b] = x[a];
      }
}

/* Channels-last operands (conv2d_run_bf16io's cl: X, the residual, Y, Y
 * over the residual) against the same bf16 run on planes, bit for bit:
 * the kernels read the same values and round the same sums, whichever way
 * they lie.  An odd channel count is refused for the operand it names. */
static void cl_check(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w, const uint16_t *Xh,
                     const float *B, const conv2d_epilogue *ep, const uint16_t *Rh) {
  int64_t S = d->OH * d->OW, Si = d->H * d->W;
  size_t nx = (size_t)(d->N * d->C * Si), ny = (size_t)(d->N * d->M * S);
  uint16_t *ref = malloc(2 * ny), *Xc = malloc(2 * nx), *Rc = malloc(2 * ny), *Yc = malloc(2 * ny), *Yp = malloc(2 * ny);
  CHECK(ref && Xc && Rc && Yc && Yp);
  if (ref && Xc && Rc && Yc && Yp) {
    conv2d_epilogue e = *ep;
    e.residual = NULL;
    const uint16_t *R = ep->residual ? Rh : NULL;
    CHECK_OK(conv2d_run_bf16io(pool, d, w, NULL, Xh, B, &e, R, NULL, ref, 0));
    to_cl(Xh, d->N, d->C, Si, Xc, false);
    if (R) to_cl(R, d->N, d->M, S, Rc, false);
    static const unsigned cls[] = {CB_CL_X, CB_CL_Y, CB_CL_R, CB_CL_X | CB_CL_Y, CB_CL_X | CB_CL_Y | CB_CL_R,
                                   CB_CL_Y | CB_CL_R | 8u /* Y over the residual */};
    for (size_t k = 0; k < sizeof cls / sizeof *cls; k++) {
      unsigned cl = cls[k] & 7u;
      if ((cl & CB_CL_R) && !R) continue;
      bool odd = ((cl & CB_CL_X) && d->C % 2) || ((cl & (CB_CL_Y | CB_CL_R)) && d->M % 2);
      for (size_t i = 0; i < ny; i++) Yc[i] = 0x7fc1;
      const uint16_t *res = !R ? NULL : (cl & CB_CL_R) ? Rc : R;
      if (cls[k] & 8u) memcpy(Yc, Rc, 2 * ny), res = Yc;
      smelt_status st = conv2d_run_bf16io(pool, d, w, NULL, (cl & CB_CL_X) ? Xc : Xh, B, &e, res, NULL, Yc, cl);
      if (odd) { /* refused, nothing written */
        CHECK(st == SMELT_ERR_INTERNAL);
        err_clear();
        continue;
      }
      CHECK_OK(st);
      if (cl & CB_CL_Y) to_cl(Yc, d->N, d->M, S, Yp, true);
      else memcpy(Yp, Yc, 2 * ny);
      long bad = 0;
      for (size_t i = 0; i < ny; i++)
        if (Yp[i] != ref[i] && bad++ < 3)
          fprintf(stderr, "channels-last %u: C%lld M%lld %lldx%lld k%lldx%lld s%lld: y[%zu] 0x%04x, planes 0x%04x\n",
                  cls[k], (long long)d->C, (long long)d->M, (long long)d->H, (long long)d->W, (long long)d->KH,
                  (long long)d->KW, (long long)d->sh, i, Yp[i], ref[i]);
      n_bad += bad, n_cl += (long)ny;
    }
  }
  free(ref), free(Xc), free(Rc), free(Yc), free(Yp);
}

static long n_io; /* outputs checked with a bf16 input or output */

/* The same conv with X given in bf16, the residual in bf16 and / or Y
 * written in bf16 (conv2d_run_bf16io) against fp32 runs: a bf16 Y is the
 * fp32 Y rounded to nearest even, and a bf16 X (or residual) gives bit for
 * bit the fp32 run over X (or the residual) rounded to bf16 -- which is Y
 * itself for X but on Winograd, whose input transform reads X unrounded.
 * Last, Y written in bf16 over the bf16 residual (in place). */
static void io_check(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w, const float *X, const float *B,
                     const conv2d_epilogue *ep, const float *Y) {
  size_t nx = (size_t)(d->N * d->C * d->H * d->W), ny = (size_t)(d->N * d->M * d->OH * d->OW);
  uint16_t *Xh = malloc(sizeof *Xh * nx), *Yh = malloc(sizeof *Yh * ny), *Rh = malloc(sizeof *Rh * ny);
  float *Y2 = malloc(sizeof *Y2 * ny), *Xr = malloc(sizeof *Xr * nx), *Yr = malloc(sizeof *Yr * ny);
  float *Rr = malloc(sizeof *Rr * ny), *Yrr = malloc(sizeof *Yrr * ny);
  CHECK(Xh && Yh && Rh && Y2 && Xr && Yr && Rr && Yrr);
  if (Xh && Yh && Rh && Y2 && Xr && Yr && Rr && Yrr) {
    const float *R = ep->residual;
    for (size_t i = 0; i < nx; i++) Xh[i] = f32_to_bf16(X[i]), Xr[i] = bf(X[i]);
    for (size_t i = 0; R && i < ny; i++) Rh[i] = f32_to_bf16(R[i]), Rr[i] = bf(R[i]);
    conv2d_epilogue epr = *ep;
    epr.residual = R ? Rr : NULL;
    CHECK_OK(conv2d_run_ep(pool, d, w, Xr, B, ep, Yr));    /* X rounded */
    CHECK_OK(conv2d_run_ep(pool, d, w, X, B, &epr, Yrr)); /* the residual rounded */
    conv2d_epilogue nores = *ep;
    nores.residual = NULL;
    /* bf16 in and out; bf16 in, fp32 out; fp32 in, bf16 out; the residual
     * in bf16, fp32 out; bf16 out over the bf16 residual */
    for (int k = 0; k < (R ? 5 : 3); k++) {
      const float *ref = k == 2 ? Y : k >= 3 ? Yrr : Yr;
      for (size_t i = 0; i < ny; i++) Yh[i] = 0x7fc1, Y2[i] = NAN;
      if (k == 4) memcpy(Yh, Rh, sizeof *Yh * ny);
      bool xh = k < 2, yh = k != 1 && k != 3;
      CHECK_OK(conv2d_run_bf16io(pool, d, w, xh ? NULL : X, xh ? Xh : NULL, B, k >= 3 ? &nores : ep,
                                 k == 3 ? Rh : k == 4 ? Yh : NULL, yh ? NULL : Y2, yh ? Yh : NULL, 0));
      long bad = 0;
      for (size_t i = 0; i < ny; i++) {
        bool ok = !yh ? !memcmp(&Y2[i], &ref[i], sizeof *Y) : Yh[i] == f32_to_bf16(ref[i]);
        if (!ok && bad++ < 3)
          fprintf(stderr, "bf16 io %d: C%lld M%lld %lldx%lld k%lldx%lld: y[%zu] %.9g / 0x%04x, fp32 run %.9g\n", k,
                  (long long)d->C, (long long)d->M, (long long)d->H, (long long)d->W, (long long)d->KH,
                  (long long)d->KW, i, Y2[i], Yh[i], ref[i]);
      }
      n_bad += bad, n_io += (long)ny;
    }
    cl_check(pool, d, w, Xh, B, ep, Rh);
  }
  free(Xh), free(Yh), free(Rh), free(Y2), free(Xr), free(Yr), free(Rr), free(Yrr);
}

static void one(smelt_pool *pool, conv2d_desc d, bool bias_on, bool res_on, bool clamp) {
  int64_t taps = d.KH * d.KW, S = d.OH * d.OW;
  size_t nx = (size_t)(d.N * d.C * d.H * d.W), nw = (size_t)(d.M * d.C * taps), ny = (size_t)(d.N * d.M * S);
  float *X = malloc(sizeof(float) * nx), *W = malloc(sizeof(float) * nw), *Bv = malloc(sizeof(float) * (size_t)d.M);
  float *R = malloc(sizeof(float) * ny), *Y = malloc(sizeof(float) * ny);
  CHECK(X && W && Bv && R && Y);
  if (!X || !W || !Bv || !R || !Y) goto done;
  for (size_t i = 0; i < nx; i++) X[i] = frand();
  for (size_t i = 0; i < nw; i++) W[i] = frand();
  for (int64_t i = 0; i < d.M; i++) Bv[i] = frand();
  for (size_t i = 0; i < ny; i++) R[i] = frand(), Y[i] = NAN;
  conv2d_weights *w = NULL;
  CHECK(conv2d_supports(&d, CONV_ALGO_BF16));
  CHECK_OK(conv2d_prepare(pool, &d, CONV_ALGO_BF16, path_isa, W, &w));
  if (!w) goto done;
  conv2d_epilogue ep = {res_on ? R : NULL, clamp ? -0.25f : -INFINITY, clamp ? 0.5f : INFINITY};
  CHECK_OK(conv2d_run_ep(pool, &d, w, X, bias_on ? Bv : NULL, &ep, Y));
  if (conv2d_bf16_io(w)) io_check(pool, &d, w, X, bias_on ? Bv : NULL, &ep, Y);
  conv2d_weights_free(w);
  bool wino = conv_bf16_form(&d, path_isa) == CB_FORM_WINO;
  for (int64_t n = 0; n < d.N; n++)
    for (int64_t m = 0; m < d.M; m++)
      for (int64_t oh = 0; oh < d.OH; oh++)
        for (int64_t ow = 0; ow < d.OW; ow++) {
          double acc = 0, mag = 0;
          for (int64_t c = 0; c < d.C; c++)
            for (int64_t kh = 0; kh < d.KH; kh++)
              for (int64_t kw = 0; kw < d.KW; kw++) {
                int64_t ih = oh * d.sh - d.pt + kh * d.dh, iw = ow * d.sw - d.pl + kw * d.dw;
                if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
                double p = (double)bf(W[((m * d.C + c) * d.KH + kh) * d.KW + kw]) *
                           bf(X[((n * d.C + c) * d.H + ih) * d.W + iw]);
                acc += p, mag += fabs(p);
              }
          size_t yi = (size_t)(((n * d.M + m) * d.OH + oh) * d.OW + ow);
          double extra = (bias_on ? Bv[m] : 0) + (res_on ? R[yi] : 0);
          double extra_mag = (bias_on ? fabs(Bv[m]) : 0) + (res_on ? fabs(R[yi]) : 0);
          acc += extra, mag += extra_mag;
          if (clamp) acc = acc < -0.25 ? -0.25 : acc > 0.5 ? 0.5 : acc;
          double e = fabs(Y[yi] - acc), tol = 2.0 * (double)(d.C * taps / 2 + 2) * 0x1p-24 * mag + 1e-30;
          if (wino) {
            /* against the exact convolution only coarsely (bf16 V and U:
             * 2^-6 of sum |w x|, a wrong sign or point is far past it),
             * then tightly against the reference over the same rounded V
             * and U: fp32 sums over the channel pairs and the transform */
            double wm, wy = wino_ref(&d, X, W, n, m, oh, ow, &wm) + extra;
            if (clamp) wy = wy < -0.25 ? -0.25 : wy > 0.5 ? 0.5 : wy;
            if (!(e <= 0x1p-6 * mag + 1e-30) && n_bad++ < 8)
              fprintf(stderr, "winograd: y[%lld][%lld][%lld][%lld] %.9g, exact %.9g\n", (long long)n, (long long)m,
                      (long long)oh, (long long)ow, Y[yi], acc);
            acc = wy, e = fabs(Y[yi] - wy), tol = 2.0 * (double)(d.C / 2 + 12) * 0x1p-24 * (wm + extra_mag) + 1e-30;
            n_wino++;
          }
          n_values++;
          if (e > max_err) max_err = e;
          if (!(e <= tol) && n_bad++ < 8)
            fprintf(stderr, "C%lld M%lld %lldx%lld k%lldx%lld s%lld,%lld: y[%lld][%lld][%lld][%lld] %.9g, ref %.9g\n",
                    (long long)d.C, (long long)d.M, (long long)d.H, (long long)d.W, (long long)d.KH,
                    (long long)d.KW, (long long)d.sh, (long long)d.sw, (long long)n, (long long)m,
                    (long long)oh, (long long)ow, Y[yi], acc);
        }
done:
  free(X), free(W), free(Bv), free(R), free(Y);
}

static conv2d_desc geom(int64_t N, int64_t C, int64_t M, int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t sh,
                        int64_t sw, int64_t dh, int64_t dw, int64_t pt, int64_t pl, int64_t pb, int64_t pr) {
  conv2d_desc d = {.N = N, .C = C, .H = H, .W = W, .M = M, .G = 1, .KH = KH, .KW = KW, .sh = sh, .sw = sw,
                   .dh = dh, .dw = dw, .pt = pt, .pl = pl};
  d.OH = (H + pt + pb - (KH - 1) * dh - 1) / sh + 1;
  d.OW = (W + pl + pr - (KW - 1) * dw - 1) / sw + 1;
  return d;
}

static void shapes(smelt_pool *pool3) {
  const conv2d_desc ds[] = {
      geom(1, 16, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      geom(1, 33, 40, 9, 11, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(1, 64, 70, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),
      geom(2, 20, 33, 10, 13, 2, 3, 2, 1, 2, 2, 1, 2, 0, 1),
      geom(1, 48, 64, 5, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0),
      geom(1, 17, 9, 1, 50, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2),
      geom(1, 70, 1, 6, 6, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0),
      geom(1, 32, 32, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* an unpadded stride-1 plane filled in one sweep, an odd channel count
       * (a pair with no high half, pairs with neither past C) */
      geom(1, 33, 20, 9, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),
      /* 7x41 outputs: Winograd's 21 tile columns in blocks of 7, one of
       * them across the fill's 16-tile chunks; a half last tile row and
       * column */
      geom(1, 24, 20, 7, 41, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* 2x2 outputs: the channel-vector kernel's np = 4, channel blocks 48 + 16 */
      geom(1, 40, 50, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* more position blocks than one group of items holds (cb_item: 16
       * and 12 blocks a group here), the last group short */
      geom(1, 256, 20, 24, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),
      geom(1, 300, 13, 20, 22, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1),
      /* the gathered form (fewer than 16 channels): a 7x7 stride-2 stem, a
       * 3x3 stride-2 one, a 2x3 dilated one with uneven pads, a 1-D one */
      geom(1, 3, 20, 23, 21, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3),
      geom(2, 3, 33, 17, 15, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(1, 5, 7, 9, 12, 2, 3, 1, 2, 2, 1, 1, 0, 2, 1),
      geom(1, 4, 16, 1, 40, 1, 5, 1, 1, 1, 2, 0, 3, 0, 1),
      /* stems on the channel-vector kernel's paired-columns form: rows
       * wider than its 32-column loads (75: a load wholly inside, one
       * across each edge), an even kernel, a 2x5 with stride (1, 2), uneven
       * pads */
      geom(1, 3, 20, 9, 75, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3),
      geom(2, 3, 32, 8, 70, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),
      geom(1, 2, 17, 6, 67, 4, 4, 2, 2, 1, 1, 1, 2, 2, 1),
      geom(1, 6, 9, 5, 41, 2, 5, 1, 2, 1, 1, 0, 1, 1, 4),
  };
  for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
    one(i % 2 ? pool3 : NULL, ds[i], i % 3 != 1, i % 2 == 0, i % 4 == 3);
}

/* shapes() again on a path the CPU has (the output says which did not run). */
static void run_path(const char *name, bool has, const char *why_not, smelt_pool *pool) {
  if (!has) {
    printf("%s: the %s kernel was not run\n", why_not, name);
    return;
  }
  long before = n_bad;
  n_values = 0, n_wino = 0, max_err = 0;
  long io0 = n_io, cl0 = n_cl;
  shapes(pool);
  printf("%s: %ld values (%ld on Winograd, %ld more with a bf16 input or output, %ld channels-last), %ld past the "
         "tolerance; largest difference %.3g\n",
         name, n_values, n_wino, n_io - io0, n_cl - cl0, n_bad - before, max_err);
}

/* Which convolutions a session marked bf16 runs in bf16 (kernels/conv_bf16.h:
 * conv_bf16_by_cost): on AMX or when forced every one; on vdpbf16ps only
 * where it does twice the FMA's work, and there not a 3x3/1 layer that
 * fp32 Winograd does with fewer products nor a gathered stem of few
 * (channel, tap) pairs. */
static void selection(void) {
  conv2d_desc wino = geom(1, 64, 64, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc pw = geom(1, 256, 512, 14, 14, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
  conv2d_desc s2 = geom(1, 128, 128, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
  conv2d_desc stem = geom(1, 3, 64, 224, 224, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3);
  conv2d_desc stem3 = geom(1, 3, 32, 224, 224, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1);
  conv2d_desc thin = geom(1, 16, 64, 55, 55, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0); /* 16 channels */
  const conv2d_desc *all[] = {&wino, &pw, &s2, &stem, &thin};
  setenv("SMELT_CONV_BF16", "1", 1);
  CHECK(!conv_bf16_by_cost(ISA_AVX512));
  for (int i = 0; i < 5; i++) CHECK(conv_select_desc(all[i], ISA_AVX512, 2, CONV_ALGO_BF16, true) == CONV_ALGO_BF16);
  unsetenv("SMELT_CONV_BF16");
  if (!conv_bf16_by_cost(ISA_AVX512)) {
    printf("selection by cost: not this CPU (%s)\n", bf16dp_amx_hw(ISA_AVX512) ? "AMX: every marked conv in bf16"
                                                                              : "no AVX512_BF16");
    return;
  }
  bool fast = isa_bf16_dot_fast();
  for (int t = 1; t <= 2; t++) {
    conv_algo a[5];
    for (int i = 0; i < 5; i++) a[i] = conv_select_desc(all[i], ISA_AVX512, t, CONV_ALGO_BF16, true);
    printf("selection by cost (%d thread(s), vdpbf16ps %s): 3x3/1 %s, 1x1 %s, 3x3/2 %s, 7x7/2 stem %s, "
           "1x1 over 16 channels %s\n",
           t, fast ? "at twice the FMA's rate" : "at the FMA's rate", conv_algo_name(a[0]), conv_algo_name(a[1]),
           conv_algo_name(a[2]), conv_algo_name(a[3]), conv_algo_name(a[4]));
    /* planar 64 channels at 56x56: fp32 Winograd where the FMA units are
     * 256 bits wide (Zen 4: AVX-512 at AVX2's rate, Winograd's 2.25x fewer
     * multiply-adds win); on full-width FMA units (Zen 5) the model prices
     * fp32 Winograd and the bf16 Winograd form alike (bench_conv_bf16 there,
     * 64 -> 64 3x3 at 56x56: bf16 0.88x at 1 thread, 1.68x at 2 on a noisy
     * VM), so either, but never a direct kernel */
    if (isa_fma_256bit()) CHECK(a[0] == CONV_ALGO_WINO2 || a[0] == CONV_ALGO_WINO4);
    else CHECK(a[0] == CONV_ALGO_WINO2 || a[0] == CONV_ALGO_WINO4 || a[0] == CONV_ALGO_BF16);
    /* the 7x7/2 stem's 147 (channel, tap) pairs on channel vectors pay;
     * a 3x3/2 stem's 27 do not */
    CHECK((a[3] == CONV_ALGO_BF16) == (fast && conv_bf16_form(&stem, ISA_AVX512) == CB_FORM_MV));
    CHECK(conv_select_desc(&stem3, ISA_AVX512, t, CONV_ALGO_BF16, true) != CONV_ALGO_BF16);
    /* 16 channels: padded to 32 they halve the position-vector kernel's
     * gain; the channel-vector kernel pads them to pairs, but its per-item
     * store over 8 channel pairs keeps the fp32 pointwise kernel
     * (conv2d_bf16_pays), at one thread and at two */
    CHECK(a[4] != CONV_ALGO_BF16);
    CHECK((a[1] == CONV_ALGO_BF16) == fast && (a[2] == CONV_ALGO_BF16) == fast);
  }
}

/* Which vdpbf16ps kernel a shape gets (conv_bf16_form), and that the
 * prepared weights' layout follows it into the cache key
 * (conv2d_prepared_layout): Winograd F(2x2) for 3x3 stride-1 layers where
 * it does fewer products a output; channel vectors where the
 * position-vector kernel would compute many padded positions (a 7x7 plane:
 * 64 flat positions for 49), position vectors for few channels over a
 * large plane (the transposed store per item then costs more than the
 * padding saves) -- and channel vectors for a gathered 7x7 stem, whose 147
 * virtual channels they pad to 148, not 160; only position vectors on AMX
 * or the scalar kernel. */
static void form_choice(void) {
  conv2d_desc c7 = geom(1, 512, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  conv2d_desc s7 = geom(1, 512, 512, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1); /* strided: no Winograd */
  conv2d_desc p7 = geom(1, 2048, 512, 7, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
  conv2d_desc wide = geom(1, 64, 256, 56, 56, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
  conv2d_desc stem = geom(1, 3, 64, 224, 224, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3);
  if (!bf16dp_hw(ISA_AVX512) || bf16dp_amx_hw(ISA_AVX512)) {
    printf("kernel form choice: not this CPU\n");
    CHECK(conv_bf16_form(&c7, ISA_AVX512) == CB_FORM_PV);
    return;
  }
  CHECK(conv_bf16_form(&c7, ISA_AVX512) == CB_FORM_WINO);
  CHECK(conv_bf16_form(&s7, ISA_AVX512) == CB_FORM_MV && conv_bf16_form(&p7, ISA_AVX512) == CB_FORM_MV);
  CHECK(conv_bf16_form(&wide, ISA_AVX512) == CB_FORM_PV && conv_bf16_form(&stem, ISA_AVX512) == CB_FORM_MV);
  /* the stem's columns in pairs (84 pairs an output and no gathered copy,
   * against 74 gathered); not a stride-1 or dilated one, not position
   * vectors, not with SMELT_CONV_BF16_COLPAIR=0 */
  conv2d_desc st1 = geom(1, 3, 64, 56, 56, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3);
  conv2d_desc dil = geom(1, 3, 64, 56, 56, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  CHECK(conv_bf16_colpair(&stem, CB_FORM_MV) && !conv_bf16_colpair(&stem, CB_FORM_PV));
  CHECK(!conv_bf16_colpair(&st1, CB_FORM_MV) && !conv_bf16_colpair(&dil, CB_FORM_MV) &&
        !conv_bf16_colpair(&wide, CB_FORM_MV));
  CHECK(conv_bf16_words(&stem, CB_FORM_MV) == 64 * 3 * 7 * 4);
  setenv("SMELT_CONV_BF16_COLPAIR", "0", 1);
  CHECK(!conv_bf16_colpair(&stem, CB_FORM_MV) && conv_bf16_words(&stem, CB_FORM_MV) == 64 * 74);
  unsetenv("SMELT_CONV_BF16_COLPAIR");
  CHECK(conv_bf16_form(&c7, ISA_AVX2) == CB_FORM_PV); /* the scalar kernel */
  setenv("SMELT_CONV_BF16_WINO", "0", 1);
  CHECK(conv_bf16_form(&c7, ISA_AVX512) == CB_FORM_MV);
  setenv("SMELT_CONV_BF16_WINO", "1", 1);
  CHECK(conv_bf16_form(&p7, ISA_AVX512) == CB_FORM_MV); /* a 1x1: no Winograd */
  unsetenv("SMELT_CONV_BF16_WINO");
  int64_t lay[3] = {conv2d_prepared_layout(&wide, CONV_ALGO_BF16, ISA_AVX512),
                    conv2d_prepared_layout(&p7, CONV_ALGO_BF16, ISA_AVX512),
                    conv2d_prepared_layout(&c7, CONV_ALGO_BF16, ISA_AVX512)};
  CHECK(lay[0] != lay[1] && lay[1] != lay[2] && lay[0] != lay[2]);
  CHECK(conv_bf16_mv_np(49) == 7 && conv_bf16_mv_np(196) == 7 && conv_bf16_mv_np(3136) == 8 &&
        conv_bf16_mv_np(4) == 4 && conv_bf16_mv_np(30) == 6 && conv_bf16_mv_np(50) == 5);
  int64_t words = 0;
  CHECK_OK(conv2d_prepared_floats(&p7, CONV_ALGO_BF16, ISA_AVX512, &words));
  CHECK(words == 512 * 1024); /* M padded to 16, C to pairs */
  CHECK_OK(conv2d_prepared_floats(&c7, CONV_ALGO_BF16, ISA_AVX512, &words));
  CHECK(words == 16 * 512 * 256); /* 16 Winograd points */
  /* weights keep the layout they were prepared in when the choice changes
   * before they run: the position- and channel-vector kernels sum each
   * output in the same order, so the outputs are equal; Winograd's, made
   * under the forcing, still runs as Winograd without it */
  conv2d_desc s = geom(1, 40, 36, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1);
  float X[40 * 49], W[36 * 40 * 9], Y[3][36 * 49];
  for (size_t i = 0; i < sizeof X / sizeof *X; i++) X[i] = frand();
  for (size_t i = 0; i < sizeof W / sizeof *W; i++) W[i] = frand();
  conv2d_weights *w[3] = {NULL, NULL, NULL};
  const char *var[3] = {"SMELT_CONV_BF16_MV", "SMELT_CONV_BF16_MV", "SMELT_CONV_BF16_WINO"};
  for (int k = 0; k < 3; k++) {
    setenv(var[k], k == 0 ? "0" : "1", 1);
    CHECK_OK(conv2d_prepare(NULL, &s, CONV_ALGO_BF16, ISA_AVX512, W, &w[k]));
    unsetenv(var[k]);
  }
  for (int k = 0; k < 3; k++) {
    setenv("SMELT_CONV_BF16_MV", k == 1 ? "0" : "1", 1); /* another one */
    if (w[k]) CHECK_OK(conv2d_run_ep(NULL, &s, w[k], X, NULL, NULL, Y[k]));
    conv2d_weights_free(w[k]);
  }
  unsetenv("SMELT_CONV_BF16_MV");
  CHECK(w[0] && w[1] && w[2] && !memcmp(Y[0], Y[1], sizeof Y[0]));
  double worst = 0, scale = 0;
  for (int i = 0; i < 36 * 49; i++) {
    double e = fabs((double)Y[2][i] - Y[0][i]);
    worst = e > worst ? e : worst, scale = fabs(Y[0][i]) > scale ? fabs(Y[0][i]) : scale;
  }
  CHECK(worst > 0 && worst < 0.02 * scale); /* Winograd's own rounding, not the direct sums */
}

static float squeeze_in[3 * 224 * 224];

static smelt_status squeeze_run(smelt_model *m, smelt_precision p, float *y) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = SMELT_MODE_DEFAULT, o.precision = p, o.threads = 2;
  smelt_session *s = NULL;
  smelt_status st = smelt_session_create(m, &o, &s);
  if (st) return st;
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 4, .dims = {1, 3, 224, 224}, .data = squeeze_in,
                     .nbytes = sizeof squeeze_in};
  smelt_tensor out = {.dtype = SMELT_F32, .rank = 2, .dims = {1, 1000}, .data = y, .nbytes = sizeof(float) * 1000};
  st = smelt_session_run(s, &in, 1, &out, 1);
  smelt_session_free(s);
  return st;
}

static void squeezenet(void) {
  smelt_model *m = NULL;
  if (smelt_model_load(SMELT_SOURCE_DIR "/../shared/models/squeezenet/model.onnx", &m)) {
    test_skip("test_conv_bf16", "../shared/models/squeezenet not found (end-to-end part)");
    return;
  }
  for (size_t i = 0; i < sizeof squeeze_in / sizeof *squeeze_in; i++) squeeze_in[i] = sinf(0.013f * (float)i);
  static float ref[1000], y32[1000], y[1000];
  setenv("SMELT_CONV_BF16", "0", 1);
  CHECK_OK(squeeze_run(m, SMELT_PRECISION_FP32, ref));
  CHECK_OK(squeeze_run(m, SMELT_PRECISION_BF16, y32)); /* no bf16 conv: squeezenet has no GEMM to mark */
  CHECK(!memcmp(ref, y32, sizeof ref));
  setenv("SMELT_CONV_BF16", "1", 1);
  CHECK_OK(squeeze_run(m, SMELT_PRECISION_BF16, y));
  unsetenv("SMELT_CONV_BF16");
  double ab = 0, aa = 0, bb = 0;
  int same = 0;
  for (int i = 0; i < 1000; i++) ab += (double)y[i] * ref[i], aa += (double)y[i] * y[i], bb += (double)ref[i] * ref[i], same += y[i] == ref[i];
  double cos = ab / sqrt(aa * bb);
  printf("squeezenet bf16 convolutions (forced) vs fp32: cosine %.7f, %d of 1000 outputs equal\n", cos, same);
  CHECK(cos >= 0.9999);
  CHECK(same < 500);
  smelt_model_free(m);
}

int main(void) {
  setenv("SMELT_CACHE", "off", 1);
  conv2d_desc g2 = geom(1, 32, 8, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), c15 = g2;
  g2.G = 2, c15.C = 15;
  CHECK(!conv_bf16_shape(&g2) && conv_bf16_shape(&c15)); /* 15 x 9 taps: the gathered form */
  c15.KH = c15.KW = 1, c15.OH = c15.OW = 5, c15.pt = c15.pl = 0;
  CHECK(!conv_bf16_shape(&c15)); /* a 1x1 over 15 channels stays fp32 */
  c15.C = 2, c15.KH = 3, c15.KW = 1, c15.OH = 3;
  CHECK(!conv_bf16_shape(&c15)); /* 2 x 3 taps: too few */
  setenv("SMELT_CONV", "bf16", 1);
  CHECK(conv_algo_from_env() == CONV_ALGO_AUTO);
  unsetenv("SMELT_CONV");
  setenv("SMELT_CONV_BF16", "0", 1);
  CHECK(!conv_bf16_wanted(ISA_AVX512));
  setenv("SMELT_CONV_BF16", "1", 1);
  CHECK(conv_bf16_wanted(ISA_SCALAR));
  unsetenv("SMELT_CONV_BF16");
  smelt_pool *pool3 = NULL;
  CHECK_OK(pool_create(3, &pool3));
  path_isa = ISA_AVX2; /* below avx512: the scalar block kernel on any CPU */
  shapes(pool3);
  printf("scalar block kernel: %ld values, %ld past the tolerance; largest difference %.3g\n", n_values, n_bad, max_err);
  path_isa = ISA_AVX512;
  setenv("SMELT_AMX", "0", 1);
  /* both vdpbf16ps kernels on every shape, then as conv_bf16_mv picks */
  setenv("SMELT_CONV_BF16_MV", "0", 1);
  run_path("vdpbf16ps, position vectors", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16", pool3);
  setenv("SMELT_CONV_BF16_MV", "1", 1);
  run_path("vdpbf16ps, channel vectors", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16", pool3);
  setenv("SMELT_CONV_BF16_COLPAIR", "0", 1); /* the stems gathered instead of paired columns */
  run_path("vdpbf16ps, channel vectors, stems gathered", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16",
           pool3);
  unsetenv("SMELT_CONV_BF16_COLPAIR");
  unsetenv("SMELT_CONV_BF16_MV");
  setenv("SMELT_CONV_BF16_WINO", "1", 1); /* every 3x3 stride-1 shape */
  run_path("vdpbf16ps, Winograd where it applies", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16", pool3);
  setenv("SMELT_CONV_BF16_WINO_FUSED", "0", 1); /* a channels-last input's V always as a pass of its own */
  run_path("vdpbf16ps, Winograd, V never fused", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16", pool3);
  unsetenv("SMELT_CONV_BF16_WINO_FUSED");
  unsetenv("SMELT_CONV_BF16_WINO");
  run_path("vdpbf16ps, either by shape", bf16dp_hw(ISA_AVX512), "this CPU has no AVX512_BF16", pool3);
  form_choice();
  unsetenv("SMELT_AMX");
  run_path("AMX", bf16dp_amx_hw(ISA_AVX512), "this CPU/OS offers no AMX", pool3);
  CHECK(n_bad == 0);
  pool_free(pool3);
  selection();
  squeezenet();
  return test_report("test_conv_bf16");
}
