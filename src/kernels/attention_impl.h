/* The tiled attention kernels (kernels/attention_tile.h), written once
 * against kernels/simd.h.  Include after defining SIMD_LEVEL and including
 * kernels/simd.h.
 *
 * Register tiles: AT_MR rows (keys for Q.K^T, output columns c for P.V) by
 * one or two vectors of queries; with AVX2 6 x 16, twelve accumulators, two
 * vector loads and six broadcasts per step, as in the GEMM's 6x16 kernel. */
#include <float.h>
#include <math.h>

#include "kernels/attention_tile.h"

#define AT_MR 6
#define AT_INLINE static __attribute__((always_inline)) inline SIMD_TARGET

/* 2^x for x <= 0 (scores are kept in log2 units: Q^T is scaled by log2 e),
 * 0 below -125: a subnormal result (a key some 87 nats below the row's
 * best, a -1e4 mask) would cost a microcode assist per lane on x86, and
 * weighs under 1e-37 against the max's 1.  NaN passes (v_max(-125, x) is x
 * when x is NaN).  x = n + f, |f| <= 1/2, and a degree-6 fit of 2^f
 * (relative error 8.4e-8): half the work of vm_exp, whose range reduction
 * and two-step scaling serve all of the float line. */
AT_INLINE vf SIMD_NAME(at_exp2_neg)(vf x) {
  vm tiny = v_lt(x, v_set1(-125.f));
  x = v_max(v_set1(-125.f), x);
#if SIMD_LEVEL == 0
  vf e = exp2f(x); /* libm is faster than the one-lane polynomial */
#else
  vi ni = v_round_i(x);
  vf f = v_sub(x, v_i2f(ni));
  vf p = v_set1(1.5345699e-4f);
  p = v_fma(p, f, v_set1(1.3399888e-3f));
  p = v_fma(p, f, v_set1(9.6184891e-3f));
  p = v_fma(p, f, v_set1(5.5503290e-2f));
  p = v_fma(p, f, v_set1(2.4022646e-1f));
  p = v_fma(p, f, v_set1(6.9314718e-1f));
  p = v_fma(p, f, v_set1(1.f));
  vf e = v_mul(p, v_as_f(vi_slli23(vi_add(ni, vi_set1(127)))));
#endif
  return v_sel(tiny, v_zero(), e);
}

