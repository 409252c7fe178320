/* Depthwise convolution over channels-last bf16 activations (kernels/
 * conv_bf16.h: conv_dw_cl_run), for CPUs with AVX512_BF16 (the bf16
 * activations' kernels; passes/bf16_acts.c keeps an inverted-residual
 * block's expanded activations channels-last through it):
 *
 *   y[oh][ow][c] = clamp(b[c] + sum over taps of w[c][kh][kw] x[ih][iw][c])
 *
 * An item is one output row of one image for a group of up to 64
 * channels.  Per 16-channel block the taps' weights (up to 25 zmm, from W
 * as it lies, [C][KH][KW]) and the bias stay in registers while the row's
 * positions go by, four at a time: per tap and position one 16-value bf16
 * load widened exactly, one fp32 FMA.  Taps past the input's edge are
 * skipped (the padding's zeros).  The sums are fp32 in tap order (kh, then
 * kw), as the fp32 depthwise kernel's; the output is rounded once. */
#include "kernels/conv_bf16_impl.h"

#include <math.h>

#include "kernels/conv_internal.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "ir/tensor.h"
#include "util/err.h"

#define DW_TAPS_MAX 25 /* 5x5 */
#define DW_GROUP 64    /* channels per item */

bool conv_dw_cl_shape(const conv2d_desc *d) {
  return d->G == d->C && d->M == d->C && d->C >= 2 && d->C % 2 == 0 && d->KH * d->KW <= DW_TAPS_MAX && d->KH >= 1 &&
         d->KW >= 1 && d->sh >= 1 && d->sw >= 1 && d->dh >= 1 && d->dw >= 1 && d->pt >= 0 && d->pl >= 0 &&
         d->OH >= 1 && d->OW >= 1 && d->H >= 1 && d->W >= 1;
}

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/conv_bf16_x86.h"

typedef struct dw_job {
  const conv2d_desc *d;
  const float *Wt, *B; /* Wt: [taps][Cp] (C padded to 16 with zeros) */
  const uint16_t *X;
  uint16_t *Y;
  float lo, hi;
  int64_t ngroups, Cp;
  int64_t ow_lo, ow_hi; /* the output columns whose taps all lie inside the row */
} dw_job;

/* 16 channels of position (ih, iw) of image x (from its channel c), widened
 * (zeros outside the plane) */
CB_INLINE __m512 dw_x(const dw_job *j, const uint16_t *x, int64_t ih, int64_t iw, __mmask16 mk) {
  const conv2d_desc *d = j->d;
  if (ih < 0 || ih >= d->H || iw < 0 || iw >= d->W) return _mm512_setzero_ps();
  return cb_bf16x16(_mm256_maskz_loadu_epi16(mk, x + (ih * d->W + iw) * d->C));
}

CB_INLINE void dw_store(const dw_job *j, uint16_t *y, int64_t oh, int64_t ow, int64_t c, __mmask16 mk, __m512 v) {
  v = _mm512_min_ps(_mm512_set1_ps(j->hi), _mm512_max_ps(_mm512_set1_ps(j->lo), v)); /* NaN passes through */
  _mm256_mask_storeu_epi16(y + (oh * j->d->OW + ow) * j->d->C + c, mk, (__m256i)_mm512_cvtneps_pbh(v));
}

/* Eight output positions from ow of row oh (those past OW computed and
 * dropped), undilated, stride SW (1 or 2): the (8 - 1) SW + KW input
 * columns each loaded and widened once (zeros past the row's ends) and
 * multiplied into every position that reads it */
