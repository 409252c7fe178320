/* bf16 pairs for vdpbf16ps from two rows of floats: word k of the result
 * holds bf16(lo[k]) in its low half and bf16(hi[k]) in its high half
 * (round to nearest even; a denormal becomes 0, as vdpbf16ps takes it
 * anyway).  vcvtne2ps2bf16 puts lo's 16 values in halves 0..15 and hi's in
 * 16..31; a vpermw interleaves them.  For files built with the AVX-512
 * BF16 target (the conv and attention bf16 kernels); call only where
 * bf16dp_hw. */
#ifndef SMELT_KERNELS_X86_BF16_PAIRS_H
#define SMELT_KERNELS_X86_BF16_PAIRS_H

#include <immintrin.h>
#include <stdint.h>

#define BF16_PAIRS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* half 2k: half k of vcvtne2ps2bf16's result (lo), half 2k + 1: half 16 + k (hi) */
#define PAIR_INTERLEAVE                                                                                      \
  _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, \
                   19, 3, 18, 2, 17, 1, 16, 0)

static inline __attribute__((always_inline)) BF16_PAIRS_TARGET __m512i bf16_pairs16(__m512 lo, __m512 hi) {
  return _mm512_permutexvar_epi16(PAIR_INTERLEAVE, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* The pairs of n <= 32 consecutive floats of one row, x[2k] low and
 * x[2k + 1] high in word k (32 floats in order are 16 pairs in order:
 * no interleave); the floats past n read as 0 and are not loaded. */
static inline __attribute__((always_inline)) BF16_PAIRS_TARGET __m512i bf16_pairs_seq16(const float *x, int64_t n) {
  __mmask16 m0 = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1);
  __mmask16 m1 = n >= 32 ? (__mmask16)0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
  __m512 lo = _mm512_maskz_loadu_ps(m0, x), hi = _mm512_maskz_loadu_ps(m1, x + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

#endif
