/* Winograd convolution F(m x m, 3 x 3), m = 2 or 4 (alpha = m + 2), for
 * 3x3 stride-1 undilated ungrouped convolutions (Lavin & Gray, 2016).
 *
 *   U = G g G^T per (output, input) channel pair: prepared once, laid out
 *       [alpha^2][panel of wnr outputs][Cp inputs][wnr] for the tuple GEMM;
 *   V = B^T d B per input tile (alpha x alpha patch, stride m) and channel;
 *   O[xi] = V[xi] U[xi] for each of the alpha^2 points xi (a GEMM over the
 *       input channels);
 *   Y = A^T O A per output tile, plus the bias, then the epilogue.
 * Transforms run on vl channels at once on a blocked copy of the input
 * ([channel block][row][col][vl]).  Work items (conv_wino_piece) are
 * (batch, tile rows, output panels) rectangles: each thread's even share
 * of the (batch, tile row, panel) units in chunks of tile rows and panels,
 * or (batch, panel chunk, row chunk) where each thread takes a panel chunk
 * of its own; each transforms its tiles' inputs into its own scratch, so
 * one pool_parallel_for runs the whole convolution; a thread's next item
 * over the same tile rows (its next chunk of panels) reuses the V its
 * scratch holds (wino_held: at 2 threads resnet50's 256 -> 256 at 14x14
 * transformed each thread's rows once per panel chunk, the transform and
 * its fill 14% of the thread time against 8.4% at 1 thread; 0.371 -> 0.352
 * ms a layer, the mean of its five in the model).  Even shares: 2-core
 * Zen 4, 2 threads, resnet50's 64 -> 64 at 56x56 and 128 -> 128 at 28x28
 * on F(4x4) (14 and 7 tile rows in chunks of 2) left the worker idle for
 * 0.04-0.1 ms of 0.4-0.55 each before, 0.02-0.04 after
 * (`bench/pool_idle.py` over `smelt profile`'s trace).
 *
 * Accuracy: the transforms multiply rounding errors by the size of their
 * coefficients.  Against a double-precision direct convolution on uniform
 * [-1, 1) data (tests/unit/test_conv_kernels.c), the worst error relative
 * to sum |x w| over the window is 3.2e-7 for F(2,3) (direct: 2.4e-7) and
 * 2.6e-6 for F(4,3): F(4,3) gives up about one decimal digit, more where
 * the output cancels (relative to |y| it can lose 2-3 digits).  The tests
 * allow 2e-5 and 1e-4.
 * SMELT_CONV=direct (or im2col) turns Winograd off. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

const double conv_wino_g2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};

typedef struct wino_prep_job {
  conv2d_weights *w;
  const float *W;
  const double (*G)[3];
  int a;
} wino_prep_job;

#define WINO_WNR_MAX 64

/* Output panels [p0, p1): for each (panel, input channel) the wnr kernels
 * are transformed together (u = G g G^T, the loops over the panel's lanes
 * vectorize) and their alpha^2 values land as alpha^2 runs of wnr floats,
 * finished before the next channel (a channel-major walk would touch every
 * line wnr times, far apart). Padding channels and outputs are zero.  The
 * transform runs in double and rounds once to float, as a per-kernel
 * transform would. */
