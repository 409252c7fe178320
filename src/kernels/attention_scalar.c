/* Tiled attention kernels in portable C (kernels/attention_impl.h at 1 lane)
 * and the per-ISA lookup. */
#define SIMD_LEVEL 0
#include "kernels/simd.h"
#include "kernels/attention_impl.h"

const attn_tile_kernels *attn_tile_get(isa_level isa) {
  isa = isa_clamp(isa);
#if defined(__x86_64__) || defined(__i386__)
  if (isa == ISA_AVX512) return &attn_tile_avx512;
  if (isa == ISA_AVX2) return &attn_tile_avx2;
#endif
  return &attn_tile_scalar;
}
