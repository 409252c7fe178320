/* Depthwise convolution (group == C == M): per channel plane, the padded
 * stride-phase copy (kernels/conv_fill.c; after a thread's first plane
 * only the values are rewritten, the zero padding stays), then sums over
 * the taps of contiguous runs of that copy, the bias, residual and clamp
 * applied before the store.  3x3 kernels take
 * dw9_row (the nine weights in registers); others dw_row plus epi_rows.
 *
 * Rows of at least two vectors run one by one straight into Y.  Narrower
 * planes (7x7, 14x14 at AVX-512) would leave most lanes of each row's
 * vector idle and one dependent FMA chain per row, so they run "wide": the
 * plane's rows back to back as one run over the padded width Wq (the
 * columns past OW are computed and dropped) into a small scratch, then
 * each row is copied out through the epilogue.  Planes run in parallel.
 *
 * Narrow planes, and kernels larger than 3x3, without a residual
 * (dwb_fits) run blocked instead: vl channels at a
 * time are transposed into a padded pixel-major copy (a pixel is vl
 * consecutive floats: rows_to_blk), every output pixel is taps FMAs on
 * whole vectors (dw_blk), and the result goes back to the channels' planes
 * (blk_to_rows).  No lane is idle and no row is short; on mobilenet_v2's
 * 14x14 and 7x7 layers (AVX2) ~2x the wide form, whose per-row copies,
 * partial vectors and pass through a scratch cost more than the sums.
 *
 * 3x3 at stride 1 or 2 over wide rows (dw3_fits) takes neither copy of
 * the plane: each input row is copied once with its padding into a ring
 * of eight rows that stays in L1 (dw3_plane), and stride 2 picks its taps
 * out of whole vectors with permutes.  The blocked form's transposes and
 * the phase split's copy of a plane too big for L1 cost more there.
 *
 * Rows of up to 8 vectors (dw3d_fits: most stride-2 layers, stride 1 from
 * 2 vectors at AVX-512) copy nothing at all: the taps are masked loads
 * from the input rows in place (dw3d_plane), the padding lanes masked
 * off.  A 56 -> 28 stride-2 layer spent three quarters of its time in the
 * blocked form's transposes. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/env.h"
#include "util/err.h"

#define DW_WIDE_FLOATS 4096 /* scratch of one wide block (16 KB) */

typedef struct dw_job {
  const conv2d_weights *w;
  const float *X, *B, *res;
  float *Y;
  float lo, hi;
  conv_phases ph;
  int64_t plane_len, taps;
  int64_t block_rows; /* wide: output rows per block; 0: row by row */
  int64_t *off;
  atomic_bool failed;
} dw_job;

/* n sums of channel c from buf + q0 into t: bias + taps, and the epilogue
 * when res/clamp are given (only row by row: a wide run has junk columns). */
static void dw_sums(const dw_job *j, const float *buf, const float *wc, float bias, const float *res,
                    float lo, float hi, float *t, int64_t n, int64_t cap) {
  const conv_kernels *k = j->w->k;
  if (j->taps == 9) {
    k->dw9_row(buf, j->off, wc, bias, res, lo, hi, t, n, cap);
    return;
  }
  k->dw_row(buf, j->off, wc, (int)j->taps, bias, t, n);
  if (res || lo != -INFINITY || hi != INFINITY) k->epi_rows(t, n, res, lo, hi, t, n, 1, n);
}

/* first: buf does not hold an earlier plane's fill yet */
static void dw_plane(const dw_job *j, int64_t q, float *buf, float *tmp, bool first) {
  const conv2d_desc *d = &j->w->d;
  const conv_kernels *k = j->w->k;
  int64_t c = q % d->C, Wq = j->ph.Wq, OHW = d->OH * d->OW;
  if (first) conv_fill_phases(&j->ph, j->X + q * d->H * d->W, 1, 0, 0.f, buf);
  else conv_refill_phases(&j->ph, j->X + q * d->H * d->W, 1, 0, buf);
  const float *wc = j->w->data + c * j->taps;
  float bias = j->B ? j->B[c] : 0.f, *y = j->Y + q * OHW;
  const float *res = j->res ? j->res + q * OHW : NULL;
  /* rows are written in order: each may spill whole vectors onto the next (cap) */
  if (!j->block_rows) {
    for (int64_t oh = 0; oh < d->OH; oh++)
      dw_sums(j, buf + oh * Wq, wc, bias, res ? res + oh * d->OW : NULL, j->lo, j->hi, y + oh * d->OW,
              d->OW, OHW - oh * d->OW);
    return;
  }
  for (int64_t r0 = 0; r0 < d->OH; r0 += j->block_rows) {
    int64_t rows = d->OH - r0 < j->block_rows ? d->OH - r0 : j->block_rows;
    int64_t n = (rows - 1) * Wq + d->OW;
    dw_sums(j, buf + r0 * Wq, wc, bias, NULL, -INFINITY, INFINITY, tmp, n, j->block_rows * Wq);
    int64_t o = r0 * d->OW;
    k->epi_rows(tmp, Wq, res ? res + o : NULL, j->lo, j->hi, y + o, d->OW, rows, OHW - o);
  }
}

