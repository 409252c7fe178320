/* AVX-512 parts of the bf16 convolution (kernels/conv_bf16.h): the input's
 * conversion (vcvtne2ps2bf16, two channels interleaved into pairs), the
 * store of a block of results (bias, residual, clamp), and the vdpbf16ps
 * block kernel for CPUs with AVX512_BF16 but no AMX (x86/conv_bf16_amx.c
 * has the AMX one).  Compiles everywhere (per-function target attributes);
 * runs only where bf16dp_hw (kernels/bf16dp.h). */
#include "kernels/conv_bf16_impl.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/bf16_pairs.h"
#include "kernels/x86/conv_bf16_x86.h"

/* Wq words of a plane row: the pairs of rows x0 (low halves) and x1 (high),
 * each with its own column offset (none: zeros); h: the rows are bf16 (a
 * constant at both calls, so each loop is its own) */
CB_INLINE void fill_row_t(bool h, cb_src x0, int64_t off0, cb_src x1, int64_t off1, int64_t W, int64_t sw,
                          int64_t Wq, uint32_t *o) {
  for (int64_t c = 0; c < Wq; c += 16) {
    __m512i p;
    if (h && sw == 1) p = cb_pairs_h16(row_h16(x0.h, W, off0, c), row_h16(x1.h, W, off1, c));
    else if (h && sw == 2) /* x0's values in the low halves as loaded, x1's moved up */
      p = _mm512_or_si512(_mm512_and_si512(row_h32(x0.h, W, off0, c), _mm512_set1_epi32(0xffff)),
                          _mm512_slli_epi32(row_h32(x1.h, W, off1, c), 16));
    else if (h) p = bf16_pairs16(row_lanes_h(x0.h, W, sw, off0, c), row_lanes_h(x1.h, W, sw, off1, c));
    else p = bf16_pairs16(row_lanes(x0.f, W, sw, off0, c), row_lanes(x1.f, W, sw, off1, c));
    _mm512_mask_storeu_epi32(o + c, avx512_mask(Wq - c), p);
  }
}

/* fill_row_t over a channels-last input: where the two are channels c and
 * c + 1 of the same position (the usual pair), each word is gathered as it
 * lies; else each half gathered on its own */
CB_TARGET static void fill_row_cl(cb_src x0, int64_t off0, cb_src x1, int64_t off1, int64_t W, int64_t sw,
                                  int64_t Wq, uint32_t *o) {
  bool pair = x0.h && x1.h == x0.h + 1 && off0 == off1 && ((uintptr_t)x0.h & 3) == 0;
  for (int64_t c = 0; c < Wq; c += 16) {
    __m512i p = pair ? row_pairs_cl(x0.h, x0.cs, W, sw, off0, c)
                     : bf16_pairs16(src_lanes(x0, W, sw, off0, c), src_lanes(x1, W, sw, off1, c));
    _mm512_mask_storeu_epi32(o + c, avx512_mask(Wq - c), p);
  }
}

CB_TARGET static void fill_row(const cb_job *j, cb_src x0, int64_t off0, cb_src x1, int64_t off1, int64_t W,
                               int64_t sw, int64_t Wq, uint32_t *o) {
  if (j->xcl) fill_row_cl(x0, off0, x1, off1, W, sw, Wq, o);
  else if (j->Xh) fill_row_t(true, x0, off0, x1, off1, W, sw, Wq, o);
  else fill_row_t(false, x0, off0, x1, off1, W, sw, Wq, o);
}

/* The small-channel form (kernels/conv_bf16.c: conv_bf16_gathered): virtual channel
 * cv = (c, kh, kw) is input channel c shifted by the tap, over the output plane. */
CB_TARGET static void fill_gathered(const cb_job *j, int64_t q) {
  const conv2d_desc *d = j->d;
  uint32_t *o = j->xp + q * j->L;
  for (int64_t oh = 0; oh < d->OH; oh++) {
    cb_src x[2] = {{NULL, NULL, 1}, {NULL, NULL, 1}};
    int64_t off[2] = {0, 0};
    for (int h = 0; h < 2; h++) {
      int64_t cv = 2 * q + h;
      if (cv >= d->C * j->taps_v) continue;
      int64_t c = cv / j->taps_v, t = cv % j->taps_v, kh = t / d->KW, kw = t % d->KW;
      int64_t r = oh * d->sh - d->pt + kh * d->dh;
      if (r < 0 || r >= d->H) continue;
      x[h] = cb_src_pos(j, c, r * d->W), off[h] = kw * d->dw - d->pl;
    }
    fill_row(j, x[0], off[0], x[1], off[1], d->W, d->sw, d->OW, o + oh * d->OW);
  }
  memset(o + d->OH * d->OW, 0, sizeof *o * (size_t)(j->L - d->OH * d->OW));
}

