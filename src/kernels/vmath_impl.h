/* The vmath functions (kernels/vmath.h), written once against
 * kernels/simd.h.  Include after defining SIMD_LEVEL and including
 * kernels/simd.h. */
#include "kernels/vmath.h"

#define VM_INLINE static __attribute__((always_inline)) inline SIMD_TARGET

/* copysign(mag, sign) for mag >= 0 */
VM_INLINE vf SIMD_NAME(vm_withsign)(vf mag, vf sign) {
  return v_or(mag, v_and(sign, v_set1(-0.0f)));
}

/* ---- exp ---- */

/* exp(x) * 2^k for any x (0 <= k <= 24): Cody-Waite reduction, Cephes'
 * polynomial for (e^r - 1 - r) / r^2 on |r| <= ln2/2, and 2^(n+k) applied
 * as two normal factors so that a subnormal result rounds once.  k > 0
 * keeps a small result normal until a caller's last multiply. */
VM_INLINE vf SIMD_NAME(vm_exp_k)(vf x, int k) {
  /* past these bounds the result is 0 or inf for every k; NaN passes */
  x = v_max(v_set1(-121.0f), v_min(v_set1(89.0f), x));
  vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
  vf r = v_fnma(n, v_set1(0.693359375f), x);
  r = v_fnma(n, v_set1(-2.12194440e-4f), r);
  vf p = v_set1(1.9875691500e-4f);
  p = v_fma(p, r, v_set1(1.3981999507e-3f));
  p = v_fma(p, r, v_set1(8.3334519073e-3f));
  p = v_fma(p, r, v_set1(4.1665795894e-2f));
  p = v_fma(p, r, v_set1(1.6666665459e-1f));
  p = v_fma(p, r, v_set1(5.0000001201e-1f));
  p = v_add(v_fma(p, v_mul(r, r), r), v_set1(1.0f));
  vi ni = vi_add(v_round_i(n), vi_set1(k)), n1 = vi_srai1(ni), n2 = vi_sub(ni, n1);
  vf s1 = v_as_f(vi_slli23(vi_add(n1, vi_set1(127))));
  vf s2 = v_as_f(vi_slli23(vi_add(n2, vi_set1(127))));
  return v_mul(v_mul(p, s1), s2);
}

VM_INLINE vf SIMD_NAME(vm_exp)(vf x) { return SIMD_NAME(vm_exp_k)(x, 0); }

/* exp(-(hi + lo)) * 2^k for a small correction lo: e^-hi 2^k (1 - lo). */
VM_INLINE vf SIMD_NAME(vm_exp_neg2)(vf hi, vf lo, int k) {
  vf e = SIMD_NAME(vm_exp_k)(v_sub(v_zero(), hi), k);
  return v_fnma(e, lo, e);
}

/* ---- tanh, sigmoid ---- */

VM_INLINE vf SIMD_NAME(vm_tanh)(vf x) {
  vf ax = v_abs(x), z = v_mul(x, x);
  vf p = v_set1(-6.097092759e-03f);
  p = v_fma(p, z, v_set1(2.099749073e-02f));
  p = v_fma(p, z, v_set1(-5.385099351e-02f));
  p = v_fma(p, z, v_set1(1.333277076e-01f));
  p = v_fma(p, z, v_set1(-3.333332837e-01f));
  vf small = v_fma(v_mul(x, z), p, x);
  vf e = SIMD_NAME(vm_exp)(v_add(ax, ax));
  vf large = v_sub(v_set1(1.0f), v_div(v_set1(2.0f), v_add(e, v_set1(1.0f))));
  large = SIMD_NAME(vm_withsign)(large, x);
  return v_sel(v_lt(ax, v_set1(0.625f)), small, large);
}

/* x >= 0: 1/(1+e); x < 0: e/(1+e); e = exp(-|x|) <= 1 */
VM_INLINE vf SIMD_NAME(vm_sigmoid)(vf x) {
  vf e = SIMD_NAME(vm_exp)(v_sub(v_zero(), v_abs(x)));
  vf s = v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
  return v_sel(v_lt(x, v_zero()), v_mul(e, s), s);
}

/* x sigmoid(x) in one division: x / (1 + e) for x >= 0, x e / (1 + e) for
 * x < 0, e = exp(-|x|) <= 1; e carried as e 2^8 so that x e stays normal
 * until the last multiply where the result is subnormal (x < -87). */
VM_INLINE vf SIMD_NAME(vm_silu)(vf x) {
  vf ek = SIMD_NAME(vm_exp_k)(v_sub(v_zero(), v_abs(x)), 8);
  vf d = v_fma(ek, v_set1(1.0f / 256), v_set1(1.0f));
  vf y = v_div(v_sel(v_lt(x, v_zero()), v_mul(x, ek), x), d);
  return v_sel(v_lt(x, v_zero()), v_mul(y, v_set1(1.0f / 256)), y);
}

