/* Max pooling over channels-last bf16 activations (kernels/pool2d.h:
 * pool2d_max_cl_bf16): X [N][H][W][C] and Y [N][OH][OW][C] in bf16, as
 * passes/bf16_acts.c keeps a convolution's output channels-last through a
 * MaxPool to the convolutions after it (a ResNet's stem).  The max of bf16
 * values is one of them, so the result is exact: each output is the
 * window's maximum as the reference takes it (NaN ignored, the first
 * maximum kept; a window wholly in the padding gives -inf).  At AVX-512:
 * 32 channels per load, as two vectors of floats (the even channels
 * shifted up, the odd ones masked: a bf16 value is its float's high half),
 * the window's taps one max each; else a scalar loop.  Output rows in
 * parallel. */
#include "kernels/pool2d.h"

#include <math.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "util/err.h"

typedef struct mcl_job {
  const pool2d_desc *d;
  const uint16_t *X;
  uint16_t *Y;
} mcl_job;

/* Taps [*k0, *k1) of a window starting at st (output index x stride - pad)
 * with dilation dil that fall inside [0, extent): contiguous, since the
 * input index rises with the tap */
static void mcl_taps(int64_t st, int64_t dil, int64_t K, int64_t extent, int64_t *k0, int64_t *k1) {
  int64_t lo = st < 0 ? (-st + dil - 1) / dil : 0, hi = extent - st > 0 ? (extent - st + dil - 1) / dil : 0;
  *k0 = lo, *k1 = hi < K ? hi : K;
}

/* Output row r = (n, oh), channels [c0, c1), scalar */
static void mcl_row_scalar(const mcl_job *j, int64_t n, int64_t oh, int64_t c0, int64_t c1) {
  const pool2d_desc *d = j->d;
  int64_t h0, h1, w0, w1, ih0 = oh * d->sh - d->pt;
  mcl_taps(ih0, d->dh, d->KH, d->H, &h0, &h1);
  for (int64_t ow = 0; ow < d->OW; ow++) {
    int64_t iw0 = ow * d->sw - d->pl;
    mcl_taps(iw0, d->dw, d->KW, d->W, &w0, &w1);
    for (int64_t c = c0; c < c1; c++) {
      float m = -INFINITY;
      for (int64_t kh = h0; kh < h1; kh++) {
        int64_t ih = ih0 + kh * d->dh;
        for (int64_t kw = w0; kw < w1; kw++) {
          int64_t iw = iw0 + kw * d->dw;
          float v = bf16_to_f32(j->X[((n * d->H + ih) * d->W + iw) * d->C + c]);
          if (v > m) m = v; /* NaN never wins */
        }
      }
      j->Y[((n * d->OH + oh) * d->OW + ow) * d->C + c] = f32_to_bf16(m);
    }
  }
}

#if defined(SMELT_X86) && defined(__x86_64__)
#include <immintrin.h>

#define MCL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

MCL_TARGET static void mcl_rows_avx512(void *ctx, int64_t r0, int64_t r1) {
  const mcl_job *j = ctx;
  const pool2d_desc *d = j->d;
  const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
  for (int64_t r = r0; r < r1; r++) {
    int64_t n = r / d->OH, oh = r % d->OH, h0, h1, w0, w1, ih0 = oh * d->sh - d->pt;
    mcl_taps(ih0, d->dh, d->KH, d->H, &h0, &h1);
    for (int64_t ow = 0; ow < d->OW; ow++) {
      int64_t iw0 = ow * d->sw - d->pl;
      mcl_taps(iw0, d->dw, d->KW, d->W, &w0, &w1);
      for (int64_t c = 0; c < d->C; c += 32) { /* 32 channels a vector: even ones and odd ones apart */
        __mmask32 mk = d->C - c >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (d->C - c)) - 1);
        __m512 me = _mm512_set1_ps(-INFINITY), mo = me;
        for (int64_t kh = h0; kh < h1; kh++) {
          int64_t ih = ih0 + kh * d->dh;
          for (int64_t kw = w0; kw < w1; kw++) {
            int64_t iw = iw0 + kw * d->dw;
            __m512i x = _mm512_maskz_loadu_epi16(mk, j->X + ((n * d->H + ih) * d->W + iw) * d->C + c);
            /* a bf16 value is its float's high half: the even channel shifted up, the odd one masked */
            me = _mm512_max_ps(_mm512_castsi512_ps(_mm512_slli_epi32(x, 16)), me); /* a NaN gives m back: ignored */
            mo = _mm512_max_ps(_mm512_castsi512_ps(_mm512_and_si512(x, hi16)), mo);
          }
        }
        /* every lane is a bf16 value (or -inf): its high half, exactly */
        __m512i y = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(me), 16),
                                    _mm512_and_si512(_mm512_castps_si512(mo), hi16));
        _mm512_mask_storeu_epi16(j->Y + ((n * d->OH + oh) * d->OW + ow) * d->C + c, mk, y);
      }
    }
  }
}
#endif

static void mcl_rows_scalar(void *ctx, int64_t r0, int64_t r1) {
  const mcl_job *j = ctx;
  for (int64_t r = r0; r < r1; r++) mcl_row_scalar(j, r / j->d->OH, r % j->d->OH, 0, j->d->C);
}

smelt_status pool2d_max_cl_bf16(smelt_pool *pool, const pool2d_desc *d, isa_level isa, const uint16_t *X,
                                uint16_t *Y) {
  if (!d->is_max || d->N < 0 || d->C < 1 || d->H < 1 || d->W < 1 || d->KH < 1 || d->KW < 1 || d->sh < 1 ||
      d->sw < 1 || d->dh < 1 || d->dw < 1)
    return err_set(SMELT_ERR_INTERNAL, "channels-last max pool: a geometry it does not take");
  mcl_job j = {d, X, Y};
  void (*rows)(void *, int64_t, int64_t) = mcl_rows_scalar;
#if defined(SMELT_X86) && defined(__x86_64__)
  if (isa >= ISA_AVX512) rows = mcl_rows_avx512;
#else
  (void)isa;
#endif
  pool_parallel_for(pool, d->N * d->OH, 1, rows, &j);
  return SMELT_OK;
}
