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

/* MR-row micro-panels (MR <= 16) of op(A).  A transposed (K x M) is read
 * in runs along its rows and scattered into the panels, 8 rows of A at a
 * time: panel by panel would touch every row of A once per panel for a few
 * floats, and row by row would store to every panel per row -- panels are
 * a power of two apart, so those stores all land in one L1 set. */
AVX512_INLINE void pack_a(const int MR, const gemm_params *p, int64_t i0, int64_t mc, int64_t p0,
                          int64_t kc, float *restrict dst) {
  if (!p->trans_a) {
    for (int64_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {
      int rows = (int)(mc - ir < MR ? mc - ir : MR);
      pack_rows_t(p->A + (i0 + ir) * p->lda + p0, p->lda, rows, kc, MR, dst);
    }
    return;
  }
  const __mmask16 wm = avx512_mask(MR);
  const float *src = p->A + p0 * p->lda + i0;
  for (int64_t k0 = 0; k0 < kc; k0 += 8) {
    int64_t k1 = k0 + 8 < kc ? k0 + 8 : kc;
    for (int64_t k = k0; k < k1; k++)
      for (int64_t ir = 0; ir < mc; ir += 16)
        _mm_prefetch((const char *)(src + (k + 8) * p->lda + ir), _MM_HINT_T0);
    float *d = dst;
    for (int64_t ir = 0; ir < mc; ir += MR, d += MR * kc) {
      __mmask16 rm = avx512_mask(mc - ir);
      for (int64_t k = k0; k < k1; k++) {
        if (MR == 8 && mc - ir >= 8) /* the common tile: plain 256-bit moves */
          _mm256_store_ps(d + k * 8, _mm256_loadu_ps(src + k * p->lda + ir));
        else
          _mm512_mask_storeu_ps(d + k * MR, wm, _mm512_maskz_loadu_ps(rm, src + k * p->lda + ir));
      }
    }
  }
}

/* One NR = 16*NV wide micro-panel of op(B), B transposed. */
AVX512_INLINE void pack_b_t(const int NV, const gemm_params *p, int64_t j0, int64_t cols,
                            int64_t p0, int64_t kc, float *restrict dst) {
  const int NR = 16 * NV;
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

/* ceil(cols / NR) micro-panels of op(B), panel i at dst + i*stride.  B not
 * transposed is read a whole row of the group at a time: one contiguous
 * run per row instead of one short run per row per panel, which is what
 * the prefetchers (and DRAM pages) want; rows are also prefetched ahead. */
AVX512_INLINE void pack_b(const int NV, const gemm_params *p, int64_t j0, int64_t cols, int64_t p0,
                          int64_t kc, float *restrict dst, int64_t stride) {
  const int NR = 16 * NV;
  int64_t panels = (cols + NR - 1) / NR;
  if (p->trans_b) {
    for (int64_t i = 0; i < panels; i++) {
      int64_t c = cols - i * NR < NR ? cols - i * NR : NR;
      pack_b_t(NV, p, j0 + i * NR, c, p0, kc, dst + i * stride);
    }
    return;
  }
  int64_t full = cols / NR;
  __mmask16 m[4];
#pragma GCC unroll 4
  for (int v = 0; v < NV; v++) m[v] = avx512_mask(cols - full * NR - 16 * v);
  const float *src = p->B + p0 * p->ldb + j0;
  for (int64_t k = 0; k < kc; k++, src += p->ldb) {
    for (int64_t c = 0; c < cols; c += 16)
      _mm_prefetch((const char *)(src + 16 * p->ldb + c), _MM_HINT_T0);
    for (int64_t i = 0; i < full; i++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        _mm512_store_ps(dst + i * stride + k * NR + 16 * v, _mm512_loadu_ps(src + i * NR + 16 * v));
    if (full < panels)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++)
        _mm512_store_ps(dst + full * stride + k * NR + 16 * v,
                        _mm512_maskz_loadu_ps(m[v], src + full * NR + 16 * v));
  }
}

SMELT_TARGET_AVX512
void f32_pack_a_8_avx512(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                         float *dst) {
  pack_a(8, p, i0, mc, p0, kc, dst);
}

SMELT_TARGET_AVX512
void f32_pack_b_32_avx512(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                          float *dst, int64_t stride) {
  pack_b(2, p, j0, cols, p0, kc, dst, stride);
}
#endif
