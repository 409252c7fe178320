/* AVX-512 BF16 products of attention's tiled path (kernels/attention_bf16.h):
 * register tiles of up to AB_MR rows (keys for Q.K^T, output columns for
 * P.V) by one or two vectors of queries, each row's pair broadcast, two
 * vdpbf16ps per row and pair step: half the steps of the fp32 kernels'
 * (attention_impl.h) at the same width.  Compiles everywhere; runs only
 * where bf16dp_hw. */
#include "kernels/attention_bf16.h"

#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#ifdef SMELT_X86
#include <immintrin.h>

#include "kernels/x86/avx512_tile.h"
#include "kernels/x86/bf16_pairs.h"

#define AB_MR 12
#define AB_INLINE static inline __attribute__((always_inline)) BF16_PAIRS_TARGET
#define AS_BH(v) ((__m512bh)(v))
#if defined(__clang__)
#define AB_UNROLL
#else
#define AB_UNROLL _Pragma("GCC unroll 12")
#endif

BF16_PAIRS_TARGET void attn_bf16_pairs_rows(const float *lo, const float *hi, int64_t n, uint32_t *out) {
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = avx512_mask(n - k);
    __m512 l = _mm512_maskz_loadu_ps(m, lo + k), h = hi ? _mm512_maskz_loadu_ps(m, hi + k) : _mm512_setzero_ps();
    _mm512_mask_storeu_epi32(out + k, m, bf16_pairs16(l, h));
  }
}

BF16_PAIRS_TARGET void attn_bf16_pairs_seq(const float *x, int64_t D, uint32_t *out) {
  for (int64_t k = 0; k < D; k += 32) {
    int64_t n = D - k < 32 ? D - k : 32;
    _mm512_mask_storeu_epi32(out + k / 2, avx512_mask((n + 1) / 2), bf16_pairs_seq16(x + k, n));
  }
}

/* st[r][0 .. nv 16) = sum_d kw[r][d] . qtp[d][0 .. nv 16) for r < R */
AB_INLINE void qk_tile(const int R, const int nv, const uint32_t *qtp, int64_t nqp, int64_t dpn,
                       const uint32_t *kw, int64_t ldkw, float *st, int64_t ldst) {
  __m512 a0[AB_MR], a1[AB_MR];
  AB_UNROLL
  for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dpn; d++) {
    const uint32_t *q = qtp + d * nqp;
    __m512i q0 = _mm512_loadu_si512((const void *)q), q1 = nv > 1 ? _mm512_loadu_si512((const void *)(q + 16)) : q0;
    AB_UNROLL
    for (int r = 0; r < R; r++) {
      __m512i b = _mm512_set1_epi32((int)kw[r * ldkw + d]);
      a0[r] = _mm512_dpbf16_ps(a0[r], AS_BH(q0), AS_BH(b));
      if (nv > 1) a1[r] = _mm512_dpbf16_ps(a1[r], AS_BH(q1), AS_BH(b));
    }
  }
  AB_UNROLL
  for (int r = 0; r < R; r++) {
    _mm512_storeu_ps(st + r * ldst, a0[r]);
    if (nv > 1) _mm512_storeu_ps(st + r * ldst + 16, a1[r]);
  }
}

