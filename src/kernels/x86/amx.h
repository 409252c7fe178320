/* Intel AMX tile primitives shared by the AMX drivers (x86/bf16dp_amx.c,
 * x86/conv_bf16_amx.c): the palette-1 configuration with tiles 0-7 of 16
 * rows x 64 bytes, and the instructions as inline asm with their memory
 * made visible to the compiler.  Include only where AMX_BUILT is 1; run
 * only where bf16dp_amx_hw says so (kernels/bf16dp.h). */
#ifndef SMELT_KERNELS_X86_AMX_H
#define SMELT_KERNELS_X86_AMX_H

#include <stdint.h>
#include <string.h>

/* The tile configuration (palette 1). */
typedef struct __attribute__((aligned(64))) amx_cfg {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_cfg;

/* Tiles 0-7 of 16 rows x 64 bytes, loaded into the tile unit; pair with
 * AMX_RELEASE when the thread's tile work is done. */
static inline void amx_load_config(void) {
  amx_cfg c;
  memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

#define TILE_LOAD(t, base, stride) \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) : "memory")
#define TILE_STORE(t, base, stride) \
  __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride)) : "memory")
#define TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
/* tmm(dst) += tmm(a) x tmm(b), bf16 pairs into fp32 */
#define TILE_DP(dst, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #dst ::)
#define AMX_RELEASE() __asm__ volatile("tilerelease" ::)

#endif
