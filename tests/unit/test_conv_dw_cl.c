/* The depthwise convolution over channels-last bf16 activations
 * (kernels/conv_bf16.h: conv_dw_cl_run) against a double reference over the
 * same bf16 inputs and the weights rounded to bf16, on awkward shapes: channel counts
 * that are not multiples of 16 (the masked last block) and span several
 * 64-channel items, rows of several 8-position blocks, 3x3 and 5x5 kernels, strides 1 and 2 (and 2 by 1),
 * dilation 2, pads that leave borders on every side and none, planes of
 * one row and one column, batch 2; with and without bias, with a clamp
 * (ReLU6) and without; 1 and 3 threads.  Each output is the reference
 * rounded to bf16 within the fp32 sums' rounding: |y - ref| <= one bf16
 * step of |ref| plus (taps + 2) 2^-23 sum |w x|.  Every output is written
 * (Y starts as NaN) and the values past Y are left alone.  The same input
 * given as planes (fp32 and bf16, each row staged channels-last) gives the
 * same outputs bit for bit.  Odd channel counts, groups other than C,
 * residuals, weights off a 64-byte line and two inputs are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "kernels/conv_bf16.h"
#include "kernels/isa.h"
#include "parallel/pool.h"
#include "smelt.h"
#include "util/err.h"

#define TEST_RNG_SEED 0x51c7e0d2b39a4f61ull
#include "test_rng.h"

static long n_values, n_planes;

static float bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

static conv2d_desc dw(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t sh, int64_t sw, int64_t dil,
                      int64_t pad) {
  conv2d_desc d = {.N = N, .C = C, .H = H, .W = W, .M = C, .G = C, .KH = K, .KW = K, .sh = sh, .sw = sw, .dh = dil,
                   .dw = dil, .pt = pad, .pl = pad};
  d.OH = (H + 2 * pad - dil * (K - 1) - 1) / sh + 1, d.OW = (W + 2 * pad - dil * (K - 1) - 1) / sw + 1;
  return d;
}

static void one(smelt_pool *pool, conv2d_desc d, bool bias, bool clamp) {
  int64_t taps = d.KH * d.KW;
  size_t nx = (size_t)(d.N * d.H * d.W * d.C), ny = (size_t)(d.N * d.OH * d.OW * d.C);
  uint16_t *X = malloc(2 * nx), *Y = malloc(2 * (ny + 16));
  float *W = malloc(sizeof(float) * (size_t)(d.C * taps)), *B = malloc(sizeof(float) * (size_t)d.C);
  CHECK(X && Y && W && B);
  if (!X || !Y || !W || !B) goto done;
  for (size_t i = 0; i < nx; i++) X[i] = f32_to_bf16(frand());
  for (int64_t i = 0; i < d.C * taps; i++) W[i] = frand();
  for (int64_t i = 0; i < d.C; i++) B[i] = frand();
  for (size_t i = 0; i < ny + 16; i++) Y[i] = 0x7fc1;
  conv2d_epilogue ep = {NULL, clamp ? 0.f : -INFINITY, clamp ? 6.f : INFINITY};
  uint32_t *Wt = tensor_data_alloc(sizeof(uint32_t) * (size_t)conv_dw_cl_packed_words(&d));
  CHECK(Wt != NULL);
  if (!Wt) goto done;
  conv_dw_cl_pack(&d, W, Wt);
  CHECK_OK(conv_dw_cl_run(pool, isa_active(), &d, Wt, bias ? B : NULL, &ep, NULL, X, false, Y));
  /* the same input as planes, fp32 (the bf16 values widened) and bf16: the
   * same outputs bit for bit (each row staged channels-last in bf16) */
  uint16_t *Xph = malloc(2 * nx), *Y2 = malloc(2 * (ny + 16));
  float *Xpf = malloc(sizeof(float) * nx);
  CHECK(Xph && Y2 && Xpf);
  if (Xph && Y2 && Xpf) {
    for (int64_t n = 0; n < d.N; n++)
      for (int64_t c = 0; c < d.C; c++)
        for (int64_t p = 0; p < d.H * d.W; p++) {
          uint16_t v = X[(n * d.H * d.W + p) * d.C + c];
          Xph[(n * d.C + c) * d.H * d.W + p] = v, Xpf[(n * d.C + c) * d.H * d.W + p] = bf16_to_f32(v);
        }
    for (int form = 0; form < 2; form++) {
      for (size_t i = 0; i < ny + 16; i++) Y2[i] = 0x7fc1;
      CHECK_OK(conv_dw_cl_run(pool, isa_active(), &d, Wt, bias ? B : NULL, &ep, form ? NULL : Xpf, form ? Xph : NULL,
                              true, Y2));
      long diff = 0;
      for (size_t i = 0; i < ny + 16; i++) diff += Y2[i] != Y[i];
      CHECK(diff == 0);
      if (diff) fprintf(stderr, "dw C%lld %lldx%lld: %ld outputs differ from planes (%s)\n", (long long)d.C,
                        (long long)d.H, (long long)d.W, diff, form ? "bf16" : "fp32");
      n_planes += (long)ny;
    }
  }
  free(Xph), free(Y2), free(Xpf);
  tensor_data_free(Wt);
  long bad = 0;
  for (int64_t n = 0; n < d.N; n++)
    for (int64_t oh = 0; oh < d.OH; oh++)
      for (int64_t ow = 0; ow < d.OW; ow++)
        for (int64_t c = 0; c < d.C; c++) {
          double acc = bias ? B[c] : 0, mag = fabs(acc);
          for (int64_t kh = 0; kh < d.KH; kh++)
            for (int64_t kw = 0; kw < d.KW; kw++) {
              int64_t ih = oh * d.sh - d.pt + kh * d.dh, iw = ow * d.sw - d.pl + kw * d.dw;
              if (ih < 0 || ih >= d.H || iw < 0 || iw >= d.W) continue;
              double p = (double)bf(W[c * taps + kh * d.KW + kw]) * bf16_to_f32(X[((n * d.H + ih) * d.W + iw) * d.C + c]);
              acc += p, mag += fabs(p);
            }
          if (clamp) acc = acc < 0 ? 0 : acc > 6 ? 6 : acc;
          double y = bf16_to_f32(Y[((n * d.OH + oh) * d.OW + ow) * d.C + c]);
          double tol = fabs(acc) * 0x1p-8 + (double)(taps + 2) * 0x1p-23 * mag + 1e-30;
          n_values++;
          if (!(fabs(y - acc) <= tol) && bad++ < 3)
            fprintf(stderr, "dw C%lld %lldx%lld k%lld s%lld,%lld: y[%lld][%lld][%lld][%lld] %.9g, ref %.9g\n",
                    (long long)d.C, (long long)d.H, (long long)d.W, (long long)d.KH, (long long)d.sh,
                    (long long)d.sw, (long long)n, (long long)oh, (long long)ow, (long long)c, y, acc);
        }
  CHECK(bad == 0);
  for (size_t i = ny; i < ny + 16; i++) CHECK(Y[i] == 0x7fc1);
