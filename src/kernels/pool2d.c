/* Vectorized 2-D pooling, planes in parallel.  (3x3/2 max pools over
 * output rows of up to three vectors run a plane per call at AVX-512:
 * plane_k3s2_fits; other max pools over output rows of at most one vector
 * run blocked: maxb_run below.)
 *
 * Max is separable: per output row, the max down the window's input rows
 * (max_rows, whole vectors along the row), then that one row split into
 * its stride phases padded with -inf (conv_fill_phases on a 1-row plane)
 * and the max across the taps of contiguous runs of it.  3 taps at
 * stride 2 (squeezenet's and resnet's pools) skip the phase copy: the
 * even/odd values are shuffled out of whole vectors of the vertical max,
 * kept in registers at AVX-512, padded in place in a row otherwise
 * (max_pool_row_k3s2).  Everything
 * between input and output is a row or two in L1.  (The two-dimensional
 * form below, a padded copy of the whole plane and KH*KW taps per output,
 * was 1.5-2.3x slower on the pools of squeezenet and resnet.)
 *
 * Average: per plane, the stride-phase padded copy (kernels/conv_fill.c,
 * padded with 0), then every output row is a sum over the taps of
 * contiguous runs of it, times the per-output scale. */
#include "kernels/pool2d.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

typedef struct pool_job {
  const pool2d_desc *d;
  const conv_kernels *k;
  const float *X;
  float *Y;
  conv_phases ph;
  int64_t plane_len, taps;
  int64_t *off;
  float *scale; /* average: per output position, 1/count (NaN: no tap inside) */
  pool_row_geom row;  /* max: one output row's geometry */
  int64_t *row_idx;   /* max: row.lo, row.hi and row.off's storage */
  int64_t row_len;    /* max: floats of scratch per thread */
  atomic_bool failed;
} pool_job;

static int64_t ceil_div0(int64_t a, int64_t b) { return a > 0 ? (a + b - 1) / b : 0; }

/* Whether a 3x3/2 max pool (no dilation) runs a plane per call in
 * registers (conv_kernels.h: max_pool_plane_k3s2, AVX-512 only, output
 * rows of up to CONV_POOL_PLANE_NV vectors).  Measured (1 thread, hot, against the
 * row form / the blocked form): 256 ch 27x27 -> 13x13 0.022 / 0.043 /
 * 0.045 ms, 512 ch 14 -> 7 0.021 / 0.042 / 0.023, 96 ch 28 -> 14 0.009 /
 * 0.018 / 0.021, 128 ch 55 -> 27 0.044 / 0.069, 256 ch 56 -> 28 0.146 /
 * 0.158; at 4 vectors (112 -> 56) it was no faster than the row form. */
static bool plane_k3s2_fits(const pool2d_desc *d, const conv_kernels *k) {
  return d->is_max && k->max_pool_plane_k3s2 && d->KH == 3 && d->KW == 3 && d->sh == 2 && d->sw == 2 &&
         d->dh == 1 && d->dw == 1 && d->OW <= CONV_POOL_PLANE_NV * k->vl;
}

static void max_planes(void *vctx, int64_t q0, int64_t q1) {
  pool_job *j = vctx;
  const pool2d_desc *d = j->d;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->row_len);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  float *t = buf, *ph = buf + (d->W + 32) / 16 * 16; /* t: whole vectors of any ISA */
  bool k3s2 = d->KW == 3 && d->sw == 2 && d->dw == 1; /* t then holds the padded row (row_len) */
  bool plane = plane_k3s2_fits(d, j->k);
  for (int64_t q = q0; q < q1; q++) {
    const float *x = j->X + q * d->H * d->W;
    float *y = j->Y + q * d->OH * d->OW;
    if (plane) { /* the plane in one call */
      j->k->max_pool_plane_k3s2(x, d->H, d->pt, &j->row, y, d->OH);
      continue;
    }
    for (int64_t oh = 0; oh < d->OH; oh++) { /* in order: a row may spill onto the next */
      int64_t st = oh * d->sh - d->pt;       /* input row of tap 0; taps inside: [k0, k1) */
      int64_t k0 = ceil_div0(-st, d->dh), k1 = ceil_div0(d->H - st, d->dh);
      if (k1 > d->KH) k1 = d->KH;
      int64_t rows = k1 > k0 ? k1 - k0 : 0;
      const float *x0 = rows ? x + (st + k0 * d->dh) * d->W : x;
      if (k3s2) j->k->max_pool_row_k3s2(x0, d->dh * d->W, rows, &j->row, t, y + oh * d->OW, (d->OH - oh) * d->OW);
      else j->k->max_pool_row(x0, d->dh * d->W, rows, &j->row, t, ph, y + oh * d->OW, (d->OH - oh) * d->OW);
    }
  }
  tensor_data_free(buf);
}