static void dw_planes(void *vctx, int64_t q0, int64_t q1) {
  dw_job *j = vctx;
  int64_t tmp_len = j->block_rows ? j->block_rows * j->ph.Wq : 0;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)(j->plane_len + tmp_len));
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t q = q0; q < q1; q++) dw_plane(j, q, buf, buf + j->plane_len, q == q0);
  tensor_data_free(buf);
}

/* ---- blocked: vl channels per unit of work ---- */

typedef struct dwb_job {
  const conv2d_weights *w;
  const float *X, *B;
  float *Y;
  float lo, hi;
  conv_blk cb;        /* the padded blocked copy */
  int64_t n_blk;      /* channel blocks per image */
  int64_t off[64];    /* per tap: its offset in the copy, in floats */
  int64_t buf_floats; /* per thread: the copy, the outputs, weights, bias */
  atomic_bool failed;
} dwb_job;

smelt_status conv_dw_blk_weights(conv2d_weights *w) {
  const conv2d_desc *d = &w->d;
  int vl = w->k->vl;
  int64_t taps = d->KH * d->KW, nb = conv_cdiv(d->C, vl);
  if (w->algo != CONV_ALGO_DEPTHWISE || vl <= 1 || w->blk) return SMELT_OK;
  size_t bytes = sizeof(float) * (size_t)(nb * taps * vl);
  w->blk = tensor_data_alloc(bytes ? bytes : sizeof(float));
  if (!w->blk) return err_nomem("depthwise blocked weights", bytes);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < taps; t++)
      for (int l = 0; l < vl; l++) {
        int64_t c = b * vl + l;
        w->blk[(b * taps + t) * vl + l] = c < d->C ? w->data[c * taps + t] : 0.f;
      }
  return SMELT_OK;
}

static void dwb_block(const dwb_job *j, int64_t u, float *buf, float *obuf, float *wv, float *bv) {
  const conv2d_desc *d = &j->w->d;
  const conv_kernels *k = j->w->k;
  const int vl = k->vl;
  int64_t n = u / j->n_blk, c0 = (u % j->n_blk) * vl, taps = d->KH * d->KW;
  int nch = (int)(d->C - c0 < vl ? d->C - c0 : vl);
  float *dst[16];
  const float *wk = j->w->blk ? j->w->blk + (c0 / vl) * taps * vl : wv; /* blk: made once, at prepare */
  for (int l = 0; l < vl; l++) {
    bool in = l < nch;
    if (!j->w->blk)
      for (int64_t t = 0; t < taps; t++) wv[t * vl + l] = in ? j->w->data[(c0 + l) * taps + t] : 0.f;
    bv[l] = in && j->B ? j->B[c0 + l] : 0.f;
    dst[l] = in ? j->Y + (n * d->C + c0 + l) * d->OH * d->OW : NULL;
  }
  conv_blk_fill(k, &j->cb, j->X + (n * d->C + c0) * d->H * d->W, nch, buf); /* the padding stays 0 */
  k->dw_blk(buf, j->cb.Wp, d->sh, d->sw, j->off, (int)taps, wk, bv, j->lo, j->hi, d->OH, d->OW, obuf);
  k->blk_to_rows(obuf, d->OH * d->OW, dst, NULL);
}

static void dwb_blocks(void *vctx, int64_t u0, int64_t u1) {
  dwb_job *j = vctx;
  const conv2d_desc *d = &j->w->d;
  int vl = j->w->k->vl;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->buf_floats);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  int64_t copy = j->cb.Hp * j->cb.Wp * vl;
  conv_blk_border(&j->cb, 0.f, buf);
  float *obuf = buf + copy, *wv = obuf + d->OH * d->OW * vl, *bv = wv + d->KH * d->KW * vl;
  for (int64_t u = u0; u < u1; u++) dwb_block(j, u, buf, obuf, wv, bv);
  tensor_data_free(buf);
}

