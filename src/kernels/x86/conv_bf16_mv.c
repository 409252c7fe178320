/* The bf16 convolution's channel-vector kernel (kernels/conv_bf16.h:
 * conv_bf16_mv) for CPUs with AVX512_BF16 and no AMX: output channels along
 * the vector, positions broadcast.  An item is up to CB_MV_BLOCK (48)
 * output channels -- NM = 1..3 zmm of 16 -- by np (4..8) consecutive output
 * positions in raster order, NM x np accumulators; per tap and channel
 * pair, NM loads of the block's weight pairs and np broadcasts of the
 * positions' input pairs, each from its own flat offset in the converted
 * copy (a block may span output rows: no flat position past a row's end is
 * computed, as the position-vector kernel's 32-wide blocks must).  So a
 * 7x7 plane is 7 blocks of 7 (the position-vector kernel: 64 flat positions
 * for 49, 63 of them for a 3x3 over its padded rows) and M = 2048 is
 * 2048 channels (that one: 12-channel items, 2052).
 *
 * Weights are block-major: block b (channels 48 b .. 48 b + wb - 1, wb the
 * block's width rounded to 16) is taps x Cq x wb words, contiguous, so an
 * item streams its block front to back.  The store adds the bias as a
 * vector, transposes each 16 channels x np positions in registers and
 * writes each channel's np outputs (contiguous in Y) as one masked store,
 * the residual added and the clamp applied; a channels-last Y is written a
 * position's channels at a time, no transpose.  A 16-channel block (NM = 1:
 * one vdpbf16ps a broadcast) splits its sums by even and odd pairs
 * (cb_cv_dot1): np sums alone would wait on vdpbf16ps's latency.  Compiles
 * everywhere (per-function target attributes); runs only where bf16dp_hw. */
#include "kernels/conv_bf16_impl.h"

#include "kernels/conv_internal.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>

#include <string.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/conv_bf16_x86.h"

#define NP_MAX CB_NP_MAX

/* Where a run's blocks start and how a block's positions lie in xp */
typedef struct mv_run_at {
  int64_t pb, nb; /* blocks pb .. pb + nb - 1 of np positions */
  int64_t oh, ow; /* block pb's first position */
  int64_t rs, cs; /* words from one output row to the next in xp, one column to the next */
} mv_run_at;

/* One run of items: NM zmm of output channels from m0 (weights wb, block
 * width 16 NM) by nb consecutive blocks of NP positions (NP a constant at
 * each call, so the loops unroll into registers).  The bias, masks, bounds
 * and the job's fields are set up once a run, not once a block: with 16
 * or 24 channels in (an expand or project 1x1 over a large plane) a
 * block's dot is ~100 cycles and that setup a good part of it. */
CB_INLINE void mv_run(int NP, const cb_job *j, const uint32_t *wb, int NM, int64_t m0, mv_run_at at) {
  const conv2d_desc *d = j->d;
  const int64_t M = d->M, OW = d->OW, S = j->S, taps = j->taps, Cq = j->Cq, xs = j->mcl ? 1 : j->P * j->L;
  const uint32_t *xp = j->xp;
  const int64_t *toff = j->toff;
  __m512 bias[3];
  __mmask16 mk[3];
#pragma GCC unroll 3
  for (int i = 0; i < NM; i++) { /* the sums start at the bias */
    mk[i] = avx512_mask(M - m0 - 16 * i);
    bias[i] = j->B ? _mm512_maskz_loadu_ps(mk[i], j->B + m0 + 16 * i) : _mm512_setzero_ps();
  }
  /* channels-last, the residual too or none: each position's NM vectors
   * stored as they are */
  const bool cl = j->ycl && (j->rcl || (!j->res && !j->resh));
  const __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
  uint16_t *const Yh = j->Yh;
  const uint16_t *const rh = j->rcl ? j->resh : NULL;
  int64_t oh = at.oh, ow = at.ow;
  for (int64_t b = 0, pb = at.pb; b < at.nb; b++, pb++) {
    int64_t y0 = pb * NP, npv = S - y0 < NP ? S - y0 : NP;
    int64_t off[NP_MAX], h = oh, w = ow;
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++) { /* past the plane: the last position again, not stored */
      off[p] = p == 0 || p < npv ? h * at.rs + w * at.cs : off[p - 1]; /* npv >= 1 */
      if (p < npv - 1 && ++w == OW) w = 0, h++;
    }
    for (ow += NP; ow >= OW; ow -= OW) oh++; /* the next block's first position */
    __m512 c[NP_MAX][3];
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
      for (int i = 0; i < NM; i++) c[p][i] = bias[i];
    for (int64_t t = 0; t < taps; t++) {
      const uint32_t *x = xp + toff[t], *wt = wb + t * Cq * 16 * NM;
      if (NM == 1) cb_cv_dot1(c, x, xs, wt, Cq, off, NP);
      else cb_cv_dot(c, x, xs, wt, Cq, off, NM, NP);
    }
    if (cl) {
#pragma GCC unroll 8
      for (int p = 0; p < NP; p++) {
        if (p >= npv) break;
        uint16_t *yp = Yh + (y0 + p) * M + m0;
        const uint16_t *rp = rh ? rh + (y0 + p) * M + m0 : NULL;
        __m512 v[3];
#pragma GCC unroll 3
        for (int i = 0; i < NM; i++) {
          v[i] = c[p][i];
          if (rp) v[i] = _mm512_add_ps(v[i], cb_bf16x16(_mm256_maskz_loadu_epi16(mk[i], rp + 16 * i)));
        }
        /* the first 32 channels converted and stored as one vector */
        if (NM >= 2) cb_out_cl32(yp, (__mmask32)mk[0] | (__mmask32)mk[1] << 16, lo, hi, v[0], v[1]);
        else cb_out_cl16(yp, mk[0], lo, hi, v[0]);
        if (NM == 3) cb_out_cl16(yp + 32, mk[2], lo, hi, v[2]);
      }
      continue;
    }
#pragma GCC unroll 3
    for (int i = 0; i < NM; i++) {
      __m512 r[NP_MAX];
#pragma GCC unroll 8
      for (int p = 0; p < NP_MAX; p++) r[p] = p < NP ? c[p][i] : _mm512_setzero_ps();
      mv_store16(j, r, m0 + 16 * i, y0, npv);
    }
  }
}

