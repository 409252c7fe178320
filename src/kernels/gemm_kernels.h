/* Internal interface between the GEMM driver (gemm.c), the portable path
 * (gemm_scalar.c) and the per-ISA micro-kernels (x86/).  Not for op code:
 * ops call gemm_f32 / gemm_f32_ex. */
#ifndef SMELT_KERNELS_GEMM_KERNELS_H
#define SMELT_KERNELS_GEMM_KERNELS_H

#include "kernels/gemm.h"
#include "kernels/isa.h"

/* How a micro-kernel finishes its tile:  c = act(alpha*acc + beta*c + bias). */
typedef struct gemm_store {
  float alpha, beta;   /* beta: the caller's on the first K block, 1 after it */
  gemm_bias bias_kind; /* NONE and act NONE except on the last K block */
  const float *bias;   /* at the tile's first column (COL) or first row (ROW) */
  gemm_act act;
  float lo, hi;
} gemm_store;

/* C tile (mr x nr, mr <= MR, nr <= NR) from packed panels: a holds kc groups
 * of MR floats (rows of op(A), zero padded), b holds kc groups of NR floats. */
typedef void (*gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                int64_t ldc, int mr, int nr, const gemm_store *st);

/* Small-M path: columns [n0, n1) of C for all M rows, A and B read in place,
 * epilogue included.  M <= GEMM_SMALL_M. */
typedef void (*gemm_smallm_fn)(const gemm_params *p, int64_t n0, int64_t n1);
#define GEMM_SMALL_M 16

#if defined(__x86_64__) || defined(__i386__)
#define SMELT_X86 1
#define SMELT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define SMELT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

void f32_gemm_6x16_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                        int mr, int nr, const gemm_store *st);
void f32_gemm_14x32_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                           int mr, int nr, const gemm_store *st);
void f32_gemm_smallm_avx2(const gemm_params *p, int64_t n0, int64_t n1);
void f32_gemm_smallm_avx512(const gemm_params *p, int64_t n0, int64_t n1);
#endif

/* The portable path (the reference the fast paths are tested against).
 * Arguments already validated; alpha != 0, K > 0. */
void gemm_f32_scalar(smelt_pool *pool, const gemm_params *p);

/* gemm_f32_ex on a given ISA level (clamped to what the machine has): lets
 * tests and benchmarks run every path in one process without SMELT_ISA. */
smelt_status gemm_f32_isa(smelt_pool *pool, const gemm_params *p, isa_level isa);

/* The epilogue on one value (shared by the scalar paths and edge code). */
static inline float gemm_act_apply(float x, gemm_act act, float lo, float hi) {
  if (act == GEMM_ACT_RELU) return x < 0.f ? 0.f : x;
  if (act == GEMM_ACT_CLIP) return x < lo ? lo : (x > hi ? hi : x);
  return x;
}

#endif
