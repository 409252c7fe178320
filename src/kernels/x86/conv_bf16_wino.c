/* bf16 Winograd F(2x2, 3x3) for CPUs with AVX512_BF16 and no AMX
 * (kernels/conv_bf16.h: CB_FORM_WINO), for 3x3 stride-1 undilated layers:
 *
 *   V = B^T d B per 4x4 input patch (stride 2) and channel, in fp32, then
 *       rounded to bf16 in channel pairs: j->xp is [16 points][item blocks
 *       of np tiles][Cq][np], so an item reads its tiles' pairs front to
 *       back (laid [Cq][16][tiles], a step of q jumped 16 planes: a new
 *       page per step at 56x56, and the kernel ran at a third of this);
 *   U = G g G^T per (output, input) channel pair, rounded to bf16 once
 *       (kernels/conv_bf16.c packs it, blocks of 48 output channels as the
 *       channel-vector kernel's, [16 points][Cq][width] each);
 *   O[xi] = sum over pairs of V[xi] U[xi] with vdpbf16ps, fp32 sums;
 *   Y = A^T O A per tile, plus the bias, then the epilogue.
 *
 * Over a channels-last input where the plane's tiles outnumber the output
 * channels (kernels/conv_bf16.c decides), V is not a pass of its own: an
 * item is one block of np tiles for every output channel, its V computed
 * into a buffer on its stack and read from L1 by each channel block
 * (cb_items_wino_fused).  The whole V of such a plane (1.6 MB at 56x56
 * over 64 channels) was written to a scratch block last touched a run
 * before, from memory: resnet50's first 3x3 at 2 threads 0.31 -> 0.20 ms.
 *
 * 16 products a 2x2 tile for direct's 36, at vdpbf16ps' twice-fp32 rate.
 * An item is up to 48 output channels (NM = 1..3 zmm) x np tiles of one tile
 * row: per point, the channel-vector kernel's loop (NM weight loads and np
 * broadcasts a pair), its sums kept in a 16-point block in L1; then per 16
 * channels the output transform and the transposed store of x86/
 * conv_bf16_x86.h (mv_store16), 8 positions of an output row at a time.
 *
 * Accuracy: V and U are rounded to bf16 (2^-9 relative each) where direct
 * bf16 rounds x and w; V sums up to 4 inputs and U up to 9 weights / 4, and
 * Y sums 9 point products with signs, so the error against the exact
 * convolution is a few times direct bf16's (resnet50 at precision bf16:
 * output cosine to fp32 0.99999 either way, top-1 64/64 of 64 inputs).
 * The unit test holds it to a double-precision reference over the same
 * rounded V and U (tests/unit/test_conv_bf16.c). */
#include "kernels/conv_bf16_impl.h"

#include "kernels/conv_internal.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/bf16_pairs.h"
#include "kernels/x86/conv_bf16_x86.h"

#define NP_MAX CB_NP_MAX

/* V = B^T d B over a 4x4 patch d (row r, column k: 16 lanes each, tiles
 * or channels), in place of d: columns (B's) first, then rows, in the order
 * the unit test's reference keeps */
CB_INLINE void wino_v_tile(__m512 *d) {
  for (int r = 0; r < 4; r++) {
    __m512 *u = d + 4 * r, d0 = u[0], d1 = u[1], d2 = u[2], d3 = u[3];
    u[0] = _mm512_sub_ps(d0, d2), u[1] = _mm512_add_ps(d1, d2);
    u[2] = _mm512_sub_ps(d2, d1), u[3] = _mm512_sub_ps(d1, d3);
  }
  for (int k = 0; k < 4; k++) {
    __m512 u0 = d[k], u1 = d[4 + k], u2 = d[8 + k], u3 = d[12 + k];
    d[k] = _mm512_sub_ps(u0, u2), d[4 + k] = _mm512_add_ps(u1, u2);
    d[8 + k] = _mm512_sub_ps(u2, u1), d[12 + k] = _mm512_sub_ps(u1, u3);
  }
}

/* V at the 16 points for 16 tiles of tile row ty from tile column tx0, one
 * channel x (NULL: zeros) */