/* The max path's row geometry: the row's stride phases (as
 * conv_fill_phases lays out a plane of one row) and the taps in them. */
static smelt_status max_setup(pool_job *j) {
  const pool2d_desc *d = j->d;
  int64_t sw = d->sw, Wq = j->ph.Wq;
  j->row_len = (d->W + 32) / 16 * 16 + sw * Wq + 32;
  int64_t k3s2_len = d->pl + d->W + 2 * d->OW + 4 * 16 + 32; /* max_pool_row_k3s2's tp */
  if (j->row_len < k3s2_len) j->row_len = k3s2_len;
  j->row_idx = malloc(sizeof(int64_t) * (size_t)(2 * sw + d->KW));
  if (!j->row_idx) return err_nomem("pool offsets", sizeof(int64_t) * (size_t)(2 * sw + d->KW));
  int64_t *lo = j->row_idx, *hi = lo + sw, *off = hi + sw;
  for (int64_t pw = 0; pw < sw; pw++) { /* columns i with 0 <= i*sw + pw - pl < W */
    lo[pw] = ceil_div0(d->pl - pw, sw);
    hi[pw] = ceil_div0(d->W + d->pl - pw, sw);
    if (hi[pw] > Wq) hi[pw] = Wq;
    if (lo[pw] > hi[pw]) lo[pw] = hi[pw];
  }
  for (int64_t kw = 0; kw < d->KW; kw++) off[kw] = kw * d->dw % sw * Wq + kw * d->dw / sw;
  j->row = (pool_row_geom){d->W, d->pl, sw, Wq, d->KW, d->OW, lo, hi, off};
  return SMELT_OK;
}

/* Average: whole planes (see the top). */
static void pool_planes(void *vctx, int64_t q0, int64_t q1) {
  pool_job *j = vctx;
  const pool2d_desc *d = j->d;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->plane_len);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t q = q0; q < q1; q++) {
    conv_fill_phases(&j->ph, j->X + q * d->H * d->W, 1, 0, 0.f, buf);
    float *y = j->Y + q * d->OH * d->OW;
    for (int64_t oh = 0; oh < d->OH; oh++) { /* in order: a row may spill onto the next */
      const float *row = buf + oh * j->ph.Wq;
      j->k->pool_avg_row(row, j->off, (int)j->taps, j->scale + oh * d->OW, 0.f, y + oh * d->OW,
                         d->OW, (d->OH - oh) * d->OW);
    }
  }
  tensor_data_free(buf);
}

/* Taps of output o along one dim inside the input (valid) and inside the
 * padded extent (padded), as the reference counts them. */
static void pool_counts(int64_t o, int64_t s, int64_t pad_lo, int64_t pad_hi, int64_t k,
                        int64_t d, int64_t in, int64_t *valid, int64_t *padded) {
  int64_t st = o * s - pad_lo;
  int64_t lo = st >= 0 ? 0 : conv_cdiv(-st, d);
  int64_t hi = in - st > 0 ? conv_cdiv(in - st, d) : 0;
  int64_t hp = in + pad_hi - st > 0 ? conv_cdiv(in + pad_hi - st, d) : 0;
  if (hi > k) hi = k;
  *valid = hi > lo ? hi - lo : 0;
  *padded = hp > k ? k : hp;
}

