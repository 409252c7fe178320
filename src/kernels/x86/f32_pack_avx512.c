/* AVX-512 packing for the 8 x 32 micro-kernel (layouts in gemm_kernels.h).
 * Where the source runs along the wrong dimension (A not transposed, B
 * transposed) 16 x 16 blocks are transposed in registers instead of being
 * gathered element by element. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"

/* In-register transpose of r[0..15] (rows) into columns. */
AVX512_INLINE void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 2; j++) { /* j = 0: elements 0, 1 of each lane; j = 1: 2, 3 */
      __m512 a = t[4 * i + j], b = t[4 * i + 2 + j];
      r[4 * i + 2 * j] = _mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0));
      r[4 * i + 2 * j + 1] = _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2));
    }
  }
  /* r[4i + q] now holds, per 128-bit lane L, element q of rows 4i..4i+3 at
   * k = 4L + q.  Gather the four lanes of each k from the four row groups. */
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    __m512 a0 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);      /* lanes 0,2 | 0,2 */
    __m512 a1 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xdd);      /* lanes 1,3 | 1,3 */
    __m512 b0 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
    __m512 b1 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xdd);
    t[q] = _mm512_shuffle_f32x4(a0, b0, 0x88);      /* k = q */
    t[8 + q] = _mm512_shuffle_f32x4(a0, b0, 0xdd);  /* k = 8 + q */
    t[4 + q] = _mm512_shuffle_f32x4(a1, b1, 0x88);  /* k = 4 + q */
    t[12 + q] = _mm512_shuffle_f32x4(a1, b1, 0xdd); /* k = 12 + q */
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* rows x kc (rows <= 16) of a row-major source, transposed into kc groups of
 * `width` floats (lanes past rows zero). */
AVX512_INLINE void pack_rows_t(const float *src, int64_t ld, int rows, int64_t kc, int width,
                               float *dst) {
  __mmask16 wm = avx512_mask(width);
  for (int64_t k = 0; k < kc; k += 16) {
    __mmask16 km = avx512_mask(kc - k);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) {
      if (i < rows) _mm_prefetch((const char *)(src + i * ld + k + 64), _MM_HINT_T0);
      r[i] = i < rows ? _mm512_maskz_loadu_ps(km, src + i * ld + k) : _mm512_setzero_ps();
    }
    transpose16(r);
    int64_t n = kc - k < 16 ? kc - k : 16;
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++)
      if (i < n) _mm512_mask_storeu_ps(dst + (k + i) * width, wm, r[i]);
  }
}

/* MR-row micro-panels (MR <= 16) of op(A). */
AVX512_INLINE void pack_a(const int MR, const gemm_params *p, int64_t i0, int64_t mc, int64_t p0,
                          int64_t kc, float *restrict dst) {
  for (int64_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {
    int rows = (int)(mc - ir < MR ? mc - ir : MR);
    if (!p->trans_a) {
      pack_rows_t(p->A + (i0 + ir) * p->lda + p0, p->lda, rows, kc, MR, dst);
    } else {
      __mmask16 m = avx512_mask(rows);
      const float *src = p->A + p0 * p->lda + i0 + ir;
      for (int64_t k = 0; k < kc; k++, src += p->lda)
        _mm512_mask_storeu_ps(dst + k * MR, avx512_mask(MR), _mm512_maskz_loadu_ps(m, src));
    }
  }
}

/* One NR = 16*NV wide micro-panel of op(B). */
AVX512_INLINE void pack_b(const int NV, const gemm_params *p, int64_t j0, int64_t cols, int64_t p0,
                          int64_t kc, float *restrict dst) {
  const int NR = 16 * NV;
  if (!p->trans_b) {
    __mmask16 m[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) m[v] = avx512_mask(cols - 16 * v);
    const float *src = p->B + p0 * p->ldb + j0;
    for (int64_t k = 0; k < kc; k++, src += p->ldb) {
      /* Rows are ldb apart (pages, often): the prefetchers need help. */
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) _mm_prefetch((const char *)(src + 8 * p->ldb + 16 * v), _MM_HINT_T0);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        _mm512_store_ps(dst + k * NR + 16 * v, _mm512_maskz_loadu_ps(m[v], src + 16 * v));
    }
    return;
  }
  /* B is N x K: columns of op(B) are rows of B, 16 at a time. */
  for (int v = 0; v < NV; v++) {
    int64_t c = cols - 16 * v;
    int rows = (int)(c < 0 ? 0 : c > 16 ? 16 : c);
    if (rows == 0) {
      for (int64_t k = 0; k < kc; k++) _mm512_store_ps(dst + k * NR + 16 * v, _mm512_setzero_ps());
      continue;
    }
    pack_rows_t(p->B + (j0 + 16 * v) * p->ldb + p0, p->ldb, rows, kc, NR, dst + 16 * v);
  }
}

SMELT_TARGET_AVX512
void f32_pack_a_8_avx512(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                         float *dst) {
  pack_a(8, p, i0, mc, p0, kc, dst);
}

SMELT_TARGET_AVX512
void f32_pack_b_32_avx512(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                          float *dst) {
  pack_b(2, p, j0, cols, p0, kc, dst);
}
#endif