/* st[r][0 .. nv VL) = sum_d k[r][d] qt[d][0 .. nv VL) for r < mr */
AT_INLINE void SIMD_NAME(at_qk_tile)(const int mr, const int nv, const float *qt, int64_t nqp,
                                     int64_t D, const float *k, int64_t ldk, float *st,
                                     int64_t ldst) {
  vf a0[AT_MR], a1[AT_MR];
#pragma GCC unroll 6
  for (int r = 0; r < AT_MR; r++) a0[r] = a1[r] = v_zero();
  for (int64_t d = 0; d < D; d++) {
    const float *q = qt + d * nqp;
    vf q0 = v_load(q), q1 = nv > 1 ? v_load(q + VL) : v_zero();
#pragma GCC unroll 6
    for (int r = 0; r < AT_MR; r++) {
      if (r >= mr) break;
      vf b = v_set1(k[r * ldk + d]);
      a0[r] = v_fma(b, q0, a0[r]);
      if (nv > 1) a1[r] = v_fma(b, q1, a1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < AT_MR; r++) {
    if (r >= mr) break;
    v_store(st + r * ldst, a0[r]);
    if (nv > 1) v_store(st + r * ldst + VL, a1[r]);
  }
}

#define AT_DISPATCH(FN, mr, nv, ...)                       \
  do {                                                     \
    if (nv > 1) switch (mr) {                              \
        case 1: FN(1, 2, __VA_ARGS__); break;              \
        case 2: FN(2, 2, __VA_ARGS__); break;              \
        case 3: FN(3, 2, __VA_ARGS__); break;              \
        case 4: FN(4, 2, __VA_ARGS__); break;              \
        case 5: FN(5, 2, __VA_ARGS__); break;              \
        default: FN(6, 2, __VA_ARGS__); break;             \
      }                                                    \
    else switch (mr) {                                     \
        case 1: FN(1, 1, __VA_ARGS__); break;              \
        case 2: FN(2, 1, __VA_ARGS__); break;              \
        case 3: FN(3, 1, __VA_ARGS__); break;              \
        case 4: FN(4, 1, __VA_ARGS__); break;              \
        case 5: FN(5, 1, __VA_ARGS__); break;              \
        default: FN(6, 1, __VA_ARGS__); break;             \
      }                                                    \
  } while (0)

static SIMD_TARGET void SIMD_NAME(at_qk)(const float *qt, int64_t nqp, int64_t D, const float *k,
                                        int64_t ldk, int64_t n, float *st) {
  for (int64_t i = 0; i < nqp; i += 2 * VL) {
    int nv = nqp - i >= 2 * VL ? 2 : 1;
    for (int64_t j = 0; j < n; j += AT_MR) {
      int mr = n - j < AT_MR ? (int)(n - j) : AT_MR;
      AT_DISPATCH(SIMD_NAME(at_qk_tile), mr, nv, qt + i, nqp, D, k + j * ldk, ldk,
                  st + i * n + j * nv * VL, nv * VL);
    }
  }
}

static SIMD_TARGET void SIMD_NAME(at_softmax)(float *st, int64_t nqp, int64_t n, float *m, float *l,
                                             float *corr) {
  for (int64_t i = 0; i < nqp; i += VL) {
    int64_t p0 = i - i % (2 * VL), ld = nqp - p0 < 2 * VL ? nqp - p0 : 2 * VL;
    float *s = st + p0 * n + (i - p0); /* this vector's column of its panel */
    vf mx = v_set1(-INFINITY);
    for (int64_t j = 0; j < n; j++) mx = v_max(v_load(s + j * ld), mx); /* NaN passed over */
    vf mo = v_load(m + i), mn = v_max(mx, mo);
    vm empty = v_lt(mn, v_set1(-FLT_MAX)); /* every key so far masked */
    vf mu = v_sel(empty, v_zero(), mn), sum = v_zero();
    vf c = SIMD_NAME(at_exp2_neg)(v_sub(mo, mu)); /* 0 on the first block: m was -inf */
    if (vm_any(empty))
      for (int64_t j = 0; j < n; j++) {
        vf e = v_sel(empty, v_zero(), SIMD_NAME(at_exp2_neg)(v_sub(v_load(s + j * ld), mu)));
        v_store(s + j * ld, e);
        sum = v_add(sum, e);
      }
    else
      for (int64_t j = 0; j < n; j++) {
        vf e = SIMD_NAME(at_exp2_neg)(v_sub(v_load(s + j * ld), mu));
        v_store(s + j * ld, e);
        sum = v_add(sum, e);
      }
    v_store(m + i, mn);
    v_store(l + i, v_fma(v_load(l + i), c, sum));
    v_store(corr + i, c);
  }
}

/* ot[r][0 .. nv VL) = ot[r][..] corr + sum_j v[j][r] st[j][..] for r < mr */
AT_INLINE void SIMD_NAME(at_pv_tile)(const int mr, const int nv, const float *st, int64_t nqp,
                                     int64_t n, const float *v, int64_t ldv, const float *corr,
                                     float *ot) {
  vf a0[AT_MR], a1[AT_MR];
  vf c0 = v_load(corr), c1 = nv > 1 ? v_load(corr + VL) : v_zero();
#pragma GCC unroll 6
  for (int r = 0; r < AT_MR; r++) {
    if (r >= mr) break;
    a0[r] = v_mul(v_load(ot + r * nqp), c0);
    if (nv > 1) a1[r] = v_mul(v_load(ot + r * nqp + VL), c1);
  }
  for (int64_t j = 0; j < n; j++) {
    const float *p = st + j * nv * VL; /* the panel's row j */
    vf p0 = v_load(p), p1 = nv > 1 ? v_load(p + VL) : v_zero();
#pragma GCC unroll 6
    for (int r = 0; r < AT_MR; r++) {
      if (r >= mr) break;
      vf b = v_set1(v[j * ldv + r]);
      a0[r] = v_fma(b, p0, a0[r]);
      if (nv > 1) a1[r] = v_fma(b, p1, a1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < AT_MR; r++) {
    if (r >= mr) break;
    v_store(ot + r * nqp, a0[r]);
    if (nv > 1) v_store(ot + r * nqp + VL, a1[r]);
  }
}

static SIMD_TARGET void SIMD_NAME(at_pv)(const float *st, int64_t nqp, int64_t n, const float *v,
                                        int64_t ldv, int64_t Dv, const float *corr, float *ot) {
  for (int64_t i = 0; i < nqp; i += 2 * VL) {
    int nv = nqp - i >= 2 * VL ? 2 : 1;
    for (int64_t c = 0; c < Dv; c += AT_MR) {
      int mr = Dv - c < AT_MR ? (int)(Dv - c) : AT_MR;
      AT_DISPATCH(SIMD_NAME(at_pv_tile), mr, nv, st + i * n, nqp, n, v + c, ldv, corr + i,
                  ot + c * nqp + i);
    }
  }
}

/* One query per head (a decode step), one key row: out[h os] = q_h . k_h
 * for h < nh, q_h = q + h qs, k_h = k + ((h0 + h) / group) ks, D floats. */
static SIMD_TARGET void SIMD_NAME(at_qk_row)(const float *q, int64_t qs, const float *k, int64_t ks,
                                            int64_t h0, int64_t nh, int64_t group, int64_t D, float *out,
                                            int64_t os) {
  for (int64_t h = 0; h < nh; h++) {
    const float *qh = q + h * qs, *kh = k + ((h0 + h) / group) * ks;
    vf a0 = v_zero(), a1 = v_zero();
    int64_t d = 0;
    for (; d + 2 * VL <= D; d += 2 * VL) {
      a0 = v_fma(v_load(qh + d), v_load(kh + d), a0);
      a1 = v_fma(v_load(qh + d + VL), v_load(kh + d + VL), a1);
    }
    for (; d < D; d += VL) {
      int w = D - d < VL ? (int)(D - d) : VL;
      a0 = v_fma(v_loadn(qh + d, w), v_loadn(kh + d, w), a0);
    }
    out[h * os] = v_hsum(v_add(a0, a1));
  }
}

/* The same key's value row: acc_h[c] += p[h ps] v_h[c] for h < nh, c < Dv,
 * acc_h = acc + h Dv, v_h = v + ((h0 + h) / group) vs. */
static SIMD_TARGET void SIMD_NAME(at_pv_row)(const float *p, int64_t ps, const float *v, int64_t vs,
                                            int64_t h0, int64_t nh, int64_t group, int64_t Dv, float *acc) {
  for (int64_t h = 0; h < nh; h++) {
    const float *vh = v + ((h0 + h) / group) * vs;
    float *ah = acc + h * Dv;
    vf w = v_set1(p[h * ps]);
    int64_t c = 0;
    for (; c + VL <= Dv; c += VL) v_store(ah + c, v_fma(w, v_load(vh + c), v_load(ah + c)));
    if (c < Dv) v_storen(ah + c, v_fma(w, v_loadn(vh + c, (int)(Dv - c)), v_loadn(ah + c, (int)(Dv - c))), (int)(Dv - c));
  }
}

const attn_tile_kernels SIMD_NAME(attn_tile) = {
    .isa = SIMD_ISA,
    .vl = VL,
    .qk = SIMD_NAME(at_qk),
    .softmax = SIMD_NAME(at_softmax),
    .pv = SIMD_NAME(at_pv),
    .qk_row = SIMD_NAME(at_qk_row),
    .pv_row = SIMD_NAME(at_pv_row),
};
