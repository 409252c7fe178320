/* The int8 GEMM's GEMV (kernels/qgemm.h, M <= QGEMM_GEMV_M), one template
 * for the AVX2 and AVX512_VNNI files: one 8-column panel at a time, so the
 * weights are read as one front-to-back stream, and U groups of 4 k per
 * step into U sets of accumulators (U * R independent sums).  Two panels
 * at once, as the tiles read them, are two interleaved streams 32 bytes a
 * step each: measured 3x slower from memory at one row (10.8 vs 34 GB/s
 * over a 38 MB LM head, AVX2), while from cache it is as fast.
 *
 * The including file defines Q8_GEMV_INLINE (static inline with its
 * target) and Q8_GEMV_MAC(c, a, b): c plus the four u8 x s8 products of
 * each 32-bit lane of a and b, exactly, in int32. */
#include <immintrin.h>
#include <string.h>

Q8_GEMV_INLINE __m256i q8_gemv_group(const uint8_t *q) {
  int32_t v;
  memcpy(&v, q, sizeof v);
  return _mm256_set1_epi32(v);
}

Q8_GEMV_INLINE void q8_gemv_panel(const int R, const int U, const uint8_t *qa, int64_t lq, const int8_t *b,
                                  int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  __m256i c[4][4];
  for (int u = 0; u < U; u++)
    for (int r = 0; r < R; r++) c[u][r] = _mm256_setzero_si256();
  int64_t g = 0;
  for (; g + U <= groups; g += U)
    for (int u = 0; u < U; u++) {
      __m256i bv = _mm256_loadu_si256((const __m256i *)(b + (g + u) * 32));
      for (int r = 0; r < R; r++) c[u][r] = Q8_GEMV_MAC(c[u][r], q8_gemv_group(qa + r * lq + 4 * (g + u)), bv);
    }
  for (; g < groups; g++) {
    __m256i bv = _mm256_loadu_si256((const __m256i *)(b + g * 32));
    for (int r = 0; r < R; r++) c[0][r] = Q8_GEMV_MAC(c[0][r], q8_gemv_group(qa + r * lq + 4 * g), bv);
  }
  for (int r = 0; r < R; r++) {
    for (int u = 1; u < U; u++) c[0][r] = _mm256_add_epi32(c[0][r], c[u][r]);
    _mm256_storeu_si256((__m256i *)acc[r], c[0][r]);
  }
}
