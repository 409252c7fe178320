/* int4 GEMM nodes: int4 weights through the op cache and the prep store,
 * and the run (see gemm_int4.h). */
#include "ops/gemm_int4.h"

#include <string.h>

#include "ops/gemm_prep.h"

bool gemm_int4_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "int4"); }

static size_t q4_bytes(int64_t K, int64_t N) { return q4gemm_weights_bytes(K, N, false); }
static void q4_view(int64_t K, int64_t N, const void *blob, void *out) { q4gemm_weights_view(K, N, false, blob, out); }

static const gemm_prep_kind q4_kind = {"gemm-q4s", '4', sizeof(q4gemm_weights), q4_bytes, q4gemm_quantize_b,
                                       q4_view};

const q4gemm_weights *gemm_int4_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  return gemm_prep_weights(c, i, &q4_kind, trans_b, K, N);
}

smelt_status gemm_int4_run(op_ctx *c, const q4gemm_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C) {
  q4gemm_args a = {.M = M, .A = A, .lda = lda, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                   .C = C, .ldc = w->N};
  return q4gemm_run(c->pool, isa_active(), &a);
}
