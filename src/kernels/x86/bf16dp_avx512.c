/* AVX-512 BF16 tile kernel of the bf16 compute GEMM (kernels/bf16dp.h): up
 * to 12 rows x 32 columns in 24 zmm accumulators (two per row), over all of
 * K in pairs.  Per pair row: the panel's 32 pairs as two zmm loads, each
 * row's A pair broadcast to 16 lanes (vpbroadcastd, or the instruction's
 * own {1to16} memory broadcast), two vdpbf16ps per row: 24 independent
 * chains, enough for two pipes of latency ~5.  vdpbf16ps adds, per lane,
 * the high halves' product and then the low halves' (each an fp32 fma with
 * RNE, denormal inputs and results flushed to zero); the scalar kernel
 * sums in that order.  The epilogue, alpha * acc + bias (+ C), is the
 * scalar kernel's (mul, add, add: no fma), masked to the tile's columns.
 *
 * The file compiles everywhere (per-function target attribute, gcc >= 10,
 * clang >= 9) and runs only where isa_has_avx512bf16. */
#include "kernels/bf16dp.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#ifdef SMELT_X86
#include <immintrin.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/bf16_pairs.h"

#define DP_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define DP_INLINE static inline __attribute__((always_inline)) DP_TARGET

/* __m512bh is a vector of 32 shorts in gcc 12 / clang 14 and of 32 __bf16
 * in gcc 13+: a cast between same-size vectors is a bit copy in all. */
#define AS_BH(v) ((__m512bh)(v))

/* The row loops fully unrolled, so the accumulators live in registers: gcc
 * 12 needs the pragma (without it the 24 zmm go to the stack); clang 14
 * unrolls them by itself and spills them when given it. */
#if defined(__clang__)
#define UNROLL_ROWS
#else
#define UNROLL_ROWS _Pragma("GCC unroll 12")
#endif

DP_INLINE void tile_rows(const int R, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                         const bf16dp_epi *e_arg, float *C, int64_t ldc, const char *pf) {
  const bf16dp_epi e_copy = *e_arg, *e = &e_copy; /* C's stores cannot alias it */
  __m512 acc[BF16DP_MR][2];
UNROLL_ROWS
  for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kp; q++, a += BF16DP_MR, b += BF16DP_NR) {
    if (pf) _mm_prefetch(pf + q * 64, _MM_HINT_T1); /* a line of the next panel into L2 per pair row */
    __m512i b0 = _mm512_loadu_si512((const void *)b), b1 = _mm512_loadu_si512((const void *)(b + 16));
UNROLL_ROWS
    for (int r = 0; r < R; r++) {
      __m512i av = _mm512_set1_epi32((int)a[r]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], AS_BH(b0), AS_BH(av));
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], AS_BH(b1), AS_BH(av));
    }
  }
  /* columns [0, cols) of the 32: masks of the two halves */
  __mmask16 m0 = avx512_mask(cols), m1 = avx512_mask(cols - 16);
  __m512 alpha = _mm512_set1_ps(e->alpha);
  __m512 bias0 = e->bias ? _mm512_maskz_loadu_ps(m0, e->bias) : _mm512_setzero_ps();
  __m512 bias1 = e->bias ? _mm512_maskz_loadu_ps(m1, e->bias + 16) : _mm512_setzero_ps();
UNROLL_ROWS
  for (int r = 0; r < R; r++) {
    avx512_store_scaled(acc[r][0], alpha, bias0, e->accumulate, C + r * ldc, m0);
    avx512_store_scaled(acc[r][1], alpha, bias1, e->accumulate, C + r * ldc + 16, m1);
  }
}

static DP_TARGET void tile_any(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                               const bf16dp_epi *e, float *C, int64_t ldc, const char *pf) {
  switch (rows) {
    case 1: tile_rows(1, cols, kp, a, b, e, C, ldc, pf); return;
    case 2: tile_rows(2, cols, kp, a, b, e, C, ldc, pf); return;
    case 3: tile_rows(3, cols, kp, a, b, e, C, ldc, pf); return;
    case 4: tile_rows(4, cols, kp, a, b, e, C, ldc, pf); return;
    case 5: tile_rows(5, cols, kp, a, b, e, C, ldc, pf); return;
    case 6: tile_rows(6, cols, kp, a, b, e, C, ldc, pf); return;
    case 7: tile_rows(7, cols, kp, a, b, e, C, ldc, pf); return;
    case 8: tile_rows(8, cols, kp, a, b, e, C, ldc, pf); return;
    case 9: tile_rows(9, cols, kp, a, b, e, C, ldc, pf); return;
    case 10: tile_rows(10, cols, kp, a, b, e, C, ldc, pf); return;
    case 11: tile_rows(11, cols, kp, a, b, e, C, ldc, pf); return;
    case 12: tile_rows(12, cols, kp, a, b, e, C, ldc, pf); return;
    default: return;
  }
}

DP_TARGET void bf16dp_tile_avx512(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                                  const bf16dp_epi *e, float *C, int64_t ldc) {
  tile_any(rows, cols, kp, a, b, e, C, ldc, NULL);
}

DP_TARGET void bf16dp_tile_avx512_pf(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                                     const bf16dp_epi *e, float *C, int64_t ldc, const void *pf) {
  tile_any(rows, cols, kp, a, b, e, C, ldc, pf);
}

/* bf16dp_pack_a_tile with vcvtne2ps2bf16: 32 floats of each row to 16
 * pairs at a time (round to nearest even, as f32_to_bf16; a denormal
 * becomes 0, as vdpbf16ps takes it anyway), the 12 rows x 16 pairs then
 * transposed in registers and stored as 16 runs of 12 words (the tile is
 * pair-major: pair q's 12 rows at q x 12) -- not a word at a time. */
DP_TARGET void bf16dp_pack_a_tile_avx512(int rows, int64_t K, const float *A, int64_t lda, uint32_t *tile) {
  for (int64_t k = 0; k < K; k += 32) {
    int64_t n = K - k < 32 ? K - k : 32, nq = (n + 1) / 2;
    __m512 v[16]; /* each row's 16 pairs, as words */
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
      v[r] = r < rows && r < BF16DP_MR ? _mm512_castsi512_ps(bf16_pairs_seq16(A + r * lda + k, n)) : _mm512_setzero_ps();
    avx512_transpose16(v);
    uint32_t *o = tile + k / 2 * BF16DP_MR;
    const __mmask16 m = (__mmask16)((1u << BF16DP_MR) - 1);
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++)
      if (q < nq) _mm512_mask_storeu_ps(o + q * BF16DP_MR, m, v[q]);
  }
}
#endif