/* Channel pair q where the plane is the input as it lies (one phase, no
 * padding, Hq x Wq = H x W: a 1x1 or unpadded stride-1 convolution): one
 * sweep over the H W values of both channels, not a call per row (2-core
 * Zen 4, 2 threads: mobilenet_v2's 384 -> 64 at 14x14 filled its 75 K
 * values in ~20 us of a 50 us layer row by row). */
CB_TARGET static void fill_plane(const cb_job *j, int64_t q) {
  const conv2d_desc *d = j->d;
  int64_t S = d->H * d->W;
  uint32_t *o = j->xp + q * j->L;
  cb_src x0 = cb_src_chan(j, 2 * q), x1 = cb_src_chan(j, 2 * q + 1);
  if (cb_src_none(x0)) {
    memset(o, 0, sizeof *o * (size_t)j->L);
    return;
  }
  if (j->Xh) /* bf16 as it lies: only the pairs to interleave */
    for (int64_t c = 0; c < S; c += 16) {
      __mmask16 m = avx512_mask(S - c);
      __m256i a = _mm256_maskz_loadu_epi16(m, x0.h + c), b = x1.h ? _mm256_maskz_loadu_epi16(m, x1.h + c) : _mm256_setzero_si256();
      _mm512_mask_storeu_epi32(o + c, m, cb_pairs_h16(a, b));
    }
  else
    for (int64_t c = 0; c < S; c += 16) {
      __mmask16 m = avx512_mask(S - c);
      __m512 v0 = _mm512_maskz_loadu_ps(m, x0.f + c), v1 = x1.f ? _mm512_maskz_loadu_ps(m, x1.f + c) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(o + c, m, bf16_pairs16(v0, v1));
    }
  memset(o + S, 0, sizeof *o * (size_t)(j->L - S));
}

CB_TARGET void cb_fill_avx512(void *ctx, int64_t q0, int64_t q1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d;
  bool whole = !j->taps_v && !j->xcl && j->P == 1 && d->pt == 0 && d->pl == 0 && j->Hq == d->H && j->Wq == d->W;
  for (int64_t q = q0; q < q1; q++) {
    if (j->taps_v) {
      fill_gathered(j, q);
      continue;
    }
    if (whole) {
      fill_plane(j, q);
      continue;
    }
    cb_src x0 = cb_src_chan(j, 2 * q), x1 = cb_src_chan(j, 2 * q + 1);
    for (int64_t ph = 0; ph < d->sh; ph++)
      for (int64_t pw = 0; pw < d->sw; pw++) {
        if (!j->used[ph * d->sw + pw]) continue;
        uint32_t *o = j->xp + (q * j->P + ph * d->sw + pw) * j->L;
        for (int64_t i = 0; i < j->Hq; i++) {
          int64_t r = i * d->sh + ph - d->pt;
          uint32_t *row = o + i * j->Wq;
          if (r < 0 || r >= d->H || cb_src_none(x0)) {
            memset(row, 0, sizeof *row * (size_t)j->Wq);
            continue;
          }
          fill_row(j, cb_src_add(x0, r * d->W), pw - d->pl, cb_src_add(x1, r * d->W), pw - d->pl, d->W, d->sw, j->Wq, row);
        }
        memset(o + j->Hq * j->Wq, 0, sizeof *o * (size_t)(j->L - j->Hq * j->Wq));
      }
  }
}

/* Wq words of a paired-columns row: word k holds columns 2 k + c0 and
 * 2 k + c0 + 1 of row x (zeros outside [0, W)), so 16 words are 32
 * consecutive columns: loaded and rounded in order, no interleave */
CB_TARGET static void colpair_row(cb_src x, int64_t c0, int64_t W, int64_t Wq, uint32_t *o) {
  for (int64_t k = 0; k < Wq; k += 16, c0 += 32) {
    __mmask32 m = c0 >= 0 && c0 + 32 <= W ? (__mmask32)0xffffffffu : cb_mask32(-c0, W - c0);
    __m512i p;
    if (x.h) p = _mm512_maskz_loadu_epi16(m, x.h + c0);
    else if (m == 0xffffffffu) p = bf16_pairs_seq16(x.f + c0, 32);
    else
      p = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps((__mmask16)(m >> 16), x.f + c0 + 16),
                                       _mm512_maskz_loadu_ps((__mmask16)m, x.f + c0));
    _mm512_mask_storeu_epi32(o + k, avx512_mask(Wq - k), p);
  }
}

