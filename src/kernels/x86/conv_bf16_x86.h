/* Pieces the x86 bf16 convolution kernels share (x86/conv_bf16_avx512.c,
 * x86/conv_bf16_mv.c, x86/conv_bf16_wino.c): a row of input lanes with its
 * padding as zeros, and the channel-vector store.  For files built with
 * the AVX-512 BF16 target; call only where bf16dp_hw. */
#ifndef SMELT_KERNELS_X86_CONV_BF16_X86_H
#define SMELT_KERNELS_X86_CONV_BF16_X86_H

#include <immintrin.h>

#include "ir/tensor.h" /* bf16_to_f32 */
#include "kernels/conv_bf16_impl.h"
#include "kernels/x86/avx512_tile.h"

#define CB_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define CB_INLINE static inline __attribute__((always_inline)) CB_TARGET

/* 16 values of one input row for columns c .. c+15 of a plane row: lane k
 * is column (c + k) sw + off of x (0 outside [0, W), or everywhere when x
 * is NULL); contiguous masked loads for sw 1, two loads and the even lanes
 * for sw 2, gathers otherwise.  The masked-off lanes are not read. */
CB_INLINE __m512 row_lanes(const float *x, int64_t W, int64_t sw, int64_t off, int64_t c) {
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

/* 16 bf16 values widened to fp32 (exact: the bits moved up) */
CB_INLINE __m512 cb_bf16x16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

/* A mask of the lanes [lo, hi) of 32 (either may lie outside 0..32) */
CB_INLINE __mmask32 cb_mask32(int64_t lo, int64_t hi) {
  lo = lo < 0 ? 0 : lo > 32 ? 32 : lo, hi = hi < 0 ? 0 : hi > 32 ? 32 : hi;
  if (hi <= lo) return 0;
  uint64_t m = ((1ull << hi) - 1) & ~((1ull << lo) - 1);
  return (__mmask32)m;
}

/* 16 words of channel pairs from two runs of 16 bf16 values as they lie:
 * a's values in the low halves, b's in the high (one permute, no rounding) */
CB_INLINE __m512i cb_pairs_h16(__m256i a, __m256i b) {
  static const uint16_t ix[32] __attribute__((aligned(64))) = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                               21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512((const void *)ix),
                                  _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1));
}

/* row_lanes' 16 values for stride 1 from a bf16 row, as they lie */
CB_INLINE __m256i row_h16(const uint16_t *x, int64_t W, int64_t off, int64_t c) {
  int64_t s0 = c + off, lo = s0 < 0 ? -s0 : 0, hi = W - s0 < 16 ? W - s0 : 16;
  __mmask16 m = x ? (__mmask16)cb_mask32(lo, hi) : 0;
  return m ? _mm256_maskz_loadu_epi16(m, x + s0) : _mm256_setzero_si256();
}

/* row_lanes' 16 values for stride 2 from a bf16 row: 32 values loaded from
 * column 2c + off, so value k of the 16 is the low half of 32-bit lane k */
CB_INLINE __m512i row_h32(const uint16_t *x, int64_t W, int64_t off, int64_t c) {
  int64_t s0 = 2 * c + off;
  __mmask32 m = x ? cb_mask32(s0 < 0 ? -s0 : 0, W - s0) : 0;
  return m ? _mm512_maskz_loadu_epi16(m, x + s0) : _mm512_setzero_si512();
}

/* row_lanes over a row stored in bf16: the same lanes, widened exactly */
CB_INLINE __m512 row_lanes_h(const uint16_t *x, int64_t W, int64_t sw, int64_t off, int64_t c) {
  if (sw == 1) return cb_bf16x16(row_h16(x, W, off, c));
  if (sw == 2) return _mm512_castsi512_ps(_mm512_slli_epi32(row_h32(x, W, off, c), 16));
  float t[16] __attribute__((aligned(64)));
  for (int k = 0; k < 16; k++) {
    int64_t s = c * sw + off + k * sw;
    t[k] = x && s >= 0 && s < W ? bf16_to_f32(x[s]) : 0.f;
  }
  return _mm512_load_ps(t);
}

/* Lane k: the 32-bit word starting at bf16 element (c sw + off + k sw) cs
 * of x, where that column lies in [0, W) (zeros elsewhere): one gather */
CB_INLINE __m512i cl_gather_words(const uint16_t *x, int64_t cs, int64_t W, int64_t sw, int64_t off, int64_t c) {
  __m512i col = _mm512_add_epi32(_mm512_set1_epi32((int)(c * sw + off)),
                                 _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                    _mm512_set1_epi32((int)sw)));
  __mmask16 m = _mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()) &
                _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32((int)W));
  if (!m) return _mm512_setzero_si512();
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, _mm512_mullo_epi32(col, _mm512_set1_epi32((int)cs)),
                                     (const void *)x, 2);
}

