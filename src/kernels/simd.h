/* A thin vector shim for the per-ISA kernel templates (conv, pool, vmath).
 *
 * A kernel template (kernels/<family>_impl.h) is written once against the names
 * below and compiled three times: by kernels/x86/<family>_avx512.c with
 * SIMD_LEVEL 2 (16 lanes), kernels/x86/<family>_avx2.c with SIMD_LEVEL 1
 * (8 lanes) and kernels/<family>_scalar.c with SIMD_LEVEL 0 (1 lane, plain
 * C).  Every function a template defines is marked SIMD_FN so that it gets
 * the ISA's target attribute, and named with SIMD_NAME(x) (x_avx512, ...).
 *
 * Semantics every level shares:
 *   v_max(a, b) = a > b ? a : b  (so NaN in a yields b, as MAXPS does)
 *   v_min(a, b) = a < b ? a : b
 *   v_loadn/v_storen touch only the first n < VL lanes (the rest load 0,
 *   or `fill` with v_loadn_or).  v_lanes(lo, hi) names the lanes lo <= i
 *   < hi (0 <= lo, hi <= VL; none when hi <= lo); v_loadm(p, m) loads
 *   those lanes from p + i and 0 in the rest, reading no other lane.
 *   v_even2(a, b) / v_odd2(a, b): the even / odd lanes of the 2*VL floats
 *   a then b (a[0] a[2] .. b[VL-2] / a[1] a[3] .. b[VL-1]).
 *   v_fma/v_fnma: a*b + c, c - a*b, fused where the ISA has FMA (portable C:
 *   two roundings); v_fma1/v_fnma1 round once on every level.
 *   v_fms(a, b, c) = a*b - c rounded once (the exact error of a product).
 *   Masks (vm) come from comparisons and select with v_sel(m, t, f). */
#ifndef SMELT_KERNELS_SIMD_H
#define SMELT_KERNELS_SIMD_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifndef SIMD_LEVEL
#error "define SIMD_LEVEL (0 scalar, 1 avx2, 2 avx512) before including kernels/simd.h"
#endif

