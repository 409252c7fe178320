/* Direct convolution with two vectors of output channels along the vector
 * ("direct-cv", kernels/conv.h) for one-group convolutions over small
 * output planes, the strided ones above all.
 *
 * The direct driver (conv_direct.c) puts positions along the vector: a row
 * of the wide output (Wq = OW + the taps' reach columns) is cut into tiles
 * of whole vectors, so a 7x7 output of a 3x3 conv computes 63 positions in
 * 96 lanes for 49.  Here the tile is the pointwise conv's channel-vector
 * tile (conv_kernels.h: pwcx_tile): a packed panel of pmr output channels
 * ([K][pmr], K = C*KH*KW in W's order) against up to pcp positions of one
 * output row, each a broadcast of one input value read through a tap offset
 * table from the stride-phase-split padded input (conv_phases: every tap
 * one flat offset), the sums turned into Y's channel rows with the bias,
 * residual and clamp.  No lane holds a position that is not in Y.
 *
 * Per image the input is split into its phase planes once, by all threads
 * (channel chunks), then the items -- (panel, chunk of output rows) -- run
 * over that one shared copy. */
#include <math.h>
#include <stdlib.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

smelt_status conv_dcv_prepare(smelt_pool *pool, conv2d_weights *w, const float *W) {
  conv_pack_panels(pool, w, W, w->k->pmr);
  return SMELT_OK;
}

typedef struct dcv_job {
  const conv2d_desc *d;
  const conv_kernels *k;
  const float *W, *X, *B, *res;
  float *Y, *buf;
  float lo, hi;
  conv_phases ph;
  int64_t K, kc, plane, np, rpc, nrc, seg; /* plane: floats per channel's phases; rows per chunk, chunks */
  const int64_t *xoff;
  uint64_t gen; /* this run's number (conv_warm) */
} dcv_job;

static void dcv_fill(void *vctx, int64_t c0, int64_t c1) {
  const dcv_job *j = vctx;
  conv_fill_phases(&j->ph, j->X + c0 * j->d->H * j->d->W, c1 - c0, 0, 0.f, j->buf + c0 * j->plane);
}

/* Tile t of the plane: row t / spr, segment t % spr. */
static conv_cv_tile dcv_at(const void *vctx, int64_t t) {
  const dcv_job *j = vctx;
  int64_t spr = conv_cdiv(j->d->OW, j->seg), oh = t / spr, ow = t % spr * j->seg;
  return (conv_cv_tile){oh * j->ph.Wq + ow, oh * j->d->OW + ow, (int)(j->d->OW - ow < j->seg ? j->d->OW - ow : j->seg)};
}

/* Before its first item each thread brings the shared phase copy, half of
 * it written by the other threads, into its L2 (conv_warm): read through
 * the tap offsets instead, each first touch of another core's line was
 * waited on alone (2-core VM, cores in different chiplets: resnet50's
 * 256 -> 256 3x3/2 to 14x14 at 2 threads 0.762 -> 0.689 ms, 512 -> 512
 * 0.700 -> 0.627; level where the cores share their L3). */
static void dcv_items(void *vctx, int64_t i0, int64_t i1) {
  const dcv_job *j = vctx;
  conv_warm(j->gen, j->buf, sizeof(float) * (size_t)(j->d->C * j->plane));
  const conv2d_desc *d = j->d;
  const conv_kernels *k = j->k;
  int64_t OHW = d->OH * d->OW, spr = conv_cdiv(d->OW, j->seg), pmr = k->pmr;
  for (int64_t it = i0; it < i1; it++) {
    int64_t p = it / j->nrc, rc = it % j->nrc, m0 = p * pmr;
    int64_t r0 = rc * j->rpc, r1 = r0 + j->rpc < d->OH ? r0 + j->rpc : d->OH;
    const float *w = j->W + p * j->K * pmr;
    conv_cv_panel(k, j->K, j->kc, w, m0 + pmr < d->M ? w + j->K * pmr : NULL, j->buf, 0, j->xoff, r0 * spr,
                  r1 * spr, dcv_at, j, j->B ? j->B + m0 : NULL, j->res ? j->res + m0 * OHW : NULL, j->lo, j->hi,
                  j->Y + m0 * OHW, OHW, (int)(d->M - m0 < pmr ? d->M - m0 : pmr));
  }
}

smelt_status conv_dcv_run(smelt_pool *pool, const conv2d_weights *w, const float *X, const float *B,
                          const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  const conv_kernels *k = w->k;
  if (d->G != 1) return err_set(SMELT_ERR_INTERNAL, "conv direct-cv: %lld groups", (long long)d->G);
  dcv_job j = {.d = d, .k = k, .W = w->data, .B = B, .lo = ep ? ep->lo : -INFINITY,
               .hi = ep ? ep->hi : INFINITY};
  if (k->pcp * k->pmr > CONV_CV_TILE)
    return err_set(SMELT_ERR_INTERNAL, "conv direct-cv: tiles of %d x %d", k->pcp, k->pmr);
  j.K = d->C * d->KH * d->KW;
  j.kc = conv_cv_kc(k, j.K);
  j.np = conv_cdiv(d->M, k->pmr);
  /* a row of OW outputs in the fewest tiles, evened out (28 -> 14 + 14) */
  j.seg = conv_cdiv(d->OW, conv_cdiv(d->OW, k->pcp));
  int64_t amax = (d->KH - 1) * d->dh / d->sh, bmax = (d->KW - 1) * d->dw / d->sw, P = d->sh * d->sw;
  /* every row a tap reaches, every column */
  j.ph = (conv_phases){d->H, d->W, d->sh, d->sw, d->pt, d->pl, d->OH + amax, d->OW + bmax, k};
  j.plane = P * j.ph.Hl * j.ph.Wq;
  /* the panels first; the rows cut as well when there are too few of them
   * to give each thread 8 items */
  int threads = pool_threads(pool);
  int64_t want = threads > 1 ? 8 * (int64_t)threads : 1;
  j.nrc = j.np >= want ? 1 : conv_cdiv(want, j.np);
  if (j.nrc > d->OH) j.nrc = d->OH;
  j.rpc = conv_cdiv(d->OH, j.nrc);
  j.nrc = conv_cdiv(d->OH, j.rpc);
  size_t bytes = sizeof(float) * (size_t)(d->C * j.plane + k->vl);
  int64_t *xoff = conv_tap_offsets(d, d->C, j.ph.Hl, j.ph.Wq);
  if (!xoff) return SMELT_ERR_NOMEM;
  j.buf = tensor_data_alloc(bytes);
  if (!j.buf) {
    free(xoff);
    return err_nomem("conv direct-cv scratch", bytes);
  }
  j.xoff = xoff;
  int64_t OHW = d->OH * d->OW;
  for (int64_t n = 0; n < d->N; n++) {
    j.X = X + n * d->C * d->H * d->W;
    j.Y = Y + n * d->M * OHW;
    j.res = ep && ep->residual ? ep->residual + n * d->M * OHW : NULL;
    j.gen = conv_warm_run(pool_threads(pool));
    pool_parallel_for(pool, d->C, 1 + 4096 / (j.plane + 1), dcv_fill, &j);
    pool_parallel_for(pool, j.np * j.nrc, 1, dcv_items, &j);
  }
  tensor_data_free(j.buf);
  free(xoff);
  return SMELT_OK;
}
