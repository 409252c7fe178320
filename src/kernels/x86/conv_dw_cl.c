/* Depthwise convolution over channels-last bf16 activations (kernels/
 * conv_bf16.h: conv_dw_cl_run), for CPUs with AVX512_BF16 (the bf16
 * activations' kernels; passes/bf16_acts.c keeps an inverted-residual
 * block's expanded activations channels-last through it):
 *
 *   y[oh][ow][c] = clamp(b[c] + sum over taps of w[c][kh][kw] x[ih][iw][c])
 *
 * On vdpbf16ps with no widening: a position's 32 channels are one 64-byte
 * load of 16 channel pairs, and each tap multiplies it twice, by the pairs
 * (w_c, 0) into the even channels' sums and by (0, w_c+1) into the odd
 * ones' (the weights rounded to bf16 once, conv_dw_cl_pack; each product
 * bf16 x bf16 is exact, each sum fp32).  The store interleaves the two
 * halves back (bf16_pairs16), after bias and clamp in fp32.
 *
 * An item is one output row of one image for a group of up to 64
 * channels; per 32-channel block, eight positions of the row at a time
 * (stride 1 or 2, undilated): the (8 - 1) stride + KW input columns each
 * loaded once and multiplied into every position that reads it, 16 sums in
 * registers, the weights as memory operands (a block's taps lie together,
 * 128 bytes a tap).  Other strides and dilations: a position at a time.
 * Columns past the input's edge load as zeros (the padding).  An input
 * given as planes (the model's layout, fp32 or bf16) is staged: each item
 * transposes the rows it reads, its channel group's, into a channels-last
 * bf16 copy (16 x 16 transposes in registers), kept for the next output
 * row, which is the item after it. */
#include "kernels/conv_bf16_impl.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ir/tensor.h"
#include "kernels/conv_internal.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "util/err.h"

#define DW_TAPS_MAX 25 /* 5x5 */
#define DW_GROUP 64    /* channels per item */
#define DW_BLOCK 32    /* channels per vector of pairs */

bool conv_dw_cl_shape(const conv2d_desc *d) {
  return d->G == d->C && d->M == d->C && d->C >= 2 && d->C % 2 == 0 && d->KH * d->KW <= DW_TAPS_MAX && d->KH >= 1 &&
         d->KW >= 1 && d->sh >= 1 && d->sw >= 1 && d->dh >= 1 && d->dw >= 1 && d->pt >= 0 && d->pl >= 0 &&
         d->OH >= 1 && d->OW >= 1 && d->H >= 1 && d->W >= 1;
}

int64_t conv_dw_cl_packed_words(const conv2d_desc *d) {
  return conv_cdiv(d->C, DW_BLOCK) * d->KH * d->KW * 2 * 16;
}

/* Block b's tap t: 16 words of pairs (w_c, 0) for its even channels c, then
 * 16 of (0, w_c) for its odd ones */
void conv_dw_cl_pack(const conv2d_desc *d, const float *W, uint32_t *Wt) {
  int64_t taps = d->KH * d->KW, nb = conv_cdiv(d->C, DW_BLOCK);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < taps; t++)
      for (int64_t i = 0; i < 16; i++) {
        int64_t ce = b * DW_BLOCK + 2 * i, co = ce + 1;
        uint32_t *o = Wt + ((b * taps + t) * 2) * 16 + i;
        o[0] = ce < d->C ? f32_to_bf16(W[ce * taps + t]) : 0;
        o[16] = co < d->C ? (uint32_t)f32_to_bf16(W[co * taps + t]) << 16 : 0;
      }
}

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/bf16_pairs.h"
#include "kernels/x86/conv_bf16_x86.h"

typedef struct dw_job {
  const conv2d_desc *d;
  const uint32_t *Wt; /* conv_dw_cl_pack's */
  const float *B;
  const uint16_t *X;   /* channels-last, or NULL: */
  const float *Xp;     /* the input as fp32 planes, or */
  const uint16_t *Xph; /* as bf16 planes (staged per row: dw_rows_of) */
  uint16_t *Y;
  bool rows_outer; /* items row-major (dw_items) */
  float lo, hi;
  int64_t ngroups;
  _Atomic int nomem; /* a call could not have its staging buffer */
} dw_job;

/* The KH input rows an output row reads for one channel group: row kh at
 * r[kh] (NULL: outside the plane, the padding's zeros), position w's
 * channel pairs at r[kh] + w cs */
