/* The patch route of the Conv op (conv_registry.c): a convolution whose
 * kernel tiles its input -- kernel == stride along every axis, no padding,
 * no dilation, one group: the "patchify" stems of ViT (16x16/16), CLIP
 * (32x32/32) and Swin / ConvNeXt (4x4/4), ConvNeXt's 2x2/2 downsampling
 * layers -- is a 1x1 conv over its input rearranged space-to-depth:
 *
 *   Xs[n][(c*KH + kh)*KW + kw][oh*OW + ow] = X[n][c][oh*sh + kh][ow*sw + kw]
 *
 * with W [M][C][KH][KW] read as it lies as the 1x1 conv's [M][C*KH*KW].
 * Each input value lands in Xs once (the windows do not overlap; rows and
 * columns past the last whole window are dropped, as the conv drops them),
 * and the 1x1 routes (their packed weights, epilogue and threading) run
 * the product.  Measured on the 2-core Zen 4, one-conv models against the
 * direct / direct-cv kernels the cost model picked before (ort_compare
 * --baseline-lib, medians of 40 runs, ms at 1 / 2 threads): ConvNeXt's
 * 96 -> 192 2x2/2 from 56x56 1.28 -> 1.19 / 0.74 -> 0.62, 384 -> 768 from
 * 14x14 1.42 -> 1.16 / 0.77 -> 0.62; the 3 -> 96 4x4/4 stem 0.58 -> 0.42
 * / 0.43 -> 0.31; ViT-B/16's 3 -> 768 16x16/16 2.30 -> 2.22 / 1.25 ->
 * 1.17; CLIP's 32x32/32 2.50 -> 2.26 / 1.45 -> 1.23.  The copy is split
 * over (image, channel, kernel row) items: per channel, a 3-channel stem
 * left one of two threads idle a third of the copy. */
#include <string.h>

#include "ir/tensor.h"
#include "ops/conv_route.h"
#include "util/err.h"

bool conv_patch_geom(const conv_geom *g, conv_geom *g2) {
  if (g->G != 1 || g->Kdim <= 0 || g->Kdim != g->C * g->Kk || g->Kk < 2 || g->w.nsp < 1 || g->w.nsp > 2)
    return false;
  for (int i = 0; i < g->w.nsp; i++)
    if (g->w.kernel[i] != g->w.stride[i] || g->w.kernel[i] < 1 || g->w.dil[i] != 1 || g->w.pad_lo[i] != 0 ||
        g->w.pad_hi[i] != 0 || g->w.out[i] != g->w.in[i] / g->w.stride[i])
      return false;
  *g2 = *g;
  for (int i = 0; i < g->w.nsp; i++) g2->w.kernel[i] = 1, g2->w.stride[i] = 1, g2->w.in[i] = g->w.out[i];
  g2->C = g2->Cg = g2->Kdim = g->C * g->Kk;
  g2->Kk = 1;
  g2->S_in = g->S_out;
  return true;
}

/* Items (n * C + c) * KH + kh: the rows kh of input channel c's windows,
 * as KW rows of Xs (channel row (c*KH + kh)*KW + kw of image n). */
static void s2d_rows(void *ctx, int64_t i0, int64_t i1) {
  const conv_xcopy_job *j = ctx;
  const conv_geom *g = j->g;
  const nn_window *w = &g->w;
  int two = w->nsp == 2;
  int64_t KH = two ? w->kernel[0] : 1, KW = w->kernel[two], OH = two ? w->out[0] : 1, OW = w->out[two];
  int64_t IH = two ? w->in[0] : 1, IW = w->in[two], S = g->S_out;
  for (int64_t it = i0; it < i1; it++) {
    int64_t plane = it / KH, kh = it % KH; /* plane: n * C + c */
    const float *x = j->X + plane * IH * IW;
    float *dst = j->dst + it * KW * S; /* (plane * KH + kh) * KW rows of S */
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *src = x + (oh * KH + kh) * IW;
      for (int64_t kw = 0; kw < KW; kw++) {
        float *d = dst + kw * S + oh * OW;
        for (int64_t ow = 0; ow < OW; ow++) d[ow] = src[ow * KW + kw];
      }
    }
  }
}

smelt_status conv_route_patch_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  conv_geom g2;
  *taken = true;
  if (!conv_patch_geom(a->g, &g2)) return err_set(SMELT_ERR_INTERNAL, "conv: not a patch conv");
  return conv_prepare_geom(a->c, &g2);
}

smelt_status conv_route_patch_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  const conv_geom *g = a->g;
  conv_geom g2;
  *taken = true;
  if (!conv_patch_geom(g, &g2)) return err_set(SMELT_ERR_INTERNAL, "conv: not a patch conv");
  int64_t KH = g->w.nsp == 2 ? g->w.kernel[0] : 1; /* items: KW rows of S floats each */
  return conv_run_rewritten(a, &g2, g->N * g->C * KH, 1 + 16384 / (g2.C / g->C / KH * g->S_out + 1), s2d_rows,
                            "conv: the space-to-depth copy of a patch conv's input");
}

void conv_route_patch_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q;
  conv_geom g2;
  conv_describe_rewritten(a, conv_patch_geom(a->g, &g2) ? &g2 : NULL, "the input rearranged space-to-depth", buf,
                          n);
}