/* ---- erf, erfc ---- */

#define ERF_SPLIT 0.921875f

/* erf(x) / x = c0 + x^2 Q(x^2), |x| < ERF_SPLIT; c0 = C0_HI + C0_LO */
#define C0_HI 1.128379107e+00f
#define C0_LO 4.308622437e-08f
VM_INLINE vf SIMD_NAME(vm_erf_q)(vf z) {
  vf p = v_set1(-5.990956561e-04f);
  p = v_fma(p, z, v_set1(4.993204493e-03f));
  p = v_fma(p, z, v_set1(-2.676663734e-02f));
  p = v_fma(p, z, v_set1(1.128181666e-01f));
  return v_fma(p, z, v_set1(-3.761249483e-01f));
}

VM_INLINE vf SIMD_NAME(vm_erf_small)(vf x) {
  vf z = v_mul(x, x);
  return v_mul(x, v_fma(SIMD_NAME(vm_erf_q)(z), z, v_set1(C0_HI)));
}

/* 1 - erf(t), |t| < ERF_SPLIT: the leading term 1 - C0_HI t is rounded
 * once, since the difference (down to 0.19) would magnify earlier errors */
VM_INLINE vf SIMD_NAME(vm_erfc_small)(vf t) {
  vf z = v_mul(t, t);
  vf rest = v_fma(v_mul(t, z), SIMD_NAME(vm_erf_q)(z), v_mul(t, v_set1(C0_LO)));
  return v_sub(v_fnma1(v_set1(C0_HI), t, v_set1(1.0f)), rest);
}

/* erfc(t) * 2^k for t >= ERF_SPLIT given u = 1/t and t^2 = t2 + t2lo
 * exactly: exp(-t^2) * u * S(u), S fitted on u in [1/10.2, 1/ERF_SPLIT]
 * (beyond t = 10.2 the result is below the smallest float). */
VM_INLINE vf SIMD_NAME(vm_erfc_tail)(vf u, vf t2, vf t2lo, int k) {
  vf s = v_sub(u, v_set1(5.899999738e-01f));
  vf p = v_set1(7.227510959e-02f);
  p = v_fma(p, s, v_set1(-1.929331385e-02f));
  p = v_fma(p, s, v_set1(-8.315818757e-02f));
  p = v_fma(p, s, v_set1(7.956328243e-02f));
  p = v_fma(p, s, v_set1(-3.596047312e-02f));
  p = v_fma(p, s, v_set1(-4.740656354e-03f));
  p = v_fma(p, s, v_set1(5.073582381e-02f));
  p = v_fma(p, s, v_set1(-8.672359586e-02f));
  p = v_fma(p, s, v_set1(8.364970982e-02f));
  p = v_fma(p, s, v_set1(-9.463251568e-03f));
  p = v_fma(p, s, v_set1(-1.712163687e-01f));
  p = v_fma(p, s, v_set1(4.955255091e-01f));
  return v_mul(SIMD_NAME(vm_exp_neg2)(t2, t2lo, k), v_mul(u, p));
}

/* t = |x| capped where erfc is already 0 (keeps t^2 finite; NaN passes) */
VM_INLINE vf SIMD_NAME(vm_cap)(vf ax) { return v_min(v_set1(10.5f), ax); }

VM_INLINE vf SIMD_NAME(vm_erf)(vf x) {
  vf t = SIMD_NAME(vm_cap)(v_abs(x)), t2 = v_mul(t, t);
  vf tail = v_sub(v_set1(1.0f),
                  SIMD_NAME(vm_erfc_tail)(v_div(v_set1(1.0f), t), t2, v_fms(t, t, t2), 0));
  tail = SIMD_NAME(vm_withsign)(tail, x);
  return v_sel(v_lt(v_abs(x), v_set1(ERF_SPLIT)), SIMD_NAME(vm_erf_small)(x), tail);
}

/* ---- GELU ---- */

/* x >= 0: x/2 (1 + erf(t)); x < 0: x/2 erfc(t); t = |x|/sqrt2, t^2 = x^2/2
 * exact.  erfc is kept 2^24 larger until the last multiply, since it can
 * be subnormal while |x|/2 > 1. */
