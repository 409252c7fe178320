/* Direct convolution as an im2col-free implicit GEMM.
 *
 * Per (batch, group), output channel m and "wide" output position
 * q = oh * Wq + ow (ow < Wq, where Wq = OW + (KW-1)*dw/sw; the columns
 * ow >= OW are computed and dropped):
 *   y[m][q] = sum_{c, kh, kw} w[m][c][kh][kw] * buf[boff[c,kh,kw] + q]
 * where buf holds the zero-padded input split into sh*sw stride phases
 * (phase (ph, pw) row i col j = padded input row i*sh+ph, col j*sw+pw).  A
 * tap then reads one flat offset from every position, whatever the stride
 * and dilation, so the GEMM micro-kernel's B operand is buf itself, reached
 * through the offset table boff: no im2col matrix.
 *
 * Work items are (batch, group, range of position tiles, range of weight
 * panels); each fills the rows of buf its positions read (all channels of
 * the group) into its own scratch, then runs every panel over its tiles
 * (the panel's packed weights stay in cache across the tiles).  One
 * pool_parallel_for per convolution. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/env.h"
#include "util/err.h"

/* Packed weights: [G][panel][K][width], K = Cg*KH*KW in W's own order,
 * rows past Mg zero.  Split over (group, panel) pairs. */
typedef struct panel_prep_job {
  conv2d_weights *w;
  const float *W;
  int width;
} panel_prep_job;

static void prep_panels(void *ctx, int64_t q0, int64_t q1) {
  const panel_prep_job *j = ctx;
  const conv2d_desc *d = &j->w->d;
  int width = j->width;
  int64_t Mg = d->M / d->G, K = d->C / d->G * d->KH * d->KW, np = conv_cdiv(Mg, width);
  for (int64_t q = q0; q < q1; q++) {
    int64_t g = q / np, p = q % np;
    float *dst = j->w->data + q * K * width;
    for (int64_t k = 0; k < K; k++)
      for (int i = 0; i < width; i++) {
        int64_t m = p * width + i;
        *dst++ = m < Mg ? j->W[(g * Mg + m) * K + k] : 0.f;
      }
  }
}

void conv_pack_panels(smelt_pool *pool, conv2d_weights *w, const float *W, int width) {
  const conv2d_desc *d = &w->d;
  panel_prep_job j = {w, W, width};
  pool_parallel_for(pool, d->G * conv_cdiv(d->M / d->G, width), 1, prep_panels, &j);
}

smelt_status conv_direct_prepare(smelt_pool *pool, conv2d_weights *w, const float *W) {
  conv_pack_panels(pool, w, W, w->k->dmr);
  return SMELT_OK;
}

typedef struct direct_job {
  const conv2d_desc *d;
  const conv2d_weights *w;
  const conv_kernels *k;
  const float *X, *B;
  float *Y;
  int64_t Cg, Mg, K, P, Wq, Hl, Q, NR, nv, tiles;
  int64_t ntc, n_qc, ppc, n_mc, np; /* tiles per chunk, chunks; panels per chunk, chunks */
  int64_t buf_len;                   /* floats of one item's scratch, slack included */
  const int64_t *boff;
  const float *res; /* epilogue: residual (NULL: none) and clamp */
  float lo, hi;
  bool epi; /* the tile through the epilogue from registers (direct_epi) */
  atomic_bool failed;
} direct_job;

/* Rows [r0, r0 + Hl) of every phase plane of the group's channels, and
 * zeros in the slack after them. */
static void direct_fill(const direct_job *j, const float *x, int64_t r0, float *buf) {
  const conv2d_desc *d = j->d;
  conv_phases ph = {d->H, d->W, d->sh, d->sw, d->pt, d->pl, j->Hl, j->Wq, j->k};
  conv_fill_phases(&ph, x, j->Cg, r0, 0.f, buf);
  int64_t used = j->Cg * j->P * j->Hl * j->Wq;
  memset(buf + used, 0, sizeof(float) * (size_t)(j->buf_len - used));
}

/* The runs of Y the vectors of the tile at wide position q land in (n of
 * its positions are outputs' rows: q .. q + n - 1, the columns past OW
 * dropped); false where a vector would take more than CONV_DIRECT_SEGS
 * (rows of a few columns), which go through direct_out */
static bool direct_segs_of(int64_t q, int64_t n, int nv, int vl, int64_t Wq, int64_t OW, conv_direct_segs *sg) {
  for (int v = 0; v < nv; v++) {
    int cnt = 0;
    for (int64_t l = 0; l < vl;) {
      int64_t p = q + v * vl + l;
      if (p >= q + n) break;
      int64_t oh = p / Wq, ow = p - oh * Wq;
      if (ow >= OW) { /* the dropped columns: on to the next row */
        l += Wq - ow;
        continue;
      }
      int64_t run = OW - ow;
      if (run > vl - l) run = vl - l;
      if (run > q + n - p) run = q + n - p;
      if (cnt == CONV_DIRECT_SEGS) return false;
      sg->lo[v][cnt] = (int)l, sg->hi[v][cnt] = (int)(l + run), sg->off[v][cnt] = oh * OW + ow - l;
      cnt++;
      l += run;
    }
    sg->n[v] = cnt;
  }
  return true;
}