#if SIMD_LEVEL == 2
#include <immintrin.h>
#define SIMD_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define SIMD_NAME(x) x##_avx512
#define SIMD_ISA ISA_AVX512 /* the isa field of a per-ISA kernel table */
#define VL 16
typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vm;
#define SIMD_FN static inline SIMD_TARGET
SIMD_FN vf v_zero(void) { return _mm512_setzero_ps(); }
SIMD_FN vf v_set1(float x) { return _mm512_set1_ps(x); }
SIMD_FN vf v_load(const float *p) { return _mm512_loadu_ps(p); }
SIMD_FN void v_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
SIMD_FN vm v_firstn(int n) { return (vm)(n >= 16 ? 0xffff : ((1u << n) - 1)); }
SIMD_FN vf v_loadn(const float *p, int n) { return _mm512_maskz_loadu_ps(v_firstn(n), p); }
typedef __mmask16 vlm;
SIMD_FN vlm v_lanes(int lo, int hi) { return (vlm)(v_firstn(hi) & ~v_firstn(lo)); }
SIMD_FN vf v_loadm(const float *p, vlm m) { return _mm512_maskz_loadu_ps(m, p); }
SIMD_FN void v_storen(float *p, vf v, int n) { _mm512_mask_storeu_ps(p, v_firstn(n), v); }
SIMD_FN void v_storem(float *p, vf v, vlm m) { _mm512_mask_storeu_ps(p, m, v); }
SIMD_FN vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
SIMD_FN vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
SIMD_FN vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
SIMD_FN vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
SIMD_FN vf v_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a*b+c */
SIMD_FN vf v_fnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c-a*b */
SIMD_FN vf v_fma1(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* one rounding */
SIMD_FN vf v_fnma1(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }
SIMD_FN vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
SIMD_FN vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
SIMD_FN vf v_abs(vf a) { return _mm512_abs_ps(a); }
SIMD_FN vf v_sqrt(vf a) { return _mm512_sqrt_ps(a); }
SIMD_FN float v_hsum(vf a) { return _mm512_reduce_add_ps(a); }
SIMD_FN float v_hmax(vf a) { return _mm512_reduce_max_ps(a); }
/* sum of the lanes in double (the lanes widened first) */
SIMD_FN double v_hsum_d(vf a) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
  __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1));
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
SIMD_FN vm v_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
SIMD_FN vm v_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
SIMD_FN vm v_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
SIMD_FN vm v_isnan(vf a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
SIMD_FN vm vm_or(vm a, vm b) { return (vm)(a | b); }
SIMD_FN bool vm_any(vm a) { return a != 0; }
SIMD_FN vf v_sel(vm m, vf t, vf f) { return _mm512_mask_blend_ps(m, f, t); }
/* bit-level helpers for vmath */
SIMD_FN vf v_and(vf a, vf b) { return _mm512_and_ps(a, b); }
SIMD_FN vf v_or(vf a, vf b) { return _mm512_or_ps(a, b); }
SIMD_FN vf v_xor(vf a, vf b) { return _mm512_xor_ps(a, b); }
SIMD_FN vi v_round_i(vf a) { return _mm512_cvtps_epi32(a); } /* to nearest even */
SIMD_FN vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
SIMD_FN vf v_i2f(vi a) { return _mm512_cvtepi32_ps(a); }
SIMD_FN vi vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
SIMD_FN vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
SIMD_FN vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
SIMD_FN vi vi_slli23(vi a) { return _mm512_slli_epi32(a, 23); }
SIMD_FN vf v_as_f(vi a) { return _mm512_castsi512_ps(a); }
SIMD_FN vi v_as_i(vf a) { return _mm512_castps_si512(a); }
SIMD_FN vi vi_srai1(vi a) { return _mm512_srai_epi32(a, 1); }
SIMD_FN vf v_fms(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); } /* a*b-c, one rounding */
SIMD_FN vf v_loadn_or(const float *p, int n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), v_firstn(n), p);
}
SIMD_FN vf v_even2(vf a, vf b) {
  return _mm512_permutex2var_ps(a, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), b);
}
SIMD_FN vf v_odd2(vf a, vf b) {
  return _mm512_permutex2var_ps(a, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), b);
}