VM_INLINE vf SIMD_NAME(vm_gelu_erf)(vf x) {
  vf ax = v_min(v_set1(20.0f), v_abs(x)), t = v_mul(ax, v_set1(0.70710678118654752f));
  vf x2 = v_mul(ax, ax), x2lo = v_fms(ax, ax, x2);
  vf u = v_div(v_set1(1.41421356237309505f), ax); /* 1/t, rounded once */
  vf erfc24 = SIMD_NAME(vm_erfc_tail)(u, v_mul(x2, v_set1(0.5f)), v_mul(x2lo, v_set1(0.5f)), 24);
  vf erf_s = SIMD_NAME(vm_erf_small)(t);
  vm small = v_lt(t, v_set1(ERF_SPLIT));
  vf one_plus = v_sel(small, v_add(v_set1(1.0f), erf_s),
                      v_fnma(erfc24, v_set1(0x1p-24f), v_set1(2.0f)));
  vf h = v_mul(x, v_set1(0.5f));
  vf neg = v_sel(small, v_mul(h, SIMD_NAME(vm_erfc_small)(t)),
                 v_mul(v_mul(h, erfc24), v_set1(0x1p-24f)));
  return v_sel(v_lt(x, v_zero()), neg, v_mul(h, one_plus));
}

/* x * sigmoid(y), y = 2u = K x (1 + c x^2) with K = 2 sqrt(2/pi), c = 0.044715,
 * evaluated as y_hi + y_lo (each constant and product carried in two floats).
 * For x < 0 the result is x e s with e = exp(-|y|) near the subnormal range
 * while |x| > 1: e is kept 2^24 larger until the last multiply. */
VM_INLINE vf SIMD_NAME(vm_gelu_tanh)(vf x) {
  const vf c_hi = v_set1(4.47149984538555145264e-02f), c_lo = v_set1(1.546144435e-09f);
  const vf k_hi = v_set1(1.59576916694641113281e+00f), k_lo = v_set1(-4.534068054e-08f);
  vf xc = v_max(v_set1(-40.0f), v_min(v_set1(40.0f), x)); /* beyond: sigmoid is 0 or 1 */
  vf x2 = v_mul(xc, xc), x2lo = v_fms(xc, xc, x2);
  vf w = v_fma(c_hi, x2, v_set1(1.0f));
  vf wlo = v_fma1(c_hi, x2, v_sub(v_set1(1.0f), w)); /* exact error of w */
  wlo = v_fma(c_hi, x2lo, v_fma(c_lo, x2, wlo));
  vf p = v_mul(xc, w), plo = v_fma(xc, wlo, v_fms(xc, w, p));
  vf y = v_mul(k_hi, p), ylo = v_fma(k_hi, plo, v_fma(k_lo, p, v_fms(k_hi, p, y)));
  vf ay = v_abs(y), aylo = v_xor(ylo, v_and(y, v_set1(-0.0f))); /* |y| = ay + aylo */
  vf e24 = SIMD_NAME(vm_exp_neg2)(ay, aylo, 24), e = v_mul(e24, v_set1(0x1p-24f));
  vf s = v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
  vf neg = v_mul(v_mul(v_mul(x, s), e24), v_set1(0x1p-24f));
  return v_sel(v_lt(x, v_zero()), neg, v_mul(x, s));
}

/* ---- array functions ---- */

#define VM_ARRAY(NAME, FN)                                                              \
  static SIMD_TARGET void SIMD_NAME(NAME)(const float *x, float *y, int64_t n) {        \
    int64_t i = 0;                                                                      \
    for (; i + VL <= n; i += VL) v_store(y + i, SIMD_NAME(FN)(v_load(x + i)));          \
    if (i < n) v_storen(y + i, SIMD_NAME(FN)(v_loadn(x + i, (int)(n - i))), (int)(n - i)); \
  }
VM_ARRAY(vmath_exp, vm_exp)
VM_ARRAY(vmath_erf, vm_erf)
VM_ARRAY(vmath_tanh, vm_tanh)
VM_ARRAY(vmath_sigmoid, vm_sigmoid)
VM_ARRAY(vmath_gelu_erf, vm_gelu_erf)
VM_ARRAY(vmath_gelu_tanh, vm_gelu_tanh)
VM_ARRAY(vmath_silu, vm_silu)

/* ---- rows ---- */

/* sum over x[0..n) in double from f32 partials over blocks of 256 */
VM_INLINE double SIMD_NAME(vm_sum)(const float *x, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 256) {
    int64_t e = b + 256 < n ? b + 256 : n, j = b;
    vf a = v_zero();
    for (; j + VL <= e; j += VL) a = v_add(a, v_load(x + j));
    if (j < e) a = v_add(a, v_loadn(x + j, (int)(e - j)));
    total += v_hsum_d(a);
  }
  return total;
}

static SIMD_TARGET float SIMD_NAME(row_max)(const float *x, int64_t n);