static void wino_prep_panels(void *ctx, int64_t p0, int64_t p1) {
  const wino_prep_job *j = ctx;
  conv2d_weights *w = j->w;
  const conv2d_desc *d = &w->d;
  int a = j->a, a2 = a * a, wnr = w->k->wnr;
  int64_t cp = w->cp, np = w->mp / wnr;
  double G[6][3], g[9][WINO_WNR_MAX], t[6][3][WINO_WNR_MAX];
  float u[36][WINO_WNR_MAX];
  for (int i = 0; i < a; i++)
    for (int k = 0; k < 3; k++) G[i][k] = j->G[i][k];
  for (int64_t p = p0; p < p1; p++)
    for (int64_t c = 0; c < cp; c++) {
      for (int r = 0; r < wnr; r++) {
        int64_t mo = p * wnr + r;
        bool real = mo < d->M && c < d->C;
        for (int e = 0; e < 9; e++) g[e][r] = real ? j->W[(mo * d->C + c) * 9 + e] : 0.0;
      }
      for (int i = 0; i < a; i++)
        for (int k = 0; k < 3; k++)
          for (int r = 0; r < wnr; r++)
            t[i][k][r] = G[i][0] * g[k][r] + G[i][1] * g[3 + k][r] + G[i][2] * g[6 + k][r];
      for (int i = 0; i < a; i++)
        for (int e = 0; e < a; e++)
          for (int r = 0; r < wnr; r++)
            u[i * a + e][r] = (float)(t[i][0][r] * G[e][0] + t[i][1][r] * G[e][1] + t[i][2][r] * G[e][2]);
      for (int xi = 0; xi < a2; xi++)
        memcpy(w->data + ((xi * np + p) * cp + c) * wnr, u[xi], sizeof(float) * (size_t)wnr);
    }
}

void conv_wino_layout(conv2d_weights *w) {
  w->cp = conv_cdiv(w->d.C, w->k->vl) * w->k->vl;
  w->mp = conv_cdiv(w->d.M, w->k->wnr) * w->k->wnr;
}

smelt_status conv_wino_prepare(smelt_pool *pool, conv2d_weights *w, const float *W) {
  const conv_kernels *k = w->k;
  if (k->wnr > WINO_WNR_MAX) return err_set(SMELT_ERR_INTERNAL, "winograd: panel width %d", k->wnr);
  int m = conv_wino_m(w->algo);
  conv_wino_layout(w);
  wino_prep_job j = {w, W, m == 4 ? G4 : conv_wino_g2, m + 2};
  pool_parallel_for(pool, w->mp / k->wnr, 1, wino_prep_panels, &j);
  return SMELT_OK;
}

/* The tile rows whose V an item's scratch holds: the next item on the
 * same thread over the same rows (the plan's next chunk of output panels
 * for them) transforms nothing again. */
typedef struct wino_held {
  int64_t n, r0, r1;
} wino_held;
#define WINO_SLOTS 64 /* threads of a run that keep their scratch; more take a fresh one a chunk */

typedef struct wino_job {
  const conv2d_weights *w;
  const float *X, *B;
  float *Y;
  const float *res; /* epilogue: residual (NULL: none) and clamp */
  float lo, hi;
  bool ep;          /* any epilogue at all */
  int m, a;
  int64_t TW;
  conv_wino_plan plan; /* the items (conv_wino_piece); rc x pc sizes the scratch */
  int64_t kmax;
  int threads;
  int64_t rows_l, Wl; /* blocked input rows/cols of one chunk */
  int64_t scratch;    /* floats per item */
  atomic_bool failed;
  /* Per thread taking part (wino_items): its scratch, kept across its
   * chunks of items, and the tile rows whose V that scratch holds */
  uint64_t gen; /* this run's, for the threads' slot lookup */
  atomic_int next_slot;
  float *slot_scratch[WINO_SLOTS];
  wino_held slot_held[WINO_SLOTS];
} wino_job;

/* Blocked, zero-padded copy of the input rows tile rows [tr0, ...) read
 * (vl channel rows transposed into pixel-major vectors at a time). */
static void wino_fill(const wino_job *j, const float *x, int64_t tr0, float *xt) {
  const conv2d_desc *d = &j->w->d;
  const conv_kernels *k = j->w->k;
  int vl = k->vl;
  int64_t cb_n = j->w->cp / vl, Wl = j->Wl, pl = d->pl, pr = Wl - pl - d->W; /* pr >= 0 */
  const float *src[16];
  for (int64_t cb = 0; cb < cb_n; cb++)
    for (int64_t R = 0; R < j->rows_l; R++) {
      float *dst = xt + ((cb * j->rows_l + R) * Wl) * vl;
      int64_t r = tr0 * j->m + R - d->pt;
      if (r < 0 || r >= d->H) {
        memset(dst, 0, sizeof(float) * (size_t)(Wl * vl));
        continue;
      }
      for (int l = 0; l < vl; l++) {
        int64_t c = cb * vl + l;
        src[l] = c < d->C ? x + (c * d->H + r) * d->W : NULL;
      }
      memset(dst, 0, sizeof(float) * (size_t)(pl * vl));
      k->rows_to_blk(src, d->W, dst + pl * vl);
      memset(dst + (pl + d->W) * vl, 0, sizeof(float) * (size_t)(pr * vl));
    }
}