CB_INLINE void dw_cols(const dw_job *j, const uint16_t *x, uint16_t *y, int64_t oh, int64_t ow, int64_t c,
                       __mmask16 mk, const __m512 *wv, __m512 bias, const int KH, const int KW, const int SW) {
  const conv2d_desc *d = j->d;
  const int64_t C = d->C, ih0 = oh * d->sh - d->pt, iw0 = ow * SW - d->pl;
  __m512 a[8];
#pragma GCC unroll 8
  for (int p = 0; p < 8; p++) a[p] = bias;
#pragma GCC unroll 8
  for (int kh = 0; kh < KH; kh++) {
    int64_t ih = ih0 + kh * d->dh;
    if (ih < 0 || ih >= d->H) continue;
    const uint16_t *xr = x + ih * d->W * C + c;
#pragma GCC unroll 24
    for (int k = 0; k < 7 * SW + KW; k++) {
      int64_t iw = iw0 + k;
      __mmask16 m = iw >= 0 && iw < d->W ? mk : 0;
      __m512 xk = cb_bf16x16(_mm256_maskz_loadu_epi16(m, xr + iw * C));
#pragma GCC unroll 8
      for (int kw = 0; kw < KW; kw++)
        if (k - kw >= 0 && (k - kw) % SW == 0 && (k - kw) / SW < 8)
          a[(k - kw) / SW] = _mm512_fmadd_ps(wv[kh * KW + kw], xk, a[(k - kw) / SW]);
    }
  }
  int n = d->OW - ow < 8 ? (int)(d->OW - ow) : 8;
  for (int p = 0; p < n; p++) dw_store(j, y, oh, ow + p, c, mk, a[p]);
}

/* Row oh of image x, channels c .. c + 15 (mask mk), for a KH x KW kernel
 * (constants where the caller passes them, so the taps unroll into
 * registers): inside the plane four positions at a time with no checks,
 * at its edges one at a time with them */
CB_INLINE void dw_row(const dw_job *j, const uint16_t *x, uint16_t *y, int64_t oh, int64_t c, __mmask16 mk,
                      const int KH, const int KW) {
  const conv2d_desc *d = j->d;
  const int64_t C = d->C, sw = d->sw, dw = d->dw, ih0 = oh * d->sh - d->pt;
  __m512 wv[DW_TAPS_MAX];
  for (int t = 0; t < KH * KW; t++) wv[t] = _mm512_load_ps(j->Wt + t * j->Cp + c);
  __m512 bias = j->B ? _mm512_maskz_loadu_ps(mk, j->B + c) : _mm512_setzero_ps();
  bool rows_in = ih0 >= 0 && ih0 + (KH - 1) * d->dh < d->H;
  int64_t ow = 0;
  while (ow < d->OW) {
    if (dw == 1 && (sw == 1 || sw == 2)) {
      if (sw == 1) dw_cols(j, x, y, oh, ow, c, mk, wv, bias, KH, KW, 1);
      else dw_cols(j, x, y, oh, ow, c, mk, wv, bias, KH, KW, 2);
      ow += 8;
      continue;
    }
    if (rows_in && ow >= j->ow_lo && ow + 4 <= j->ow_hi) {
      __m512 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
      for (int kh = 0; kh < KH; kh++) {
        const uint16_t *xr = x + ((ih0 + kh * d->dh) * d->W + ow * sw - d->pl) * C + c;
        for (int kw = 0; kw < KW; kw++) {
          __m512 w = wv[kh * KW + kw];
          const uint16_t *q = xr + kw * dw * C;
          a0 = _mm512_fmadd_ps(w, cb_bf16x16(_mm256_maskz_loadu_epi16(mk, q)), a0);
          a1 = _mm512_fmadd_ps(w, cb_bf16x16(_mm256_maskz_loadu_epi16(mk, q + sw * C)), a1);
          a2 = _mm512_fmadd_ps(w, cb_bf16x16(_mm256_maskz_loadu_epi16(mk, q + 2 * sw * C)), a2);
          a3 = _mm512_fmadd_ps(w, cb_bf16x16(_mm256_maskz_loadu_epi16(mk, q + 3 * sw * C)), a3);
        }
      }
      dw_store(j, y, oh, ow, c, mk, a0), dw_store(j, y, oh, ow + 1, c, mk, a1);
      dw_store(j, y, oh, ow + 2, c, mk, a2), dw_store(j, y, oh, ow + 3, c, mk, a3);
      ow += 4;
      continue;
    }
    __m512 a = bias;
    for (int kh = 0; kh < KH; kh++)
      for (int kw = 0; kw < KW; kw++)
        a = _mm512_fmadd_ps(wv[kh * KW + kw], dw_x(j, x + c, ih0 + kh * d->dh, ow * sw - d->pl + kw * dw, mk), a);
    dw_store(j, y, oh, ow, c, mk, a);
    ow++;
  }
}

