/* Tiled attention kernels for AVX-512: kernels/attention_impl.h at 16 lanes. */
#if defined(__x86_64__) || defined(__i386__)
#define SIMD_LEVEL 2
#include "kernels/simd.h"
#include "kernels/attention_impl.h"
#endif