/* Output rows [0, rows) of the item's blocked result (channel blocks of
 * the panel chunk from m_first) into Y, bias added, then the epilogue
 * (residual, clamp) over each row while it is in cache. */
static void wino_store(const wino_job *j, const float *yb, int64_t rows, int64_t Wo, int64_t mcw,
                       float *y, int64_t m_first, int64_t oh0) {
  const conv2d_desc *d = &j->w->d;
  int vl = j->w->k->vl;
  float *dst[16];
  for (int64_t mb = 0; mb < mcw / vl; mb++) {
    int64_t m0 = m_first + mb * vl;
    if (m0 >= d->M) break;
    for (int64_t r = 0; r < rows && oh0 + r < d->OH; r++) {
      for (int l = 0; l < vl; l++)
        dst[l] = m0 + l < d->M ? y + (m0 + l) * d->OH * d->OW + (oh0 + r) * d->OW : NULL;
      j->w->k->blk_to_rows(yb + ((mb * rows + r) * Wo) * vl, d->OW, dst, j->B ? j->B + m0 : NULL);
      for (int l = 0; j->ep && l < vl; l++)
        if (dst[l])
          j->w->k->epi_rows(dst[l], d->OW, j->res ? j->res + (dst[l] - j->Y) : NULL, j->lo, j->hi, dst[l],
                            d->OW, 1, d->OW);
    }
  }
}

static void wino_item(const wino_job *j, int64_t it, float *scratch, wino_held *held) {
  const conv2d_weights *w = j->w;
  const conv2d_desc *d = &w->d;
  const conv_kernels *k = w->k;
  int vl = k->vl, m = j->m, a = j->a, A2 = a * a, fi = m == 4;
  conv_wino_piece pc;
  if (!conv_wino_piece_of(&j->plan, d->N, j->threads, j->kmax, it, &pc)) return; /* a padding item */
  int64_t n = pc.n, tr0 = pc.r0, ntr = pc.r1 - pc.r0;
  int64_t T = ntr * j->TW, cp = w->cp, wnr = k->wnr;
  int64_t p0 = pc.p0, p1 = pc.p1, mcw = (p1 - p0) * wnr;
  float *xt = scratch, *V = xt + cp * j->rows_l * j->Wl, *O = V + A2 * j->plan.rc * j->TW * cp;
  if (held->n != n || held->r0 != pc.r0 || held->r1 != pc.r1) { /* else V holds these rows already */
    wino_fill(j, j->X + n * d->C * d->H * d->W, tr0, xt);
    for (int64_t cb = 0; cb < cp / vl; cb++)
      for (int64_t t = 0; t < T; t++) {
        int64_t tri = t / j->TW, tw = t % j->TW;
        const float *x = xt + ((cb * j->rows_l + tri * m) * j->Wl + tw * m) * vl;
        k->wino_in[fi](x, j->Wl * vl, V + t * cp + cb * vl, T * cp);
      }
    *held = (wino_held){n, pc.r0, pc.r1};
  }
  /* the item's next panel of U (cp x wnr floats, not touched since the
   * previous run: from memory) streams into L2 spread over this panel's
   * calls, a few lines a K step, not all at once beside the first call's
   * own misses */
  int64_t calls = conv_cdiv(T, k->wmr), lines = cp * wnr * (int64_t)sizeof(float) / 64;
  for (int xi = 0; xi < A2; xi++)
    for (int64_t p = p0; p < p1; p++) {
      const float *U = w->data + ((xi * j->plan.np + p) * cp) * wnr;
      int64_t nxi = p + 1 < p1 ? xi : xi + 1, np_ = p + 1 < p1 ? p + 1 : p0;
      const float *next = nxi < A2 ? w->data + ((nxi * j->plan.np + np_) * cp) * wnr : NULL;
      float *o = O + (int64_t)xi * T * mcw + (p - p0) * wnr;
      for (int64_t t0 = 0, c = 0; t0 < T; t0 += k->wmr, c++) {
        int mr = (int)(T - t0 < k->wmr ? T - t0 : k->wmr);
        const float *pf;
        int64_t pfl = conv_pf_share(next, lines, calls, c, &pf);
        k->wgemm(cp, V + xi * T * cp + t0 * cp, cp, U, o + t0 * mcw, mcw, pf, pfl, mr);
      }
    }
  /* output transforms into a blocked buffer, then rows into Y */
  int64_t Wo = j->TW * m, rows = ntr * m;
  float *yb = O + A2 * j->plan.rc * j->TW * j->plan.pc * wnr;
  for (int64_t t = 0; t < T; t++) {
    int64_t tri = t / j->TW, tw = t % j->TW;
    for (int64_t mb = 0; mb < mcw / vl; mb++) {
      if (p0 * wnr + mb * vl >= d->M) break;
      k->wino_out[fi](O + t * mcw + mb * vl, T * mcw, yb + ((mb * rows + tri * m) * Wo + tw * m) * vl,
                      Wo * vl);
    }
  }
  wino_store(j, yb, rows, Wo, mcw, j->Y + n * d->M * d->OH * d->OW, p0 * wnr, tr0 * m);
}