typedef struct dw_rows {
  const uint16_t *r[DW_TAPS_MAX];
  int64_t cs;
} dw_rows;

#define AS_BH(v) ((__m512bh)(v))

/* The 16 channel pairs of input column iw of row xr (words, zeros outside
 * [0, W) or with no row) */
CB_INLINE __m512i dw_col(const uint16_t *xr, int64_t iw, int64_t W, int64_t C, __mmask16 mw) {
  __mmask16 m = xr && iw >= 0 && iw < W ? mw : 0;
  return m ? _mm512_maskz_loadu_epi32(m, xr + iw * C) : _mm512_setzero_si512();
}

/* Even and odd channels' sums, bias added: clamped, interleaved, rounded
 * and stored as position (oh, ow)'s 32 channels from c */
CB_INLINE void dw_store(const dw_job *j, uint16_t *y, int64_t oh, int64_t ow, int64_t c, __mmask16 mw, __m512 e,
                        __m512 o) {
  __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
  e = _mm512_min_ps(hi, _mm512_max_ps(lo, e)), o = _mm512_min_ps(hi, _mm512_max_ps(lo, o)); /* NaN passes through */
  _mm512_mask_storeu_epi32(y + (oh * j->d->OW + ow) * j->d->C + c, mw, bf16_pairs16(e, o));
}

/* Eight output positions from ow of row oh (those past OW computed and
 * dropped), undilated, stride SW (1 or 2), for a KH x KW kernel (constants
 * at each call, so the loops unroll and the sums stay in registers) */
CB_INLINE void dw_cols(const dw_job *j, const dw_rows *x, uint16_t *y, int64_t oh, int64_t ow, int64_t c,
                       __mmask16 mw, const uint32_t *wb, __m512 be, __m512 bo, const int KH, const int KW,
                       const int SW) {
  const conv2d_desc *d = j->d;
  const int64_t iw0 = ow * SW - d->pl;
  __m512 ae[8], ao[8];
#pragma GCC unroll 8
  for (int p = 0; p < 8; p++) ae[p] = be, ao[p] = bo;
#pragma GCC unroll 8
  for (int kh = 0; kh < KH; kh++) {
    const uint16_t *xr = x->r[kh];
    if (!xr) continue;
#pragma GCC unroll 24
    for (int k = 0; k < 7 * SW + KW; k++) {
      __m512i xk = dw_col(xr, iw0 + k, d->W, x->cs, mw);
#pragma GCC unroll 8
      for (int kw = 0; kw < KW; kw++)
        if (k - kw >= 0 && (k - kw) % SW == 0 && (k - kw) / SW < 8) {
          const uint32_t *w = wb + (kh * KW + kw) * 32;
          int p = (k - kw) / SW;
          ae[p] = _mm512_dpbf16_ps(ae[p], AS_BH(xk), AS_BH(_mm512_load_si512((const void *)w)));
          ao[p] = _mm512_dpbf16_ps(ao[p], AS_BH(xk), AS_BH(_mm512_load_si512((const void *)(w + 16))));
        }
    }
  }
  int n = d->OW - ow < 8 ? (int)(d->OW - ow) : 8;
#pragma GCC unroll 8
  for (int p = 0; p < 8; p++) /* constant indices: the sums stay in registers */
    if (p < n) dw_store(j, y, oh, ow + p, c, mw, ae[p], ao[p]);
}

/* Row oh, channels c .. c + 31 (mw: their pairs below C; x: the rows from
 * channel c), for a KH x KW kernel (constants where the caller passes them) */