CB_INLINE void wino_v16(const cb_job *j, cb_src x, int64_t ty, int64_t tx0, __m512 *v) {
  const conv2d_desc *d = j->d;
  for (int r = 0; r < 4; r++) {
    int64_t row = 2 * ty + r - d->pt;
    bool none = cb_src_none(x) || row < 0 || row >= d->H;
    cb_src xr = none ? x : cb_src_add(x, row * d->W);
    for (int k = 0; k < 4; k++) v[4 * r + k] = none ? _mm512_setzero_ps() : src_lanes(xr, d->W, 2, k - d->pl, tx0);
  }
  wino_v_tile(v);
}

CB_TARGET void cb_fill_wino(void *ctx, int64_t q0, int64_t q1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  int64_t TH = conv_cdiv(d->OH, 2);
  const int64_t np = j->np, NB = TH * j->tbr;
  for (int64_t q = q0; q < q1; q++) {
    cb_src x0 = cb_src_chan(j, 2 * q), x1 = cb_src_chan(j, 2 * q + 1);
    for (int64_t ty = 0; ty < TH; ty++)
      for (int64_t tx0 = 0; tx0 < j->TW; tx0 += 16) {
        __m512 v0[16], v1[16];
        wino_v16(j, x0, ty, tx0, v0);
        wino_v16(j, x1, ty, tx0, v1);
        int64_t tx1 = j->TW - tx0 < 16 ? j->TW : tx0 + 16;
        for (int xi = 0; xi < 16; xi++) {
          __m512i pr = bf16_pairs16(v0[xi], v1[xi]);
          /* lanes [l0, l1) are tiles of item block bx: compressed to the
           * block's row of np for pair q */
          for (int64_t bx = tx0 / np; bx * np < tx1; bx++) {
            int64_t l0 = bx * np > tx0 ? bx * np - tx0 : 0, l1 = (bx + 1) * np < tx1 ? (bx + 1) * np - tx0 : tx1 - tx0;
            __mmask16 mk = (__mmask16)(avx512_mask(l1) & ~avx512_mask(l0));
            uint32_t *o = j->xp + ((xi * NB + ty * j->tbr + bx) * j->Cq + q) * np + (tx0 + l0 - bx * np);
            _mm512_mask_storeu_epi32(o, avx512_mask(l1 - l0), _mm512_maskz_compress_epi32(mk, pr));
          }
        }
      }
  }
}

/* V of tile (ty, tx) for channel pairs q0 .. q0 + 15 (those below Cq)
 * from the channels-last Xh, its 16 points ps words apart from o */
CB_INLINE void wino_v_cl16(const cb_job *j, int64_t ty, int64_t tx, int64_t q0, uint32_t *o, int64_t ps) {
  const conv2d_desc *d = j->d;
  __mmask16 mq = avx512_mask(j->Cq - q0); /* the pairs below Cq (C is even: whole pairs) */
  __m512i w[16];                          /* the patch's pairs, zeros in the padding */
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < 4; k++) {
      int64_t ih = 2 * ty + r - d->pt, iw = 2 * tx + k - d->pl;
      w[4 * r + k] = ih >= 0 && ih < d->H && iw >= 0 && iw < d->W
                         ? _mm512_maskz_loadu_epi32(mq, j->Xh + (ih * d->W + iw) * d->C + 2 * q0)
                         : _mm512_setzero_si512();
    }
  __m512 ve[16], vo[16]; /* the even channels (low halves), then the odd (high) */
  for (int i = 0; i < 16; i++) ve[i] = _mm512_castsi512_ps(_mm512_slli_epi32(w[i], 16));
  wino_v_tile(ve);
  for (int i = 0; i < 16; i++) vo[i] = _mm512_castsi512_ps(_mm512_and_si512(w[i], _mm512_set1_epi32((int)0xffff0000u)));
  wino_v_tile(vo);
  for (int xi = 0; xi < 16; xi++) _mm512_mask_storeu_epi32(o + xi * ps, mq, bf16_pairs16(ve[xi], vo[xi]));
}

