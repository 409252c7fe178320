/* Tiled attention kernels for AVX2 + FMA: kernels/attention_impl.h at 8 lanes. */
#if defined(__x86_64__) || defined(__i386__)
#define SIMD_LEVEL 1
#include "kernels/simd.h"
#include "kernels/attention_impl.h"
#endif