CB_INLINE void dw_row(const dw_job *j, const dw_rows *x, uint16_t *y, int64_t oh, int64_t c, __mmask16 mw,
                      const int KH, const int KW) {
  const conv2d_desc *d = j->d;
  const uint32_t *wb = j->Wt + (c / DW_BLOCK) * d->KH * d->KW * 32;
  __m512 be = _mm512_setzero_ps(), bo = _mm512_setzero_ps();
  if (j->B) { /* the bias's even and odd channels apart */
    __mmask16 m0 = avx512_mask(d->C - c), m1 = avx512_mask(d->C - c - 16);
    __m512 b0 = _mm512_maskz_loadu_ps(m0, j->B + c), b1 = m1 ? _mm512_maskz_loadu_ps(m1, j->B + c + 16) : _mm512_setzero_ps();
    be = _mm512_permutex2var_ps(b0, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), b1);
    bo = _mm512_permutex2var_ps(b0, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), b1);
  }
  if (d->dw == 1 && d->sw <= 2) {
    for (int64_t ow = 0; ow < d->OW; ow += 8)
      if (d->sw == 1) dw_cols(j, x, y, oh, ow, c, mw, wb, be, bo, KH, KW, 1);
      else dw_cols(j, x, y, oh, ow, c, mw, wb, be, bo, KH, KW, 2);
    return;
  }
  for (int64_t ow = 0; ow < d->OW; ow++) {
    __m512 e = be, o = bo;
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++) {
        __m512i xk = dw_col(x->r[kh], ow * d->sw - d->pl + kw * d->dw, d->W, x->cs, mw);
        const uint32_t *w = wb + (kh * KW + kw) * 32;
        e = _mm512_dpbf16_ps(e, AS_BH(xk), AS_BH(_mm512_load_si512((const void *)w)));
        o = _mm512_dpbf16_ps(o, AS_BH(xk), AS_BH(_mm512_load_si512((const void *)(w + 16))));
      }
    dw_store(j, y, oh, ow, c, mw, e, o);
  }
}

/* Input row ih of image n, channels [c0, c1) from the planes, into buf as
 * a channels-last row of DW_GROUP channels a position, rounded to bf16:
 * 16 channels x 16 columns loaded, transposed in registers, stored */
CB_INLINE void dw_stage(const dw_job *j, int64_t n, int64_t ih, int64_t c0, int64_t c1, uint16_t *buf) {
  const conv2d_desc *d = j->d;
  for (int64_t c = c0; c < c1; c += 16)
    for (int64_t w0 = 0; w0 < d->W; w0 += 16) {
      __mmask16 mw = avx512_mask(d->W - w0);
      __m512 r[16];
      for (int k = 0; k < 16; k++) {
        int64_t o = ((n * d->C + c + k) * d->H + ih) * d->W + w0;
        if (c + k >= c1) r[k] = _mm512_setzero_ps();
        else if (j->Xp) r[k] = _mm512_maskz_loadu_ps(mw, j->Xp + o);
        else r[k] = cb_bf16x16(_mm256_maskz_loadu_epi16(mw, j->Xph + o));
      }
      avx512_transpose16(r);
      int64_t nw = d->W - w0 < 16 ? d->W - w0 : 16;
      for (int64_t k = 0; k < nw; k++)
        _mm256_storeu_si256((__m256i *)(buf + (w0 + k) * DW_GROUP + (c - c0)), (__m256i)_mm512_cvtneps_pbh(r[k]));
    }
}

/* The KH input rows of output row oh (image n) for channel group gi: from
 * the channels-last input as it lies, or staged from the planes into the
 * call's KH row slots -- a row the previous output row of the group staged
 * is kept (tags: which row each slot holds), so going down a group's rows
 * each input row is staged once */
CB_INLINE void dw_rows_of(const dw_job *j, int64_t n, int64_t oh, int64_t gi, uint16_t *stage, int64_t *tags,
                          dw_rows *x) {
  const conv2d_desc *d = j->d;
  int64_t c0 = gi * DW_GROUP, c1 = c0 + DW_GROUP < d->C ? c0 + DW_GROUP : d->C;
  x->cs = j->X ? d->C : DW_GROUP;
  int64_t key[DW_TAPS_MAX];
  bool held[DW_TAPS_MAX] = {false};
  for (int64_t kh = 0; kh < d->KH; kh++) {
    int64_t ih = oh * d->sh - d->pt + kh * d->dh;
    x->r[kh] = NULL, key[kh] = -1;
    if (ih < 0 || ih >= d->H) continue;
    if (j->X) {
      x->r[kh] = j->X + ((n * d->H + ih) * d->W) * d->C + c0;
      continue;
    }
    key[kh] = (n * d->H + ih) * j->ngroups + gi;
    for (int64_t s = 0; s < d->KH; s++)
      if (tags[s] == key[kh]) x->r[kh] = stage + s * d->W * DW_GROUP, held[s] = true;
  }
  for (int64_t kh = 0; kh < d->KH; kh++) { /* the rows not held, into slots no row of this one holds */
    if (key[kh] < 0 || x->r[kh]) continue;
    int64_t s = 0;
    while (held[s]) s++;
    held[s] = true, tags[s] = key[kh];
    dw_stage(j, n, oh * d->sh - d->pt + kh * d->dh, c0, c1, stage + s * d->W * DW_GROUP);
    x->r[kh] = stage + s * d->W * DW_GROUP;
  }
}

