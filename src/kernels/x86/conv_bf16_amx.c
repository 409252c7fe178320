/* AMX driver of the bf16 convolution (kernels/conv_bf16.h): the input's
 * conversion with AVX-512 (vcvtne2ps2bf16, two channels interleaved into
 * pairs), items of 32 output channels x 32 flat positions on four
 * accumulator tiles, and an AVX-512 store of the valid positions.
 *
 * Per item and per tap, per 16 channel pairs: two A tiles (16 output
 * channels each, rows Cq pairs apart in the prepared weights), two B tiles
 * (16 flat positions each, rows a channel pair's P*L words apart in the
 * converted input), four TDPBF16PS: 32 x 32 x 32 products for 4 KiB loaded.
 * TDPBF16PS sums in an order of its own with denormals flushed, so results
 * agree with the scalar block kernel to fp32 rounding of the sums.
 *
 * Compiles everywhere (per-function target attributes); runs only where
 * bf16dp_amx_hw (kernels/bf16dp.h). */
#include "kernels/conv_bf16_impl.h"

#include "kernels/bf16dp.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#if defined(SMELT_X86) && defined(__linux__) && defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/amx.h"
#include "kernels/x86/avx512_tile.h"

#define CB_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* words 2k, 2k+1 of the result: word k (x0) and 16 + k (x1) of vcvtne2ps2bf16's */
#define PAIR_INTERLEAVE                                                                                      \
  _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, \
                   19, 3, 18, 2, 17, 1, 16, 0)

/* 16 values of one input row for columns c .. c+15 of a plane row: lane k
 * is column (c + k) sw + off of x (0 outside [0, W), or everywhere when x
 * is NULL); contiguous masked loads for sw 1, two loads and the even lanes
 * for sw 2, gathers otherwise.  The masked-off lanes are not read. */
CB_TARGET static inline __m512 row_lanes(const float *x, int64_t W, int64_t sw, int64_t off, int64_t c) {
  if (!x) return _mm512_setzero_ps();
  int64_t s0 = c * sw + off; /* input column of lane 0 */
  if (sw == 1) {
    int64_t lo = s0 < 0 ? -s0 : 0, hi = W - s0 < 16 ? W - s0 : 16;
    __mmask16 m = hi > lo ? (__mmask16)(avx512_mask(hi) & ~avx512_mask(lo)) : 0;
    return m ? _mm512_maskz_loadu_ps(m, x + s0) : _mm512_setzero_ps();
  }
  if (sw == 2) { /* columns s0, s0 + 2, ..., s0 + 30: two masked loads and the even lanes of both */
    int64_t lo = s0 < 0 ? -s0 : 0, hi = W - s0 < 32 ? W - s0 : 32;
    if (hi <= lo) return _mm512_setzero_ps();
    __mmask16 m0 = (__mmask16)(avx512_mask(hi) & ~avx512_mask(lo));
    __mmask16 m1 = (__mmask16)(avx512_mask(hi - 16) & ~avx512_mask(lo - 16));
    __m512 a = m0 ? _mm512_maskz_loadu_ps(m0, x + s0) : _mm512_setzero_ps();
    __m512 b = m1 ? _mm512_maskz_loadu_ps(m1, x + s0 + 16) : _mm512_setzero_ps();
    return _mm512_permutex2var_ps(a, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), b);
  }
  __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)s0),
                                 _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                    _mm512_set1_epi32((int)sw)));
  __mmask16 m = _mm512_cmpge_epi32_mask(idx, _mm512_setzero_si512()) &
                _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32((int)W));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, x, 4);
}

/* Wq words of a plane row: the pairs of rows x0 (low halves) and x1 (high),
 * each with its own column offset (NULL: zeros). */
CB_TARGET static void fill_row(const float *x0, int64_t off0, const float *x1, int64_t off1, int64_t W, int64_t sw,
                               int64_t Wq, uint32_t *o) {
  const __m512i inter = PAIR_INTERLEAVE;
  for (int64_t c = 0; c < Wq; c += 16) {
    __m512 v0 = row_lanes(x0, W, sw, off0, c), v1 = row_lanes(x1, W, sw, off1, c);
    __m512i p = _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
    _mm512_mask_storeu_epi32(o + c, avx512_mask(Wq - c), p);
  }
}

/* The small-channel form (kernels/conv_bf16.c: cb_gathered): virtual channel
 * cv = (c, kh, kw) is input channel c shifted by the tap, over the output plane. */
CB_TARGET static void fill_gathered(const cb_job *j, int64_t q) {
  const conv2d_desc *d = j->d;
  uint32_t *o = j->xp + q * j->L;
  for (int64_t oh = 0; oh < d->OH; oh++) {
    const float *x[2] = {NULL, NULL};
    int64_t off[2] = {0, 0};
    for (int h = 0; h < 2; h++) {
      int64_t cv = 2 * q + h;
      if (cv >= d->C * j->taps_v) continue;
      int64_t c = cv / j->taps_v, t = cv % j->taps_v, kh = t / d->KW, kw = t % d->KW;
      int64_t r = oh * d->sh - d->pt + kh * d->dh;
      if (r < 0 || r >= d->H) continue;
      x[h] = j->X + (c * d->H + r) * d->W, off[h] = kw * d->dw - d->pl;
    }
    fill_row(x[0], off[0], x[1], off[1], d->W, d->sw, d->OW, o + oh * d->OW);
  }
  memset(o + d->OH * d->OW, 0, sizeof *o * (size_t)(j->L - d->OH * d->OW));
}

