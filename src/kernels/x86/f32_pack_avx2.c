/* AVX2 packing for the 6 x 16 micro-kernel (layouts in gemm_kernels.h).
 * Sources that run along the wrong dimension (A not transposed, B
 * transposed) go through 8 x 8 register transposes. */
#include "kernels/gemm_kernels.h"

#ifdef SMELT_X86
#include "kernels/x86/avx2_tile.h"

#define MR 6
#define NR 16

AVX2_INLINE void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < 2; g++) {
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) { /* j = 0: elements 0, 1 of each lane; j = 1: 2, 3 */
      __m256 a = t[4 * g + j], b = t[4 * g + 2 + j];
      u[4 * g + 2 * j] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * g + 2 * j + 1] = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2));
    }
  }
  /* u[4g + q] holds rows 4g..4g+3 at k = q (low lane) and k = 4 + q (high). */
#pragma GCC unroll 4
  for (int q = 0; q < 4; q++) {
    r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

/* rows (<= 8) x kc of a row-major source into kc groups of `width` floats
 * (lanes past rows zero).  Full 8-lane stores run in k order, so each one's
 * spill past `width` lanes is overwritten by the next; the last group of
 * the panel is stored lane by lane instead, to stay inside dst. */
AVX2_INLINE void pack_rows_t(const float *src, int64_t ld, int rows, int64_t kc, int width,
                             float *dst) {
  for (int64_t k = 0; k < kc; k += 8) {
    int64_t n = kc - k < 8 ? kc - k : 8;
    __m256i km = avx2_mask(n);
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
      r[i] = i >= rows ? _mm256_setzero_ps()
             : n == 8  ? _mm256_loadu_ps(src + i * ld + k)
                       : _mm256_maskload_ps(src + i * ld + k, km);
    transpose8(r);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      if (i >= n) break;
      if (k + i + 1 < kc || width >= 8) {
        _mm256_storeu_ps(dst + (k + i) * width, r[i]);
      } else {
        float tmp[8];
        _mm256_storeu_ps(tmp, r[i]);
        memcpy(dst + (k + i) * width, tmp, sizeof(float) * (size_t)(width < 8 ? width : 8));
      }
    }
  }
}

/* A transposed (K x M) is read in runs along its rows and scattered into
 * the panels, 8 rows of A at a time (see the AVX-512 packer).  Each 8-lane
 * store spills 2 floats into the next k group, which the next k overwrites;
 * the panel's last k is stored through a temp. */
SMELT_TARGET_AVX2
void f32_pack_a_6_avx2(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                       float *restrict dst) {
  if (!p->trans_a) {
    for (int64_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {
      int rows = (int)(mc - ir < MR ? mc - ir : MR);
      pack_rows_t(p->A + (i0 + ir) * p->lda + p0, p->lda, rows, kc, MR, dst);
    }
    return;
  }
  const float *src = p->A + p0 * p->lda + i0;
  for (int64_t k0 = 0; k0 < kc; k0 += 8) {
    int64_t k1 = k0 + 8 < kc ? k0 + 8 : kc;
    for (int64_t k = k0; k < k1; k++)
      for (int64_t ir = 0; ir < mc; ir += 16)
        _mm_prefetch((const char *)(src + (k + 8) * p->lda + ir), _MM_HINT_T0);
    float *d = dst;
    for (int64_t ir = 0; ir < mc; ir += MR, d += MR * kc) {
      __m256i m = avx2_mask(mc - ir < MR ? mc - ir : MR);
      for (int64_t k = k0; k < k1; k++) {
        __m256 v = _mm256_maskload_ps(src + k * p->lda + ir, m);
        if (k + 1 < kc) {
          _mm256_storeu_ps(d + k * MR, v);
        } else {
          float tmp[8];
          _mm256_storeu_ps(tmp, v);
          memcpy(d + k * MR, tmp, sizeof(float) * MR);
        }
      }
    }
  }
}

/* One 16-wide micro-panel of op(B), B transposed (N x K): columns of op(B)
 * are rows of B, 8 at a time. */
AVX2_INLINE void pack_b_t(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                          float *restrict dst) {
  for (int h = 0; h < 2; h++) {
    int64_t c = cols - 8 * h;
    int rows = (int)(c < 0 ? 0 : c > 8 ? 8 : c);
    if (rows == 0) {
      for (int64_t k = 0; k < kc; k++) _mm256_store_ps(dst + k * NR + 8 * h, _mm256_setzero_ps());
      continue;
    }
    pack_rows_t(p->B + (j0 + 8 * h) * p->ldb + p0, p->ldb, rows, kc, NR, dst + 8 * h);
  }
}

/* ceil(cols / 16) micro-panels, panel i at dst + i*stride; B not
 * transposed is read a whole row of the group at a time (see the AVX-512
 * packer). */
SMELT_TARGET_AVX2
void f32_pack_b_16_avx2(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                        float *restrict dst, int64_t stride) {
  int64_t panels = (cols + NR - 1) / NR, full = cols / NR;
  if (p->trans_b) {
    for (int64_t i = 0; i < panels; i++)
      pack_b_t(p, j0 + i * NR, cols - i * NR < NR ? cols - i * NR : NR, p0, kc, dst + i * stride);
    return;
  }
  __m256i m0 = avx2_mask(cols - full * NR), m1 = avx2_mask(cols - full * NR - 8);
  const float *src = p->B + p0 * p->ldb + j0;
  for (int64_t k = 0; k < kc; k++, src += p->ldb) {
    for (int64_t c = 0; c < cols; c += 16)
      _mm_prefetch((const char *)(src + 16 * p->ldb + c), _MM_HINT_T0);
    for (int64_t i = 0; i < full; i++) {
      _mm256_store_ps(dst + i * stride + k * NR, _mm256_loadu_ps(src + i * NR));
      _mm256_store_ps(dst + i * stride + k * NR + 8, _mm256_loadu_ps(src + i * NR + 8));
    }
    if (full < panels) {
      _mm256_store_ps(dst + full * stride + k * NR, _mm256_maskload_ps(src + full * NR, m0));
      _mm256_store_ps(dst + full * stride + k * NR + 8,
                      _mm256_maskload_ps(src + full * NR + 8, m1));
    }
  }
}
#endif