static SIMD_TARGET void SIMD_NAME(softmax_row)(const float *x, float *y, int64_t n) {
  vf vm = v_set1(SIMD_NAME(row_max)(x, n));
  int64_t i;
  double sum = 0;
  for (int64_t b = 0; b < n; b += 256) { /* exp, store and partial sums in one pass */
    int64_t e = b + 256 < n ? b + 256 : n, j = b;
    vf a = v_zero();
    for (; j + VL <= e; j += VL) {
      vf t = SIMD_NAME(vm_exp)(v_sub(v_load(x + j), vm));
      v_store(y + j, t);
      a = v_add(a, t);
    }
    if (j < e) {
      int r = (int)(e - j);
      vf t = SIMD_NAME(vm_exp)(v_sub(v_loadn(x + j, r), vm));
      v_storen(y + j, t, r);
      a = v_add(a, v_loadn(y + j, r));
    }
    sum += v_hsum_d(a);
  }
  vf inv = v_set1((float)(1.0 / sum));
  for (i = 0; i + VL <= n; i += VL) v_store(y + i, v_mul(v_load(y + i), inv));
  if (i < n) v_storen(y + i, v_mul(v_loadn(y + i, (int)(n - i)), inv), (int)(n - i));
}

static SIMD_TARGET void SIMD_NAME(layernorm_row)(const float *x, float *y, int64_t n,
                                                 const float *scale, const float *bias,
                                                 float eps, float *mean_out, float *inv_out) {
  double mean = SIMD_NAME(vm_sum)(x, n) / (double)n;
  vf mf = v_set1((float)mean);
  double var = 0;
  for (int64_t b = 0; b < n; b += 256) {
    int64_t e = b + 256 < n ? b + 256 : n, j = b;
    vf a = v_zero();
    for (; j + VL <= e; j += VL) {
      vf d = v_sub(v_load(x + j), mf);
      a = v_fma(d, d, a);
    }
    if (j < e) { /* lanes past the end load the mean: they add 0 */
      vf d = v_sub(v_loadn_or(x + j, (int)(e - j), (float)mean), mf);
      a = v_fma(d, d, a);
    }
    var += v_hsum_d(a);
  }
  var /= (double)n;
  double inv = 1.0 / sqrt(var + (double)eps);
  if (mean_out) *mean_out = (float)mean;
  if (inv_out) *inv_out = (float)inv;
  vf iv = v_set1((float)inv);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf t = v_mul(v_sub(v_load(x + i), mf), iv);
    t = bias ? v_fma(t, v_load(scale + i), v_load(bias + i)) : v_mul(t, v_load(scale + i));
    v_store(y + i, t);
  }
  if (i < n) {
    int r = (int)(n - i);
    vf t = v_mul(v_sub(v_loadn(x + i, r), mf), iv);
    t = bias ? v_fma(t, v_loadn(scale + i, r), v_loadn(bias + i, r)) : v_mul(t, v_loadn(scale + i, r));
    v_storen(y + i, t, r);
  }
}

static SIMD_TARGET float SIMD_NAME(row_max)(const float *x, int64_t n) {
  vf mv = v_set1(-INFINITY);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) mv = v_max(v_load(x + i), mv);
  if (i < n) mv = v_max(v_loadn_or(x + i, (int)(n - i), -INFINITY), mv);
  return v_hmax(mv);
}

static SIMD_TARGET float SIMD_NAME(exp_shift_sum)(float *x, int64_t n, float m) {
  vf vm = v_set1(m), a = v_zero();
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf t = SIMD_NAME(vm_exp)(v_sub(v_load(x + i), vm));
    v_store(x + i, t);
    a = v_add(a, t);
  }
  if (i < n) {
    int r = (int)(n - i);
    vf t = SIMD_NAME(vm_exp)(v_sub(v_loadn(x + i, r), vm));
    v_storen(x + i, t, r);
    a = v_add(a, v_loadn(x + i, r));
  }
  return v_hsum(a);
}

const vmath_kernels SIMD_NAME(vmath_kernels) = {
    .isa = SIMD_ISA,
    .op = {[VMATH_EXP] = SIMD_NAME(vmath_exp), [VMATH_ERF] = SIMD_NAME(vmath_erf),
           [VMATH_TANH] = SIMD_NAME(vmath_tanh), [VMATH_SIGMOID] = SIMD_NAME(vmath_sigmoid),
           [VMATH_GELU_ERF] = SIMD_NAME(vmath_gelu_erf),
           [VMATH_GELU_TANH] = SIMD_NAME(vmath_gelu_tanh), [VMATH_SILU] = SIMD_NAME(vmath_silu)},
    .softmax_row = SIMD_NAME(softmax_row),
    .layernorm_row = SIMD_NAME(layernorm_row),
    .row_max = SIMD_NAME(row_max),
    .exp_shift_sum = SIMD_NAME(exp_shift_sum),
};
