/* vmath for AVX-512 (F, BW, VL, DQ): kernels/vmath_impl.h at 16 lanes. */
#if defined(__x86_64__) || defined(__i386__)
#define SIMD_LEVEL 2
#include "kernels/simd.h"
#include "kernels/vmath_impl.h"
#endif