/* ot[r][..] = ot[r][..] corr + sum_j vp[j][r] . ptp[j][..] for r < R */
AB_INLINE void pv_tile(const int R, const int nv, const uint32_t *ptp, int64_t njp, const uint32_t *vp, int64_t ldvp,
                       const float *corr, float *ot, int64_t nqp) {
  __m512 a0[AB_MR], a1[AB_MR];
  __m512 c0 = _mm512_loadu_ps(corr), c1 = nv > 1 ? _mm512_loadu_ps(corr + 16) : c0;
  AB_UNROLL
  for (int r = 0; r < R; r++) {
    a0[r] = _mm512_mul_ps(_mm512_loadu_ps(ot + r * nqp), c0);
    a1[r] = nv > 1 ? _mm512_mul_ps(_mm512_loadu_ps(ot + r * nqp + 16), c1) : a0[r];
  }
  const int64_t pw = nv * 16;
  for (int64_t j = 0; j < njp; j++) {
    const uint32_t *p = ptp + j * pw;
    __m512i p0 = _mm512_loadu_si512((const void *)p), p1 = nv > 1 ? _mm512_loadu_si512((const void *)(p + 16)) : p0;
    AB_UNROLL
    for (int r = 0; r < R; r++) {
      __m512i b = _mm512_set1_epi32((int)vp[j * ldvp + r]);
      a0[r] = _mm512_dpbf16_ps(a0[r], AS_BH(p0), AS_BH(b));
      if (nv > 1) a1[r] = _mm512_dpbf16_ps(a1[r], AS_BH(p1), AS_BH(b));
    }
  }
  AB_UNROLL
  for (int r = 0; r < R; r++) {
    _mm512_storeu_ps(ot + r * nqp, a0[r]);
    if (nv > 1) _mm512_storeu_ps(ot + r * nqp + 16, a1[r]);
  }
}

#define AB_DISPATCH(FN, R, nv, ...)                  \
  do {                                               \
    switch (R) {                                     \
      case 1: FN(1, nv, __VA_ARGS__); break;         \
      case 2: FN(2, nv, __VA_ARGS__); break;         \
      case 3: FN(3, nv, __VA_ARGS__); break;         \
      case 4: FN(4, nv, __VA_ARGS__); break;         \
      case 5: FN(5, nv, __VA_ARGS__); break;         \
      case 6: FN(6, nv, __VA_ARGS__); break;         \
      case 7: FN(7, nv, __VA_ARGS__); break;         \
      case 8: FN(8, nv, __VA_ARGS__); break;         \
      case 9: FN(9, nv, __VA_ARGS__); break;         \
      case 10: FN(10, nv, __VA_ARGS__); break;       \
      case 11: FN(11, nv, __VA_ARGS__); break;       \
      default: FN(12, nv, __VA_ARGS__); break;       \
    }                                                \
  } while (0)

BF16_PAIRS_TARGET void attn_bf16_qk(const uint32_t *qtp, int64_t nqp, int64_t dpn, const uint32_t *kw, int64_t ldkw,
                                    int64_t n, float *st) {
  for (int64_t i = 0; i < nqp; i += 32) {
    int nv = nqp - i >= 32 ? 2 : 1;
    for (int64_t j = 0; j < n; j += AB_MR) {
      int R = n - j < AB_MR ? (int)(n - j) : AB_MR;
      if (nv > 1) AB_DISPATCH(qk_tile, R, 2, qtp + i, nqp, dpn, kw + j * ldkw, ldkw, st + i * n + j * 32, 32);
      else AB_DISPATCH(qk_tile, R, 1, qtp + i, nqp, dpn, kw + j * ldkw, ldkw, st + i * n + j * 16, 16);
    }
  }
}

BF16_PAIRS_TARGET void attn_bf16_pv(const uint32_t *ptp, int64_t nqp, int64_t njp, const uint32_t *vp, int64_t ldvp,
                                    int64_t Dv, const float *corr, float *ot) {
  for (int64_t i = 0; i < nqp; i += 32) {
    int nv = nqp - i >= 32 ? 2 : 1;
    for (int64_t c = 0; c < Dv; c += AB_MR) {
      int R = Dv - c < AB_MR ? (int)(Dv - c) : AB_MR;
      if (nv > 1) AB_DISPATCH(pv_tile, R, 2, ptp + i * njp, njp, vp + c, ldvp, corr + i, ot + c * nqp + i, nqp);
      else AB_DISPATCH(pv_tile, R, 1, ptp + i * njp, njp, vp + c, ldvp, corr + i, ot + c * nqp + i, nqp);
    }
  }
}
#endif
