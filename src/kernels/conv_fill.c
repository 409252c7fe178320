/* The stride-phase-split padded copy of an input (kernels/conv_internal.h;
 * the per-ISA fill_phases in kernels/conv_impl.h), and conv_split. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_internal.h"
#include "util/err.h"

void conv_fill_phases(const conv_phases *p, const float *x, int64_t channels, int64_t r0,
                      float pad, float *buf) {
  const conv_kernels *k = p->k ? p->k : conv_kernels_get(ISA_SCALAR);
  k->fill_phases(p, x, channels, r0, pad, buf, false);
}

void conv_refill_phases(const conv_phases *p, const float *x, int64_t channels, int64_t r0,
                        float *buf) {
  const conv_kernels *k = p->k ? p->k : conv_kernels_get(ISA_SCALAR);
  k->fill_phases(p, x, channels, r0, 0.f, buf, true);
}

void conv_split(int threads, int64_t per, int64_t R, int64_t min_r, int64_t np, double work_s,
                double w_bytes, double in_bytes, int64_t *rc, int64_t *pc) {
  /* Traffic at 40 GB/s and 3 us an item for one or two threads: the model
   * the splits were tuned with on the 2-core machines.  Each thread reads
   * its own items' weights and inputs beside the others, and hands out its
   * own items, so beyond two threads the rate of both grows with the
   * threads kept busy.  Charged at the two-thread rates, a 16-thread split
   * kept too few items (128 -> 128 3x3/2 at 28x28: 12 items for 16
   * threads, 4 of them idle). */
  const double reread_bw = 40e9, item_s = 3e-6;
  if (threads < 1) threads = 1;
  if (per < 1) per = 1;
  if (R < 1) R = 1;
  if (np < 1) np = 1;
  if (min_r < 1) min_r = 1;
  if (min_r > R) min_r = R;
  *rc = conv_cdiv(R, min_r), *pc = np;
  double best = -1;
  for (int64_t r = min_r; r <= R && r <= min_r + 64; r++) {
    int64_t c_r = conv_cdiv(R, r), r_eff = conv_cdiv(R, c_r);
    if (r_eff != r) continue; /* the same split as a smaller r */
    for (int64_t p = 1; p <= np && p <= 64; p++) {
      int64_t c_p = conv_cdiv(np, p), p_eff = conv_cdiv(np, c_p);
      if (p_eff != p) continue;
      double items = (double)per * (double)r * (double)p;
      /* items of about even size (the drivers cut even chunks), handed
       * out from even home ranges: the busiest thread does ceil(items /
       * threads) of them, plus one item for a thread slowed by other load
       * (finer items let the others take more of its share).  The bound
       * the split had before, an even share plus one item, rated 15 items
       * on 2 threads above 14 (resnet50's stem, 2-core Zen 4: the worker
       * sat idle for the 15th, 0.1-0.2 ms of 1.4). */
      double item = (double)c_r * (double)c_p / ((double)per * (double)R * (double)np);
      double share = ceil(items / threads) / items + item * (1.0 - 1.0 / threads);
      double busy = (items < threads ? items : threads) / 2.0; /* the rates' scale */
      if (busy < 1) busy = 1;
      double t = work_s * share + (double)per * ((double)r * w_bytes + (double)p * in_bytes) / (reread_bw * busy) +
                 items * item_s / busy;
      if (best < 0 || t < best) best = t, *rc = c_r, *pc = c_p;
    }
  }
}

bool conv_phases_sane(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sh, int64_t sw,
                      int64_t dh, int64_t dw) {
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || KH < 1 || KW < 1 || sh > 64 || sw > 64) return false;
  double amax = (double)(KH - 1) * (double)dh / (double)sh;
  double bmax = (double)(KW - 1) * (double)dw / (double)sw;
  double floats = (double)sh * (double)sw * ((double)OH + amax + 3) * ((double)OW + bmax + 1);
  return floats <= (double)(1 << 28) && (double)KH * (double)KW <= (double)(1 << 20);
}

