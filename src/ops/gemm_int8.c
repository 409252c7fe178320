/* int8 GEMM nodes: quantized weights through the op cache and the prep
 * store, and the run (see gemm_int8.h). */
#include "ops/gemm_int8.h"

#include <stdlib.h>
#include <string.h>

#include "ops/gemm_prep.h"
#include "util/err.h"

bool gemm_int8_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "int8"); }

static void q8_view(int64_t K, int64_t N, const void *blob, void *out) { qgemm_weights_view(K, N, blob, out); }

static const gemm_prep_kind q8_kind = {"gemm-u8s8", 'q', sizeof(qgemm_weights), qgemm_weights_bytes,
                                       qgemm_quantize_b, q8_view};

const qgemm_weights *gemm_int8_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  if (K > QGEMM_MAX_K) return NULL;
  return gemm_prep_weights(c, i, &q8_kind, trans_b, K, N);
}

smelt_status gemm_int8_run(op_ctx *c, const qgemm_weights *w, int64_t M, const float *A, int64_t lda,
                           float alpha, const float *bias, bool accumulate, float *C) {
  if (M <= 0) return SMELT_OK;
  size_t qa_bytes = (size_t)(M * w->Kp), bytes = qa_bytes + (sizeof(float) + sizeof(int32_t)) * (size_t)M;
  uint8_t *qa = tensor_data_alloc(bytes); /* Kp is a multiple of 4: sa and za are aligned */
  if (!qa) return err_nomem("int8 GEMM: quantized activations", bytes);
  float *sa = (float *)(qa + qa_bytes);
  int32_t *za = (int32_t *)(sa + M);
  qgemm_quantize_a(c->pool, isa_active(), M, w->K, A, lda, qa, sa, za);
  qgemm_args a = {.M = M, .qa = qa, .sa = sa, .za = za, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                  .C = C, .ldc = w->N};
  qgemm_run(c->pool, isa_active(), &a);
  tensor_data_free(qa);
  return SMELT_OK;
}
