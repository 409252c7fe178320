/* The vector exp of kernels/vmath.h (vm_exp_k, vm_exp), for templates that
 * need it inline: vmath_impl.h and attention_impl.h.  Include after defining
 * SIMD_LEVEL and including kernels/simd.h (one level per translation unit). */
#ifndef SMELT_KERNELS_VMATH_EXP_H
#define SMELT_KERNELS_VMATH_EXP_H

#define VM_INLINE static __attribute__((always_inline)) inline SIMD_TARGET

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

#endif
