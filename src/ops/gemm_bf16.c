/* bf16 / fp16 weight GEMM nodes: 16-bit weights through the op cache and
 * the prep store, and the run (see gemm_bf16.h). */
#include "ops/gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "ops/gemm_prep.h"
#include "util/err.h"

bool gemm_bf16_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "bf16"); }
bool gemm_f16_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "fp16"); }

static void wb_view(int64_t K, int64_t N, const void *blob, void *out) { wbf16_weights_view(K, N, blob, out); }
static void wh_view(int64_t K, int64_t N, const void *blob, void *out) { wf16_weights_view(K, N, blob, out); }

static const gemm_prep_kind wb_kind = {"gemm-wbf16", 'h', sizeof(wbf16_weights), wbf16_weights_bytes,
                                       wbf16_pack_b, wb_view};
static const gemm_prep_kind wh_kind = {"gemm-wf16", 'f', sizeof(wbf16_weights), wbf16_weights_bytes,
                                       wf16_pack_b, wh_view};

const wbf16_weights *gemm_bf16_weights(op_ctx *c, int i, bool f16, bool trans_b, int64_t K, int64_t N) {
  return gemm_prep_weights(c, i, f16 ? &wh_kind : &wb_kind, trans_b, K, N);
}

smelt_status gemm_bf16_run(op_ctx *c, const wbf16_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C) {
  wbf16_args a = {.M = M, .A = A, .lda = lda, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                  .C = C, .ldc = w->N};
  return wbf16_run(c->pool, isa_active(), &a);
}

bool gemm_bf16dp_for(const ir_node *nd, int64_t M) {
  return M > WBF16_SMALL_M && gemm_bf16_marked(nd) && bf16dp_wanted(isa_active());
}

bool gemm_half_as_f32_for(const ir_node *nd, int64_t M) {
  return M > WBF16_SMALL_M && (gemm_bf16_marked(nd) || gemm_f16_marked(nd)) && !gemm_bf16dp_for(nd, M);
}

static void dp_view(int64_t K, int64_t N, const void *blob, void *out) { bf16dp_weights_view(K, N, blob, out); }

static const gemm_prep_kind dp_kind = {"gemm-bf16dp", 'd', sizeof(bf16dp_weights), bf16dp_weights_bytes,
                                       bf16dp_pack_b, dp_view};

const bf16dp_weights *gemm_bf16dp_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  return gemm_prep_weights(c, i, &dp_kind, trans_b, K, N);
}

smelt_status gemm_bf16dp_run(op_ctx *c, const bf16dp_weights *w, int64_t M, const float *A, int64_t lda,
                             float alpha, const float *bias, bool accumulate, float *C) {
  bf16dp_args a = {.M = M, .A = A, .lda = lda, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                   .C = C, .ldc = w->N};
  return bf16dp_run(c->pool, isa_active(), &a);
}
