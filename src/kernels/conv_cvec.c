/* Direct convolution with the output channels along the vector ("chanvec",
 * kernels/conv.h): for grouped convolutions over small planes.
 *
 * The direct driver (conv_direct.c) puts positions along the vector: a
 * row of the wide output (Wq = OW + the taps' reach columns) is cut into
 * tiles of whole vectors, so a 7x7 plane (Wq = 9 for a 3x3) computes 72
 * positions for 49, and each (batch, group) item fills its rows of the
 * input for a few tiles' work.  Here a vector holds vl output channels of
 * one group (a packed panel: [K][vl], zero past Mg) and each position is a
 * broadcast of one input value: a tile is np <= cvp positions of one
 * output row, read from the same stride-phase-split padded buffer as the
 * direct kernel (every tap one flat offset), so no position is computed
 * that is not in Y.  The bias starts the sums; the tile (positions x
 * channels) goes to Y's channel rows through cols_to_rows, which adds the
 * residual and clamps (a row's partial last vector stored whole: the
 * outputs after it in that channel's plane are this item's to write,
 * later).  Work items are (batch, group): each fills its
 * group's channels once (after a thread's first item only the values,
 * conv_refill_phases) and runs every panel over every row. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

/* Packed weights: [G][panel][K][vl] (conv_pack_panels at the vector width). */
smelt_status conv_cvec_prepare(smelt_pool *pool, conv2d_weights *w, const float *W) {
  conv_pack_panels(pool, w, W, w->k->vl);
  return SMELT_OK;
}

typedef struct cvec_job {
  const conv2d_desc *d;
  const conv2d_weights *w;
  const float *X, *B, *res;
  float *Y;
  float lo, hi;
  conv_phases ph;
  int64_t Cg, Mg, K, np, seg; /* seg: positions per tile (a row is cut evenly) */
  int64_t buf_len;
  const int64_t *xoff;
  atomic_bool failed;
} cvec_job;

static void cvec_item(const cvec_job *j, int64_t it, float *buf, bool first) {
  const conv2d_desc *d = j->d;
  const conv_kernels *k = j->w->k;
  const int vl = k->vl;
  int64_t n = it / d->G, g = it % d->G, OHW = d->OH * d->OW, Wq = j->ph.Wq;
  const float *x = j->X + (n * d->C + g * j->Cg) * d->H * d->W;
  if (first) conv_fill_phases(&j->ph, x, j->Cg, 0, 0.f, buf);
  else conv_refill_phases(&j->ph, x, j->Cg, 0, buf);
  float c[64 * 16], bias[16];
  for (int64_t p = 0; p < j->np; p++) {
    int64_t m0 = p * vl;
    int nl = (int)(j->Mg - m0 < vl ? j->Mg - m0 : vl);
    for (int v = 0; v < vl; v++) bias[v] = j->B && v < nl ? j->B[g * j->Mg + m0 + v] : 0.f;
    const float *a = j->w->data + (g * j->np + p) * j->K * vl;
    int64_t yoff = (n * d->M + g * j->Mg + m0) * OHW;
    for (int64_t oh = 0; oh < d->OH; oh++)
      for (int64_t ow = 0; ow < d->OW; ow += j->seg) {
        int npos = (int)(d->OW - ow < j->seg ? d->OW - ow : j->seg);
        k->cvec(j->K, a, buf + oh * Wq + ow, j->xoff, bias, c, npos);
        /* the rest of each channel's plane is written later by this item */
        int64_t o = yoff + oh * d->OW + ow, left = OHW - (oh * d->OW + ow);
        k->cols_to_rows(c, vl, npos, nl, j->res ? j->res + o : NULL, j->lo, j->hi, j->Y + o, OHW, left);
      }
  }
}

static void cvec_items(void *vctx, int64_t i0, int64_t i1) {
  cvec_job *j = vctx;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->buf_len);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t it = i0; it < i1; it++) cvec_item(j, it, buf, it == i0);
  tensor_data_free(buf);
}

smelt_status conv_cvec_run(smelt_pool *pool, const conv2d_weights *w, const float *X, const float *B,
                           const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  const conv_kernels *k = w->k;
  if (k->vl > 16 || k->cvp > 64)
    return err_set(SMELT_ERR_INTERNAL, "conv chanvec: vector of %d floats, tiles of %d", k->vl, k->cvp);
  cvec_job j = {.d = d, .w = w, .X = X, .B = B, .Y = Y, .res = ep ? ep->residual : NULL,
                .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  j.Cg = d->C / d->G;
  j.Mg = d->M / d->G;
  j.K = j.Cg * d->KH * d->KW;
  j.np = conv_cdiv(j.Mg, k->vl);
  /* a row of OW outputs in the fewest tiles, evened out (14 -> 7 + 7) */
  j.seg = conv_cdiv(d->OW, conv_cdiv(d->OW, k->cvp));
  int64_t amax = (d->KH - 1) * d->dh / d->sh, bmax = (d->KW - 1) * d->dw / d->sw;
  /* every row a tap reaches, every column: the plane the depthwise row form fills */
  j.ph = (conv_phases){d->H, d->W, d->sh, d->sw, d->pt, d->pl, d->OH + amax, d->OW + bmax, k};
  int64_t P = d->sh * d->sw;
  j.buf_len = j.Cg * P * j.ph.Hl * j.ph.Wq + k->vl;
  int64_t *xoff = conv_tap_offsets(d, j.Cg, j.ph.Hl, j.ph.Wq);
  if (!xoff) return SMELT_ERR_NOMEM;
  j.xoff = xoff;
  pool_parallel_for(pool, d->N * d->G, 1, cvec_items, &j);
  free(xoff);
  if (atomic_load(&j.failed)) return err_nomem("conv scratch", sizeof(float) * (size_t)j.buf_len);
  return SMELT_OK;
}
