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

/* A 32 x 32 block of fp32 results on four accumulator tiles (0: rows 0-15
 * x cols 0-15, 1: rows 0-15 x cols 16-31, 2 and 3 the same for rows
 * 16-31), both drivers' unit: zero them, add one 16-pair step (A rows 0-15
 * and 16-31 at a0 / a1, B columns 0-15 and 16-31 at b0 / b0 + 64 bytes,
 * each tile's rows `stride` bytes apart), store them row-major (ld floats). */
static inline void amx_block_zero(void) {
  TILE_ZERO(0);
  TILE_ZERO(1);
  TILE_ZERO(2);
  TILE_ZERO(3);
}
static inline void amx_block_step(const uint32_t *a0, const uint32_t *a1, long a_stride, const uint32_t *b0,
                                  long b_stride) {
  TILE_LOAD(4, a0, a_stride);
  TILE_LOAD(5, a1, a_stride);
  TILE_LOAD(6, b0, b_stride);
  TILE_LOAD(7, b0 + 16, b_stride);
  TILE_DP(0, 4, 6);
  TILE_DP(1, 4, 7);
  TILE_DP(2, 5, 6);
  TILE_DP(3, 5, 7);
}
static inline void amx_block_store(float *acc, int ld) {
  long stride = 4 * (long)ld;
  TILE_STORE(0, acc, stride);
  TILE_STORE(1, acc + 16, stride);
  TILE_STORE(2, acc + 16 * ld, stride);
  TILE_STORE(3, acc + 16 * ld + 16, stride);
}

#endif