/* segs[t - t0] for the chunk's tiles [t0, t1) (j->epi): made once per
 * chunk, not once per panel; n[0] = -1 where the tile goes through
 * direct_out */
static void direct_segs_chunk(const direct_job *j, int64_t t0, int64_t t1, conv_direct_segs *segs) {
  for (int64_t t = t0; t < t1; t++) {
    int64_t q = t * j->NR, n = j->Q - q < j->NR ? j->Q - q : j->NR;
    if (!direct_segs_of(q, n, (int)j->nv, j->k->vl, j->Wq, j->d->OW, &segs[t - t0])) segs[t - t0].n[0] = -1;
  }
}

static void direct_item(const direct_job *j, int64_t it, float *buf, conv_direct_segs *segs, int64_t *filled) {
  const conv2d_desc *d = j->d;
  const conv_kernels *k = j->k;
  int64_t mc = it % j->n_mc, rest = it / j->n_mc, qc = rest % j->n_qc, ng = rest / j->n_qc;
  int64_t n = ng / d->G, g = ng % d->G;
  /* chunks of even size (at most ntc tiles): a short last chunk left the
   * thread that took it idle at the join */
  int64_t t0 = qc * j->tiles / j->n_qc, t1 = (qc + 1) * j->tiles / j->n_qc;
  int64_t r0 = t0 * j->NR / j->Wq; /* first phase row the chunk reads */
  if (*filled != rest) {           /* consecutive items of one chunk share the fill */
    direct_fill(j, j->X + (n * d->C + g * j->Cg) * d->H * d->W, r0, buf);
    if (segs) direct_segs_chunk(j, t0, t1, segs);
    *filled = rest;
  }
  float tile[8 * 64];
  int64_t p0 = mc * j->ppc, p1 = p0 + j->ppc < j->np ? p0 + j->ppc : j->np;
  for (int64_t p = p0; p < p1; p++) {
    const float *a = j->w->data + ((g * j->np + p) * j->K) * k->dmr;
    int64_t m0 = p * k->dmr;
    int mr = (int)(j->Mg - m0 < k->dmr ? j->Mg - m0 : k->dmr);
    float *y = j->Y + (n * d->M + g * j->Mg + m0) * d->OH * d->OW;
    const float *bias = j->B ? j->B + g * j->Mg + m0 : NULL;
    for (int64_t t = t0; t < t1; t++) {
      int64_t q = t * j->NR, n = j->Q - q < j->NR ? j->Q - q : j->NR;
      const float *res = j->res ? j->res + (y - j->Y) : NULL;
      if (segs && segs[t - t0].n[0] >= 0) {
        k->direct_epi[j->nv](j->K, a, buf + (q - r0 * j->Wq), j->boff, &segs[t - t0], mr, bias, res, j->lo, j->hi,
                             y, d->OH * d->OW);
        continue;
      }
      k->direct[j->nv](j->K, a, buf + (q - r0 * j->Wq), j->boff, tile);
      k->direct_out(tile, j->NR, mr, q, n, j->Wq, d->OW, bias, res, j->lo, j->hi, y, d->OH * d->OW);
    }
  }
}

static void direct_items(void *vctx, int64_t i0, int64_t i1) {
  direct_job *j = vctx;
  float *buf = tensor_data_alloc(sizeof(float) * (size_t)j->buf_len);
  conv_direct_segs *segs = j->epi ? malloc(sizeof *segs * (size_t)j->ntc) : NULL;
  if (!buf || (j->epi && !segs)) {
    atomic_store(&j->failed, true);
    tensor_data_free(buf), free(segs);
    return;
  }
  int64_t filled = -1;
  for (int64_t it = i0; it < i1; it++) direct_item(j, it, buf, segs, &filled);
  tensor_data_free(buf), free(segs);
}

/* The vector count per tile: fewest wasted lanes at the end of the rows,
 * weighed by how much slower the narrower tiles run. */
static int64_t direct_pick_nv(const conv_kernels *k, int64_t Q) {
  static const double speed[CONV_DIRECT_MAX_NV + 1] = {0, 0.6, 0.88, 1.0, 1.0};
  int64_t best = k->dmax_nv;
  double best_cost = 0;
  for (int64_t nv = k->dmax_nv; nv >= 1; nv--) {
    int64_t nr = nv * k->vl;
    double cost = (double)(conv_cdiv(Q, nr) * nr) / speed[nv];
    if (nv == k->dmax_nv || cost < best_cost) best = nv, best_cost = cost;
  }
  return best;
}

void conv_direct_chunking(const conv2d_desc *d, int64_t NR, int64_t *fit_tiles, int64_t *row_bytes,
                          int64_t *extra_rows) {
  int64_t amax = (d->KH - 1) * d->dh / d->sh, Wq = d->OW + (d->KW - 1) * d->dw / d->sw;
  int64_t rb = d->C / d->G * d->sh * d->sw * Wq * 4;
  int64_t fit_rows = ((int64_t)512 << 10) / (rb > 0 ? rb : 1) - amax - 2;
  int64_t ft = fit_rows * Wq / NR;
  *fit_tiles = ft < 1 ? 1 : ft;
  *row_bytes = rb;
  *extra_rows = amax + 2;
}