CB_TARGET void cb_fill_colpair(void *ctx, int64_t i0, int64_t i1) {
  const cb_job *j = ctx;
  const conv2d_desc *d = j->d0; /* the layer as given: word s of a row is its columns 2 s - pl, 2 s - pl + 1 */
  for (int64_t it = i0; it < i1; it++) {
    int64_t i, ph, q; /* rows outer where the items go by bands of positions (cb_job.bands) */
    if (j->bands) i = it / (j->P * j->Cq), ph = it / j->Cq % j->P, q = it % j->Cq;
    else i = it % j->Hq, ph = it / j->Hq % j->P, q = it / j->Hq / j->P;
    int64_t r = i * d->sh + ph - d->pt;
    uint32_t *o = j->xp + (q * j->P + ph) * j->L, *row = o + i * j->Wq;
    if (!j->used[ph]) continue;
    if (r < 0 || r >= d->H) memset(row, 0, sizeof *row * (size_t)j->Wq);
    else {
      cb_src x = cb_src_pos(j, q, r * d->W);
      if (j->xcl) fill_row(j, x, -d->pl, x, 1 - d->pl, d->W, 2, j->Wq, row);
      else colpair_row(x, -d->pl, d->W, j->Wq, row);
    }
    if (i == j->Hq - 1) /* the plane's tail, which the last blocks may read */
      memset(o + j->Hq * j->Wq, 0, sizeof *o * (size_t)(j->L - j->Hq * j->Wq));
  }
}

/* n <= 16 outputs of channel m from position y0 (v, bias added) where the
 * residual or the output is channels-last: each value on its own */
CB_TARGET static void store_cl_lanes(const cb_job *j, __m512 v, int64_t m, int64_t y0, int64_t n) {
  float t[16];
  _mm512_storeu_ps(t, v);
  const conv2d_desc *d = j->d;
  for (int64_t k = 0; k < n; k++) {
    int64_t y = y0 + k, o = j->ycl ? y * d->M + m : m * j->S + y, ro = j->rcl ? y * d->M + m : m * j->S + y;
    float x = t[k];
    if (j->res) x += j->res[ro];
    else if (j->resh) x += bf16_to_f32(j->resh[ro]);
    x = x < j->lo ? j->lo : x; /* NaN passes through */
    x = x > j->hi ? j->hi : x;
    if (j->Yh) j->Yh[o] = f32_to_bf16(x);
    else j->Y[o] = x;
  }
}

/* cb_store_scalar with 16 lanes at a time, for `rows` output channels from
 * m0 (acc row r, ld floats apart): bias, residual, clamp (max(lo, v) then
 * min(hi, v): NaN passes through, as there). */
CB_TARGET void cb_store_avx512(const cb_job *j, const float *acc, int64_t ld, int64_t m0, int64_t rows, int64_t fb) {
  __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
  if (rows > j->d->M - m0) rows = j->d->M - m0;
  cb_seg segs[CB_BLOCK];
  int ns = cb_segments(j, fb, segs);
  for (int i = 0; i < ns; i++)
    for (int64_t r = 0; r < rows; r++) {
      int64_t m = m0 + r;
      __m512 b = _mm512_set1_ps(j->B ? j->B[m] : 0.f);
      int64_t yo = m * j->S + segs[i].y0;
      const float *a = acc + r * ld + segs[i].c;
      for (int64_t k = 0; k < segs[i].len; k += 16) {
        __mmask16 mk = avx512_mask(segs[i].len - k);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(mk, a + k), b);
        if (j->rcl || j->ycl) { /* channels-last: position by position (not a form bf16_acts picks) */
          store_cl_lanes(j, v, m, segs[i].y0 + k, segs[i].len - k < 16 ? segs[i].len - k : 16);
          continue;
        }
        if (j->res || j->resh) v = _mm512_add_ps(v, cb_res16(j, yo + k, mk));
        v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        cb_out16(j, yo + k, mk, v);
      }
    }
}

/* ---- the vdpbf16ps block kernel (CPUs with AVX512_BF16 and no AMX) ----
 * VR output channels x 32 positions in 2 VR zmm accumulators, per channel
 * pair and tap: the 32 positions' pairs as two loads from the converted
 * input, each channel's weight pair broadcast, two vdpbf16ps per channel
 * (high halves' product, then the low halves', each rounded to fp32). */
#define VR CB_VR
#define AS_BH(v) ((__m512bh)(v))