/* This thread's slot in run gen: taken from next_slot on its first chunk */
static _Thread_local struct {
  uint64_t gen;
  int slot;
} wino_tl;

static void wino_items(void *vctx, int64_t i0, int64_t i1) {
  wino_job *j = vctx;
  if (wino_tl.gen != j->gen) wino_tl.gen = j->gen, wino_tl.slot = atomic_fetch_add(&j->next_slot, 1);
  int s = wino_tl.slot;
  wino_held fresh = {-1, 0, 0}, *held = s < WINO_SLOTS ? &j->slot_held[s] : &fresh;
  float *scratch = s < WINO_SLOTS ? j->slot_scratch[s] : NULL;
  if (!scratch) {
    scratch = tensor_data_alloc(sizeof(float) * (size_t)j->scratch);
    if (!scratch) {
      atomic_store(&j->failed, true);
      return;
    }
    if (s < WINO_SLOTS) j->slot_scratch[s] = scratch, *held = fresh;
  }
  for (int64_t it = i0; it < i1; it++) wino_item(j, it, scratch, held);
  if (s >= WINO_SLOTS) tensor_data_free(scratch);
}

/* Tile rows an item takes: its scratch within ~768 KiB, up to 4 MiB when
 * U is so large that reading it again per chunk costs more than spilling
 * the scratch from L2 (conv_split weighs re-reading U per tile-row chunk
 * against redoing the input transform per panel chunk). */
static int64_t wino_fit_rows(int m, int64_t TW, int64_t cp, int64_t mp) {
  int64_t a = m + 2, A2 = a * a, Wl = TW * m + 2, row_bytes = 4 * (A2 * TW * (cp + mp) + cp * m * Wl);
  double u_bytes = 4.0 * A2 * cp * mp;
  double budget = u_bytes / 4 < 768 * 1024.0 ? 768 * 1024.0 : u_bytes / 4 > 4194304.0 ? 4194304.0 : u_bytes / 4;
  int64_t fit = (int64_t)(budget / (double)row_bytes);
  return fit < 1 ? 1 : fit;
}