CB_TARGET void cb_fill_avx512(void *ctx, int64_t q0, int64_t q1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  for (int64_t q = q0; q < q1; q++) {
    if (j->taps_v) {
      fill_gathered(j, q);
      continue;
    }
    const float *x0 = 2 * q < d->C ? j->X + 2 * q * d->H * d->W : NULL;
    const float *x1 = 2 * q + 1 < d->C ? j->X + (2 * q + 1) * d->H * d->W : NULL;
    for (int64_t ph = 0; ph < d->sh; ph++)
      for (int64_t pw = 0; pw < d->sw; pw++) {
        if (!j->used[ph * d->sw + pw]) continue;
        uint32_t *o = j->xp + (q * j->P + ph * d->sw + pw) * j->L;
        for (int64_t i = 0; i < j->Hq; i++) {
          int64_t r = i * d->sh + ph - d->pt;
          uint32_t *row = o + i * j->Wq;
          if (r < 0 || r >= d->H || !x0) {
            memset(row, 0, sizeof *row * (size_t)j->Wq);
            continue;
          }
          fill_row(x0 + r * d->W, pw - d->pl, x1 ? x1 + r * d->W : NULL, pw - d->pl, d->W, d->sw, j->Wq, row);
        }
        memset(o + j->Hq * j->Wq, 0, sizeof *o * (size_t)(j->L - j->Hq * j->Wq));
      }
  }
}

/* cb_store_scalar with 16 lanes at a time: bias, residual, clamp (max(lo, v)
 * then min(hi, v): NaN passes through, as there). */
CB_TARGET static void store_avx512(const cb_job *j, const float *acc, int64_t mb, int64_t fb) {
  const conv2d_desc *d = j->d;
  __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
  int64_t rows = d->M - mb * CB_BLOCK < CB_BLOCK ? d->M - mb * CB_BLOCK : CB_BLOCK;
  for (int64_t c = 0; c < CB_BLOCK;) {
    int64_t f = fb * CB_BLOCK + c, oh = f / j->Wq, ow = f % j->Wq;
    if (oh >= d->OH) break;
    if (ow >= d->OW) {
      c += j->Wq - ow;
      continue;
    }
    int64_t len = d->OW - ow < CB_BLOCK - c ? d->OW - ow : CB_BLOCK - c, y0 = oh * d->OW + ow;
    for (int64_t r = 0; r < rows; r++) {
      int64_t m = mb * CB_BLOCK + r;
      __m512 b = _mm512_set1_ps(j->B ? j->B[m] : 0.f);
      float *y = j->Y + m * j->S + y0;
      const float *res = j->res ? j->res + m * j->S + y0 : NULL;
      for (int64_t k = 0; k < len; k += 16) {
        __mmask16 mk = avx512_mask(len - k);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, acc + r * CB_BLOCK + c + k), b);
        if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, res + k));
        v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        _mm512_mask_storeu_ps(y + k, mk, v);
      }
    }
    c += len;
  }
}

CB_TARGET void cb_items_amx(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  amx_load_config();
  float acc[CB_BLOCK * CB_BLOCK] __attribute__((aligned(64)));
  const int64_t PL = j->P * j->L;
  const long a_stride = 4 * (long)j->Cq, b_stride = 4 * (long)PL, c_stride = 4 * CB_BLOCK;
  for (int64_t it = it0; it < it1; it++) {
    int64_t mb = it / j->nfb, fb = it % j->nfb;
    TILE_ZERO(0);
    TILE_ZERO(1);
    TILE_ZERO(2);
    TILE_ZERO(3);
    for (int64_t t = 0; t < j->taps; t++) {
      const uint32_t *A0 = j->w + (t * j->Mp + mb * CB_BLOCK) * j->Cq, *A1 = A0 + 16 * j->Cq;
      const uint32_t *B0 = j->xp + j->toff[t] + fb * CB_BLOCK;
      for (int64_t g = 0; g < j->Cq; g += 16) {
        TILE_LOAD(4, A0 + g, a_stride);
        TILE_LOAD(5, A1 + g, a_stride);
        TILE_LOAD(6, B0 + g * PL, b_stride);
        TILE_LOAD(7, B0 + g * PL + 16, b_stride);
        TILE_DP(0, 4, 6);
        TILE_DP(1, 4, 7);
        TILE_DP(2, 5, 6);
        TILE_DP(3, 5, 7);
      }
    }
    TILE_STORE(0, acc, c_stride);
    TILE_STORE(1, acc + 16, c_stride);
    TILE_STORE(2, acc + 16 * CB_BLOCK, c_stride);
    TILE_STORE(3, acc + 16 * CB_BLOCK + 16, c_stride);
    store_avx512(j, acc, mb, fb);
  }
  AMX_RELEASE();
}

#else

/* Not built for this platform: bf16dp_amx_hw is false, so these are only
 * the scalar paths under the AMX names. */
void cb_fill_avx512(void *ctx, int64_t q0, int64_t q1) { cb_fill_scalar(ctx, q0, q1); }
void cb_items_amx(void *ctx, int64_t it0, int64_t it1) { cb_items_scalar(ctx, it0, it1); }

#endif
