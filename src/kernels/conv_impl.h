/* Conv and pool micro-kernels, written once against kernels/simd.h and
 * compiled per ISA (see kernels/conv_kernels.h for what each computes).
 * Include after defining SIMD_LEVEL and including kernels/simd.h. */
#include "kernels/conv_internal.h"

#if SIMD_LEVEL == 2
#define CVP 24 /* chanvec: 24 positions x one vector of channels */
#define DMR 8 /* direct: 8 channels x up to 3 vectors = 24 zmm accumulators */
#define DNV 3
#define WMR 6 /* winograd: 6 tiles x 4 vectors (64 channels) = 24 accumulators */
#define WNV 4
#define PCV 2  /* pointwise panels: 2 vectors of output channels */
#define PCP 14 /* channel-vector pointwise: 14 positions x 2 vectors = 28 accumulators */
#elif SIMD_LEVEL == 1
#define CVP 12 /* 12 accumulators + the weight vector + a broadcast */
#define DMR 4 /* 4 x 3 ymm = 12 accumulators + 3 loads + 1 broadcast */
#define DNV 3
#define WMR 6 /* 6 x 2 ymm = 12 accumulators */
#define WNV 2
#define PCV 2
#define PCP 6 /* 6 x 2 ymm = 12 accumulators + 2 weight vectors + a broadcast */
#else
#define CVP 8
#define DMR 4
#define DNV 4
#define WMR 4
#define WNV 4
#define PCV 8 /* two DMR-row groups, so the two tiles' panels differ */
#define PCP 1 /* at most VL positions: the tile is transposed by vectors */
#endif
#define PMR (PCV * VL) /* output channels per packed pointwise panel */

#define INLINE_ALWAYS __attribute__((always_inline)) inline
/* Keeps p in one register from here on (an empty asm that "changes" it):
 * loads at p + constant then address off it, instead of the compiler's
 * strength reduction into an index register per constant. */
#ifndef OPAQUE_PTR
#define OPAQUE_PTR(p) __asm__("" : "+r"(p))
#endif

/* ---- direct conv tile ---- */

/* The direct tile's sums: acc[i][v] = sum_k a[k*DMR + i] * b[boff[k] + v*VL ..] */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(direct_sums)(int64_t K, const float *restrict a,
                                                             const float *restrict b,
                                                             const int64_t *restrict boff, vf acc[DMR][DNV],
                                                             const int nv) {
#pragma GCC unroll 8
  for (int i = 0; i < DMR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) acc[i][v] = v_zero();
  for (int64_t k = 0; k < K; k++) {
    const float *bk = b + boff[k];
    vf bv[DNV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) bv[v] = v_load(bk + v * VL);
#pragma GCC unroll 8
    for (int i = 0; i < DMR; i++) {
      vf ai = v_set1(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[i][v] = v_fma(ai, bv[v], acc[i][v]);
    }
    a += DMR;
  }
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(direct_body)(int64_t K, const float *restrict a,
                                                             const float *restrict b,
                                                             const int64_t *restrict boff,
                                                             float *restrict c, const int nv) {
  vf acc[DMR][DNV];
  SIMD_NAME(direct_sums)(K, a, b, boff, acc, nv);
#pragma GCC unroll 8
  for (int i = 0; i < DMR; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) v_store(c + (i * nv + v) * VL, acc[i][v]);
}

#define DIRECT_NV(NV)                                                                        \
  static SIMD_TARGET void SIMD_NAME(direct_nv##NV)(int64_t K, const float *a, const float *b, \
                                                   const int64_t *boff, float *c) {         \
    SIMD_NAME(direct_body)(K, a, b, boff, c, NV);                                            \
  }
DIRECT_NV(1)
DIRECT_NV(2)
DIRECT_NV(3)
#if DNV >= 4
DIRECT_NV(4)
#endif

/* ---- direct conv, output channels along the vector (conv_kernels.h:
 * cvec) ---- */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(cvec_body)(int64_t K, const float *restrict w,
                                                           const float *restrict x,
                                                           const int64_t *restrict xoff,
                                                           const float *restrict bias, float *restrict c,
                                                           const int np) {
  vf acc[CVP];
  const vf b = v_load(bias);
#pragma GCC unroll 24
  for (int p = 0; p < np; p++) acc[p] = b;
  for (int64_t k = 0; k < K; k++) {
    const float *xk = x + xoff[k];
    const vf wk = v_load(w + k * VL);
#pragma GCC unroll 24
    for (int p = 0; p < np; p++) acc[p] = v_fma(v_set1(xk[p]), wk, acc[p]);
  }
#pragma GCC unroll 24
  for (int p = 0; p < np; p++) v_store(c + p * VL, acc[p]);
}

static SIMD_TARGET void SIMD_NAME(cvec)(int64_t K, const float *w, const float *x, const int64_t *xoff,
                                        const float *bias, float *c, int np) {
  switch (np) {
#define CVCASE(P)                                            \
  case P:                                                    \
    SIMD_NAME(cvec_body)(K, w, x, xoff, bias, c, P);         \
    break;
    CVCASE(1) CVCASE(2) CVCASE(3) CVCASE(4) CVCASE(5) CVCASE(6) CVCASE(7) CVCASE(8)
#if CVP > 8
    CVCASE(9) CVCASE(10) CVCASE(11) CVCASE(12)
#endif
#if CVP > 12
    CVCASE(13) CVCASE(14) CVCASE(15) CVCASE(16) CVCASE(17) CVCASE(18) CVCASE(19) CVCASE(20)
    CVCASE(21) CVCASE(22) CVCASE(23) CVCASE(24)
#endif
#undef CVCASE
    default: break;
  }
}

/* One K step's share of pfl 64-byte lines from *pf into L2, pfl over the
 * K steps (conv_internal.h: conv_pf_share gives each call its lines): a
 * line whenever *pfa, the lines owed times K, reaches K. */
static INLINE_ALWAYS void SIMD_NAME(pf_step)(const float **pf, int64_t *pfa, int64_t pfl, int64_t K) {
  if (*pf)
    for (*pfa += pfl; *pfa >= K; *pfa -= K, *pf += 16) __builtin_prefetch(*pf, 0, 2);
}

/* ---- Winograd tuple GEMM ---- */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(wgemm_body)(int64_t K, const float *restrict a,
                                                            int64_t lda, const float *restrict b,
                                                            float *restrict c, int64_t ldc,
                                                            const float *pf, int64_t pfl, const int mr) {
  vf acc[WMR][WNV];
#pragma GCC unroll 8
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < WNV; v++) acc[i][v] = v_zero();
  int64_t pfa = 0; /* pf_step's count */
  for (int64_t k = 0; k < K; k++) {
    SIMD_NAME(pf_step)(&pf, &pfa, pfl, K);
    vf bv[WNV];
#pragma GCC unroll 4
    for (int v = 0; v < WNV; v++) bv[v] = v_load(b + v * VL);
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      vf ai = v_set1(a[i * lda + k]);
#pragma GCC unroll 4
      for (int v = 0; v < WNV; v++) acc[i][v] = v_fma(ai, bv[v], acc[i][v]);
    }
    b += WNV * VL;
  }
#pragma GCC unroll 8
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < WNV; v++) v_store(c + i * ldc + v * VL, acc[i][v]);
}

static SIMD_TARGET void SIMD_NAME(wgemm)(int64_t K, const float *a, int64_t lda, const float *b,
                                         float *c, int64_t ldc, const float *pf, int64_t pfl, int mr) {
  switch (mr) {
#define WCASE(R)                                       \
  case R:                                              \
    SIMD_NAME(wgemm_body)(K, a, lda, b, c, ldc, pf, pfl, R); \
    break;
    WCASE(1)
    WCASE(2)
    WCASE(3)
    WCASE(4)
#if WMR >= 6
    WCASE(5)
    WCASE(6)
#endif
#undef WCASE
    default: break;
  }
}