void conv_wino_plan_of(const conv2d_desc *d, const conv_kernels *k, int m, int threads, conv_wino_plan *p) {
  int64_t a = m + 2, A2 = a * a, cp = conv_cdiv(d->C, k->vl) * k->vl, mp = conv_cdiv(d->M, k->wnr) * k->wnr;
  int64_t TH = conv_cdiv(d->OH, m), TW = conv_cdiv(d->OW, m), np = mp / k->wnr, fit = wino_fit_rows(m, TW, cp, mp);
  double u_bytes = 4.0 * A2 * cp * mp, in_bytes = 4.0 * A2 * TH * TW * cp;
  double work_s = 2.0 * d->N * A2 * TH * TW * (double)cp * (double)mp / 150e9;
  *p = (conv_wino_plan){.TH = TH, .np = np};
  if (threads < 1) threads = 1;
  conv_split(threads, d->N, TH, conv_cdiv(TH, fit), np, work_s, u_bytes, in_bytes, &p->rc, &p->pc);
  /* Each thread its own chunk of the output panels over every tile row
   * (items panel-chunk-major: a thread's home range is one chunk) where
   * the panels split evenly and a thread reads its share of U once a run
   * -- it fits its L2 beside the scratch, or every tile row is one chunk
   * -- for one more input transform per thread.  Measured at 2 threads in
   * squeezenet (one process, two runs each way): 32 -> 128 at 27x27 (F4)
   * 0.165 -> 0.137 ms, 64 -> 256 at 13x13 (F2) 0.20 -> 0.17, the model
   * 3.35 -> 3.23 ms.  Where U is larger than an L2 and every tile row one
   * chunk (2-core Zen 4, 2 threads, in resnet50, `bench/layer_profile.py`,
   * the best of two rounds): 256 -> 256 at 14x14 on F(4x4) 0.54-0.60 ms
   * against conv_split's tile-row split's 0.72-0.85, 512 -> 512 at 7x7 on
   * F(2x2) 0.86-0.89 against 1.02-1.10.  resnet50's larger planes, which
   * take several row chunks and whose U is larger, were level, so they
   * keep conv_split's. */
  bool once = u_bytes / threads <= CONV_WINO_L2_U || conv_cdiv(TH, fit) == 1;
  if (threads > 1 && np >= threads && np % threads == 0 && once) {
    p->pmajor = true;
    p->rc = conv_cdiv(TH, conv_cdiv(TH, fit));
    p->pc = np / threads;
  }
}

/* Thread s's pieces where the plan splits by tile rows: its even share
 * [s U / threads, (s + 1) U / threads) of the U = N TH np units (image,
 * tile row, panel; panels fastest), cut into rectangles of at most rc
 * whole rows, a row the share starts or ends inside taking only its
 * panels, each in chunks of at most pc panels.  The rectangles of whole
 * rows come first, a partial row's last: a thread's first item reads its
 * panels of U from memory, and a one-row item did that for a third of a
 * whole-row item's work (resnet50's 256 -> 256 at 14x14, 2 threads: the
 * worker's first item, row 3's second half, 100 us against 52 for the
 * same work with U in cache, and the other thread waited 0.04 ms of 0.33
 * at the end).  The want-th piece into *out (want >= 0; returns -1 past
 * the last), or the count (want < 0). */
static int64_t wino_walk(const conv_wino_plan *p, int64_t N, int threads, int s, int64_t want,
                         conv_wino_piece *out) {
  int64_t np = p->np, TH = p->TH, Ut = N * TH * np, cnt = 0;
  for (int partial = 0; partial < 2; partial++) {
    int64_t u = s * Ut / threads, u1 = (s + 1) * Ut / threads;
    while (u < u1) {
      int64_t n = u / (TH * np), r = u / np % TH, q = u % np, r1, q0, q1;
      bool part = q > 0 || u1 - u < np;
      if (part) {
        r1 = r + 1, q0 = q, q1 = q + (u1 - u) < np ? q + (u1 - u) : np;
      } else {
        int64_t nr = p->rc < TH - r ? p->rc : TH - r;
        if ((u1 - u) / np < nr) nr = (u1 - u) / np;
        r1 = r + nr, q0 = 0, q1 = np;
      }
      if (part == (partial == 1))
        for (int64_t c = q0; c < q1; c += p->pc, cnt++)
          if (cnt == want) {
            *out = (conv_wino_piece){n, r, r1, c, c + p->pc < q1 ? c + p->pc : q1};
            return cnt;
          }
      u += (r1 - r) * (q1 - q0);
    }
  }
  return want < 0 ? cnt : -1;
}