static smelt_status pool_scale(const pool2d_desc *d, float **out) {
  float *sc = malloc(sizeof(float) * (size_t)(d->OH * d->OW));
  if (!sc) return err_nomem("pool scale", sizeof(float) * (size_t)(d->OH * d->OW));
  for (int64_t oh = 0; oh < d->OH; oh++) {
    int64_t vh, ph;
    pool_counts(oh, d->sh, d->pt, d->pb, d->KH, d->dh, d->H, &vh, &ph);
    for (int64_t ow = 0; ow < d->OW; ow++) {
      int64_t vw, pw;
      pool_counts(ow, d->sw, d->pl, d->pr, d->KW, d->dw, d->W, &vw, &pw);
      double n = d->count_pad ? (double)ph * (double)pw : (double)vh * (double)vw;
      sc[oh * d->OW + ow] = vh && vw && n > 0 ? (float)(1.0 / n) : NAN;
    }
  }
  *out = sc;
  return SMELT_OK;
}

/* ---- max, blocked: vl channels at a time ----
 * Planes narrower than a few vectors leave most lanes of the row form's
 * vectors idle and pay its per-row setup for a handful of outputs
 * (squeezenet's 27x27 -> 13x13 pool: 23 ns a row, 4.5x ONNX Runtime's
 * channel-blocked pool).  As the blocked depthwise convolution
 * (conv_depthwise.c) does, vl planes are transposed into a padded
 * pixel-major copy (rows_to_blk; the padding -inf), every output is the
 * max of whole vectors over the taps (max_blk), and the result goes back
 * to the planes (blk_to_rows). */
typedef struct maxb_job {
  const pool2d_desc *d;
  const conv_kernels *k;
  const float *X;
  float *Y;
  conv_blk cb; /* the padded blocked copy */
  int64_t n_blk, buf_floats;
  int64_t off[64]; /* per tap: its offset in the copy, in floats */
  atomic_bool failed;
} maxb_job;

static void maxb_blocks(void *vctx, int64_t u0, int64_t u1) {
  maxb_job *j = vctx;
  const pool2d_desc *d = j->d;
  const conv_kernels *k = j->k;
  int vl = k->vl;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->buf_floats);
  if (!buf) {
    atomic_store(&j->failed, true);
    return;
  }
  float *obuf = buf + j->cb.Hp * j->cb.Wp * vl;
  conv_blk_border(&j->cb, -INFINITY, buf);
  for (int64_t u = u0; u < u1; u++) {
    int64_t n = u / j->n_blk, c0 = u % j->n_blk * vl;
    int nch = (int)(d->C - c0 < vl ? d->C - c0 : vl);
    float *dst[16];
    for (int l = 0; l < vl; l++) dst[l] = l < nch ? j->Y + (n * d->C + c0 + l) * d->OH * d->OW : NULL;
    conv_blk_fill(k, &j->cb, j->X + (n * d->C + c0) * d->H * d->W, nch, buf);
    k->max_blk(buf, j->cb.Wp, d->sh, d->sw, j->off, (int)(d->KH * d->KW), d->OH, d->OW, obuf);
    k->blk_to_rows(obuf, d->OH * d->OW, dst, NULL);
  }
  tensor_data_free(buf);
}

/* Output rows of at most one vector, and windows of at most 64 taps.
 * Measured, 3x3/2 pools, blocked against the row form (1 thread / 2
 * threads, AVX-512, 2-core Emerald Rapids): 512ch 14x14 -> 7x7 0.32 /
 * 0.35, 256ch 27x27 -> 13x13 0.66 / 0.61, 96ch 28x28 -> 14x14 0.73 /
 * 1.0; but 55 -> 27 1.37 / 1.64 and 111 -> 55 2.3 / 2.8, where the rows
 * fill whole vectors and the transposes cost more than they save. */
static bool maxb_fits(const pool2d_desc *d, const conv_kernels *k) {
  int vl = k->vl;
  return d->is_max && vl > 1 && vl <= 16 && d->OW <= vl && d->KH * d->KW <= 64 && !plane_k3s2_fits(d, k);
}