/* Items are (channel group, image and output row): over a channels-last
 * input rows outer where conv_bf16_bands says the convolution before split
 * by positions (no more channels than positions), so each thread's home
 * range (parallel/pool.h) is a band of rows, every channel -- the
 * positions that convolution wrote on that thread; else, as it split its
 * channels, groups outer; over planes a group's rows in order, each
 * staged row kept for the next output row */
CB_TARGET static void dw_items(void *ctx, int64_t i0, int64_t i1) {
  const dw_job *j = ctx;
  const conv2d_desc *d = j->d;
  uint16_t *stage = NULL;
  int64_t tags[DW_TAPS_MAX];
  for (int k = 0; k < DW_TAPS_MAX; k++) tags[k] = -1;
  if (!j->X) { /* planes: KH rows of DW_GROUP channels, staged */
    stage = malloc(sizeof *stage * (size_t)(d->KH * d->W * DW_GROUP));
    if (!stage) { /* conv_dw_cl_run reports it */
      atomic_store(&((dw_job *)ctx)->nomem, 1);
      return;
    }
  }
  for (int64_t it = i0; it < i1; it++) {
    int64_t gi, row;
    if (j->rows_outer) gi = it % j->ngroups, row = it / j->ngroups;
    else gi = it / (d->N * d->OH), row = it % (d->N * d->OH);
    int64_t n = row / d->OH, oh = row % d->OH;
    uint16_t *y = j->Y + n * d->OH * d->OW * d->C;
    int64_t c0 = gi * DW_GROUP, c1 = c0 + DW_GROUP < d->C ? c0 + DW_GROUP : d->C;
    dw_rows x;
    dw_rows_of(j, n, oh, gi, stage, tags, &x);
    for (int64_t c = c0; c < c1; c += DW_BLOCK) {
      __mmask16 mw = avx512_mask((d->C - c) / 2); /* C is even: whole pairs */
      if (d->KH == 3 && d->KW == 3) dw_row(j, &x, y, oh, c, mw, 3, 3);
      else if (d->KH == 5 && d->KW == 5) dw_row(j, &x, y, oh, c, mw, 5, 5);
      else dw_row(j, &x, y, oh, c, mw, (int)d->KH, (int)d->KW);
      for (int64_t kh = 0; kh < d->KH; kh++)
        if (x.r[kh]) x.r[kh] += DW_BLOCK;
    }
  }
  free(stage);
}

smelt_status conv_dw_cl_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, const uint32_t *Wt,
                            const float *B, const conv2d_epilogue *ep, const float *Xp, const uint16_t *Xh,
                            bool x_planes, uint16_t *Yh) {
  if (!conv_bf16_io_native(isa)) return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: no AVX512_BF16 here");
  if (!conv_dw_cl_shape(d) || (ep && ep->residual) || (Xp ? 1 : 0) + (Xh ? 1 : 0) != 1 || (Xp && !x_planes))
    return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: a shape, input or residual it does not take");
  if ((uintptr_t)Wt % 64) return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: weights off a 64-byte line");
  if (d->N <= 0) return SMELT_OK;
  dw_job j = {.d = d, .Wt = Wt, .B = B, .X = x_planes ? NULL : Xh, .Xp = Xp, .Xph = x_planes ? Xh : NULL,
              .Y = Yh, .lo = ep ? ep->lo : -INFINITY, .hi = ep ? ep->hi : INFINITY,
              .ngroups = conv_cdiv(d->C, DW_GROUP)};
  j.rows_outer = !x_planes && conv_bf16_bands(d->C, d->H * d->W);
  atomic_init(&j.nomem, 0);
  pool_parallel_for(pool, d->N * d->OH * j.ngroups, 1, dw_items, &j);
  if (atomic_load(&j.nomem))
    return err_nomem("depthwise channels-last: the staged input rows",
                     sizeof(uint16_t) * (size_t)(d->KH * d->W * DW_GROUP));
  return SMELT_OK;
}

#else

smelt_status conv_dw_cl_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, const uint32_t *Wt,
                            const float *B, const conv2d_epilogue *ep, const float *Xp, const uint16_t *Xh,
                            bool x_planes, uint16_t *Yh) {
  (void)pool, (void)isa, (void)d, (void)Wt, (void)B, (void)ep, (void)Xp, (void)Xh, (void)x_planes, (void)Yh;
  return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: not built for this platform");
}

#endif
