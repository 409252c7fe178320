/* vmath for AVX2 + FMA: kernels/vmath_impl.h at 8 lanes. */
#if defined(__x86_64__) || defined(__i386__)
#define SIMD_LEVEL 1
#include "kernels/simd.h"
#include "kernels/vmath_impl.h"
#endif