/* The lines of Y (for writing) and of the residual that item `it`'s store
 * touches, asked for while the item before it computes: the store reads
 * VR rows a block wide, S floats apart, a pattern the hardware prefetchers
 * do not follow (resnet50's 256 -> 1024 layer with its residual ran 0.94
 * ms in the model against 0.59 alone; with this and the output written
 * over the residual, the whole model's bf16 run 1.10x faster at 1 thread). */
static inline void vdp_prefetch_store(const cb_job *j, int64_t it, int64_t nvb) {
  int64_t vb, fb;
  cb_item(j, it, nvb, &vb, &fb);
  int64_t f = fb * CB_BLOCK, oh = f / j->Wq, ow = f % j->Wq;
  if (oh >= j->d->OH) return;
  int64_t y0 = oh * j->d->OW + (ow < j->d->OW ? ow : j->d->OW - 1);
  int64_t rows = j->d->M - vb * VR < VR ? j->d->M - vb * VR : VR;
  for (int64_t r = 0; r < rows; r++) {
    int64_t o = (vb * VR + r) * j->S + y0;
    const char *y0 = j->Yh ? (const char *)(j->Yh + o) : (const char *)(j->Y + o);
    const char *y1 = j->Yh ? (const char *)(j->Yh + o + CB_BLOCK - 1) : (const char *)(j->Y + o + CB_BLOCK - 1);
    _mm_prefetch(y0, _MM_HINT_ET0);
    _mm_prefetch(y1, _MM_HINT_ET0);
    if (j->res) {
      _mm_prefetch((const char *)(j->res + o), _MM_HINT_T0);
      _mm_prefetch((const char *)(j->res + o + CB_BLOCK - 1), _MM_HINT_T0);
    } else if (j->resh) {
      _mm_prefetch((const char *)(j->resh + o), _MM_HINT_T0);
      _mm_prefetch((const char *)(j->resh + o + CB_BLOCK - 1), _MM_HINT_T0);
    }
  }
}

CB_TARGET void cb_items_vdp(void *ctx, int64_t it0, int64_t it1) {
  const cb_job *j = ctx;
  float acc[VR * CB_BLOCK] __attribute__((aligned(64)));
  const int64_t PL = j->P * j->L, MC = j->Mp * j->Cq, nvb = (j->d->M + VR - 1) / VR;
  for (int64_t it = it0; it < it1; it++) {
    int64_t vb, fb;
    cb_item(j, it, nvb, &vb, &fb);
    if (it + 1 < it1) vdp_prefetch_store(j, it + 1, nvb);
    int64_t m0 = vb * VR;
    int64_t rows = j->d->M - m0 < VR ? j->d->M - m0 : VR;
    const uint32_t *w0 = j->w + m0 * j->Cq; /* row r: w0 + r Cq (rows past M: the last one again) */
    int64_t roff[VR];
    for (int r = 0; r < VR; r++) roff[r] = (r < rows ? r : rows - 1) * j->Cq;
    __m512 c[VR][2];
#pragma GCC unroll 12
    for (int r = 0; r < VR; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (int64_t t = 0; t < j->taps; t++) {
      const uint32_t *b = j->xp + j->toff[t] + fb * CB_BLOCK, *w = w0 + t * MC;
      for (int64_t q = 0; q < j->Cq; q++, b += PL, w++) {
        __m512i b0 = _mm512_loadu_si512((const void *)b), b1 = _mm512_loadu_si512((const void *)(b + 16));
#pragma GCC unroll 12
        for (int r = 0; r < VR; r++) {
          __m512i a = _mm512_set1_epi32((int)w[roff[r]]);
          c[r][0] = _mm512_dpbf16_ps(c[r][0], AS_BH(a), AS_BH(b0));
          c[r][1] = _mm512_dpbf16_ps(c[r][1], AS_BH(a), AS_BH(b1));
        }
      }
    }
#pragma GCC unroll 12
    for (int r = 0; r < VR; r++) {
      _mm512_store_ps(acc + r * CB_BLOCK, c[r][0]);
      _mm512_store_ps(acc + r * CB_BLOCK + 16, c[r][1]);
    }
    cb_store_avx512(j, acc, CB_BLOCK, m0, rows, fb);
  }
}

#else

/* Not built for this platform: bf16dp_hw is false, so these are only the
 * scalar paths under the AVX-512 names. */
void cb_fill_avx512(void *ctx, int64_t q0, int64_t q1) { cb_fill_scalar(ctx, q0, q1); }
void cb_items_vdp(void *ctx, int64_t it0, int64_t it1) { cb_items_scalar(ctx, it0, it1); }
/* never called: the paired-columns form runs on the channel-vector kernel only */
void cb_fill_colpair(void *ctx, int64_t i0, int64_t i1) { (void)ctx, (void)i0, (void)i1; }

#endif
