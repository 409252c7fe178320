/* The int4 weight path of the GEMM nodes that the autocast pass marked with
 * the attribute precision = "int4" (passes/autocast.c; session precision
 * int4): the constant weight is quantized once per session to int4 groups
 * of 32 along K with an fp32 scale each (kernels/q4gemm.h) and kept in the
 * node's op cache and the session's prep store, like the int8 and bf16
 * weights (gemm_int8.h, gemm_bf16.h); activations are quantized per row in
 * int8 groups of 32 on every run (few rows) or stay fp32 against a
 * dequantized panel (many rows). */
#ifndef SMELT_OPS_GEMM_INT4_H
#define SMELT_OPS_GEMM_INT4_H

#include "kernels/q4gemm.h"
#include "ops/op.h"

/* The node carries precision = "int4". */
bool gemm_int4_marked(const ir_node *nd);

/* Input i as op(B) (K x N; trans_b: stored N x K) in int4: from the op
 * cache or the prep store, else made now.  NULL (no error) when input i is
 * not a constant 2-D float32 weight, there is no cache, or no memory for
 * it: the caller then runs in fp32. */
const q4gemm_weights *gemm_int4_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N);

/* C (M x N, row stride N) = alpha * A w + bias (+ C when accumulate); A is
 * M x K with row stride lda. */
smelt_status gemm_int4_run(op_ctx *c, const q4gemm_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C);

#endif
