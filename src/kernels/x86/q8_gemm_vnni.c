/* AVX512_VNNI kernels of the int8 GEMM (kernels/qgemm.h).
 *
 * Tile: up to 8 rows x 32 columns, int32 accumulators in 16 zmm registers.
 * (12 rows in 24 accumulators ran 5-15% faster over one GEMM in a loop on
 * an Emerald Rapids core, but bert_base and gpt2_small at int8 ran 2-8%
 * slower with it, the two builds taking turns in one process: kept 8.)
 * A zmm holds 16 columns x 4 k: the group g of two neighbouring 8-column
 * panels side by side (one 256-bit load and one inserted from the next
 * panel, shared by every row).  Per group of 4 k, a row's 4 quantized
 * bytes (u8, 0..255: qgemm_a_levels) are broadcast as one 32-bit lane and vpdpbusd adds
 * the four u8 x s8 products of each lane to its int32 accumulator: exact
 * (no 16-bit intermediate, no saturation), one instruction where the AVX2
 * kernel needs three.
 *
 * GEMV (M <= QGEMM_GEMV_M): one 8-column panel at a time, so the weights
 * stream from memory front to back (as the AVX2 GEMV), with the 256-bit
 * vpdpbusd.
 *
 * Compiled with per-function target attributes; runs only where
 * isa_has_avx512vnni. */
#include "kernels/qgemm.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#ifdef SMELT_X86
#include <immintrin.h>
#include <string.h>

#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define VNNI_INLINE static inline __attribute__((always_inline)) VNNI_TARGET

VNNI_INLINE int32_t group_of(const uint8_t *q) {
  int32_t v;
  memcpy(&v, q, sizeof v);
  return v;
}

/* c + the u8 x s8 products of a and b, four per lane (vpdpbusd).  Inline
 * asm with c tied in place: with the intrinsic, GCC 12 copies every
 * accumulator of the unrolled tile to another register and back each
 * step. */
VNNI_INLINE __m512i dpbusd(__m512i c, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
  return c;
}

VNNI_INLINE __m256i dpbusd_y(__m256i c, __m256i a, __m256i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b));
  return c;
}

/* Group g of panels p and p + 1 (or zeros past the last panel). */
VNNI_INLINE __m512i pair_at(const int8_t *p, int64_t pstride, int64_t g, int have_second) {
  __m256i lo = _mm256_loadu_si256((const __m256i *)(p + g * 32));
  if (!have_second) return _mm512_zextsi256_si512(lo);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)(p + pstride + g * 32)), 1);
}

VNNI_INLINE void tile(const int R, const int P, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                      int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N], const int8_t *pf, int64_t pf_lines) {
  const int Z = (P + 1) / 2; /* zmm per row */
  __m512i c[QGEMM_MR][2];
  for (int r = 0; r < R; r++) c[r][0] = c[r][1] = _mm512_setzero_si512();
  for (int64_t g = 0; g < groups; g++) {
    __m512i b0 = pair_at(b, pstride, g, P > 1);
    __m512i b1 = Z > 1 ? pair_at(b + 2 * pstride, pstride, g, P > 3) : b0;
    if (g < pf_lines) _mm_prefetch((const char *)(pf + g * 64), _MM_HINT_T1); /* one line a step */
    for (int r = 0; r < R; r++) {
      __m512i a = _mm512_set1_epi32(group_of(qa + r * lq + 4 * g));
      c[r][0] = dpbusd(c[r][0], a, b0);
      if (Z > 1) c[r][1] = dpbusd(c[r][1], a, b1);
    }
  }
  for (int r = 0; r < R; r++) {
    _mm512_storeu_si512(acc[r], c[r][0]);
    if (Z > 1) _mm512_storeu_si512(acc[r] + 16, c[r][1]);
  }
}

#define PANELS_CASE(R)                                                            \
  case R:                                                                         \
    switch (panels) {                                                             \
      case 1: tile(R, 1, qa, lq, b, pstride, groups, acc, pf, pf_lines); return;  \
      case 2: tile(R, 2, qa, lq, b, pstride, groups, acc, pf, pf_lines); return;  \
      case 3: tile(R, 3, qa, lq, b, pstride, groups, acc, pf, pf_lines); return;  \
      default: tile(R, 4, qa, lq, b, pstride, groups, acc, pf, pf_lines); return; \
    }

VNNI_TARGET void qgemm_tile_vnni(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                 int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  qgemm_tile_vnni_pf(rows, panels, qa, lq, b, pstride, groups, acc, NULL, 0);
}

VNNI_TARGET void qgemm_tile_vnni_pf(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                    int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N],
                                    const int8_t *pf, int64_t pf_lines) {
  switch (rows) {
    PANELS_CASE(1)
    PANELS_CASE(2)
    PANELS_CASE(3)
    PANELS_CASE(4)
    PANELS_CASE(5)
    PANELS_CASE(6)
    PANELS_CASE(7)
    PANELS_CASE(8)
    default: return;
  }
}

VNNI_TARGET void qgemm_store_avx512(const qgemm_args *a, int64_t m0, int rows, int64_t n0, int cols,
                                    int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  const qgemm_weights *w = a->w;
  for (int j = 0; j < cols; j += 16) {
    __mmask16 k = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1);
    __m512 sb = _mm512_maskz_loadu_ps(k, w->scale + n0 + j);
    __m512i cs = _mm512_maskz_loadu_epi32(k, w->colsum + n0 + j);
    __m512 bias = a->bias ? _mm512_maskz_loadu_ps(k, a->bias + n0 + j) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
      float *c = a->C + (m0 + r) * a->ldc + n0 + j;
      __m512i zc = _mm512_mullo_epi32(_mm512_set1_epi32(a->za[m0 + r]), cs);
      __m512i d = _mm512_sub_epi32(_mm512_loadu_si512(acc[r] + j), zc);
      __m512 s = _mm512_mul_ps(_mm512_set1_ps(a->alpha * a->sa[m0 + r]), sb);
      __m512 v = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(d), bias);
      if (a->accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, c));
      _mm512_mask_storeu_ps(c, k, v);
    }
  }
}

/* Few rows (a decode step's GEMV): x86/q8_gemv_impl.h on the 256-bit vpdpbusd */
#define Q8_GEMV_INLINE VNNI_INLINE
#define Q8_GEMV_MAC(c, a, b) dpbusd_y((c), (a), (b))
#include "kernels/x86/q8_gemv_impl.h"

VNNI_TARGET void qgemm_gemv_vnni(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b,
                                 int64_t pstride, int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  (void)panels, (void)pstride;
  switch (rows) {
    case 1: q8_gemv_panel(1, 4, qa, lq, b, groups, acc); return;
    case 2: q8_gemv_panel(2, 4, qa, lq, b, groups, acc); return;
    case 3: q8_gemv_panel(3, 2, qa, lq, b, groups, acc); return;
    case 4: q8_gemv_panel(4, 2, qa, lq, b, groups, acc); return;
    default: return;
  }
}
#endif