/* The job's compute seconds on one thread, for conv_split: the tiles'
 * multiply-adds at 150 GFLOP/s on a vector ISA (the rate the split was
 * tuned with; 15 on the scalar path), plus,
 * per output value of every tile, the tile's store and its way out to Y
 * through the epilogue (direct_out) and the tile's share of the fill,
 * worth DIRECT_OUT_FLOPS at that rate.  Measured on AVX2 (one thread): a
 * 3-channel stem (K = 27) spends ~0.4 ns an output on those against ~0.7
 * on its multiply-adds; without the term it was costed at a third of its
 * time and cut into 5 or 7 items over 2 threads (3:2, 4:3), now 8 and 10.
 * Layers of a large K keep their split (64 -> 128 3x3/2 at 28x28: with
 * the work counted at 75 GFLOP/s it took 10 items, not 8, and ran 5-9%
 * slower). */
#define DIRECT_OUT_FLOPS 80.0
static double direct_work_s(const direct_job *j) {
  const conv2d_desc *d = j->d;
  double outs = (double)d->N * d->G * j->np * j->k->dmr * j->tiles * j->NR;
  double rate = j->k->vl > 1 ? 150e9 : 15e9; /* the scalar kernel: ~15 GFLOP/s at best */
  return outs * (2.0 * j->K + DIRECT_OUT_FLOPS) / rate;
}

/* Chunks of position tiles (each chunk's copy of the input within ~L2) and
 * of weight panels: conv_split weighs re-reading the weights per position
 * chunk against refilling the input per panel chunk. */
static void direct_plan(direct_job *j, int threads) {
  const conv2d_desc *d = j->d;
  int64_t amax = (d->KH - 1) * d->dh / d->sh, row_bytes, fit_tiles, extra;
  conv_direct_chunking(d, j->NR, &fit_tiles, &row_bytes, &extra);
  double w_bytes = 4.0 * j->Mg * j->K, in_bytes = (double)row_bytes * (d->OH + amax);
  int64_t rc, pc;
  conv_split(threads, d->N * d->G, j->tiles, conv_cdiv(j->tiles, fit_tiles), j->np, direct_work_s(j),
             w_bytes, in_bytes, &rc, &pc);
  j->ntc = rc;
  j->n_qc = conv_cdiv(j->tiles, j->ntc);
  j->ppc = pc;
  j->n_mc = conv_cdiv(j->np, j->ppc);
  /* plane rows one chunk reads: its positions' rows (a chunk need not start
   * at a row start, hence one more) plus the taps' reach */
  j->Hl = conv_cdiv(j->ntc * j->NR, j->Wq) + 2 + amax;
}

/* The job's sizes, tiling and work split for d on k over `threads`. */
static void direct_setup(direct_job *j, const conv2d_desc *d, const conv_kernels *k, int threads) {
  j->d = d;
  j->k = k;
  j->Cg = d->C / d->G;
  j->Mg = d->M / d->G;
  j->K = j->Cg * d->KH * d->KW;
  j->P = d->sh * d->sw;
  j->Wq = d->OW + (d->KW - 1) * d->dw / d->sw;
  j->Q = d->OH * j->Wq;
  j->nv = direct_pick_nv(k, j->Q);
  j->NR = j->nv * k->vl;
  j->tiles = conv_cdiv(j->Q, j->NR);
  j->np = conv_cdiv(j->Mg, k->dmr);
  direct_plan(j, threads);
}

int64_t conv_direct_items(const conv2d_desc *d, isa_level isa, int threads) {
  direct_job j = {0};
  direct_setup(&j, d, conv_kernels_get(isa), threads);
  return d->N * d->G * j.n_qc * j.n_mc;
}

smelt_status conv_direct_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                             const float *B, const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  const conv_kernels *k = w->k;
  direct_job j = {.d = d, .w = w, .X = X, .B = B, .Y = Y, .res = ep ? ep->residual : NULL,
                  .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  direct_setup(&j, d, k, pool_threads(pool));
  int64_t bmax = (d->KW - 1) * d->dw / d->sw;
  /* slack: the dropped columns of the last row read up to bmax + Wq past it */
  j.buf_len = j.Cg * j.P * j.Hl * j.Wq + bmax + j.Wq + j.NR + k->vl;
  int64_t *boff = conv_tap_offsets(d, j.Cg, j.Hl, j.Wq);
  if (!boff) return SMELT_ERR_NOMEM;
  j.boff = boff;
  /* SMELT_DIRECT_EPI=0: every tile through memory and direct_out */
  j.epi = k->direct_epi[j.nv] && env_flag_on("SMELT_DIRECT_EPI");
  pool_parallel_for(pool, d->N * d->G * j.n_qc * j.n_mc, 1, direct_items, &j);
  free(boff);
  if (atomic_load(&j.failed)) return err_nomem("conv scratch", sizeof(float) * (size_t)j.buf_len);
  return SMELT_OK;
}