int64_t *conv_tap_offsets(const conv2d_desc *d, int64_t channels, int64_t Hl, int64_t Wq) {
  int64_t K = channels * d->KH * d->KW, P = d->sh * d->sw;
  int64_t *off = malloc(sizeof(int64_t) * (size_t)(K > 0 ? K : 1));
  if (!off) {
    err_nomem("conv tap offsets", sizeof(int64_t) * (size_t)K);
    return NULL;
  }
  /* channel 0's taps, then each channel's a plane set further on (the
   * divisions once a tap, not once a tap and channel: 512 channels of 3x3
   * cost 12 us a run on the graph thread) */
  int64_t T = d->KH * d->KW, cstep = P * Hl * Wq;
  for (int64_t kh = 0, kk = 0; K > 0 && kh < d->KH; kh++) /* no channels: nothing */
    for (int64_t kw = 0; kw < d->KW; kw++, kk++) {
      int64_t ph = kh * d->dh % d->sh, pw = kw * d->dw % d->sw;
      off[kk] = ((ph * d->sw + pw) * Hl + kh * d->dh / d->sh) * Wq + kw * d->dw / d->sw;
    }
  for (int64_t kk = T; kk < K; kk++) off[kk] = off[kk - T] + cstep;
  return off;
}

conv_blk conv_blk_make(int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t OH, int64_t OW, int64_t KH,
                       int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int vl, int64_t *off) {
  /* rows and columns read: the input's with its begin pads, and the last window's */
  int64_t rh = (OH - 1) * sh + (KH - 1) * dh + 1, rw = (OW - 1) * sw + (KW - 1) * dw + 1;
  conv_blk b = {H, W, pt, pl, H + pt > rh ? H + pt : rh, W + pl > rw ? W + pl : rw, vl};
  for (int64_t kh = 0, t = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++, t++) off[t] = (kh * dh * b.Wp + kw * dw) * vl;
  return b;
}

static void fill_value(float *p, int64_t n, float value) {
  if (value == 0.f) memset(p, 0, sizeof(float) * (size_t)n);
  else
    for (int64_t i = 0; i < n; i++) p[i] = value;
}

void conv_blk_border(const conv_blk *b, float value, float *buf) {
  int64_t row = b->Wp * b->vl, in_end = b->pt + b->H; /* rows [pt, in_end) hold input pixels [pl, pl + W) */
  fill_value(buf, b->pt * row, value);
  for (int64_t r = b->pt; r < in_end; r++) {
    fill_value(buf + r * row, b->pl * b->vl, value);
    fill_value(buf + r * row + (b->pl + b->W) * b->vl, (b->Wp - b->pl - b->W) * b->vl, value);
  }
  fill_value(buf + in_end * row, (b->Hp - in_end) * row, value);
}

void conv_blk_fill(const conv_kernels *k, const conv_blk *b, const float *x, int nch, float *buf) {
  const float *src[16];
  for (int64_t ih = 0; ih < b->H; ih++) {
    for (int l = 0; l < b->vl; l++) src[l] = l < nch ? x + (l * b->H + ih) * b->W : NULL;
    k->rows_to_blk(src, b->W, buf + ((ih + b->pt) * b->Wp + b->pl) * b->vl);
  }
}

static atomic_uint_fast64_t run_numbers;

uint64_t conv_run_number(void) { return atomic_fetch_add(&run_numbers, 1) + 1; }

static _Thread_local uint64_t warm_last;

uint64_t conv_warm_run(int threads) { return threads > 1 ? conv_run_number() : 0; }

void conv_warm(uint64_t run, const void *p, size_t bytes) {
  if (!run || warm_last == run) return;
  warm_last = run;
  for (const char *b = p, *e = b + bytes; b < e; b += 64) __builtin_prefetch(b, 0, 2);
}
