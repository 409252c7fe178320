/* GEMM steps: smelt.Gemm (with an in-tile activation) and MatMul with a
 * 2-D right operand, run by the plan itself on the GEMM library with every
 * size fixed at compile time — so max-autotune can choose the GEMM's
 * algorithm and threading per step, on the real shapes. */
#ifndef SMELT_RUNTIME_GEMM_STEP_H
#define SMELT_RUNTIME_GEMM_STEP_H

#include "ir/ir.h"
#include "kernels/gemm_kernels.h"
#include "ops/fused_act.h"
#include "ops/op.h" /* op_cache */
#include "runtime/gemm_registry.h"

#define GEMM_STEP_VARIANTS 8 /* 4 algorithms x (pool, one thread) */

typedef struct gemm_step {
  gemm_params tmpl; /* everything but the pointers (the f32 kernel's form) */
  bool has_bias, has_res;
  isa_level isa;
  const gemm_packed *packed_b; /* f32: B packed ahead (owned by the op cache), or NULL */
  smelt_dtype dt_a, dt_b, dt_y; /* element types from the IR */
  ir_quant bq;                  /* B's quantized element type (ops/gemm_quant.h); scheme NONE: dt_b */
  gemm_wform w;                 /* B's form: from bq (int8, int4), else the node's mark (bf16, fp16) */
  fused_act act;                /* the node's activation (reduced forms apply it after the GEMM) */
  const gemm_kernel *kern;      /* chosen from the registry (gemm_registry.h) */
} gemm_step;

/* Fills gs for node (concrete shapes) if it is such a product and the
 * registry has a kernel for its element types, weight form, the ISA and its
 * shape class. */
bool gemm_step_make(const ir_graph *g, int node, gemm_step *gs);
/* B (io->B: input 1, a constant of the plan) made ready once through the
 * node's op cache and the session's prep store: packed (f32,
 * ops/gemm_weights.h) or converted to the step's weight form (int8, bf16,
 * int4: ops/gemm_int8.h ...); runs then read it.  Nothing changes if it
 * cannot be. */
void gemm_step_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool);
/* io->Y = the node's result.  A, B, bias, res as the node's inputs 0-3
 * (bias and res NULL when absent).  variant: see GEMM_STEP_VARIANTS (0 =
 * what the library picks, on the pool). */
smelt_status gemm_step_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant);
const char *gemm_step_variant_name(int variant);

#endif