/* ---- Winograd transforms (Lavin & Gray), vl channels per vector ----
 * F(2,3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]
 * F(4,3): B^T rows  4 0 -5 0 1 0 / 0 -4 -4 1 1 0 / 0 4 -4 -1 1 0 /
 *                   0 -2 -1 2 1 0 / 0 2 -1 -2 1 0 / 0 4 0 -5 0 1
 *         A^T rows  1 1 1 1 1 0 / 0 1 -1 2 -2 0 / 0 1 1 4 4 0 / 0 1 -1 8 -8 1 */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(bt4)(const vf *d, vf *r) {
  r[0] = v_sub(d[0], d[2]);
  r[1] = v_add(d[1], d[2]);
  r[2] = v_sub(d[2], d[1]);
  r[3] = v_sub(d[1], d[3]);
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(bt6)(const vf *d, vf *r) {
  const vf c4 = v_set1(4.f), c5 = v_set1(5.f), c2 = v_set1(2.f);
  vf t0 = v_fnma(c4, d[2], d[4]); /* d4 - 4 d2 */
  vf t1 = v_fnma(c4, d[1], d[3]); /* d3 - 4 d1 */
  vf t2 = v_sub(d[4], d[2]);
  vf t3 = v_mul(c2, v_sub(d[3], d[1]));
  r[0] = v_fma(c4, d[0], v_fnma(c5, d[2], d[4]));
  r[1] = v_add(t0, t1);
  r[2] = v_sub(t0, t1);
  r[3] = v_add(t2, t3);
  r[4] = v_sub(t2, t3);
  r[5] = v_fma(c4, d[1], v_fnma(c5, d[3], d[5]));
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(at4)(const vf *o, vf *y) {
  y[0] = v_add(v_add(o[0], o[1]), o[2]);
  y[1] = v_sub(v_sub(o[1], o[2]), o[3]);
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(at6)(const vf *o, vf *y) {
  const vf c2 = v_set1(2.f), c4 = v_set1(4.f), c8 = v_set1(8.f);
  vf s12 = v_add(o[1], o[2]), d12 = v_sub(o[1], o[2]);
  vf s34 = v_add(o[3], o[4]), d34 = v_sub(o[3], o[4]);
  y[0] = v_add(v_add(o[0], s12), s34);
  y[1] = v_fma(c2, d34, d12);
  y[2] = v_fma(c4, s34, s12);
  y[3] = v_add(v_fma(c8, d34, d12), o[5]);
}

#define WINO_IN(NAME, A, BT)                                                                \
  static SIMD_TARGET void SIMD_NAME(NAME)(const float *x, int64_t xrs, float *v, int64_t vs) { \
    vf t[A][A];                                                                             \
    _Pragma("GCC unroll 8") for (int j = 0; j < A; j++) { /* columns: B^T d */              \
      vf d[A], r[A];                                                                        \
      _Pragma("GCC unroll 8") for (int i = 0; i < A; i++) d[i] = v_load(x + i * xrs + j * VL); \
      SIMD_NAME(BT)(d, r);                                                                  \
      _Pragma("GCC unroll 8") for (int i = 0; i < A; i++) t[i][j] = r[i];                   \
    }                                                                                       \
    _Pragma("GCC unroll 8") for (int i = 0; i < A; i++) { /* rows: (B^T d) B */             \
      vf r[A];                                                                              \
      SIMD_NAME(BT)(t[i], r);                                                               \
      _Pragma("GCC unroll 8") for (int j = 0; j < A; j++) v_store(v + (i * A + j) * vs, r[j]); \
    }                                                                                       \
  }
WINO_IN(wino_in2, 4, bt4)
WINO_IN(wino_in4, 6, bt6)

#define WINO_OUT(NAME, A, M, AT)                                                            \
  static SIMD_TARGET void SIMD_NAME(NAME)(const float *o, int64_t os, float *y, int64_t yrs) { \
    vf t[M][A];                                                                             \
    _Pragma("GCC unroll 8") for (int j = 0; j < A; j++) {                                   \
      vf d[A], r[M];                                                                        \
      _Pragma("GCC unroll 8") for (int i = 0; i < A; i++) d[i] = v_load(o + (i * A + j) * os); \
      SIMD_NAME(AT)(d, r);                                                                  \
      _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) t[i][j] = r[i];                   \
    }                                                                                       \
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {                                   \
      vf r[M];                                                                              \
      SIMD_NAME(AT)(t[i], r);                                                               \
      _Pragma("GCC unroll 8") for (int j = 0; j < M; j++) v_store(y + i * yrs + j * VL, r[j]); \
    }                                                                                       \
  }
WINO_OUT(wino_out2, 4, 2, at4)
WINO_OUT(wino_out4, 6, 4, at6)

/* ---- VL x VL transposes, for the blocked layout ---- */

#if SIMD_LEVEL == 2
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(transpose)(vf *r) {
  vf t[16], u[16];
#pragma GCC unroll 8
  for (int a = 0; a < 8; a++) {
    t[2 * a] = _mm512_unpacklo_ps(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm512_unpackhi_ps(r[2 * a], r[2 * a + 1]);
  }
  /* u[4b + c], 128-bit lane k: column 4k + c of rows 4b .. 4b + 3 */
#pragma GCC unroll 4
  for (int b = 0; b < 4; b++) {
    __m512d t0 = _mm512_castps_pd(t[4 * b]), t1 = _mm512_castps_pd(t[4 * b + 1]);
    __m512d t2 = _mm512_castps_pd(t[4 * b + 2]), t3 = _mm512_castps_pd(t[4 * b + 3]);
    u[4 * b + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * b + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * b + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * b + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    vf v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    vf v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    vf v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, v2, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xdd);
  }
}
#elif SIMD_LEVEL == 1
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(transpose)(vf *r) {
  vf t[8], u[8];
#pragma GCC unroll 4
  for (int a = 0; a < 4; a++) {
    t[2 * a] = _mm256_unpacklo_ps(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm256_unpackhi_ps(r[2 * a], r[2 * a + 1]);
  }
#pragma GCC unroll 2
  for (int b = 0; b < 2; b++) {
    __m256d t0 = _mm256_castps_pd(t[4 * b]), t1 = _mm256_castps_pd(t[4 * b + 1]);
    __m256d t2 = _mm256_castps_pd(t[4 * b + 2]), t3 = _mm256_castps_pd(t[4 * b + 3]);
    u[4 * b + 0] = _mm256_castpd_ps(_mm256_unpacklo_pd(t0, t2));
    u[4 * b + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(t0, t2));
    u[4 * b + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(t1, t3));
    u[4 * b + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}
#else
static INLINE_ALWAYS void SIMD_NAME(transpose)(vf *r) { (void)r; }
#endif

static SIMD_TARGET void SIMD_NAME(rows_to_blk)(const float *const *src, int64_t n, float *dst) {
  for (int64_t p0 = 0; p0 < n; p0 += VL) {
    int r = n - p0 < VL ? (int)(n - p0) : VL;
    vf t[VL];
#pragma GCC unroll 16
    for (int l = 0; l < VL; l++)
      t[l] = !src[l] ? v_zero() : r == VL ? v_load(src[l] + p0) : v_loadn(src[l] + p0, r);
    SIMD_NAME(transpose)(t);
    /* unrolled, so t stays in registers: as a loop GCC made it a memcpy
     * from a stack copy of t (a fifth of a blocked depthwise layer) */
#pragma GCC unroll 16
    for (int p = 0; p < VL; p++)
      if (p < r) v_store(dst + (p0 + p) * VL, t[p]);
  }
}

/* The partial last vector (r < VL pixels) of each channel goes first,
 * stored whole where the junk past n falls on the start of the next
 * channel's row that this call writes afterwards (dst[l + 1] == dst[l] +
 * n, n >= VL: a plane-major output); masked otherwise.  Masked stores are
 * slow on AMD (VMASKMOVPS) and a 7x7 plane ends in one. */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(blk_out)(const float *src, int64_t p0, int r,
                                                         float *const *dst, const float *bias,
                                                         int64_t n) {
  vf t[VL];
#pragma GCC unroll 16
  for (int p = 0; p < VL; p++) t[p] = p < r ? v_load(src + (p0 + p) * VL) : v_zero();
  SIMD_NAME(transpose)(t);
  for (int l = 0; l < VL; l++) {
    if (!dst[l]) continue;
    vf v = bias ? v_add(t[l], v_set1(bias[l])) : t[l];
    bool spill_ok = r == VL || (n >= VL && l + 1 < VL && dst[l + 1] == dst[l] + n);
    if (spill_ok) v_store(dst[l] + p0, v);
    else v_storen(dst[l] + p0, v, r);
  }
}

static SIMD_TARGET void SIMD_NAME(blk_to_rows)(const float *src, int64_t n, float *const *dst,
                                               const float *bias) {
  int64_t full = n / VL * VL;
  if (full < n) SIMD_NAME(blk_out)(src, full, (int)(n - full), dst, bias, n);
  for (int64_t p0 = 0; p0 < full; p0 += VL) SIMD_NAME(blk_out)(src, p0, VL, dst, bias, n);
}

/* ---- depthwise and pooling rows ----
 * cap: floats writable at y (>= n).  A last partial vector is stored whole
 * (junk past n) where cap allows: masked stores are slow on some cores
 * (AMD's VMASKMOVPS), so callers that write rows in order pass the room up
 * to the end of what they own. */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(store_tail)(float *p, vf v, int r, int64_t cap) {
  if (cap >= VL) v_store(p, v);
  else v_storen(p, v, r);
}

static SIMD_TARGET void SIMD_NAME(dw_row)(const float *p, const int64_t *off, const float *w,
                                          int taps, float bias, float *y, int64_t n) {
  int64_t j = 0;
  for (; j + 4 * VL <= n; j += 4 * VL) { /* four sums: each tap's chain of FMAs is long (25 for 5x5) */
    vf a0 = v_set1(bias), a1 = a0, a2 = a0, a3 = a0;
    for (int t = 0; t < taps; t++) {
      vf wt = v_set1(w[t]);
      const float *q = p + off[t] + j;
      a0 = v_fma(wt, v_load(q), a0);
      a1 = v_fma(wt, v_load(q + VL), a1);
      a2 = v_fma(wt, v_load(q + 2 * VL), a2);
      a3 = v_fma(wt, v_load(q + 3 * VL), a3);
    }
    v_store(y + j, a0);
    v_store(y + j + VL, a1);
    v_store(y + j + 2 * VL, a2);
    v_store(y + j + 3 * VL, a3);
  }
  for (; j + 2 * VL <= n; j += 2 * VL) {
    vf a0 = v_set1(bias), a1 = a0;
    for (int t = 0; t < taps; t++) {
      vf wt = v_set1(w[t]);
      const float *q = p + off[t] + j;
      a0 = v_fma(wt, v_load(q), a0);
      a1 = v_fma(wt, v_load(q + VL), a1);
    }
    v_store(y + j, a0);
    v_store(y + j + VL, a1);
  }
  for (; j < n; j += VL) {
    int r = n - j < VL ? (int)(n - j) : VL;
    vf a0 = v_set1(bias);
    for (int t = 0; t < taps; t++) a0 = v_fma(v_set1(w[t]), v_loadn(p + off[t] + j, r), a0);
    v_storen(y + j, a0, r);
  }
}

/* clamp(v) = min(hi, max(lo, v)): lo > NaN and hi < NaN are false, so NaN stays */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(clampv)(vf v, vf lo, vf hi) {
  return v_min(hi, v_max(lo, v));
}

static SIMD_TARGET void SIMD_NAME(dw9_row)(const float *p, const int64_t *off, const float *w,
                                           float bias, const float *res, float lo, float hi,
                                           float *y, int64_t n, int64_t cap) {
  const vf w0 = v_set1(w[0]), w1 = v_set1(w[1]), w2 = v_set1(w[2]), w3 = v_set1(w[3]);
  const vf w4 = v_set1(w[4]), w5 = v_set1(w[5]), w6 = v_set1(w[6]), w7 = v_set1(w[7]);
  const vf w8 = v_set1(w[8]), vb = v_set1(bias), vlo = v_set1(lo), vhi = v_set1(hi);
  const float *p0 = p + off[0], *p1 = p + off[1], *p2 = p + off[2], *p3 = p + off[3];
  const float *p4 = p + off[4], *p5 = p + off[5], *p6 = p + off[6], *p7 = p + off[7];
  const float *p8 = p + off[8];
  int64_t j = 0;
  for (; j + 2 * VL <= n; j += 2 * VL) {
    vf a = v_fma(w0, v_load(p0 + j), vb), b = v_fma(w0, v_load(p0 + j + VL), vb);
    a = v_fma(w1, v_load(p1 + j), a), b = v_fma(w1, v_load(p1 + j + VL), b);
    a = v_fma(w2, v_load(p2 + j), a), b = v_fma(w2, v_load(p2 + j + VL), b);
    a = v_fma(w3, v_load(p3 + j), a), b = v_fma(w3, v_load(p3 + j + VL), b);
    a = v_fma(w4, v_load(p4 + j), a), b = v_fma(w4, v_load(p4 + j + VL), b);
    a = v_fma(w5, v_load(p5 + j), a), b = v_fma(w5, v_load(p5 + j + VL), b);
    a = v_fma(w6, v_load(p6 + j), a), b = v_fma(w6, v_load(p6 + j + VL), b);
    a = v_fma(w7, v_load(p7 + j), a), b = v_fma(w7, v_load(p7 + j + VL), b);
    a = v_fma(w8, v_load(p8 + j), a), b = v_fma(w8, v_load(p8 + j + VL), b);
    if (res) a = v_add(a, v_load(res + j)), b = v_add(b, v_load(res + j + VL));
    v_store(y + j, SIMD_NAME(clampv)(a, vlo, vhi));
    v_store(y + j + VL, SIMD_NAME(clampv)(b, vlo, vhi));
  }
  for (; j < n; j += VL) {
    int r = n - j < VL ? (int)(n - j) : VL;
    vf a = v_fma(w0, v_loadn(p0 + j, r), vb);
    a = v_fma(w1, v_loadn(p1 + j, r), a);
    a = v_fma(w2, v_loadn(p2 + j, r), a);
    a = v_fma(w3, v_loadn(p3 + j, r), a);
    a = v_fma(w4, v_loadn(p4 + j, r), a);
    a = v_fma(w5, v_loadn(p5 + j, r), a);
    a = v_fma(w6, v_loadn(p6 + j, r), a);
    a = v_fma(w7, v_loadn(p7 + j, r), a);
    a = v_fma(w8, v_loadn(p8 + j, r), a);
    if (res) a = v_add(a, v_loadn(res + j, r));
    SIMD_NAME(store_tail)(y + j, SIMD_NAME(clampv)(a, vlo, vhi), r, cap - j);
  }
}

/* Blocked depthwise (conv_kernels.h: dw_blk).  Four output pixels of a row
 * at a time, each its own accumulator: one pixel's taps are a chain of
 * dependent FMAs (9 or 25 x the FMA latency) that out-of-order execution
 * overlaps only a little, and a tap's weight vector is loaded once for
 * the four.  3x3 keeps its nine weights in registers. */
#define DWB_PIX 4
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(dwb_store)(float *o, vf a, vf vlo, vf vhi) {
  v_store(o, SIMD_NAME(clampv)(a, vlo, vhi));
}

static SIMD_TARGET void SIMD_NAME(dw_blk)(const float *p, int64_t Wp, int64_t sh, int64_t sw,
                                          const int64_t *off, int taps, const float *w, const float *bias,
                                          float lo, float hi, int64_t OH, int64_t OW, float *o) {
  const vf vb = v_load(bias), vlo = v_set1(lo), vhi = v_set1(hi);
  const int64_t xs = sw * VL; /* from one output pixel's window to the next */
  if (taps == 9) { /* 3x3: the weights in registers */
    const vf w0 = v_load(w), w1 = v_load(w + VL), w2 = v_load(w + 2 * VL), w3 = v_load(w + 3 * VL);
    const vf w4 = v_load(w + 4 * VL), w5 = v_load(w + 5 * VL), w6 = v_load(w + 6 * VL);
    const vf w7 = v_load(w + 7 * VL), w8 = v_load(w + 8 * VL);
    const int64_t o0 = off[0], o1 = off[1], o2 = off[2], o3 = off[3], o4 = off[4];
    const int64_t o5 = off[5], o6 = off[6], o7 = off[7], o8 = off[8];
#define DW9(q, a)                                  \
  a = v_fma(w0, v_load((q) + o0), vb);             \
  a = v_fma(w1, v_load((q) + o1), a);              \
  a = v_fma(w2, v_load((q) + o2), a);              \
  a = v_fma(w3, v_load((q) + o3), a);              \
  a = v_fma(w4, v_load((q) + o4), a);              \
  a = v_fma(w5, v_load((q) + o5), a);              \
  a = v_fma(w6, v_load((q) + o6), a);              \
  a = v_fma(w7, v_load((q) + o7), a);              \
  a = v_fma(w8, v_load((q) + o8), a);
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *q = p + oh * sh * Wp * VL;
      float *orow = o + oh * OW * VL;
      int64_t ow = 0;
      for (; ow + 2 <= OW; ow += 2, q += 2 * xs) { /* 9 weights + 2 sums: no spill at 16 registers */
        vf a, b;
        DW9(q, a)
        DW9(q + xs, b)
        SIMD_NAME(dwb_store)(orow + ow * VL, a, vlo, vhi);
        SIMD_NAME(dwb_store)(orow + (ow + 1) * VL, b, vlo, vhi);
      }
      if (ow < OW) {
        vf a;
        DW9(q, a)
        SIMD_NAME(dwb_store)(orow + ow * VL, a, vlo, vhi);
      }
    }
#undef DW9
    return;
  }
  for (int64_t oh = 0; oh < OH; oh++) {
    const float *q = p + oh * sh * Wp * VL;
    float *orow = o + oh * OW * VL;
    int64_t ow = 0;
    for (; ow + DWB_PIX <= OW; ow += DWB_PIX, q += DWB_PIX * xs) {
      vf a0 = vb, a1 = vb, a2 = vb, a3 = vb;
      for (int t = 0; t < taps; t++) {
        const vf wt = v_load(w + t * VL);
        const float *qt = q + off[t];
        a0 = v_fma(wt, v_load(qt), a0);
        a1 = v_fma(wt, v_load(qt + xs), a1);
        a2 = v_fma(wt, v_load(qt + 2 * xs), a2);
        a3 = v_fma(wt, v_load(qt + 3 * xs), a3);
      }
      SIMD_NAME(dwb_store)(orow + ow * VL, a0, vlo, vhi);
      SIMD_NAME(dwb_store)(orow + (ow + 1) * VL, a1, vlo, vhi);
      SIMD_NAME(dwb_store)(orow + (ow + 2) * VL, a2, vlo, vhi);
      SIMD_NAME(dwb_store)(orow + (ow + 3) * VL, a3, vlo, vhi);
    }
    for (; ow < OW; ow++, q += xs) {
      vf a = vb;
      for (int t = 0; t < taps; t++) a = v_fma(v_load(w + t * VL), v_load(q + off[t]), a);
      SIMD_NAME(dwb_store)(orow + ow * VL, a, vlo, vhi);
    }
  }
}
#undef DWB_PIX

/* Blocked max pooling (conv_kernels.h: max_blk): two output pixels at a
 * time, each its own chain of maxima; 3x3 (squeezenet's and resnet's
 * pools) with the tap offsets in registers. */
static SIMD_TARGET void SIMD_NAME(max_blk)(const float *p, int64_t Wp, int64_t sh, int64_t sw, const int64_t *off,
                                           int taps, int64_t OH, int64_t OW, float *o) {
  const vf ninf = v_set1(-INFINITY);
  const int64_t xs = sw * VL;
  for (int64_t oh = 0; oh < OH; oh++) {
    const float *q = p + oh * sh * Wp * VL;
    float *orow = o + oh * OW * VL;
    int64_t ow = 0;
    if (taps == 9) {
      const int64_t o0 = off[0], o1 = off[1], o2 = off[2], o3 = off[3], o4 = off[4];
      const int64_t o5 = off[5], o6 = off[6], o7 = off[7], o8 = off[8];
#define MX9(r, a)                                                                                        \
  a = v_max(v_load((r) + o0), ninf), a = v_max(v_load((r) + o1), a), a = v_max(v_load((r) + o2), a);     \
  a = v_max(v_load((r) + o3), a), a = v_max(v_load((r) + o4), a), a = v_max(v_load((r) + o5), a);        \
  a = v_max(v_load((r) + o6), a), a = v_max(v_load((r) + o7), a), a = v_max(v_load((r) + o8), a);
      for (; ow + 2 <= OW; ow += 2, q += 2 * xs) {
        vf a, b;
        MX9(q, a)
        MX9(q + xs, b)
        v_store(orow + ow * VL, a);
        v_store(orow + (ow + 1) * VL, b);
      }
      if (ow < OW) {
        vf a;
        MX9(q, a)
        v_store(orow + ow * VL, a);
      }
#undef MX9
      continue;
    }
    for (; ow < OW; ow++, q += xs) {
      vf a = ninf;
      for (int t = 0; t < taps; t++) a = v_max(v_load(q + off[t]), a);
      v_store(orow + ow * VL, a);
    }
  }
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(epi_run)(const float *x, const float *res, vf vlo,
                                                         vf vhi, float *y, int64_t n, int64_t cap) {
  int64_t j = 0;
  for (; j + VL <= n; j += VL) {
    vf a = v_load(x + j);
    if (res) a = v_add(a, v_load(res + j));
    v_store(y + j, SIMD_NAME(clampv)(a, vlo, vhi));
  }
  if (j < n) {
    int r = (int)(n - j);
    vf a = v_loadn(x + j, r);
    if (res) a = v_add(a, v_loadn(res + j, r));
    SIMD_NAME(store_tail)(y + j, SIMD_NAME(clampv)(a, vlo, vhi), r, cap - j);
  }
}

static SIMD_TARGET void SIMD_NAME(epi_rows)(const float *x, int64_t xs, const float *res, float lo,
                                            float hi, float *y, int64_t n, int64_t rows, int64_t cap) {
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
  for (int64_t r = 0; r < rows; r++)
    SIMD_NAME(epi_run)(x + r * xs, res ? res + r * n : NULL, vlo, vhi, y + r * n, n, cap - r * n);
}

#if VL == 16
/* conv_kernels.h: direct_epi.  direct_body's sums, then for each row and
 * vector its runs of Y as direct_out writes them -- bias, residual,
 * clamp -- stored masked from the registers, the residual loaded with the
 * same mask. */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(direct_epi_body)(int64_t K, const float *restrict a,
                                                                 const float *restrict b,
                                                                 const int64_t *restrict boff,
                                                                 const conv_direct_segs *sg, int mr,
                                                                 const float *bias, const float *res, float lo,
                                                                 float hi, float *y, int64_t ys, const int nv) {
  vf acc[DMR][DNV];
  SIMD_NAME(direct_sums)(K, a, b, boff, acc, nv);
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
  vlm m[DNV][CONV_DIRECT_SEGS];
#pragma GCC unroll 4
  for (int v = 0; v < nv; v++)
    for (int s = 0; s < sg->n[v]; s++) m[v][s] = v_lanes(sg->lo[v][s], sg->hi[v][s]);
#pragma GCC unroll 8
  for (int i = 0; i < DMR; i++) {
    if (i >= mr) continue;
    const vf bi = v_set1(bias ? bias[i] : 0.f);
    float *yi = y + i * ys;
    const float *ri = res ? res + i * ys : NULL;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      vf t = v_add(acc[i][v], bi);
      for (int s = 0; s < sg->n[v]; s++) {
        int64_t o = sg->off[v][s];
        vf u = ri ? v_add(t, v_loadm(ri + o, m[v][s])) : t;
        v_storem(yi + o, SIMD_NAME(clampv)(u, vlo, vhi), m[v][s]);
      }
    }
  }
}

#define DIRECT_EPI(NV)                                                                                    \
  static SIMD_TARGET void SIMD_NAME(direct_epi##NV)(int64_t K, const float *a, const float *b,            \
                                                    const int64_t *boff, const conv_direct_segs *sg, int mr, \
                                                    const float *bias, const float *res, float lo, float hi, \
                                                    float *y, int64_t ys) {                               \
    SIMD_NAME(direct_epi_body)(K, a, b, boff, sg, mr, bias, res, lo, hi, y, ys, NV);                      \
  }
DIRECT_EPI(1)
DIRECT_EPI(2)
DIRECT_EPI(3)
#if DNV >= 4
DIRECT_EPI(4)
#endif
#endif

/* conv_kernels.h: direct_out.  The valid outputs of a tile are one run of
 * Y per row i (the dropped columns are not in Y), written segment by
 * segment in order, so a segment's partial last vector may be stored
 * whole while it stays inside that run (a later segment rewrites the
 * junk); the run's end is stored masked. */
static SIMD_TARGET void SIMD_NAME(direct_out)(const float *tile, int64_t nr, int mr, int64_t q, int64_t n,
                                              int64_t Wq, int64_t OW, const float *bias, const float *res,
                                              float lo, float hi, float *y, int64_t ys) {
  if (n < 1) return;
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
  int64_t oh0 = q / Wq, ow0 = q - oh0 * Wq, ql = q + n - 1, ohl = ql / Wq, owl = ql - ohl * Wq;
  int64_t end = ohl * OW + (owl < OW ? owl + 1 : OW); /* one past the tile's last output */
  for (int i = 0; i < mr; i++) {
    const float *t = tile + i * nr, *ri = res ? res + i * ys : NULL;
    float *yi = y + i * ys;
    const vf b = v_set1(bias ? bias[i] : 0.f);
    int64_t oh = oh0, ow = ow0;
    for (int64_t p = 0; p < n; oh++, ow = 0) {
      int64_t seg = Wq - ow < n - p ? Wq - ow : n - p;
      int64_t valid = ow < OW ? (OW - ow < seg ? OW - ow : seg) : 0, o = oh * OW + ow, j = 0;
      const float *src = t + p;
      for (; j + VL <= valid; j += VL) {
        vf a = v_add(v_load(src + j), b);
        if (ri) a = v_add(a, v_load(ri + o + j));
        v_store(yi + o + j, SIMD_NAME(clampv)(a, vlo, vhi));
      }
      if (j < valid) {
        int r = (int)(valid - j);
        vf a = v_add(v_loadn(src + j, r), b);
        if (ri) a = v_add(a, v_loadn(ri + o + j, r));
        SIMD_NAME(store_tail)(yi + o + j, SIMD_NAME(clampv)(a, vlo, vhi), r, end - (o + j));
      }
      p += seg;
    }
  }
}

/* ---- pointwise (1x1) tile, X read in place (conv_kernels.h: pw_tile) ---- */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(pw_body)(int64_t K, const float *w, int64_t ldw,
                                                         const float *x, int64_t ldx, const float *bias,
                                                         const float *res, float lo, float hi, float *y,
                                                         int64_t ldy, int mr, const float *pf,
                                                         const bool packed, const int nv, int r) {
  const float *wr[DMR];
  vf acc[DMR][DNV];
#pragma GCC unroll 8
  for (int i = 0; i < DMR; i++) { /* rows past mr repeat the last one and are not stored */
    wr[i] = packed ? w : w + (i < mr ? i : mr - 1) * ldw;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) acc[i][v] = v_zero();
  }
  for (int64_t k = 0; k < K; k++) {
    /* DMR*K floats of the next panel, a 64-byte line every 16/DMR k */
    if (pf && k % (16 / DMR) == 0) __builtin_prefetch(pf + DMR * k, 0, 2);
    const float *xk = x + k * ldx;
    vf bv[DNV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) bv[v] = v == nv - 1 && r < VL ? v_loadn(xk + v * VL, r) : v_load(xk + v * VL);
#pragma GCC unroll 8
    for (int i = 0; i < DMR; i++) {
      vf ai = v_set1(packed ? w[k * ldw + i] : wr[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[i][v] = v_fma(ai, bv[v], acc[i][v]);
    }
  }
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
#pragma GCC unroll 8
  for (int i = 0; i < DMR; i++) {
    if (i >= mr) break;
    vf b = bias ? v_set1(bias[i]) : v_zero();
    float *yi = y + i * ldy;
    const float *ri = res ? res + i * ldy : NULL;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      vf a = v_add(acc[i][v], b);
      bool tail = v == nv - 1 && r < VL;
      if (ri) a = v_add(a, tail ? v_loadn(ri + v * VL, r) : v_load(ri + v * VL));
      a = SIMD_NAME(clampv)(a, vlo, vhi);
      if (tail) v_storen(yi + v * VL, a, r);
      else v_store(yi + v * VL, a);
    }
  }
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(pw_any)(int64_t K, const float *w, int64_t ldw,
                                                        const float *x, int64_t ldx, int64_t n,
                                                        const float *bias, const float *res, float lo, float hi,
                                                        float *y, int64_t ldy, int mr, const float *pf,
                                                        const bool packed) {
  if (n == DNV * VL) {
    SIMD_NAME(pw_body)(K, w, ldw, x, ldx, bias, res, lo, hi, y, ldy, mr, pf, packed, DNV, VL);
    return;
  }
  int nv = (int)((n + VL - 1) / VL), r = (int)(n - (int64_t)(nv - 1) * VL);
  switch (nv) {
    case 1: SIMD_NAME(pw_body)(K, w, ldw, x, ldx, bias, res, lo, hi, y, ldy, mr, pf, packed, 1, r); break;
    case 2: SIMD_NAME(pw_body)(K, w, ldw, x, ldx, bias, res, lo, hi, y, ldy, mr, pf, packed, 2, r); break;
#if DNV >= 3
    case 3: SIMD_NAME(pw_body)(K, w, ldw, x, ldx, bias, res, lo, hi, y, ldy, mr, pf, packed, 3, r); break;
#endif
#if DNV >= 4
    case 4: SIMD_NAME(pw_body)(K, w, ldw, x, ldx, bias, res, lo, hi, y, ldy, mr, pf, packed, 4, r); break;
#endif
    default: break;
  }
}

static SIMD_TARGET void SIMD_NAME(pw_tile)(int64_t K, const float *w, int64_t ldw, const float *x,
                                           int64_t ldx, int64_t n, const float *bias, const float *res,
                                           float lo, float hi, float *y, int64_t ldy, int mr, const float *pf) {
  SIMD_NAME(pw_any)(K, w, ldw, x, ldx, n, bias, res, lo, hi, y, ldy, mr, pf, false);
}

static SIMD_TARGET void SIMD_NAME(pwp_tile)(int64_t K, const float *w, int64_t ldw, const float *x,
                                            int64_t ldx, int64_t n, const float *bias, const float *res,
                                            float lo, float hi, float *y, int64_t ldy, int mr, const float *pf) {
  SIMD_NAME(pw_any)(K, w, ldw, x, ldx, n, bias, res, lo, hi, y, ldy, mr, pf, true);
}

/* ---- pointwise tile with the output channels along the vector
 * (conv_kernels.h: pwc_tile) ---- */

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(pwc_body)(int64_t K, const float *w, const float *x,
                                                          int64_t ldx, const int64_t *xoff, const float *bias,
                                                          const float *res, float lo, float hi, float *y,
                                                          int64_t ldy, int mc, const float *pf, int64_t pfl,
                                                          const float *acc_in, float *acc_out, const int np) {
  vf acc[PCP][PCV];
#pragma GCC unroll 14
  for (int p = 0; p < np; p++)
#pragma GCC unroll 4
    for (int v = 0; v < PCV; v++) acc[p][v] = acc_in ? v_load(acc_in + (p * PCV + v) * VL) : v_zero();
  int64_t pfa = 0; /* pf_step's count */
  for (int64_t k = 0; k < K; k++) {
    SIMD_NAME(pf_step)(&pf, &pfa, pfl, K);
    vf wv[PCV];
#pragma GCC unroll 4
    for (int v = 0; v < PCV; v++) wv[v] = v_load(w + k * PMR + v * VL);
    const float *xk = x + (xoff ? xoff[k] : k * ldx);
    /* one base register with the positions as displacements: without the
     * barrier gcc 12 turned xoff[k] + p into 14 index registers a step,
     * spilling some (~30 integer instructions beside the 28 multiply-adds) */
    OPAQUE_PTR(xk);
#pragma GCC unroll 14
    for (int p = 0; p < np; p++) {
      vf b = v_set1(xk[p]);
#pragma GCC unroll 4
      for (int v = 0; v < PCV; v++) acc[p][v] = v_fma(b, wv[v], acc[p][v]);
    }
  }
  if (acc_out) { /* an earlier block of K: the sums wait as they are */
#pragma GCC unroll 14
    for (int p = 0; p < np; p++)
#pragma GCC unroll 4
      for (int v = 0; v < PCV; v++) v_store(acc_out + (p * PCV + v) * VL, acc[p][v]);
    return;
  }
  /* each vector of channels turned into rows over the np positions */
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
#pragma GCC unroll 4
  for (int v = 0; v < PCV; v++) {
    if (v * VL >= mc) break;
    vf t[VL];
#pragma GCC unroll 16
    for (int l = 0; l < VL; l++) t[l] = l < np && l < PCP ? acc[l][v] : v_zero();
    SIMD_NAME(transpose)(t);
    int nl = mc - v * VL < VL ? mc - v * VL : VL;
    for (int l = 0; l < nl; l++) {
      int64_t m = v * VL + l;
      vf a = t[l];
      if (bias) a = v_add(a, v_set1(bias[m]));
      if (res) a = v_add(a, v_loadn(res + m * ldy, np));
      v_storen(y + m * ldy, SIMD_NAME(clampv)(a, vlo, vhi), np);
    }
  }
}

#define PWC_SWITCH(XOFF)                                                                                     \
  switch (np) {                                                                                              \
    PWC_CASE(1, XOFF)                                                                                        \
    PWC_MORE(XOFF)                                                                                           \
    default: break;                                                                                          \
  }
#define PWC_CASE(n, XOFF) \
  case n: SIMD_NAME(pwc_body)(K, w, x, ldx, XOFF, bias, res, lo, hi, y, ldy, mc, pf, pfl, acc_in, acc_out, n); break;
#if PCP >= 14
#define PWC_MORE(XOFF)                                                                                           \
  PWC_CASE(2, XOFF) PWC_CASE(3, XOFF) PWC_CASE(4, XOFF) PWC_CASE(5, XOFF) PWC_CASE(6, XOFF) PWC_CASE(7, XOFF)     \
  PWC_CASE(8, XOFF) PWC_CASE(9, XOFF) PWC_CASE(10, XOFF) PWC_CASE(11, XOFF) PWC_CASE(12, XOFF) PWC_CASE(13, XOFF) \
  PWC_CASE(14, XOFF)
#elif PCP >= 6
#define PWC_MORE(XOFF) \
  PWC_CASE(2, XOFF) PWC_CASE(3, XOFF) PWC_CASE(4, XOFF) PWC_CASE(5, XOFF) PWC_CASE(6, XOFF)
#else
#define PWC_MORE(XOFF)
#endif

static SIMD_TARGET void SIMD_NAME(pwc_tile)(int64_t K, const float *w, const float *x, int64_t ldx, int np,
                                            const float *bias, const float *res, float lo, float hi, float *y,
                                            int64_t ldy, int mc, const float *pf, int64_t pfl,
                                            const float *acc_in, float *acc_out) {
  PWC_SWITCH(NULL)
}

static SIMD_TARGET void SIMD_NAME(pwcx_tile)(int64_t K, const float *w, const float *x, const int64_t *xoff,
                                             int np, const float *bias, const float *res, float lo, float hi,
                                             float *y, int64_t ldy, int mc, const float *pf, int64_t pfl,
                                             const float *acc_in, float *acc_out) {
  const int64_t ldx = 0;
  PWC_SWITCH(xoff)
}
#undef PWC_SWITCH
#undef PWC_CASE
#undef PWC_MORE

/* ---- the transposed pointwise GEMM's output back to channel rows
 * (conv_kernels.h: cols_to_rows) ---- */
static SIMD_TARGET void SIMD_NAME(cols_to_rows)(const float *src, int64_t lds, int64_t n, int nl,
                                                const float *res, float lo, float hi, float *dst,
                                                int64_t ldd, int64_t cap) {
  const vf vlo = v_set1(lo), vhi = v_set1(hi);
  for (int64_t p0 = 0; p0 < n; p0 += VL) {
    int r = n - p0 < VL ? (int)(n - p0) : VL;
    vf t[VL];
#pragma GCC unroll 16
    for (int p = 0; p < VL; p++) {
      const float *sp = src + (p0 + p) * lds;
      t[p] = p >= r ? v_zero() : nl == VL ? v_load(sp) : v_loadn(sp, nl);
    }
    SIMD_NAME(transpose)(t);
    for (int l = 0; l < nl; l++) {
      float *d = dst + l * ldd + p0;
      const float *rs = res ? res + l * ldd + p0 : NULL;
      vf v = t[l];
      if (r == VL) {
        if (rs) v = v_add(v, v_load(rs));
        v_store(d, SIMD_NAME(clampv)(v, vlo, vhi));
      } else if (cap - p0 >= VL) { /* whole: the junk lands where the caller writes later */
        if (rs) v = v_add(v, v_loadn(rs, r));
        v_store(d, SIMD_NAME(clampv)(v, vlo, vhi));
      } else { /* a masked store is slow on AMD: the few values one by one */
        if (rs) v = v_add(v, v_loadn(rs, r));
        float tmp[VL];
        v_store(tmp, SIMD_NAME(clampv)(v, vlo, vhi));
        for (int j = 0; j < r; j++) d[j] = tmp[j];
      }
    }
  }
}

/* dst[j] = src[2j], j < n: reads src[0 .. 2n-1) only (masked at the end);
 * cap: floats writable at dst. */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(gather_s2)(const float *src, float *dst, int64_t n,
                                                           int64_t cap) {
  int64_t j = 0;
  for (; j + VL < n; j += VL) /* not the last vector: src[2j + 2VL - 1] is still in range */
    v_store(dst + j, v_even2(v_load(src + 2 * j), v_load(src + 2 * j + VL)));
  if (j < n) { /* r <= VL values need src[2j .. 2j + 2r - 1) */
    int r = (int)(n - j), e = 2 * r - 1;
    vf a = e >= VL ? v_load(src + 2 * j) : v_loadn(src + 2 * j, e);
    vf b = e > VL ? v_loadn(src + 2 * j + VL, e - VL) : v_zero();
    SIMD_NAME(store_tail)(dst + j, v_even2(a, b), r, cap - j);
  }
}

/* p[0 .. n) = v (cap: floats writable at p) */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(set_run)(float *p, int64_t n, vf v, int64_t cap) {
  int64_t j = 0;
  for (; j + VL <= n; j += VL) v_store(p + j, v);
  if (j < n) SIMD_NAME(store_tail)(p + j, v, (int)(n - j), cap - j);
}

/* Pieces in order (pad, values, pad), so a later one overwrites what an
 * earlier one's whole-vector tail wrote past its end. */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(fill_row)(const float *src, int64_t s, int64_t lo, int64_t hi,
                                            int64_t n, float pad, float *row, int64_t cap) {
  vf vp = v_set1(pad);
  SIMD_NAME(set_run)(row, lo, vp, cap);
  float *dst = row + lo;
  int64_t m = hi - lo, dcap = cap - lo;
  if (s == 1) {
    int64_t j = 0;
    for (; j + VL <= m; j += VL) v_store(dst + j, v_load(src + j));
    if (j < m) SIMD_NAME(store_tail)(dst + j, v_loadn(src + j, (int)(m - j)), (int)(m - j), dcap - j);
  } else if (s == 2) {
    SIMD_NAME(gather_s2)(src, dst, m, dcap);
  } else {
    for (int64_t j = 0; j < m; j++) dst[j] = src[j * s];
  }
  SIMD_NAME(set_run)(row + hi, n - hi, vp, cap - hi);
}

/* Output j.. of a depthwise row: + residual, clamp, store; rows go in
 * order, so a partial last vector may spill onto the next row (cap:
 * floats writable from the row's start). */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(dw3_out)(vf v, const float *rr, vf vlo, vf vhi, float *yr, int64_t j,
                                                        int64_t OW, int64_t cap) {
  int r = OW - j < VL ? (int)(OW - j) : VL;
  if (rr) v = v_add(v, r == VL ? v_load(rr + j) : v_loadn(rr + j, r));
  v = SIMD_NAME(clampv)(v, vlo, vhi);
  if (r == VL) v_store(yr + j, v);
  else SIMD_NAME(store_tail)(yr + j, v, r, cap - j);
}

/* Depthwise 3x3 at stride 1 or 2 from one channel's plane through a ring
 * of eight zero-padded row copies (conv_kernels.h: dw3_plane), not a copy
 * of the whole plane: an output row reads three input rows, each copied
 * once (with its padding), so the copies stay in L1.  The rows are copied
 * two output rows ahead of their use: read back at once, the copies'
 * stores have not reached L1 and loads that straddle two of them wait
 * (store forwarding fails; that was a third of the time at 56x56).
 * At stride 2 a row's three taps are the even and odd lanes of the two
 * vectors from the window's start and the even lanes of the two from 2
 * further, no phase-split copy.  The three rows' sums are kept apart
 * (three chains of 3 FMAs, not one of 9). */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(dw3_vec)(const float *p0, const float *p1, const float *p2,
                                                      const vf *wk, vf vb, const int S) {
  vf t0, t1, t2, a0, a1, a2;
#define DW3_TAPS(p)                                                                          \
  if (S == 1) {                                                                              \
    t0 = v_load(p), t1 = v_load((p) + 1), t2 = v_load((p) + 2);                              \
  } else {                                                                                   \
    vf a = v_load(p), b = v_load((p) + VL), a2 = v_load((p) + 2), b2 = v_load((p) + 2 + VL); \
    t0 = v_even2(a, b), t1 = v_odd2(a, b), t2 = v_even2(a2, b2);                             \
  }
  DW3_TAPS(p0)
  a0 = v_fma(wk[2], t2, v_fma(wk[1], t1, v_fma(wk[0], t0, vb)));
  DW3_TAPS(p1)
  a1 = v_fma(wk[5], t2, v_fma(wk[4], t1, v_mul(wk[3], t0)));
  DW3_TAPS(p2)
  a2 = v_fma(wk[8], t2, v_fma(wk[7], t1, v_mul(wk[6], t0)));
#undef DW3_TAPS
  return v_add(v_add(a0, a1), a2);
}

/* input row r in the ring (slot r mod 8), copied with its padding when not there */
static INLINE_ALWAYS SIMD_TARGET const float *SIMD_NAME(dw3_row)(const float *x, int64_t H, int64_t W,
                                                                int64_t pl, int64_t Wp, int64_t r,
                                                                float *ring, int64_t *held) {
  int slot = (int)(((r % 8) + 8) % 8);
  float *row = ring + slot * Wp;
  if (held[slot] != r) {
    int64_t hi = pl + W < Wp ? pl + W : Wp, lo = pl < hi ? pl : hi;
    bool in = r >= 0 && r < H;
    SIMD_NAME(fill_row)(in ? x + r * W : NULL, 1, in ? lo : 0, in ? hi : 0, Wp, 0.f, row, Wp);
    held[slot] = r;
  }
  return row;
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(dw3_rows)(const float *x, int64_t H, int64_t W, int64_t pt,
                                                         int64_t pl, const vf *wk, vf vb, const float *res,
                                                         vf vlo, vf vhi, float *y, int64_t OH, int64_t OW,
                                                         float *ring, const int S) {
  const int64_t Wp = conv_dw3_row_floats(OW, S, VL);
  int64_t held[8];
  for (int i = 0; i < 8; i++) held[i] = INT64_MIN;
  for (int64_t oh = 0; oh < OH && oh < 2; oh++)
    for (int kh = 0; kh < 3; kh++) SIMD_NAME(dw3_row)(x, H, W, pl, Wp, oh * S - pt + kh, ring, held);
  for (int64_t oh = 0; oh < OH; oh++) {
    float *yr = y + oh * OW;
    const float *rr = res ? res + oh * OW : NULL;
    int64_t r0 = oh * S - pt;
    if (oh + 2 < OH) /* rows 2 ahead: at most 7 rows held at once (stride 2), 5 (stride 1) */
      for (int kh = 0; kh < 3; kh++) SIMD_NAME(dw3_row)(x, H, W, pl, Wp, r0 + 2 * S + kh, ring, held);
    const float *p0 = SIMD_NAME(dw3_row)(x, H, W, pl, Wp, r0, ring, held);
    const float *p1 = SIMD_NAME(dw3_row)(x, H, W, pl, Wp, r0 + 1, ring, held);
    const float *p2 = SIMD_NAME(dw3_row)(x, H, W, pl, Wp, r0 + 2, ring, held);
    for (int64_t j = 0; j < OW; j += VL)
      SIMD_NAME(dw3_out)(SIMD_NAME(dw3_vec)(p0 + j * S, p1 + j * S, p2 + j * S, wk, vb, S), rr, vlo, vhi, yr, j, OW,
                         (OH - oh) * OW);
  }
}

static SIMD_TARGET void SIMD_NAME(dw3_plane)(const float *x, int64_t H, int64_t W, int64_t s, int64_t pt,
                                             int64_t pl, const float *w, float bias, const float *res,
                                             float lo, float hi, float *y, int64_t OH, int64_t OW,
                                             float *ring) {
  vf wk[9];
  for (int t = 0; t < 9; t++) wk[t] = v_set1(w[t]);
  const vf vb = v_set1(bias), vlo = v_set1(lo), vhi = v_set1(hi);
  if (s == 1) SIMD_NAME(dw3_rows)(x, H, W, pt, pl, wk, vb, res, vlo, vhi, y, OH, OW, ring, 1);
  else SIMD_NAME(dw3_rows)(x, H, W, pt, pl, wk, vb, res, vlo, vhi, y, OH, OW, ring, 2);
}

/* Depthwise 3x3 at stride 1 or 2 straight from one channel's plane
 * (conv_kernels.h: dw3d_plane): no copy of the input at all.  Each tap
 * row's vector is a masked load from the input row in place, the lanes
 * on the left and right padding (columns outside [0, W)) masked to 0 and
 * rows on the top and bottom padding skipped; stride 2 takes its three
 * taps from four loads as dw3_vec does.  The masks depend on the column
 * only, so they are made once per plane (at most CONV_DW3D_MAX_NV vectors
 * a row).
 * Rows a few vectors wide (mobilenet's 28- and 14-wide planes) pay
 * neither the ring's per-row copies (dw3_plane) nor the blocked form's
 * transposes (dw_blk). */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(dw3d_row)(const float *row, const vlm *m, const vf *wk, vf acc,
                                                       const int S) {
  /* m NULL (a constant where this is inlined): every lane inside the row */
#define DW3D_LD(p, k) (m ? v_loadm(p, m[k]) : v_load(p))
  vf t0, t1, t2;
  if (S == 1) {
    t0 = DW3D_LD(row, 0), t1 = DW3D_LD(row + 1, 1), t2 = DW3D_LD(row + 2, 2);
  } else {
    vf a = DW3D_LD(row, 0), b = DW3D_LD(row + VL, 1), a2 = DW3D_LD(row + 2, 2), b2 = DW3D_LD(row + 2 + VL, 3);
    t0 = v_even2(a, b), t1 = v_odd2(a, b), t2 = v_even2(a2, b2);
  }
#undef DW3D_LD
  return v_fma(wk[2], t2, v_fma(wk[1], t1, v_fma(wk[0], t0, acc)));
}

/* One output vector from input rows r0..r2 (NULL: a padding row) at
 * column c: the three rows' sums apart -- three chains of 3 FMAs, not one
 * of 9 */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(dw3d_vec)(const float *r0, const float *r1, const float *r2, int64_t c,
                                                       const vlm *m, const vf *wk, vf vb, const int S) {
  vf a0 = r0 ? SIMD_NAME(dw3d_row)(r0 + c, m, wk, vb, S) : vb;
  vf a1 = r1 ? SIMD_NAME(dw3d_row)(r1 + c, m, wk + 3, v_zero(), S) : v_zero();
  vf a2 = r2 ? SIMD_NAME(dw3d_row)(r2 + c, m, wk + 6, v_zero(), S) : v_zero();
  return v_add(v_add(a0, a1), a2);
}

static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(dw3d_rows)(const float *x, int64_t H, int64_t W, int64_t pt,
                                                          int64_t pl, const vf *wk, vf vb, const float *res,
                                                          vf vlo, vf vhi, float *y, int64_t OH, int64_t OW,
                                                          const int S) {
  /* per vector of a row, per load: the lanes inside [0, W) (a branch per
   * load to plain ones was slower than the masked loads; whole runs of
   * vectors inside the row, below, are not) */
  vlm m[CONV_DW3D_MAX_NV][4];
  bool in[CONV_DW3D_MAX_NV]; /* every lane of the vector's loads inside [0, W) */
  const int64_t nv = conv_cdiv(OW, VL), loff[4] = {0, S == 1 ? 1 : VL, 2, 2 + VL};
  for (int64_t v = 0; v < nv; v++) {
    in[v] = true;
    for (int k = 0; k < 4; k++) {
      int64_t c0 = v * VL * S - pl + loff[k], lo = c0 < 0 ? -c0 : 0, hi = W - c0 < VL ? W - c0 : VL;
      m[v][k] = v_lanes((int)(lo < VL ? lo : VL), (int)(hi > 0 ? hi : 0));
      if (k < (S == 1 ? 3 : 4) && (lo > 0 || hi < VL)) in[v] = false;
    }
  }
  /* stride 1: [v_lo, v_hi), the vectors read with plain loads (each
   * masked load reloads its mask into a mask register, two instructions
   * more).  Measured alone, 1 thread: 144 channels at 56x56 0.155 -> 0.136
   * ms, 32 at 112x112 0.127 -> 0.095.  Stride 2 kept every load masked
   * (plain ones inside ran no faster: 96 channels 112 -> 56). */
  int64_t v_lo = 0, v_hi = 0;
  if (S == 1) {
    while (v_lo < nv && !in[v_lo]) v_lo++;
    for (v_hi = v_lo; v_hi < nv && in[v_hi];) v_hi++;
  }
  for (int64_t oh = 0; oh < OH; oh++) {
    int64_t ih = oh * S - pt;
    const float *r0 = ih >= 0 && ih < H ? x + ih * W - pl : NULL;
    const float *r1 = ih + 1 >= 0 && ih + 1 < H ? x + (ih + 1) * W - pl : NULL;
    const float *r2 = ih + 2 >= 0 && ih + 2 < H ? x + (ih + 2) * W - pl : NULL;
    float *yr = y + oh * OW;
    const float *rr = res ? res + oh * OW : NULL;
    int64_t v = 0, j = 0;
    for (; v < nv; v++, j += VL) {
      if (S == 1 && v == v_lo) /* the run of vectors inside the row: plain loads */
        for (; v < v_hi; v++, j += VL)
          SIMD_NAME(dw3_out)(SIMD_NAME(dw3d_vec)(r0, r1, r2, j * S, NULL, wk, vb, S), rr, vlo, vhi, yr, j, OW,
                             (OH - oh) * OW);
      if (v >= nv) break;
      SIMD_NAME(dw3_out)(SIMD_NAME(dw3d_vec)(r0, r1, r2, j * S, m[v], wk, vb, S), rr, vlo, vhi, yr, j, OW,
                         (OH - oh) * OW);
    }
  }
}

static SIMD_TARGET void SIMD_NAME(dw3d_plane)(const float *x, int64_t H, int64_t W, int64_t s, int64_t pt,
                                              int64_t pl, const float *w, float bias, const float *res,
                                              float lo, float hi, float *y, int64_t OH, int64_t OW) {
  vf wk[9];
  for (int t = 0; t < 9; t++) wk[t] = v_set1(w[t]);
  const vf vb = v_set1(bias), vlo = v_set1(lo), vhi = v_set1(hi);
  if (s == 1) SIMD_NAME(dw3d_rows)(x, H, W, pt, pl, wk, vb, res, vlo, vhi, y, OH, OW, 1);
  else SIMD_NAME(dw3d_rows)(x, H, W, pt, pl, wk, vb, res, vlo, vhi, y, OH, OW, 2);
}

/* kernels/conv_internal.h's conv_fill_phases, the rows inlined (planes
 * of 7x7 have rows of a few floats: a call per row would cost more). */
static SIMD_TARGET void SIMD_NAME(fill_phases)(const conv_phases *p, const float *x, int64_t channels,
                                               int64_t r0, float pad, float *buf, bool refill) {
  int64_t Wq = p->Wq, Hl = p->Hl;
  float *end = buf + channels * p->sh * p->sw * Hl * Wq; /* rows are written in order up to here */
  int64_t lo_of[64], hi_of[64]; /* per column phase pw (sw <= 64: conv_phases_sane) */
  for (int64_t pw = 0; pw < p->sw && pw < 64; pw++) {
    /* columns j with 0 <= j*sw + pw - pl < W: [jlo, jhi) */
    int64_t jlo = conv_cdiv(p->pl - pw > 0 ? p->pl - pw : 0, p->sw);
    int64_t jhi = p->W + p->pl - pw > 0 ? conv_cdiv(p->W + p->pl - pw, p->sw) : 0;
    if (jhi > Wq) jhi = Wq;
    if (jlo > jhi) jlo = jhi;
    lo_of[pw] = jlo, hi_of[pw] = jhi;
  }
  for (int64_t c = 0; c < channels; c++) {
    const float *xc = x + c * p->H * p->W;
    for (int64_t ph = 0; ph < p->sh; ph++)
      for (int64_t pw = 0; pw < p->sw && pw < 64; pw++) {
        float *plane = buf + ((c * p->sh + ph) * p->sw + pw) * Hl * Wq;
        int64_t jlo = lo_of[pw], jhi = hi_of[pw];
        for (int64_t i = 0; i < Hl; i++) {
          float *row = plane + i * Wq;
          int64_t r = (r0 + i) * p->sh + ph - p->pt;
          bool inside = r >= 0 && r < p->H && jlo < jhi;
          /* column j reads xr[j*sw + pw - pl] */
          const float *src = inside ? xc + r * p->W + jlo * p->sw + pw - p->pl : NULL;
          if (!refill)
            SIMD_NAME(fill_row)(src, p->sw, inside ? jlo : 0, inside ? jhi : 0, Wq, pad, row, end - row);
          else if (inside) /* the values only; what a whole-vector tail writes past them is 0 */
            SIMD_NAME(fill_row)(src, p->sw, jlo, jhi, jhi, pad, row, end - row);
        }
      }
  }
}

/* max(x, acc) keeps acc when x is NaN: the reference's "x > acc ? x : acc" */
static SIMD_TARGET void SIMD_NAME(pool_max_row)(const float *p, const int64_t *off, int taps,
                                                float *y, int64_t n, int64_t cap) {
  for (int64_t j = 0; j < n; j += VL) {
    int r = n - j < VL ? (int)(n - j) : VL;
    vf a = v_set1(-INFINITY);
    if (r == VL)
      for (int t = 0; t < taps; t++) a = v_max(v_load(p + off[t] + j), a);
    else
      for (int t = 0; t < taps; t++) a = v_max(v_loadn(p + off[t] + j, r), a);
    SIMD_NAME(store_tail)(y + j, a, r, cap - j);
  }
}

static SIMD_TARGET void SIMD_NAME(max_pool_row)(const float *x, int64_t xs, int64_t rows,
                                                const pool_row_geom *g, float *t, float *ph, float *y,
                                                int64_t cap) {
  int64_t j = 0, n = g->W;
  for (; j + 2 * VL <= n; j += 2 * VL) {
    vf a = v_set1(-INFINITY), b = a;
    for (int64_t r = 0; r < rows; r++)
      a = v_max(v_load(x + r * xs + j), a), b = v_max(v_load(x + r * xs + j + VL), b);
    v_store(t + j, a);
    v_store(t + j + VL, b);
  }
  for (; j < n; j += VL) {
    int c = n - j < VL ? (int)(n - j) : VL;
    vf a = v_set1(-INFINITY);
    for (int64_t r = 0; r < rows; r++) a = v_max(v_loadn(x + r * xs + j, c), a);
    v_store(t + j, a); /* whole: t has room (a masked store is slow on AMD) */
  }
  int64_t room = g->sw * g->Wq + VL;
  for (int64_t pw = 0; pw < g->sw; pw++) {
    int64_t lo = g->lo[pw], hi = g->hi[pw];
    SIMD_NAME(fill_row)(lo < hi ? t + lo * g->sw + pw - g->pl : t, g->sw, lo, hi, g->Wq, -INFINITY, ph + pw * g->Wq,
                        room - pw * g->Wq);
  }
  SIMD_NAME(pool_max_row)(ph, g->off, (int)g->KW, y, g->OW, cap);
}

#if SIMD_LEVEL == 2
/* The max down `rows` rows (xs apart) of columns base .. base + VL - 1 of
 * a row of W values, -inf for columns outside [0, W) (masked off: not
 * read). */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(vmax_cols)(const float *x, int64_t xs, int64_t rows, int64_t base,
                                                         int64_t W) {
  const vf ninf = v_set1(-INFINITY);
  int64_t lo = base < 0 ? -base : 0, hi = W - base < VL ? W - base : VL;
  vf a = ninf;
  if (lo == 0 && hi == VL) {
    for (int64_t r = 0; r < rows; r++) a = v_max(v_load(x + r * xs + base), a);
  } else if (lo < hi) {
    vlm m = v_lanes((int)lo, (int)hi);
    for (int64_t r = 0; r < rows; r++) a = v_max(_mm512_mask_loadu_ps(ninf, m, x + r * xs + base), a);
  }
  return a;
}
#endif

#if SIMD_LEVEL == 2
/* The 3-tap stride-2 window maxes of VL outputs from three consecutive
 * vectors of column maxes c0, c1, c2 (output i: columns 2i, 2i + 1, 2i + 2
 * of c0 c1 and the first lane of c2): the even, odd and next even values
 * (max(x, acc) order, as the reference's). */
static INLINE_ALWAYS SIMD_TARGET vf SIMD_NAME(k3s2_vec)(vf c0, vf c1, vf c2) {
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  vf e = _mm512_permutex2var_ps(c0, ev, c1), od = _mm512_permutex2var_ps(c0, odd, c1);
  vf e2 = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(c2), _mm512_castps_si512(e), 1));
  return v_max(e2, v_max(od, v_max(e, v_set1(-INFINITY))));
}
#endif

/* max_pool_row for 3 taps at stride 2 (g->KW == 3, g->sw == 2, no
 * dilation: the pools of squeezenet and resnet): the window max of the
 * vertical max t padded with -inf in place (tp[pl + i] = t[i]), read as
 * the even, odd and next even values of pairs of whole vectors; the
 * pairs' lanes come out in the same shuffled order for all three, so one
 * permute after the two maxes puts them back.  No phase copy.  tp: room
 * for 2 * OW + pl + 2 * VL + W rounded up to whole vectors. */
static SIMD_TARGET void SIMD_NAME(max_pool_row_k3s2)(const float *x, int64_t xs, int64_t rows,
                                                     const pool_row_geom *g, float *tp, float *y,
                                                     int64_t cap) {
  int64_t W = g->W, pl = g->pl, OW = g->OW, j = 0;
  const vf ninf = v_set1(-INFINITY);
#if SIMD_LEVEL == 2
  /* In registers: output vector o takes columns 2o - pl .. 2o - pl + 2VL
   * of the vertical max, two whole vectors and the first lane of the next,
   * which is the next output vector's first: each column's vertical max is
   * taken once, and nothing is stored and read back (a read of a vector
   * across two just-stored ones waits for both stores to retire). */
  (void)tp, (void)j, (void)ninf;
  vf v0 = SIMD_NAME(vmax_cols)(x, xs, rows, -pl, W);
  for (int64_t o = 0; o < OW; o += VL) {
    int64_t base = 2 * o - pl;
    vf v1 = SIMD_NAME(vmax_cols)(x, xs, rows, base + VL, W), v2 = SIMD_NAME(vmax_cols)(x, xs, rows, base + 2 * VL, W);
    vf m = SIMD_NAME(k3s2_vec)(v0, v1, v2);
    int r = OW - o < VL ? (int)(OW - o) : VL;
    SIMD_NAME(store_tail)(y + o, m, r, cap - o);
    v0 = v2;
  }
#else
  for (int64_t i = 0; i < pl; i += VL) v_store(tp + i, ninf); /* t's stores below overwrite the excess */
  float *t = tp + pl;
  for (; j + VL <= W; j += VL) {
    vf a = ninf;
    for (int64_t r = 0; r < rows; r++) a = v_max(v_load(x + r * xs + j), a);
    v_store(t + j, a);
  }
  if (j < W) {
    int c = (int)(W - j);
    vf a = ninf;
    for (int64_t r = 0; r < rows; r++) a = v_max(v_loadn(x + r * xs + j, c), a);
    v_store(t + j, a); /* the lanes past W are set to -inf below */
  }
  /* -inf from W on, over every value the windows' whole vectors read */
  int64_t end = 2 * (conv_cdiv(OW, VL) * VL) + 2 + 2 * VL;
  for (int64_t i = pl + W; i < end; i += VL) v_store(tp + i, ninf); /* room: k3s2_len in pool2d.c */
  for (int64_t o = 0; o < OW; o += VL) {
    const float *p = tp + 2 * o;
#if SIMD_LEVEL == 1
    vf a = v_load(p), b = v_load(p + VL), c = v_load(p + 2), d = v_load(p + 2 + VL);
    vf e = _mm256_shuffle_ps(a, b, 0x88), od = _mm256_shuffle_ps(a, b, 0xdd), e2 = _mm256_shuffle_ps(c, d, 0x88);
    vf m = v_max(e2, v_max(od, v_max(e, ninf)));
    m = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xd8));
#else
    vf m = v_max(p[2], v_max(p[1], v_max(p[0], ninf)));
#endif
    int r = OW - o < VL ? (int)(OW - o) : VL;
    SIMD_NAME(store_tail)(y + o, m, r, cap - o);
  }
#endif
}

#if SIMD_LEVEL == 2
/* max_pool_plane_k3s2's rows for NV output vectors a row (a constant: the
 * column maxes stay in registers).  Column vector i of output row oh is
 * the max down its rows of the input columns [i * VL - pl, + VL), lanes
 * outside the row masked to -inf (m[i]); output vector v takes columns
 * 2 v VL - pl .. + 2 VL, the even, odd and next even values of vectors 2v,
 * 2v + 1 and the first lane of 2v + 2. */
static INLINE_ALWAYS SIMD_TARGET void SIMD_NAME(k3s2_plane_nv)(const float *x, int64_t H, int64_t pt, int64_t W,
                                                              int64_t pl, const vlm *m, const vlm *st_m,
                                                              float *y, int64_t OH, int64_t OW, const int NV) {
  const vf ninf = v_set1(-INFINITY);
  for (int64_t oh = 0; oh < OH; oh++) {
    int64_t st = 2 * oh - pt, k0 = st < 0 ? -st : 0, k1 = H - st < 3 ? H - st : 3;
    const float *xr = x + (st + k0) * W - pl;
    vf col[2 * CONV_POOL_PLANE_NV + 1];
    if (k1 - k0 == 3) {
      for (int i = 0; i <= 2 * NV; i++)
        col[i] = !m[i] ? ninf /* max(x, acc): a NaN x leaves acc, as the reference's x > acc ? x : acc */
                       : v_max(_mm512_mask_loadu_ps(ninf, m[i], xr + 2 * W + i * VL),
                               v_max(_mm512_mask_loadu_ps(ninf, m[i], xr + W + i * VL),
                                     v_max(_mm512_mask_loadu_ps(ninf, m[i], xr + i * VL), ninf)));
    } else {
      for (int i = 0; i <= 2 * NV; i++) {
        col[i] = ninf;
        for (int64_t r = 0; r < k1 - k0; r++) col[i] = v_max(_mm512_mask_loadu_ps(ninf, m[i], xr + r * W + i * VL), col[i]);
      }
    }
    for (int v = 0; v < NV; v++)
      _mm512_mask_storeu_ps(y + oh * OW + v * VL, st_m[v], SIMD_NAME(k3s2_vec)(col[2 * v], col[2 * v + 1], col[2 * v + 2]));
  }
}

/* A 3x3/2 max pool over a whole plane (conv_kernels.h: max_pool_plane_k3s2,
 * AVX-512 only): the loop over output rows inside the kernel, each column
 * load's lane mask made once a plane and an output row's column maxes in
 * registers (k3s2_plane_nv), for rows of up to CONV_POOL_PLANE_NV output
 * vectors.  squeezenet's 256 ch 27x27 -> 13x13 ran 19 us against 43-45 for
 * the row form (a call per row, its constants and masks made again each
 * time) and the blocked form (1 thread, hot). */
static SIMD_TARGET void SIMD_NAME(max_pool_plane_k3s2)(const float *x, int64_t H, int64_t pt,
                                                       const pool_row_geom *g, float *y, int64_t OH) {
  int64_t W = g->W, OW = g->OW, nv = conv_cdiv(OW, VL);
  vlm m[2 * CONV_POOL_PLANE_NV + 1], st_m[CONV_POOL_PLANE_NV];
  for (int64_t i = 0; i <= 2 * nv; i++) {
    int64_t c0 = i * VL - g->pl, lo = c0 < 0 ? -c0 : 0, hi = W - c0 < VL ? W - c0 : VL;
    m[i] = lo < hi ? v_lanes((int)lo, (int)hi) : 0;
  }
  for (int64_t v = 0; v < nv; v++) st_m[v] = v_lanes(0, OW - v * VL < VL ? (int)(OW - v * VL) : VL);
  switch (nv) {
  case 1: SIMD_NAME(k3s2_plane_nv)(x, H, pt, W, g->pl, m, st_m, y, OH, OW, 1); return;
  case 2: SIMD_NAME(k3s2_plane_nv)(x, H, pt, W, g->pl, m, st_m, y, OH, OW, 2); return;
  default: SIMD_NAME(k3s2_plane_nv)(x, H, pt, W, g->pl, m, st_m, y, OH, OW, 3); return;
  }
}
#endif

static SIMD_TARGET void SIMD_NAME(pool_avg_row)(const float *p, const int64_t *off, int taps,
                                                const float *scale, float s, float *y, int64_t n,
                                                int64_t cap) {
  for (int64_t j = 0; j < n; j += VL) {
    int r = n - j < VL ? (int)(n - j) : VL;
    vf a = v_zero();
    for (int t = 0; t < taps; t++) a = v_add(a, v_loadn(p + off[t] + j, r));
    a = v_mul(a, scale ? v_loadn(scale + j, r) : v_set1(s));
    SIMD_NAME(store_tail)(y + j, a, r, cap - j);
  }
}

static SIMD_TARGET double SIMD_NAME(row_sum)(const float *x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 256) { /* f32 partials over at most 256 values */
    int64_t e = b + 256 < n ? b + 256 : n, j = b;
    vf a0 = v_zero(), a1 = v_zero();
    for (; j + 2 * VL <= e; j += 2 * VL) {
      a0 = v_add(a0, v_load(x + j));
      a1 = v_add(a1, v_load(x + j + VL));
    }
    for (; j < e; j += VL) a0 = v_add(a0, v_loadn(x + j, e - j < VL ? (int)(e - j) : VL));
    total += v_hsum_d(v_add(a0, a1));
  }
  return total;
}

const conv_kernels SIMD_NAME(conv_kernels) = {
    .isa = SIMD_ISA,
    .vl = VL,
    .dmr = DMR,
    .dmax_nv = DNV,
    .direct = {NULL, SIMD_NAME(direct_nv1), SIMD_NAME(direct_nv2), SIMD_NAME(direct_nv3),
#if DNV >= 4
               SIMD_NAME(direct_nv4)
#endif
    },
    .direct_out = SIMD_NAME(direct_out),
#if VL == 16
    .direct_epi = {NULL, SIMD_NAME(direct_epi1), SIMD_NAME(direct_epi2), SIMD_NAME(direct_epi3),
#if DNV >= 4
                   SIMD_NAME(direct_epi4)
#endif
    },
#endif
    .cvp = CVP,
    .cvec = SIMD_NAME(cvec),
    .pmr = PMR,
    .prows = DMR,
    .pmax_nv = DNV,
    .pw_tile = SIMD_NAME(pw_tile),
    .pwp_tile = SIMD_NAME(pwp_tile),
    .pcp = PCP,
    .pwc_tile = SIMD_NAME(pwc_tile),
    .pwcx_tile = SIMD_NAME(pwcx_tile),
    .wmr = WMR,
    .wnr = WNV * VL,
    .wgemm = SIMD_NAME(wgemm),
    .wino_in = {SIMD_NAME(wino_in2), SIMD_NAME(wino_in4)},
    .wino_out = {SIMD_NAME(wino_out2), SIMD_NAME(wino_out4)},
    .rows_to_blk = SIMD_NAME(rows_to_blk),
    .blk_to_rows = SIMD_NAME(blk_to_rows),
    .cols_to_rows = SIMD_NAME(cols_to_rows),
    .dw_row = SIMD_NAME(dw_row),
    .dw9_row = SIMD_NAME(dw9_row),
    .dw_blk = SIMD_NAME(dw_blk),
    .dw3_plane = SIMD_NAME(dw3_plane),
    .dw3d_plane = SIMD_NAME(dw3d_plane),
    .max_blk = SIMD_NAME(max_blk),
    .epi_rows = SIMD_NAME(epi_rows),
    .fill_phases = SIMD_NAME(fill_phases),
    .pool_max_row = SIMD_NAME(pool_max_row),
    .max_pool_row = SIMD_NAME(max_pool_row),
    .max_pool_row_k3s2 = SIMD_NAME(max_pool_row_k3s2),
#if SIMD_LEVEL == 2
    .max_pool_plane_k3s2 = SIMD_NAME(max_pool_plane_k3s2),
#endif
    .pool_avg_row = SIMD_NAME(pool_avg_row),
    .row_sum = SIMD_NAME(row_sum),
};
