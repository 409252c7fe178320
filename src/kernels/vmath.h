/* Vectorized f32 math: exp, erf, tanh, sigmoid, SiLU and GELU (erf and
 * tanh forms) over arrays, and the Softmax / LayerNormalization row kernels built
 * on them.  One template (kernels/vmath_impl.h) compiled for AVX-512, AVX2
 * and portable C; every path uses the same polynomials.
 *
 * Accuracy, measured against the functions evaluated in double (libm) on
 * 1.02e7 floats (every 1024th bit pattern over the whole float line, both
 * signs, plus 6e6 uniform on [-20, 20]) and the special values
 * (tests/unit/test_vmath.c, which enforces the bound in brackets), in ulps
 * of the float result (the spacing at the exact value; subnormal results
 * count subnormal ulps).  AVX-512 and AVX2 give the same numbers; the
 * portable path (unfused multiply-adds) is within 0.15 ulp of them:
 *
 *   exp 1.00 [1.5]   erf 2.46 [3]   tanh 1.30 [2]   sigmoid 2.73 [3]
 *   gelu (erf) 4.50 [5]   gelu (tanh) 3.51 [4]   silu 3.34 [4]
 *
 * NaN in gives NaN out; infinities give the limits libm gives (the GELUs
 * give NaN at -inf, as x/2 (1 + erf(x/sqrt2)) does).
 *
 * How: exp reduces x = n ln2 + r (Cody-Waite), evaluates Cephes' degree-6
 * polynomial on r and scales by 2^n in two steps (so subnormal results are
 * right).  tanh uses an odd polynomial below 0.625 and 1 - 2/(e^{2|x|}+1)
 * above.  sigmoid is 1/(1+e) or e/(1+e) with e = exp(-|x|) (no overflow,
 * full relative accuracy in both tails); SiLU is x/(1+e) or x e/(1+e), one
 * division instead of sigmoid's and a multiply (x e kept normal by carrying
 * e 2^8 to the last multiply).  erf uses an odd polynomial below
 * 0.921875 and 1 - erfc above, erfc(t) = exp(-t^2) (1/t) S(1/t) with t^2
 * split exactly (FMA) into hi + lo.  GELU(erf) uses erfc directly for x < 0
 * (no cancellation), with x^2/2 exact; GELU(tanh) is x sigmoid(2u),
 * u = sqrt(2/pi) (x + 0.044715 x^3), with 2u carried in two floats, since
 * a rounding of u shows up multiplied by |2u| in the result. */
#ifndef SMELT_KERNELS_VMATH_H
#define SMELT_KERNELS_VMATH_H

#include <stdint.h>

#include "kernels/isa.h"

typedef enum vmath_op {
  VMATH_EXP = 0,
  VMATH_ERF,
  VMATH_TANH,
  VMATH_SIGMOID,
  VMATH_GELU_ERF,  /* 0.5 x (1 + erf(x / sqrt 2)) */
  VMATH_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
  VMATH_SILU,      /* x sigmoid(x) */
  VMATH_OP_COUNT
} vmath_op;

/* y[i] = f(x[i]) for i < n; y may be x. */
typedef void (*vmath_fn)(const float *x, float *y, int64_t n);

typedef struct vmath_kernels {
  isa_level isa;
  vmath_fn op[VMATH_OP_COUNT];
  /* y = softmax(x) over n > 0 values (max-subtracted, sum in double); y may be x */
  void (*softmax_row)(const float *x, float *y, int64_t n);
  /* y = (x - mean) / sqrt(var + eps) * scale + bias over n > 0 values (mean
   * and variance in double; bias may be NULL); mean/invstd receive the
   * statistics when not NULL.  y may be x. */
  void (*layernorm_row)(const float *x, float *y, int64_t n, const float *scale,
                        const float *bias, float eps, float *mean, float *invstd);
  /* Softmax pieces for callers that keep a running max (flash attention):
   * the max of x[0..n) (-inf when n is 0; NaN values are passed over, the
   * first maximum kept), and x[j] = exp(x[j] - m) in place, returning the
   * f32 sum of the results. */
  float (*row_max)(const float *x, int64_t n);
  float (*exp_shift_sum)(float *x, int64_t n, float m);
} vmath_kernels;

/* The kernels for an ISA level, clamped to what the machine has. */
const vmath_kernels *vmath_get(isa_level isa);
/* What the ops use: the active level's kernels, or NULL on the portable
 * path, where libm's scalar functions are faster than vmath's one-lane
 * build (exp 1.5 vs 6 ns): the ops then keep their libm loops. */
const vmath_kernels *vmath_for_ops(void);
const char *vmath_op_name(vmath_op op);

extern const vmath_kernels vmath_kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const vmath_kernels vmath_kernels_avx2;
extern const vmath_kernels vmath_kernels_avx512;
#endif

#endif