CB_TARGET void cb_fill_wino_cl(void *ctx, int64_t i0, int64_t i1) {
  const cb_job *j = ctx;
  const int64_t np = j->np, NB = conv_cdiv(j->d->OH, 2) * j->tbr, nq = conv_cdiv(j->Cq, 16);
  for (int64_t it = i0; it < i1; it++) {
    int64_t ty = it / nq, q0 = it % nq * 16;
    for (int64_t tx = 0; tx < j->TW; tx++)
      wino_v_cl16(j, ty, tx, q0, j->xp + ((ty * j->tbr + tx / np) * np + tx % np) * j->Cq + q0, NB * np * j->Cq);
  }
}

/* One item: NM zmm of output channels from m0 (weights wb: [16][Cq][16 NM])
 * by NP tiles of tile row ty from tx0 (npv of them real; off[] their places
 * in the block's rows of np, the last repeated past them). */
CB_INLINE void wino_tile(int NP, const cb_job *j, const uint32_t *wb, const int64_t *off, int NM, int64_t m0,
                         int64_t ty, int64_t tx0, int64_t npv, const uint32_t *xv, int64_t ps) {
  const conv2d_desc *d = j->d;
  const int64_t W = 16 * NM;
  float O[16][NP_MAX][48] __attribute__((aligned(64)));
  for (int xi = 0; xi < 16; xi++) {
    __m512 c[NP_MAX][3];
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
      for (int i = 0; i < NM; i++) c[p][i] = _mm512_setzero_ps();
    cb_cv_dot(c, xv + xi * ps, j->wcl ? 1 : j->np, wb + xi * j->Cq * W, j->Cq, off, NM, NP);
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 3
      for (int i = 0; i < NM; i++) _mm512_store_ps(&O[xi][p][16 * i], c[p][i]);
  }
  /* Y = A^T O A per tile and 16 channels, then 8 positions (4 tiles) of
   * each output row at a time through the transposed store */
  for (int i = 0; i < NM; i++) {
    __m512 bias = _mm512_setzero_ps();
    if (j->B) bias = _mm512_maskz_loadu_ps(avx512_mask(d->M - m0 - 16 * i), j->B + m0 + 16 * i);
    for (int g = 0; g * 4 < NP; g++) {
      __m512 r0[8], r1[8];
      for (int pp = 0; pp < 4; pp++) {
        int p = 4 * g + pp;
        if (p >= NP) {
          r0[2 * pp] = r0[2 * pp + 1] = r1[2 * pp] = r1[2 * pp + 1] = _mm512_setzero_ps();
          continue;
        }
        __m512 t[2][4];
        for (int s = 0; s < 4; s++) {
          __m512 o0 = _mm512_load_ps(&O[0 * 4 + s][p][16 * i]), o1 = _mm512_load_ps(&O[1 * 4 + s][p][16 * i]);
          __m512 o2 = _mm512_load_ps(&O[2 * 4 + s][p][16 * i]), o3 = _mm512_load_ps(&O[3 * 4 + s][p][16 * i]);
          t[0][s] = _mm512_add_ps(_mm512_add_ps(o0, o1), o2);
          t[1][s] = _mm512_sub_ps(_mm512_sub_ps(o1, o2), o3);
        }
        for (int a = 0; a < 2; a++) {
          __m512 y0 = _mm512_add_ps(_mm512_add_ps(t[a][0], t[a][1]), t[a][2]);
          __m512 y1 = _mm512_sub_ps(_mm512_sub_ps(t[a][1], t[a][2]), t[a][3]);
          __m512 *r = a ? r1 : r0;
          r[2 * pp] = _mm512_add_ps(y0, bias), r[2 * pp + 1] = _mm512_add_ps(y1, bias);
        }
      }
      int64_t x0 = 2 * (tx0 + 4 * g), n = 2 * (npv - 4 * g);
      if (n > d->OW - x0) n = d->OW - x0;
      if (n > 8) n = 8;
      if (n <= 0) continue;
      for (int a = 0; a < 2; a++)
        if (2 * ty + a < d->OH) mv_store16(j, a ? r1 : r0, m0 + 16 * i, (2 * ty + a) * d->OW + x0, n);
    }
  }
}

#define WINO_NP_CASES(NM) CB_NP_SWITCH(np, wino_tile, j, wb, off, NM, m0, ty, tx0, npv, xv, ps)