static smelt_status maxb_run(smelt_pool *pool, const pool2d_desc *d, const conv_kernels *k, const float *X,
                             float *Y) {
  int vl = k->vl;
  maxb_job j = {.d = d, .k = k, .X = X, .Y = Y};
  j.cb = conv_blk_make(d->H, d->W, d->pt, d->pl, d->OH, d->OW, d->KH, d->KW, d->sh, d->sw, d->dh, d->dw, vl, j.off);
  j.n_blk = conv_cdiv(d->C, vl);
  j.buf_floats = (j.cb.Hp * j.cb.Wp + d->OH * d->OW) * vl;
  int64_t grain = 1 + 32768 / (d->OH * d->OW * d->KH * d->KW * vl + 1);
  pool_parallel_for(pool, d->N * j.n_blk, grain, maxb_blocks, &j);
  if (atomic_load(&j.failed)) return err_nomem("max pool block", sizeof(float) * (size_t)j.buf_floats);
  return SMELT_OK;
}

bool pool2d_supports(const pool2d_desc *d) {
  return d->N >= 0 && d->C >= 0 && d->pt >= 0 && d->pl >= 0 && d->OH >= 0 && d->OW >= 0 &&
         conv_phases_sane(d->OH, d->OW, d->KH, d->KW, d->sh, d->sw, d->dh, d->dw);
}

smelt_status pool2d_f32(smelt_pool *pool, const pool2d_desc *d, isa_level isa, const float *X,
                        float *Y) {
  if (!pool2d_supports(d)) return err_set(SMELT_ERR_INVALID_ARGUMENT, "pool: geometry not supported");
  if (d->N * d->C * d->OH * d->OW == 0) return SMELT_OK;
  const conv_kernels *k = conv_kernels_get(isa);
  if (maxb_fits(d, k)) return maxb_run(pool, d, k, X, Y);
  pool_job j = {.d = d, .k = k, .X = X, .Y = Y};
  int64_t amax = (d->KH - 1) * d->dh / d->sh, bmax = (d->KW - 1) * d->dw / d->sw;
  j.ph = (conv_phases){d->H, d->W, d->sh, d->sw, d->pt, d->pl, d->OH + amax, d->OW + bmax, j.k};
  j.plane_len = d->sh * d->sw * j.ph.Hl * j.ph.Wq;
  j.taps = d->KH * d->KW;
  j.off = malloc(sizeof(int64_t) * (size_t)j.taps);
  if (!j.off) return err_nomem("pool offsets", sizeof(int64_t) * (size_t)j.taps);
  for (int64_t kh = 0, t = 0; kh < d->KH; kh++)
    for (int64_t kw = 0; kw < d->KW; kw++, t++) {
      int64_t ph = kh * d->dh % d->sh, pw = kw * d->dw % d->sw;
      j.off[t] = ((ph * d->sw + pw) * j.ph.Hl + kh * d->dh / d->sh) * j.ph.Wq + kw * d->dw / d->sw;
    }
  smelt_status st = d->is_max ? max_setup(&j) : pool_scale(d, &j.scale);
  if (!st) {
    int64_t grain = 1 + 32768 / (d->OH * d->OW * j.taps + 1);
    pool_parallel_for(pool, d->N * d->C, grain, d->is_max ? max_planes : pool_planes, &j);
    if (atomic_load(&j.failed))
      st = err_nomem("pool plane", sizeof(float) * (size_t)(d->is_max ? j.row_len : j.plane_len));
  }
  free(j.off);
  free(j.row_idx);
  free(j.scale);
  return st;
}

typedef struct gap_job {
  const conv_kernels *k;
  const float *X;
  float *Y;
  int64_t S;
} gap_job;

static void gap_planes(void *vctx, int64_t q0, int64_t q1) {
  const gap_job *j = vctx;
  for (int64_t q = q0; q < q1; q++)
    j->Y[q] = j->S ? (float)(j->k->row_sum(j->X + q * j->S, j->S) / (double)j->S) : NAN;
}

void global_avg_f32(smelt_pool *pool, isa_level isa, int64_t planes, int64_t S, const float *X,
                    float *Y) {
  gap_job j = {conv_kernels_get(isa), X, Y, S};
  pool_parallel_for(pool, planes, 1 + 65536 / (S + 1), gap_planes, &j);
}
