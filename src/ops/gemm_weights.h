/* Constant GEMM operands packed once per session (kernels/gemm.h,
 * gemm_pack_b_prepare / gemm_pack_a_prepare): the ops that multiply by a
 * weight (MatMul, Gemm, smelt.Gemm, Conv through im2col) and the compiled
 * plan's GEMM steps ask here for the weight's packed form.  It comes from
 * the node's op cache (ops/op_cache.h), else from the session's store
 * on disk (op_cache.store: mapped, not packed again), else it is packed
 * now and kept in both.  The cache owns the result.
 *
 * NULL (and no error) when there is nothing to use: no cache (an op run
 * outside a session), no packed path on this ISA, or no memory for it --
 * the GEMM then packs the operand on every call, as without this. */
#ifndef SMELT_OPS_GEMM_WEIGHTS_H
#define SMELT_OPS_GEMM_WEIGHTS_H

#include "kernels/gemm.h"
#include "ops/op.h"
#include "ops/op_cache.h" /* op_input_is_constant */

/* op(B): K x N; B is N x K (row stride K) with trans_b, else K x N (row stride N). */
const gemm_packed *gemm_weights_b(op_cache *cache, smelt_pool *pool, bool trans_b, int64_t K, int64_t N,
                                  const float *B);
/* op(A): M x K; A is K x M with trans_a, else M x K (dense rows). */
const gemm_packed *gemm_weights_a(op_cache *cache, smelt_pool *pool, bool trans_a, int64_t M, int64_t K,
                                  const float *A);

/* The node's input i as a GEMM's B, packed, when it is a constant 2-D
 * float32 weight (op_input_is_constant), else NULL. */
const gemm_packed *gemm_weights_b_input(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N);

/* The prepare functions (op.h, op_prepare_fn) of the ops whose weight is
 * B: they pack it when the plan is made (matmul.c, fused_gemm.c). */
smelt_status matmul_op_prepare(op_ctx *c);
smelt_status gemm_op_prepare(op_ctx *c);
smelt_status fused_gemm_op_prepare(op_ctx *c);

#endif
