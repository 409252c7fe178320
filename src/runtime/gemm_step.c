/* GEMM steps (see gemm_step.h).  The semantics are smelt.Gemm's
 * (src/ops/fused_gemm.c) and MatMul's for these forms.
 *
 * Complexity: O(1) per node. */
#include "runtime/gemm_step.h"

#include <string.h>

#include "ops/fused_act.h"
#include "ops/gemm_bf16.h"
#include "ops/gemm_int4.h"
#include "ops/gemm_int8.h"
#include "ops/gemm_weights.h"
#include "util/err.h"

static const ir_value *in_val(const ir_graph *g, const ir_node *nd, int i) {
  return i < nd->n_inputs && nd->inputs[i] >= 0 ? &g->values[nd->inputs[i]] : NULL;
}

static bool concrete_f32(const ir_value *v) {
  if (!v || v->dtype != SMELT_F32 || v->rank < 0) return false;
  for (int d = 0; d < v->rank; d++)
    if (!dim_known(v->dims[d])) return false;
  return true;
}

bool gemm_step_make(const ir_graph *g, int node, gemm_step *gs) {
  const ir_node *nd = &g->nodes[node];
  bool fused = !strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Gemm");
  bool matmul = (!*nd->domain || !strcmp(nd->domain, "ai.onnx")) && !strcmp(nd->op_type, "MatMul");
  if ((!fused && !matmul) || nd->n_outputs != 1 || nd->outputs[0] < 0) return false;
  if (gemm_int8_marked(nd) || gemm_bf16_marked(nd) || gemm_int4_marked(nd))
    return false; /* int8 / bf16 / int4: the op's own kernels */
  const ir_value *a = in_val(g, nd, 0), *b = in_val(g, nd, 1), *bias = in_val(g, nd, 2), *res = in_val(g, nd, 3);
  const ir_value *y = &g->values[nd->outputs[0]];
  if (!concrete_f32(a) || !concrete_f32(b) || !concrete_f32(y) || b->rank != 2 || a->rank < 2) return false;
  if (matmul && nd->n_inputs != 2) return false;
  memset(gs, 0, sizeof *gs);
  gemm_params *p = &gs->tmpl;
  *p = gemm_params_default();
  if (fused) {
    fused_act act;
    if (fused_act_read(nd, &act)) {
      err_clear();
      return false;
    }
    if (!fused_act_in_gemm(&act, &p->epilogue)) return false;
    p->trans_a = ir_attr_int(nd, "transA", 0) != 0;
    p->trans_b = ir_attr_int(nd, "transB", 0) != 0;
    p->alpha = ir_attr_float(nd, "alpha", 1.f);
    if (p->trans_a && a->rank != 2) return false;
    if ((bias && !concrete_f32(bias)) || (res && !concrete_f32(res))) return false;
  }
  p->K = a->dims[p->trans_a ? 0 : a->rank - 1];
  p->N = b->dims[p->trans_b ? 0 : 1];
  if (b->dims[p->trans_b ? 1 : 0] != p->K || y->dims[y->rank - 1] != p->N) return false;
  p->M = p->trans_a ? a->dims[1] : shape_numel(a->rank - 1, a->dims);
  if (shape_numel(y->rank, y->dims) != p->M * p->N) return false;
  if (bias && shape_numel(bias->rank, bias->dims) != p->N) return false;
  if (res && shape_numel(res->rank, res->dims) != p->M * p->N) return false;
  p->lda = p->trans_a ? p->M : p->K;
  p->ldb = p->trans_b ? p->K : p->N;
  p->ldc = p->N;
  gs->has_bias = bias != NULL;
  gs->has_res = res != NULL;
  p->beta = res ? 1.f : 0.f;
  if (bias) p->epilogue.bias_kind = GEMM_BIAS_COL;
  gs->isa = isa_active();
  return true;
}

void gemm_step_prepare(gemm_step *gs, op_cache *cache, smelt_pool *pool, const float *B) {
  const gemm_params *p = &gs->tmpl;
  if (p->M > 0 && p->N > 0 && p->K > 0) gs->packed_b = gemm_weights_b(cache, pool, p->trans_b, p->K, p->N, B);
}

smelt_status gemm_step_run(const gemm_step *gs, const float *A, const float *B, const float *bias,
                           const float *res, float *Y, smelt_pool *pool, int variant) {
  gemm_params p = gs->tmpl;
  if (p.M == 0 || p.N == 0) return SMELT_OK;
  p.A = A;
  p.B = B;
  p.C = Y;
  p.packed_b = gs->packed_b;
  if (gs->has_bias) p.epilogue.bias = bias;
  if (gs->has_res && Y != res) memcpy(Y, res, sizeof(float) * (size_t)(p.M * p.N)); /* beta = 1 */
  static const gemm_path paths[4] = {GEMM_PATH_AUTO, GEMM_PATH_SMALL_M, GEMM_PATH_DIRECT, GEMM_PATH_PACKED};
  if (variant < 0 || variant >= GEMM_STEP_VARIANTS) variant = 0;
  return gemm_f32_run(variant >= 4 ? NULL : pool, &p, gs->isa, paths[variant % 4], NULL);
}

const char *gemm_step_variant_name(int variant) {
  static const char *const names[GEMM_STEP_VARIANTS] = {
      "auto", "small-M", "direct", "packed", "auto/1 thread", "small-M/1 thread", "direct/1 thread", "packed/1 thread"};
  return variant >= 0 && variant < GEMM_STEP_VARIANTS ? names[variant] : "?";
}