#elif SIMD_LEVEL == 1
#include <immintrin.h>
#define SIMD_TARGET __attribute__((target("avx2,fma")))
#define SIMD_NAME(x) x##_avx2
#define SIMD_ISA ISA_AVX2
#define VL 8
typedef __m256 vf;
typedef __m256i vi;
typedef __m256 vm;
#define SIMD_FN static inline SIMD_TARGET
SIMD_FN vf v_zero(void) { return _mm256_setzero_ps(); }
SIMD_FN vf v_set1(float x) { return _mm256_set1_ps(x); }
SIMD_FN vf v_load(const float *p) { return _mm256_loadu_ps(p); }
SIMD_FN void v_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
SIMD_FN __m256i v_firstn_i(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
SIMD_FN vf v_loadn(const float *p, int n) { return _mm256_maskload_ps(p, v_firstn_i(n)); }
typedef __m256i vlm;
SIMD_FN vlm v_lanes(int lo, int hi) { return _mm256_andnot_si256(v_firstn_i(lo), v_firstn_i(hi)); }
SIMD_FN vf v_loadm(const float *p, vlm m) { return _mm256_maskload_ps(p, m); }
SIMD_FN void v_storen(float *p, vf v, int n) { _mm256_maskstore_ps(p, v_firstn_i(n), v); }
SIMD_FN void v_storem(float *p, vf v, vlm m) { _mm256_maskstore_ps(p, m, v); }
SIMD_FN vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
SIMD_FN vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
SIMD_FN vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
SIMD_FN vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
SIMD_FN vf v_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
SIMD_FN vf v_fnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
SIMD_FN vf v_fma1(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
SIMD_FN vf v_fnma1(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
SIMD_FN vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
SIMD_FN vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
SIMD_FN vf v_abs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
SIMD_FN vf v_sqrt(vf a) { return _mm256_sqrt_ps(a); }
SIMD_FN float v_hsum(vf a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
SIMD_FN float v_hmax(vf a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
SIMD_FN double v_hsum_d(vf a) {
  __m256d d = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                            _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(d), _mm256_extractf128_pd(d, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
SIMD_FN vm v_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
SIMD_FN vm v_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
SIMD_FN vm v_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
SIMD_FN vm v_isnan(vf a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
SIMD_FN vm vm_or(vm a, vm b) { return _mm256_or_ps(a, b); }
SIMD_FN bool vm_any(vm a) { return _mm256_movemask_ps(a) != 0; }
SIMD_FN vf v_sel(vm m, vf t, vf f) { return _mm256_blendv_ps(f, t, m); }
SIMD_FN vf v_and(vf a, vf b) { return _mm256_and_ps(a, b); }
SIMD_FN vf v_or(vf a, vf b) { return _mm256_or_ps(a, b); }
SIMD_FN vf v_xor(vf a, vf b) { return _mm256_xor_ps(a, b); }
SIMD_FN vi v_round_i(vf a) { return _mm256_cvtps_epi32(a); }
SIMD_FN vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
SIMD_FN vf v_i2f(vi a) { return _mm256_cvtepi32_ps(a); }
SIMD_FN vi vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
SIMD_FN vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
SIMD_FN vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
SIMD_FN vi vi_slli23(vi a) { return _mm256_slli_epi32(a, 23); }
SIMD_FN vf v_as_f(vi a) { return _mm256_castsi256_ps(a); }
SIMD_FN vi v_as_i(vf a) { return _mm256_castps_si256(a); }
SIMD_FN vi vi_srai1(vi a) { return _mm256_srai_epi32(a, 1); }
SIMD_FN vf v_fms(vf a, vf b, vf c) { return _mm256_fmsub_ps(a, b, c); }
SIMD_FN vf v_loadn_or(const float *p, int n, float fill) {
  __m256i m = v_firstn_i(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
/* a0 a2 b0 b2 | a4 a6 b4 b6, then the middle 64-bit pairs swapped */
SIMD_FN vf v_even2(vf a, vf b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
}
SIMD_FN vf v_odd2(vf a, vf b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

#else /* portable C, one lane */
#define SIMD_TARGET
#define SIMD_NAME(x) x##_scalar
#define SIMD_ISA ISA_SCALAR
#define VL 1
typedef float vf;
typedef int32_t vi;
typedef bool vm;
#define SIMD_FN static inline
SIMD_FN vf v_zero(void) { return 0.f; }
SIMD_FN vf v_set1(float x) { return x; }
SIMD_FN vf v_load(const float *p) { return *p; }
SIMD_FN void v_store(float *p, vf v) { *p = v; }
SIMD_FN vf v_loadn(const float *p, int n) { return n > 0 ? *p : 0.f; }
typedef int vlm;
SIMD_FN vlm v_lanes(int lo, int hi) { return lo <= 0 && hi > 0; }
SIMD_FN vf v_loadm(const float *p, vlm m) { return m ? *p : 0.f; }
SIMD_FN vf v_even2(vf a, vf b) {
  (void)b;
  return a;
}
SIMD_FN vf v_odd2(vf a, vf b) {
  (void)a;
  return b;
}
SIMD_FN void v_storen(float *p, vf v, int n) {
  if (n > 0) *p = v;
}
SIMD_FN void v_storem(float *p, vf v, vlm m) {
  if (m) *p = v;
}
SIMD_FN vf v_add(vf a, vf b) { return a + b; }
SIMD_FN vf v_sub(vf a, vf b) { return a - b; }
SIMD_FN vf v_mul(vf a, vf b) { return a * b; }
SIMD_FN vf v_div(vf a, vf b) { return a / b; }
/* unfused (two roundings) where that is enough; v_fma1/v_fnma1 round once:
 * a*b is exact in double, so they round like a fused multiply-add (up to a
 * rare double rounding) without fmaf, a slow library call when the CPU has
 * no FMA.  The vmath error terms use those. */
SIMD_FN vf v_fma(vf a, vf b, vf c) { return a * b + c; }
SIMD_FN vf v_fnma(vf a, vf b, vf c) { return c - a * b; }
SIMD_FN vf v_fma1(vf a, vf b, vf c) { return (float)((double)a * (double)b + (double)c); }
SIMD_FN vf v_fnma1(vf a, vf b, vf c) { return (float)((double)c - (double)a * (double)b); }
SIMD_FN vf v_max(vf a, vf b) { return a > b ? a : b; }
SIMD_FN vf v_min(vf a, vf b) { return a < b ? a : b; }
SIMD_FN vf v_abs(vf a) { return fabsf(a); }
SIMD_FN vf v_sqrt(vf a) { return sqrtf(a); }
SIMD_FN float v_hsum(vf a) { return a; }
SIMD_FN float v_hmax(vf a) { return a; }
SIMD_FN double v_hsum_d(vf a) { return (double)a; }
SIMD_FN vm v_lt(vf a, vf b) { return a < b; }
SIMD_FN vm v_le(vf a, vf b) { return a <= b; }
SIMD_FN vm v_gt(vf a, vf b) { return a > b; }
SIMD_FN vm v_isnan(vf a) { return a != a; }
SIMD_FN vm vm_or(vm a, vm b) { return a || b; }
SIMD_FN bool vm_any(vm a) { return a; }
SIMD_FN vf v_sel(vm m, vf t, vf f) { return m ? t : f; }
SIMD_FN uint32_t v_bits(vf a) {
  uint32_t u;
  memcpy(&u, &a, 4);
  return u;
}
SIMD_FN vf v_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
SIMD_FN vf v_and(vf a, vf b) { return v_from_bits(v_bits(a) & v_bits(b)); }
SIMD_FN vf v_or(vf a, vf b) { return v_from_bits(v_bits(a) | v_bits(b)); }
SIMD_FN vf v_xor(vf a, vf b) { return v_from_bits(v_bits(a) ^ v_bits(b)); }
/* to nearest even by the 1.5 * 2^23 trick (|a| < 2^22; the kernels clamp
 * first): rintf/lrintf are library calls without SSE4.1 */
SIMD_FN vf v_round(vf a) {
  volatile float big = 12582912.0f; /* volatile: keep the add and subtract */
  return fabsf(a) < 4194304.0f ? (a + big) - big : a;
}
SIMD_FN vi v_round_i(vf a) {
  float r = v_round(a);
  return r == r && fabsf(r) < 2147483520.0f ? (vi)r : INT32_MIN; /* NaN: as cvtps2dq */
}
SIMD_FN vf v_i2f(vi a) { return (float)a; }
SIMD_FN vi vi_set1(int32_t x) { return x; }
SIMD_FN vi vi_add(vi a, vi b) { return (vi)((uint32_t)a + (uint32_t)b); }
SIMD_FN vi vi_sub(vi a, vi b) { return (vi)((uint32_t)a - (uint32_t)b); }
SIMD_FN vi vi_slli23(vi a) { return (vi)((uint32_t)a << 23); }
SIMD_FN vf v_as_f(vi a) { return v_from_bits((uint32_t)a); }
SIMD_FN vi v_as_i(vf a) { return (vi)v_bits(a); }
SIMD_FN vi vi_srai1(vi a) { return a >= 0 ? a / 2 : -((-(int64_t)a + 1) / 2); } /* floor(a/2) */
/* a*b - c with one rounding: a*b is exact in double */
SIMD_FN vf v_fms(vf a, vf b, vf c) { return (float)((double)a * (double)b - (double)c); }
SIMD_FN vf v_loadn_or(const float *p, int n, float fill) { return n > 0 ? *p : fill; }
#endif

#endif