CB_TARGET static void dw_items(void *ctx, int64_t i0, int64_t i1) {
  const dw_job *j = ctx;
  const conv2d_desc *d = j->d;
  for (int64_t it = i0; it < i1; it++) {
    int64_t gi = it % j->ngroups, row = it / j->ngroups, n = row / d->OH, oh = row % d->OH;
    const uint16_t *x = j->X + n * d->H * d->W * d->C;
    uint16_t *y = j->Y + n * d->OH * d->OW * d->C;
    int64_t c1 = (gi + 1) * DW_GROUP < d->C ? (gi + 1) * DW_GROUP : d->C;
    for (int64_t c = gi * DW_GROUP; c < c1; c += 16) {
      __mmask16 mk = avx512_mask(d->C - c);
      if (d->KH == 3 && d->KW == 3) dw_row(j, x, y, oh, c, mk, 3, 3);
      else if (d->KH == 5 && d->KW == 5) dw_row(j, x, y, oh, c, mk, 5, 5);
      else dw_row(j, x, y, oh, c, mk, (int)d->KH, (int)d->KW);
    }
  }
}

int64_t conv_dw_cl_packed_floats(const conv2d_desc *d) { return d->KH * d->KW * conv_cdiv(d->C, 16) * 16; }

void conv_dw_cl_pack(const conv2d_desc *d, const float *W, float *Wt) {
  int64_t taps = d->KH * d->KW, Cp = conv_cdiv(d->C, 16) * 16;
  for (int64_t t = 0; t < taps; t++)
    for (int64_t c = 0; c < Cp; c++) Wt[t * Cp + c] = c < d->C ? W[c * taps + t] : 0.f;
}

smelt_status conv_dw_cl_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, const float *Wt, const float *B,
                            const conv2d_epilogue *ep, const uint16_t *Xh, uint16_t *Yh) {
  if (!conv_bf16_io_native(isa)) return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: no AVX512_BF16 here");
  if (!conv_dw_cl_shape(d) || (ep && ep->residual))
    return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: a shape or residual it does not take");
  if ((uintptr_t)Wt % 64) return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: weights off a 64-byte line");
  if (d->N <= 0) return SMELT_OK;
  dw_job j = {.d = d, .Wt = Wt, .B = B, .X = Xh, .Y = Yh, .lo = ep ? ep->lo : -INFINITY,
              .hi = ep ? ep->hi : INFINITY, .ngroups = conv_cdiv(d->C, DW_GROUP), .Cp = conv_cdiv(d->C, 16) * 16};
  /* ow * sw - pl >= 0 and ow * sw - pl + (KW - 1) dw < W */
  j.ow_lo = conv_cdiv(d->pl, d->sw);
  int64_t last = d->W - 1 - (d->KW - 1) * d->dw + d->pl; /* the largest ow * sw inside */
  j.ow_hi = last < 0 ? 0 : last / d->sw + 1;
  if (j.ow_hi > d->OW) j.ow_hi = d->OW;
  pool_parallel_for(pool, d->N * d->OH * j.ngroups, 1, dw_items, &j);
  return SMELT_OK;
}

#else

int64_t conv_dw_cl_packed_floats(const conv2d_desc *d) { return d->KH * d->KW * conv_cdiv(d->C, 16) * 16; }
void conv_dw_cl_pack(const conv2d_desc *d, const float *W, float *Wt) { (void)d, (void)W, (void)Wt; }

smelt_status conv_dw_cl_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, const float *Wt, const float *B,
                            const conv2d_epilogue *ep, const uint16_t *Xh, uint16_t *Yh) {
  (void)pool, (void)isa, (void)d, (void)Wt, (void)B, (void)ep, (void)Xh, (void)Yh;
  return err_set(SMELT_ERR_INTERNAL, "depthwise channels-last: not built for this platform");
}

#endif