/* row_lanes over a channels-last bf16 row (value k of the row at x[k cs]):
 * the 32-bit words holding the 16 values, gathered from x's 4-byte
 * boundary below, each value moved to the high half (exact) */
CB_INLINE __m512 row_lanes_cl(const uint16_t *x, int64_t cs, int64_t W, int64_t sw, int64_t off, int64_t c) {
  int64_t odd = (int64_t)(((uintptr_t)x >> 1) & 1);
  __m512i v = cl_gather_words(x - odd, cs, W, sw, off, c);
  return _mm512_castsi512_ps(odd ? _mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)) : _mm512_slli_epi32(v, 16));
}

/* The pairs of a channels-last row: word k holds value k's channels c and
 * c + 1 (x at channel c, even, on a 4-byte boundary); lanes outside [0, W)
 * are zeros */
CB_INLINE __m512i row_pairs_cl(const uint16_t *x, int64_t cs, int64_t W, int64_t sw, int64_t off, int64_t c) {
  return cl_gather_words(x, cs, W, sw, off, c);
}

/* A row or plane of the input: fp32 (f) or bf16 (h), the other NULL; both
 * NULL reads as zeros.  cs: elements from one position to the next (1, or
 * the channel count where the bf16 input is channels-last) */
typedef struct cb_src {
  const float *f;
  const uint16_t *h;
  int64_t cs;
} cb_src;

/* Input channel c at position pos (of H W) of this image (j->X or j->Xh;
 * the layer as given, j->d0) */
CB_INLINE cb_src cb_src_pos(const cb_job *j, int64_t c, int64_t pos) {
  const conv2d_desc *d = j->d0;
  cb_src s = {NULL, NULL, 1};
  if (j->xcl) s.h = j->Xh + pos * d->C + c, s.cs = d->C;
  else if (j->Xh) s.h = j->Xh + c * d->H * d->W + pos;
  else s.f = j->X + c * d->H * d->W + pos;
  return s;
}
/* s moved by off positions */
CB_INLINE cb_src cb_src_add(cb_src s, int64_t off) {
  if (s.h) s.h += off * s.cs;
  if (s.f) s.f += off;
  return s;
}
CB_INLINE bool cb_src_none(cb_src s) { return !s.f && !s.h; }
/* Input channel c's plane of this image; none past C (a pair's missing half) */
CB_INLINE cb_src cb_src_chan(const cb_job *j, int64_t c) {
  cb_src none = {NULL, NULL, 1};
  return c < j->d0->C ? cb_src_pos(j, c, 0) : none;
}
CB_INLINE __m512 src_lanes(cb_src s, int64_t W, int64_t sw, int64_t off, int64_t c) {
  if (s.h && s.cs != 1) return row_lanes_cl(s.h, s.cs, W, sw, off, c);
  return s.h ? row_lanes_h(s.h, W, sw, off, c) : row_lanes(s.f, W, sw, off, c);
}
/* The residual's 8 (masked) values of channel m from position y0, fp32 or
 * bf16 widened (call only where j->res or j->resh, not channels-last) */
CB_INLINE __m256 cb_res8(const cb_job *j, int64_t m, int64_t y0, __mmask8 mk) {
  if (j->resh)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_maskz_loadu_epi16(mk, j->resh + m * j->S + y0)), 16));
  return _mm256_maskz_loadu_ps(mk, j->res + m * j->S + y0);
}
/* ... 16 of them at element o of this image */
CB_INLINE __m512 cb_res16(const cb_job *j, int64_t o, __mmask16 mk) {
  if (j->resh) return cb_bf16x16(_mm256_maskz_loadu_epi16(mk, j->resh + o));
  return _mm512_maskz_loadu_ps(mk, j->res + o);
}

/* 8 (masked) outputs of channel m from position y0: into Y, or rounded into Yh */
CB_INLINE void cb_out8(const cb_job *j, int64_t m, int64_t y0, __mmask8 mk, __m256 v) {
  if (j->Yh) _mm_mask_storeu_epi16(j->Yh + m * j->S + y0, mk, (__m128i)_mm256_cvtneps_pbh(v));
  else _mm256_mask_storeu_ps(j->Y + m * j->S + y0, mk, v);
}
/* 16 (masked) outputs at element o of this image's output */
CB_INLINE void cb_out16(const cb_job *j, int64_t o, __mmask16 mk, __m512 v) {
  if (j->Yh) _mm256_mask_storeu_epi16(j->Yh + o, mk, (__m256i)_mm512_cvtneps_pbh(v));
  else _mm512_mask_storeu_ps(j->Y + o, mk, v);
}