/* Whether the blocked form takes this call: planes under 4 vectors wide,
 * or 8 at a stride (the row form's phase split costs more there), or
 * kernels larger than 3x3 at any width, and no residual.  Measured at AVX2
 * (1 thread, blocked vs rows), 3x3: 7x7 1.9x, 14x14 1.4x, 28x28 1.2x, 56x56
 * 0.9x; stride 2 to 7x7 2.6x, to 28x28 1.4x, to 56x56 1.1x.  5x5 and 7x7
 * (dw_blk's four pixels at a time): 56x56 1.6x, 112x112 1.15x. */
static bool dwb_applies(const conv2d_weights *w, const conv2d_epilogue *ep) {
  int vl = w->k->vl;
  return vl > 1 && vl <= 16 && w->d.KH * w->d.KW <= 64 && !(ep && ep->residual);
}

static bool dwb_fits(const conv2d_weights *w, const conv2d_epilogue *ep) {
  const conv2d_desc *d = &w->d;
  int vl = w->k->vl;
  /* a big kernel up to 256x256 outputs (the copy and outputs of vl planes per thread stay a few MB) */
  bool big = d->KH * d->KW > 9 && d->OH * d->OW <= 65536;
  bool narrow = d->OW < 4 * vl || (d->sw > 1 && d->OW < 8 * vl) || big;
  return narrow && dwb_applies(w, ep);
}

static smelt_status dwb_run(smelt_pool *pool, const conv2d_weights *w, const float *X, const float *B,
                            const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  int vl = w->k->vl;
  dwb_job j = {.w = w, .X = X, .B = B, .Y = Y, .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  j.cb = conv_blk_make(d->H, d->W, d->pt, d->pl, d->OH, d->OW, d->KH, d->KW, d->sh, d->sw, d->dh, d->dw, vl, j.off);
  j.n_blk = (d->C + vl - 1) / vl;
  j.buf_floats = (j.cb.Hp * j.cb.Wp + d->OH * d->OW + d->KH * d->KW + 1) * vl;
  int64_t grain = 1 + 32768 / (d->OH * d->OW * d->KH * d->KW * vl + 1);
  pool_parallel_for(pool, d->N * j.n_blk, grain, dwb_blocks, &j);
  if (atomic_load(&j.failed)) return err_nomem("depthwise block", sizeof(float) * (size_t)j.buf_floats);
  return SMELT_OK;
}

/* ---- 3x3 at stride 1 or 2 by rows: through a ring of row copies
 * (dw3_plane), or the taps read in place (dw3d_plane) ---- */

typedef struct dw3_job {
  const conv2d_weights *w;
  const float *X, *B, *res;
  float *Y;
  float lo, hi;
  int64_t ring_floats; /* 0: in place */
  int64_t bands;       /* bands of output rows, the outer index of the items */
  atomic_bool failed;
} dw3_job;

/* Items are (band of output rows, plane), bands outer: with a band per
 * thread, each thread's home range (parallel/pool.h) is its band of every
 * plane -- the rows the position-split convolution before it wrote and
 * the one after it reads from that thread -- not half the planes, half of
 * whose rows the other thread wrote.  A band is the plane's kernel on the
 * band's rows: the input plane as it lies with the top padding moved up
 * by the band's first input row. */
static void dw3_planes(void *vctx, int64_t i0, int64_t i1) {
  dw3_job *j = vctx;
  const conv2d_desc *d = &j->w->d;
  const conv_kernels *k = j->w->k;
  int64_t HW = d->H * d->W, OHW = d->OH * d->OW, NC = d->N * d->C;
  float *ring = NULL;
  if (j->ring_floats && !(ring = tensor_data_alloc(sizeof(float) * (size_t)j->ring_floats))) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t it = i0; it < i1; it++) {
    int64_t q = it % NC, b = it / NC, c = q % d->C;
    int64_t oh0 = b * d->OH / j->bands, oh1 = (b + 1) * d->OH / j->bands, off = oh0 * d->OW;
    if (oh1 <= oh0) continue;
    const float *x = j->X + q * HW, *wc = j->w->data + c * 9, *res = j->res ? j->res + q * OHW + off : NULL;
    float bias = j->B ? j->B[c] : 0.f, *y = j->Y + q * OHW + off;
    int64_t pt = d->pt - oh0 * d->sh;
    if (ring) k->dw3_plane(x, d->H, d->W, d->sh, pt, d->pl, wc, bias, res, j->lo, j->hi, y, oh1 - oh0, d->OW, ring);
    else k->dw3d_plane(x, d->H, d->W, d->sh, pt, d->pl, wc, bias, res, j->lo, j->hi, y, oh1 - oh0, d->OW);
  }
  if (ring) tensor_data_free(ring);
}

