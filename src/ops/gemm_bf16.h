/* The weight-only bf16 / fp16 path of the GEMM nodes that the autocast pass
 * marked with the attribute precision = "bf16" or "fp16" (passes/autocast.c;
 * session precision bf16 / fp16): the constant weight is rounded to bf16
 * (fp16) once per session
 * (kernels/wbf16.h) and kept in the node's op cache and the session's prep
 * store, like the int8 weights (gemm_int8.h); activations stay fp32. */
#ifndef SMELT_OPS_GEMM_BF16_H
#define SMELT_OPS_GEMM_BF16_H

#include "kernels/bf16dp.h"
#include "kernels/wbf16.h"
#include "ops/op.h"

/* The node carries precision = "bf16" / "fp16". */
bool gemm_bf16_marked(const ir_node *nd);
bool gemm_f16_marked(const ir_node *nd);

/* Input i as op(B) (K x N; trans_b: stored N x K) in bf16, or in fp16 when
 * f16 (the node's mark, or B's declared element type: ops/gemm_quant.h; the
 * result's fmt says which): from the op cache or the prep store, else made
 * now.  NULL (no error) when input i is not a constant 2-D float32 weight,
 * there is no cache, or no memory for it: the caller then runs in fp32. */
const wbf16_weights *gemm_bf16_weights(op_ctx *c, int i, bool f16, bool trans_b, int64_t K, int64_t N);

/* C (M x N, row stride N) = alpha * A w + bias (+ C when accumulate); A is
 * M x K with row stride lda. */
smelt_status gemm_bf16_run(op_ctx *c, const wbf16_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C);

/* bf16 compute (kernels/bf16dp.h): a node marked "bf16" whose product has
 * more than WBF16_SMALL_M rows runs with A rounded to bf16 too (vdpbf16ps)
 * where bf16dp_wanted(isa_active()) says so; fewer rows (decode) keep the
 * weight-only kernel above.  The weight, packed in pairs, is a block of its
 * own in the op cache and the prep store ("gemm-bf16dp"): a session that
 * runs both kinds of products (prefill and decode) keeps both forms. */
bool gemm_bf16dp_for(const ir_node *nd, int64_t M);
/* A node marked "bf16" or "fp16" whose product has more than WBF16_SMALL_M
 * rows and no bf16 arithmetic to run on (not gemm_bf16dp_for): the 16-bit
 * weight saves nothing there (the product is compute-bound) and widening it
 * per call cost more than the product (bert_base at 2 threads: 169 ms against
 * fp32's 108, SMELT_BF16DP=0 on a Zen 4), so it runs the fp32 GEMM over the
 * fp32 weight packed once, as an fp32 node; fewer rows (decode) keep the
 * 16-bit weight, read at half the bytes. */
bool gemm_half_as_f32_for(const ir_node *nd, int64_t M);
/* As gemm_bf16_weights, in bf16dp's pair layout. */
const bf16dp_weights *gemm_bf16dp_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N);
/* As gemm_bf16_run. */
smelt_status gemm_bf16dp_run(op_ctx *c, const bf16dp_weights *w, int64_t M, const float *A, int64_t lda,
                             float alpha, const float *bias, bool accumulate, float *C);

#endif
