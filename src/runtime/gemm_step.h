/* GEMM steps: smelt.Gemm (with an in-tile activation) and MatMul with a
 * 2-D right operand, run by the plan itself on the GEMM library with every
 * size fixed at compile time — so max-autotune can choose the GEMM's
 * algorithm and threading per step, on the real shapes. */
#ifndef SMELT_RUNTIME_GEMM_STEP_H
#define SMELT_RUNTIME_GEMM_STEP_H

#include "ir/ir.h"
#include "kernels/gemm_kernels.h"
#include "ops/op.h" /* op_cache */

#define GEMM_STEP_VARIANTS 8 /* 4 algorithms x (pool, one thread) */

typedef struct gemm_step {
  gemm_params tmpl; /* everything but the pointers */
  bool has_bias, has_res;
  isa_level isa;
  const gemm_packed *packed_b; /* B packed ahead (owned by the op cache), or NULL */
} gemm_step;

/* Fills gs for node (concrete shapes) if it is such a product. */
bool gemm_step_make(const ir_graph *g, int node, gemm_step *gs);
/* Y = the node's result.  A, B, bias, res as the node's inputs 0-3 (bias and
 * res may be NULL when absent).  variant: see GEMM_STEP_VARIANTS (0 = what
 * the library picks, on the pool). */
/* B (input 1, a constant of the plan: its data) packed once, through the
 * node's op cache and the session's prep store (ops/gemm_weights.h); runs
 * then read it instead of packing B.  Nothing changes if it cannot be. */
void gemm_step_prepare(gemm_step *gs, op_cache *cache, smelt_pool *pool, const float *B);
smelt_status gemm_step_run(const gemm_step *gs, const float *A, const float *B, const float *bias,
                           const float *res, float *Y, smelt_pool *pool, int variant);
const char *gemm_step_variant_name(int variant);

#endif