/* Whether the row forms can run this call: 3x3, stride 1 or 2 both ways,
 * no dilation (the in-place form: rows of at most CONV_DW3D_MAX_NV
 * vectors, not the scalar level). */
static bool dw3_applies(const conv2d_desc *d) {
  return d->KH == 3 && d->KW == 3 && d->dh == 1 && d->dw == 1 && d->sh == d->sw && d->sh <= 2;
}

static bool dw3d_applies(const conv2d_weights *w) {
  int vl = w->k->vl;
  return dw3_applies(&w->d) && vl > 1 && w->d.OW <= CONV_DW3D_MAX_NV * vl;
}

/* Whether the 3x3 row-ring form (dw3_plane) takes this call: 3x3, stride
 * 1 or 2 both ways, no dilation, output rows of at least 48 (stride 1) or
 * 40 (stride 2).  Measured (1 thread, hot, ms; AVX-512 unless said;
 * against what ran before, blocked or phase-split rows): stride 2
 * 112->56 96ch 0.31 vs 0.52, 224->112 16ch 0.19 vs 0.87, 80->40 64ch 0.12
 * vs 0.24, 56->28 144ch 0.14 vs 0.14, 28->14 192ch 0.072 vs 0.039;
 * stride 1 at 56 144ch 0.25 vs 0.29, at 112 32ch 0.16 vs 0.22, at 40 64ch
 * 0.066 vs 0.061, at 28 192ch 0.12 vs 0.07; AVX2 likewise (56: 0.36 vs
 * 0.44 stride 2, 0.24 vs 0.32 stride 1; 28: 0.18 vs 0.17, 0.12 vs 0.09).
 * Narrower rows pay the ring's per-row work over too few vectors. */
static bool dw3_fits(const conv2d_weights *w) {
  const conv2d_desc *d = &w->d;
  return dw3_applies(d) && d->OW >= (d->sh == 1 ? 48 : 40);
}

