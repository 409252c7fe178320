/* Conv and pool micro-kernels in portable C (kernels/conv_impl.h at 1 lane),
 * and the per-ISA table lookup. */
#define SIMD_LEVEL 0
#include "kernels/simd.h"
#include "kernels/conv_impl.h"

const conv_kernels *conv_kernels_get(isa_level isa) {
  isa = isa_clamp(isa);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == ISA_AVX512) return &conv_kernels_avx512;
  if (isa == ISA_AVX2) return &conv_kernels_avx2;
#endif
  return &conv_kernels_scalar;
}