int64_t conv_wino_kmax(const conv_wino_plan *p, int64_t N, int threads) {
  if (threads < 1) threads = 1;
  if (p->pmajor) return conv_cdiv(N * conv_cdiv(p->TH, p->rc) * conv_cdiv(p->np, p->pc), threads);
  int64_t k = 0;
  for (int s = 0; s < threads; s++) {
    int64_t c = wino_walk(p, N, threads, s, -1, NULL);
    if (c > k) k = c;
  }
  return k;
}

bool conv_wino_piece_of(const conv_wino_plan *p, int64_t N, int threads, int64_t kmax, int64_t it,
                        conv_wino_piece *out) {
  if (threads < 1) threads = 1;
  if (p->pmajor) {
    int64_t n_tc = conv_cdiv(p->TH, p->rc), n_mc = conv_cdiv(p->np, p->pc);
    if (it >= N * n_tc * n_mc) return false;
    int64_t tc = it % n_tc, mc = it / n_tc % n_mc, n = it / (n_tc * n_mc);
    int64_t r0 = tc * p->rc, p0 = mc * p->pc;
    *out = (conv_wino_piece){n, r0, r0 + p->rc < p->TH ? r0 + p->rc : p->TH, p0, p0 + p->pc < p->np ? p0 + p->pc : p->np};
    return true;
  }
  return it / kmax < threads && wino_walk(p, N, threads, (int)(it / kmax), it % kmax, out) == it % kmax;
}

double conv_wino_balance(const conv_wino_plan *p, int64_t N, int threads) {
  if (threads <= 1) return 1;
  int64_t kmax = conv_wino_kmax(p, N, threads), n = kmax * threads;
  double total = 0, busiest = 0;
  for (int s = 0; s < threads; s++) {
    double sum = 0;
    conv_wino_piece pc;
    for (int64_t it = s * n / threads; it < (s + 1) * n / threads; it++)
      if (conv_wino_piece_of(p, N, threads, kmax, it, &pc)) sum += (double)((pc.r1 - pc.r0) * (pc.p1 - pc.p0));
    total += sum;
    if (sum > busiest) busiest = sum;
  }
  return busiest > 0 ? total / threads / busiest : 1;
}

smelt_status conv_wino_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                           const float *B, const conv2d_epilogue *ep, float *Y) {
  const conv2d_desc *d = &w->d;
  const conv_kernels *k = w->k;
  wino_job j = {.w = w, .X = X, .B = B, .Y = Y, .m = conv_wino_m(w->algo), .res = ep ? ep->residual : NULL,
                .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY};
  j.ep = j.res || j.lo != -INFINITY || j.hi != INFINITY;
  j.a = j.m + 2;
  j.TW = conv_cdiv(d->OW, j.m);
  j.Wl = j.TW * j.m + 2;
  int64_t A2 = j.a * j.a;
  j.threads = pool_threads(pool);
  conv_wino_plan_of(d, k, j.m, j.threads, &j.plan);
  j.kmax = conv_wino_kmax(&j.plan, d->N, j.threads);
  int64_t rc = j.plan.rc, mcw = j.plan.pc * k->wnr, T = rc * j.TW;
  j.rows_l = rc * j.m + 2;
  /* blocked input, V, O, blocked output */
  j.scratch = w->cp * j.rows_l * j.Wl + A2 * T * (w->cp + mcw) + mcw * rc * j.m * j.TW * j.m;
  j.gen = conv_run_number();
  atomic_init(&j.next_slot, 0);
  pool_parallel_for(pool, j.kmax * j.threads, 1, wino_items, &j);
  int slots = atomic_load(&j.next_slot);
  for (int s = 0; s < slots && s < WINO_SLOTS; s++) tensor_data_free(j.slot_scratch[s]);
  if (atomic_load(&j.failed)) return err_nomem("winograd scratch", sizeof(float) * (size_t)j.scratch);
  return SMELT_OK;
}