/* The run for NM and np (4..8), each a constant inside. */
#define MV_NP_CASES(NM) CB_NP_SWITCH(np, mv_run, j, wb, NM, m0, at)

CB_TARGET static void mv_nm1(const cb_job *j, const uint32_t *wb, int np, int64_t m0, mv_run_at at) {
  MV_NP_CASES(1)
}
CB_TARGET static void mv_nm2(const cb_job *j, const uint32_t *wb, int np, int64_t m0, mv_run_at at) {
  MV_NP_CASES(2)
}
CB_TARGET static void mv_nm3(const cb_job *j, const uint32_t *wb, int np, int64_t m0, mv_run_at at) {
  MV_NP_CASES(3)
}

/* Items [it0, it1) in cb_item's order (within a group of position blocks,
 * the blocks fastest, then the channel blocks): the first decoded with
 * divisions, the rest stepped; each channel block's consecutive position
 * blocks in the range run as one mv_run. */
CB_TARGET void cb_items_mv(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  if (it0 >= it1) return;
  int64_t Mp = conv_cdiv(d->M, 16) * 16, nvb = j->nmb;
  /* a position's words from the row start: the converted copy's rows are
   * Wq apart; a channels-last input read as it lies, C/2 words a position */
  const int64_t rs = j->xdirect ? d->sh * d->W * (d->C / 2) : j->Wq * (j->mcl ? j->Cq : 1);
  const int64_t cs = j->xdirect ? d->sw * (d->C / 2) : j->mcl ? j->Cq : 1;
  int64_t mb, pb;
  cb_item(j, it0, nvb, &mb, &pb);
  int64_t f0 = pb / j->gfb * j->gfb, gn = cb_group_blocks(j, f0); /* groups start at multiples of gfb */
  for (int64_t it = it0;;) {
    int64_t m0, wdt, nb = f0 + gn - pb < it1 - it ? f0 + gn - pb : it1 - it;
    cb_mv_block(Mp, mb, &m0, &wdt);
    int64_t oh = pb * j->np / d->OW, ow = pb * j->np - oh * d->OW; /* the run's first position */
    mv_run_at at = {pb, nb, oh, ow, rs, cs};
    const uint32_t *wb = j->w + m0 * j->taps * j->Cq;
    if (wdt == 48) mv_nm3(j, wb, (int)j->np, m0, at);
    else if (wdt == 32) mv_nm2(j, wb, (int)j->np, m0, at);
    else mv_nm1(j, wb, (int)j->np, m0, at);
    if ((it += nb) == it1) break;
    if (++mb == nvb) { /* the run ended at its group's end: the next channel block, or group */
      mb = 0, f0 += j->gfb, gn = cb_group_blocks(j, f0);
    }
    pb = f0;
  }
}

CB_TARGET void cb_fill_mv_cl(void *ctx, int64_t i0, int64_t i1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  const int64_t Cq = j->Cq;
  for (int64_t it = i0; it < i1; it++) {
    int64_t ph = it / j->Hq / d->sw, pw = it / j->Hq % d->sw, i = it % j->Hq, r = i * d->sh + ph - d->pt;
    uint32_t *o = j->xp + ((ph * d->sw + pw) * j->L + i * j->Wq) * Cq;
    if (!j->used[ph * d->sw + pw]) continue;
    for (int64_t c = 0; c < j->Wq; c++, o += Cq) {
      int64_t s = c * d->sw + pw - d->pl;
      bool in = r >= 0 && r < d->H && s >= 0 && s < d->W;
      const uint32_t *x = in ? (const uint32_t *)(const void *)(j->Xh + (r * d->W + s) * d->C) : NULL;
      for (int64_t q = 0; q < Cq; q += 16) {
        __mmask16 m = avx512_mask(Cq - q);
        _mm512_mask_storeu_epi32(o + q, m, in ? _mm512_maskz_loadu_epi32(m, x + q) : _mm512_setzero_si512());
      }
    }
    if (i == j->Hq - 1) /* the plane's tail past its rows, which the last blocks may read */
      memset(j->xp + ((ph * d->sw + pw) * j->L + j->Hq * j->Wq) * Cq, 0,
             sizeof(uint32_t) * (size_t)((j->L - j->Hq * j->Wq) * Cq));
  }
}

#else

void cb_items_mv(void *ctx, int64_t it0, int64_t it1) { (void)ctx, (void)it0, (void)it1; }
void cb_fill_mv_cl(void *ctx, int64_t i0, int64_t i1) { (void)ctx, (void)i0, (void)i1; }

#endif
