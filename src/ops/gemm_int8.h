/* The int8 path of the GEMM nodes that the autocast pass marked with the
 * attribute precision = "int8" (passes/autocast.c; session precision int8):
 * the constant weight is quantized once per session (kernels/qgemm.h) and
 * kept in the node's op cache and the session's prep store, like packed
 * fp32 weights (gemm_weights.h); A is quantized per row on every run. */
#ifndef SMELT_OPS_GEMM_INT8_H
#define SMELT_OPS_GEMM_INT8_H

#include "kernels/qgemm.h"
#include "ops/op.h"

/* The node carries precision = "int8". */
bool gemm_int8_marked(const ir_node *nd);

/* Input i as op(B) (K x N; trans_b: stored N x K), quantized: from the op
 * cache or the prep store, else made now (outside the run's stop control:
 * it outlives the run).  NULL (no error) when input i is not a constant
 * 2-D float32 weight, K is past QGEMM_MAX_K, there is no cache, or no
 * memory for it: the caller then runs in fp32. */
const qgemm_weights *gemm_int8_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N);

/* C (M x N, row stride N) = alpha * A w + bias (+ C when accumulate); A is
 * M x K with row stride lda.  SMELT_ERR_NOMEM (nothing written) when the
 * quantized copy of A does not fit. */
smelt_status gemm_int8_run(op_ctx *c, const qgemm_weights *w, int64_t M, const float *A, int64_t lda,
                           float alpha, const float *bias, bool accumulate, float *C);

#endif