CB_TARGET static void wino_nm1(const cb_job *j, const uint32_t *wb, const int64_t *off, int np, int64_t m0,
                               int64_t ty, int64_t tx0, int64_t npv, const uint32_t *xv, int64_t ps) {
  WINO_NP_CASES(1)
}
CB_TARGET static void wino_nm2(const cb_job *j, const uint32_t *wb, const int64_t *off, int np, int64_t m0,
                               int64_t ty, int64_t tx0, int64_t npv, const uint32_t *xv, int64_t ps) {
  WINO_NP_CASES(2)
}
CB_TARGET static void wino_nm3(const cb_job *j, const uint32_t *wb, const int64_t *off, int np, int64_t m0,
                               int64_t ty, int64_t tx0, int64_t npv, const uint32_t *xv, int64_t ps) {
  WINO_NP_CASES(3)
}

/* Output-channel block mb over position block fb, whose V is at xv with
 * its points ps words apart */
CB_INLINE void wino_item(const cb_job *j, int64_t mb, int64_t fb, const uint32_t *xv, int64_t ps) {
  int64_t m0, wdt;
  cb_mv_block(conv_cdiv(j->d->M, 16) * 16, mb, &m0, &wdt);
  int64_t ty = fb / j->tbr, tx0 = fb % j->tbr * j->np, npv = j->TW - tx0 < j->np ? j->TW - tx0 : j->np;
  int64_t off[NP_MAX];
  for (int64_t p = 0; p < j->np; p++) /* within the block's np tiles (a tile's pairs together: Cq apart) */
    off[p] = (p < npv ? p : npv - 1) * (j->wcl ? j->Cq : 1);
  const uint32_t *wb = j->w + m0 * 16 * j->Cq;
  if (wdt == 48) wino_nm3(j, wb, off, (int)j->np, m0, ty, tx0, npv, xv, ps);
  else if (wdt == 32) wino_nm2(j, wb, off, (int)j->np, m0, ty, tx0, npv, xv, ps);
  else wino_nm1(j, wb, off, (int)j->np, m0, ty, tx0, npv, xv, ps);
}

CB_TARGET void cb_items_wino(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  const int64_t NB = conv_cdiv(j->d->OH, 2) * j->tbr, ps = NB * j->Cq * j->np;
  for (int64_t it = it0; it < it1; it++) {
    int64_t mb, fb;
    cb_item(j, it, j->nmb, &mb, &fb);
    wino_item(j, mb, fb, j->xp + fb * j->Cq * j->np, ps);
  }
}

CB_TARGET void cb_items_wino_fused(void *ctx, int64_t fb0, int64_t fb1) {
  const cb_job *j = ctx;
  uint32_t v[CB_WINO_FUSED_WORDS] __attribute__((aligned(64)));
  const int64_t ps = j->np * j->Cq; /* [16 points][np tiles][Cq] */
  for (int64_t fb = fb0; fb < fb1; fb++) {
    int64_t ty = fb / j->tbr, tx0 = fb % j->tbr * j->np, npv = j->TW - tx0 < j->np ? j->TW - tx0 : j->np;
    for (int64_t p = 0; p < npv; p++)
      for (int64_t q0 = 0; q0 < j->Cq; q0 += 16) wino_v_cl16(j, ty, tx0 + p, q0, v + p * j->Cq + q0, ps);
    for (int64_t mb = 0; mb < j->nmb; mb++) wino_item(j, mb, fb, v, ps);
  }
}

#else

/* Not built for this platform: conv_bf16_form never picks Winograd where
 * bf16dp_hw is false, and conv_bf16_run refuses its weights there. */
void cb_fill_wino(void *ctx, int64_t q0, int64_t q1) { (void)ctx, (void)q0, (void)q1; }
void cb_fill_wino_cl(void *ctx, int64_t i0, int64_t i1) { (void)ctx, (void)i0, (void)i1; }
void cb_items_wino(void *ctx, int64_t it0, int64_t it1) { (void)ctx, (void)it0, (void)it1; }
void cb_items_wino_fused(void *ctx, int64_t fb0, int64_t fb1) { (void)ctx, (void)fb0, (void)fb1; }

#endif
