/* vmath in portable C (kernels/vmath_impl.h at 1 lane) and the per-ISA lookup. */
#define SIMD_LEVEL 0
#include "kernels/simd.h"
#include "kernels/vmath_impl.h"

const vmath_kernels *vmath_get(isa_level isa) {
  isa = isa_clamp(isa);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == ISA_AVX512) return &vmath_kernels_avx512;
  if (isa == ISA_AVX2) return &vmath_kernels_avx2;
#endif
  return &vmath_kernels_scalar;
}

const vmath_kernels *vmath_for_ops(void) {
  isa_level isa = isa_active();
  return isa == ISA_SCALAR ? NULL : vmath_get(isa);
}

const char *vmath_op_name(vmath_op op) {
  static const char *const names[VMATH_OP_COUNT] = {"exp", "erf", "tanh", "sigmoid", "gelu_erf",
                                                    "gelu_tanh", "silu"};
  return op >= 0 && op < VMATH_OP_COUNT ? names[op] : "?";
}