/* Position y's output channels m0 .. m0 + 15 (those below M) as a vector:
 * v plus the residual's same 16 values, where the residual is channels-last
 * (as they lie) or the output is (gathered from the residual's planes);
 * else v (the transposed store adds it).  Before the clamp, as everywhere. */
CB_INLINE __m512 cb_res_pos16(const cb_job *j, int64_t y, int64_t m0, __m512 v) {
  __mmask16 mk = avx512_mask(j->d->M - m0);
  if (j->rcl) return _mm512_add_ps(v, cb_bf16x16(_mm256_maskz_loadu_epi16(mk, j->resh + y * j->d->M + m0)));
  if (!j->ycl || (!j->res && !j->resh)) return v;
  __m512i ix = _mm512_add_epi32(_mm512_set1_epi32((int)y),
                                _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                   _mm512_set1_epi32((int)j->S)));
  if (j->res) return _mm512_add_ps(v, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, ix, j->res + m0 * j->S, 4));
  float t[16];
  for (int k = 0; k < 16; k++) t[k] = m0 + k < j->d->M ? bf16_to_f32(j->resh[(m0 + k) * j->S + y]) : 0.f;
  return _mm512_add_ps(v, _mm512_loadu_ps(t));
}
/* v clamped to [lo, hi] (max then min: NaN passes through) and rounded
 * into the 16 (mask mk) channels-last outputs at yp */
CB_INLINE void cb_out_cl16(uint16_t *yp, __mmask16 mk, __m512 lo, __m512 hi, __m512 v) {
  _mm256_mask_storeu_epi16(yp, mk, (__m256i)_mm512_cvtneps_pbh(_mm512_min_ps(hi, _mm512_max_ps(lo, v))));
}
/* ... 32 channels (a then b) as one store: half the conversions and stores */
CB_INLINE void cb_out_cl32(uint16_t *yp, __mmask32 mk, __m512 lo, __m512 hi, __m512 a, __m512 b) {
  a = _mm512_min_ps(hi, _mm512_max_ps(lo, a)), b = _mm512_min_ps(hi, _mm512_max_ps(lo, b));
  _mm512_mask_storeu_epi16(yp, mk, (__m512i)_mm512_cvtne2ps_pbh(b, a));
}

/* 16 channels from m0 (rows past M dropped) by positions y0 .. y0 + npv - 1
 * of Y from r[p] (position p's 16 channels, bias added; p < 8): an 8 x 16
 * transpose in registers (unpack, shuffle, two-source permute), then per
 * channel its npv outputs as one masked 8-lane store, the residual added
 * and the clamp applied (max(lo, v) then min(hi, v): NaN passes through).
 * A channels-last residual is added before the transpose, and a
 * channels-last output is stored without it, a position at a time. */
CB_INLINE void mv_store16(const cb_job *j, const __m512 *r0, int64_t m0, int64_t y0, int64_t npv) {
  __m512 t[8], u[8], r[8];
  for (int p = 0; p < 8; p++) r[p] = p < npv ? cb_res_pos16(j, y0 + p, m0, r0[p]) : r0[p];
  if (j->ycl) { /* channels-last: each position's 16 channels as they are */
    __m512 lo = _mm512_set1_ps(j->lo), hi = _mm512_set1_ps(j->hi);
    for (int p = 0; p < npv; p++) cb_out_cl16(j->Yh + (y0 + p) * j->d->M + m0, avx512_mask(j->d->M - m0), lo, hi, r[p]);
    return;
  }
  for (int h = 0; h < 2; h++) { /* positions 4h .. 4h + 3 */
    const __m512 *q = r + 4 * h;
    t[0] = _mm512_unpacklo_ps(q[0], q[1]), t[1] = _mm512_unpackhi_ps(q[0], q[1]);
    t[2] = _mm512_unpacklo_ps(q[2], q[3]), t[3] = _mm512_unpackhi_ps(q[2], q[3]);
    /* u[4h + i], 128-bit lane k: channel 4k + i at the four positions */
    u[4 * h + 0] = _mm512_shuffle_ps(t[0], t[2], 0x44), u[4 * h + 1] = _mm512_shuffle_ps(t[0], t[2], 0xee);
    u[4 * h + 2] = _mm512_shuffle_ps(t[1], t[3], 0x44), u[4 * h + 3] = _mm512_shuffle_ps(t[1], t[3], 0xee);
  }
  const __m512i lo_ix = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
  const __m512i hi_ix = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
  const __mmask8 mk = (__mmask8)((1u << npv) - 1);
  const __m256 lo = _mm256_set1_ps(j->lo), hi = _mm256_set1_ps(j->hi);
  for (int i = 0; i < 4; i++) {
    /* channels i, 4 + i (a) and 8 + i, 12 + i (b), eight positions each */
    __m512 a = _mm512_permutex2var_ps(u[i], lo_ix, u[4 + i]), b = _mm512_permutex2var_ps(u[i], hi_ix, u[4 + i]);
    __m256 v[4] = {_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(b),
                   _mm512_extractf32x8_ps(b, 1)};
    for (int k = 0; k < 4; k++) {
      int64_t m = m0 + i + 4 * k;
      if (m >= j->d->M) continue;
      __m256 x = v[k];
      if (j->res || (j->resh && !j->rcl)) x = _mm256_add_ps(x, cb_res8(j, m, y0, mk));
      cb_out8(j, m, y0, mk, _mm256_min_ps(hi, _mm256_max_ps(lo, x)));
    }
  }
}

