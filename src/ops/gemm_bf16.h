/* The weight-only bf16 / fp16 path of the GEMM nodes that the autocast pass
 * marked with the attribute precision = "bf16" or "fp16" (passes/autocast.c;
 * session precision bf16 / fp16): the constant weight is rounded to bf16
 * (fp16) once per session
 * (kernels/wbf16.h) and kept in the node's op cache and the session's prep
 * store, like the int8 weights (gemm_int8.h); activations stay fp32. */
#ifndef SMELT_OPS_GEMM_BF16_H
#define SMELT_OPS_GEMM_BF16_H

#include "kernels/wbf16.h"
#include "ops/op.h"

/* The node carries precision = "bf16" / "fp16". */
bool gemm_bf16_marked(const ir_node *nd);
bool gemm_f16_marked(const ir_node *nd);

/* Input i as op(B) (K x N; trans_b: stored N x K) in bf16, or in fp16 when
 * the node is marked "fp16" (the result's fmt says which): from the op
 * cache or the prep store, else made now.  NULL (no error) when input i is
 * not a constant 2-D float32 weight, there is no cache, or no memory for
 * it: the caller then runs in fp32. */
const wbf16_weights *gemm_bf16_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N);

/* C (M x N, row stride N) = alpha * A w + bias (+ C when accumulate); A is
 * M x K with row stride lda. */
smelt_status gemm_bf16_run(op_ctx *c, const wbf16_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C);

#endif