done:
  free(X), free(Y), free(W), free(B);
}

int main(void) {
  if (!conv_bf16_io_native(isa_active())) {
    test_skip("test_conv_dw_cl", "this CPU has no AVX512_BF16 (or has AMX): the kernel does not run here");
    return test_report("test_conv_dw_cl");
  }
  for (int th = 1; th <= 3; th += 2) {
    smelt_pool *pool = NULL;
    CHECK_OK(pool_create(th, &pool));
    conv2d_desc shapes[] = {
        dw(1, 32, 9, 9, 3, 1, 1, 1, 1),    dw(1, 144, 14, 14, 3, 1, 1, 1, 1), dw(1, 144, 15, 15, 3, 2, 2, 1, 1),
        dw(2, 18, 7, 11, 3, 2, 1, 1, 1),   dw(1, 96, 8, 8, 5, 1, 1, 1, 2),    dw(1, 96, 9, 9, 5, 2, 2, 1, 2),
        dw(1, 40, 10, 10, 3, 1, 1, 2, 2),  dw(1, 66, 1, 13, 3, 1, 1, 1, 1),   dw(1, 2, 13, 1, 3, 1, 1, 1, 1),
        dw(1, 130, 6, 6, 3, 1, 1, 1, 0),   dw(2, 960, 7, 7, 3, 1, 1, 1, 1),   dw(1, 24, 5, 5, 1, 1, 1, 1, 0),
        dw(1, 96, 6, 40, 3, 1, 1, 1, 1),   dw(1, 80, 5, 33, 3, 2, 2, 1, 1),   dw(1, 34, 4, 37, 5, 1, 1, 1, 2),
    };
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
      for (int v = 0; v < 4; v++) one(pool, shapes[k], v & 1, v & 2);
    /* refused */
    conv2d_desc odd = dw(1, 15, 5, 5, 3, 1, 1, 1, 1), grp = dw(1, 32, 5, 5, 3, 1, 1, 1, 1);
    grp.G = 16;
    uint16_t x[32 * 25] = {0}, y[32 * 25];
    float r[32 * 25] = {0};
    uint32_t *w = tensor_data_alloc(sizeof(uint32_t) * 32 * 9);
    CHECK(w != NULL);
    if (!w) return test_report("test_conv_dw_cl");
    memset(w, 0, sizeof(uint32_t) * 32 * 9);
    conv2d_epilogue res = {r, -INFINITY, INFINITY};
    CHECK(conv_dw_cl_run(pool, isa_active(), &odd, w, NULL, NULL, NULL, x, false, y) == SMELT_ERR_INTERNAL);
    CHECK(conv_dw_cl_run(pool, isa_active(), &grp, w, NULL, NULL, NULL, x, false, y) == SMELT_ERR_INTERNAL);
    CHECK(conv_dw_cl_run(pool, isa_active(), &shapes[0], w, NULL, &res, NULL, x, false, y) == SMELT_ERR_INTERNAL);
    CHECK(conv_dw_cl_run(pool, isa_active(), &shapes[0], w + 1, NULL, NULL, NULL, x, false, y) == SMELT_ERR_INTERNAL);
    CHECK(conv_dw_cl_run(pool, isa_active(), &shapes[0], w, NULL, NULL, r, x, true, y) == SMELT_ERR_INTERNAL);
    tensor_data_free(w);
    err_clear();
    pool_free(pool);
  }
  printf("depthwise channels-last: %ld values checked, %ld more from planes\n", n_values, n_planes);
  return test_report("test_conv_dw_cl");
}