/* The channel-vector tile's loop (x86/conv_bf16_mv.c per tap,
 * x86/conv_bf16_wino.c per point): c[p][i] += over K channel pairs q, the
 * pairs of NM vectors of output channels (w, 16 NM words a pair) times
 * position p's pair, broadcast from x[q xs + off[p]].  NM and NP are
 * constants at each call, so c stays in registers. */
#define CB_NP_MAX 8
CB_INLINE void cb_cv_dot(__m512 c[CB_NP_MAX][3], const uint32_t *x, int64_t xs, const uint32_t *w, int64_t K,
                         const int64_t *off, int NM, int NP) {
  for (int64_t q = 0; q < K; q++, x += xs, w += 16 * NM) {
    __m512i wv[3];
#pragma GCC unroll 3
    for (int i = 0; i < NM; i++) wv[i] = _mm512_loadu_si512((const void *)(w + 16 * i));
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++) {
      __m512i b = _mm512_set1_epi32((int)x[off[p]]);
#pragma GCC unroll 3
      for (int i = 0; i < NM; i++) c[p][i] = _mm512_dpbf16_ps(c[p][i], (__m512bh)wv[i], (__m512bh)b);
    }
  }
}

/* ... for NM = 1: one vdpbf16ps a broadcast, so np sums (8 at most)
 * cannot hide its latency at two a cycle; the even pairs go to c, the odd
 * to sums of their own, added at the end -- twice the sums in flight. */
CB_INLINE void cb_cv_dot1(__m512 c[CB_NP_MAX][3], const uint32_t *x, int64_t xs, const uint32_t *w, int64_t K,
                          const int64_t *off, int NP) {
  __m512 e[CB_NP_MAX];
#pragma GCC unroll 8
  for (int p = 0; p < NP; p++) e[p] = _mm512_setzero_ps();
  int64_t q = 0;
  for (; q + 1 < K; q += 2, x += 2 * xs, w += 32) {
    __m512i w0 = _mm512_loadu_si512((const void *)w), w1 = _mm512_loadu_si512((const void *)(w + 16));
    const uint32_t *x1 = x + xs;
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++) {
      c[p][0] = _mm512_dpbf16_ps(c[p][0], (__m512bh)w0, (__m512bh)_mm512_set1_epi32((int)x[off[p]]));
      e[p] = _mm512_dpbf16_ps(e[p], (__m512bh)w1, (__m512bh)_mm512_set1_epi32((int)x1[off[p]]));
    }
  }
  if (q < K) {
    __m512i w0 = _mm512_loadu_si512((const void *)w);
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
      c[p][0] = _mm512_dpbf16_ps(c[p][0], (__m512bh)w0, (__m512bh)_mm512_set1_epi32((int)x[off[p]]));
  }
#pragma GCC unroll 8
  for (int p = 0; p < NP; p++) c[p][0] = _mm512_add_ps(c[p][0], e[p]);
}

/* f(NP, ...) with NP the constant np (4..8) */
#define CB_NP_SWITCH(np, f, ...)        \
  switch (np) {                         \
    case 4: f(4, __VA_ARGS__); break;   \
    case 5: f(5, __VA_ARGS__); break;   \
    case 6: f(6, __VA_ARGS__); break;   \
    case 7: f(7, __VA_ARGS__); break;   \
    default: f(8, __VA_ARGS__); break;  \
  }

#endif