static smelt_status dw3_run(smelt_pool *pool, const conv2d_weights *w, const float *X, const float *B,
                            const conv2d_epilogue *ep, float *Y, bool in_place) {
  const conv2d_desc *d = &w->d;
  dw3_job j = {.w = w, .X = X, .B = B, .Y = Y, .res = ep ? ep->residual : NULL,
               .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  j.ring_floats = in_place ? 0 : 8 * conv_dw3_row_floats(d->OW, d->sh, w->k->vl);
  /* a band per thread where each keeps at least 8 rows (SMELT_DW_BANDS=0:
   * whole planes, split by channels) */
  int threads = pool_threads(pool);
  j.bands = threads > 1 && d->OH >= 8 * threads && env_flag_on("SMELT_DW_BANDS") ? threads : 1;
  int64_t grain = 1 + 32768 / (d->OH / j.bands * d->OW * 9 + 1);
  pool_parallel_for(pool, j.bands * d->N * d->C, grain, dw3_planes, &j);
  if (atomic_load(&j.failed)) return err_nomem("depthwise rows", sizeof(float) * (size_t)j.ring_floats);
  return SMELT_OK;
}

/* Whether the in-place 3x3 form (dw3d_plane) takes this call.  Measured
 * against what ran before (1 thread, hot, ms; the ring for wide rows, the
 * blocked form for narrow ones), AVX-512: stride 2 112->56 96ch 0.25 vs
 * 0.35-0.39, 56->28 144ch 0.10-0.11 vs 0.17, 28->14 192ch 0.030-0.033 vs
 * 0.041-0.043, 80->40 64ch 0.08 vs 0.12, 224->112 16ch 0.16-0.19 vs 0.20;
 * stride 1 at 56 144ch 0.22-0.24 vs 0.25-0.28, at 40 64ch 0.050 vs
 * 0.059-0.074, at 112 32ch even; it lost at stride 1 on 28 (even to
 * 1.2x slower), 14 and 7 (1.2x, 2x: the blocked form's whole vectors win
 * there) and at stride 2 down to 7 and 9.  AVX2's masked loads cost more:
 * stride 2 to 56, 40 and 28 won (0.29-0.32 vs 0.36-0.40, 0.10 vs
 * 0.13-0.16, 0.13 vs 0.16-0.18), to 14 lost (0.049-0.069 vs 0.041), and
 * stride 1 lost or tied everywhere.  SMELT_DW=direct|ring|blk|rows forces
 * a form where it applies (measurements). */
static bool dw3d_fits(const conv2d_weights *w) {
  const conv2d_desc *d = &w->d;
  int vl = w->k->vl;
  if (!dw3d_applies(w)) return false;
  if (w->k->isa == ISA_AVX512) return d->sh == 2 ? d->OW >= 12 : d->OW >= 2 * vl;
  return d->sh == 2 && d->OW >= 3 * vl;
}

typedef enum { DW_AUTO, DW_RING, DW_DIRECT, DW_BLK, DW_ROWS } dw_form;

static dw_form dw_forced(void) {
  static _Atomic int forced = -1; /* SMELT_DW, read once */
  int f = atomic_load_explicit(&forced, memory_order_relaxed);
  if (f < 0) {
    const char *e = env_get("SMELT_DW");
    f = !e ? DW_AUTO : !strcmp(e, "ring") ? DW_RING : !strcmp(e, "direct") ? DW_DIRECT
        : !strcmp(e, "blk") ? DW_BLK : !strcmp(e, "rows") ? DW_ROWS : DW_AUTO;
    atomic_store_explicit(&forced, f, memory_order_relaxed);
  }
  return (dw_form)f;
}

static dw_form dw_choose(const conv2d_weights *w, const conv2d_epilogue *ep) {
  switch (dw_forced()) {
  case DW_DIRECT:
    if (dw3d_applies(w)) return DW_DIRECT;
    break;
  case DW_RING:
    if (dw3_applies(&w->d)) return DW_RING;
    break;
  case DW_BLK:
    if (dwb_applies(w, ep)) return DW_BLK;
    break;
  case DW_ROWS:
    return DW_ROWS;
  default:
    break;
  }
  if (dw3d_fits(w)) return DW_DIRECT;
  if (dw3_fits(w)) return DW_RING;
  if (dwb_fits(w, ep)) return DW_BLK;
  return DW_ROWS;
}

smelt_status conv_dw_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                         const float *B, const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  dw_form form = dw_choose(w, ep);
  if (form == DW_DIRECT || form == DW_RING) return dw3_run(pool, w, X, B, ep, Y, form == DW_DIRECT);
  if (form == DW_BLK) return dwb_run(pool, w, X, B, ep, Y);
  dw_job j = {.w = w, .X = X, .B = B, .Y = Y, .res = ep ? ep->residual : NULL,
              .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  int64_t amax = (d->KH - 1) * d->dh / d->sh, bmax = (d->KW - 1) * d->dw / d->sw;
  j.ph = (conv_phases){d->H, d->W, d->sh, d->sw, d->pt, d->pl, d->OH + amax, d->OW + bmax, w->k};
  j.plane_len = d->sh * d->sw * j.ph.Hl * j.ph.Wq;
  j.taps = d->KH * d->KW;
  if (j.taps > (1 << 20)) return err_set(SMELT_ERR_UNSUPPORTED, "depthwise: kernel too large");
  if (d->OW < 2 * w->k->vl && d->OW > 0) {
    j.block_rows = DW_WIDE_FLOATS / j.ph.Wq;
    if (j.block_rows < 1) j.block_rows = 1;
  }
  j.off = malloc(sizeof(int64_t) * (size_t)j.taps);
  if (!j.off) return err_nomem("depthwise offsets", sizeof(int64_t) * (size_t)j.taps);
  for (int64_t kh = 0, t = 0; kh < d->KH; kh++)
    for (int64_t kw = 0; kw < d->KW; kw++, t++) {
      int64_t ph = kh * d->dh % d->sh, pw = kw * d->dw % d->sw;
      j.off[t] = ((ph * d->sw + pw) * j.ph.Hl + kh * d->dh / d->sh) * j.ph.Wq + kw * d->dw / d->sw;
    }
  int64_t grain = 1 + 32768 / (d->OH * d->OW * j.taps + 1);
  pool_parallel_for(pool, d->N * d->C, grain, dw_planes, &j);
  free(j.off);
  if (atomic_load(&j.failed)) return err_nomem("depthwise plane", sizeof(float) * (size_t)j.plane_len);
  return SMELT_OK;
}
