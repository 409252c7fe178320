/* GEMM steps (see gemm_step.h).  The semantics are smelt.Gemm's
 * (src/ops/fused_gemm.c) and MatMul's for these forms.
 *
 * Complexity: O(1) per node. */
#include "runtime/gemm_step.h"

#include <string.h>

#include "ops/fused_act.h"
#include "ops/gemm_int4.h"
#include "ops/gemm_int8.h"
#include "ops/gemm_quant.h"
#include "util/err.h"

static const ir_value *in_val(const ir_graph *g, const ir_node *nd, int i) {
  return i < nd->n_inputs && nd->inputs[i] >= 0 ? &g->values[nd->inputs[i]] : NULL;
}

static bool concrete(const ir_value *v) {
  if (!v || v->rank < 0) return false;
  for (int d = 0; d < v->rank; d++)
    if (!dim_known(v->dims[d])) return false;
  return true;
}

bool gemm_step_make(const ir_graph *g, int node, gemm_step *gs) {
  const ir_node *nd = &g->nodes[node];
  bool fused = !strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Gemm");
  bool matmul = (!*nd->domain || !strcmp(nd->domain, "ai.onnx")) && !strcmp(nd->op_type, "MatMul");
  if ((!fused && !matmul) || nd->n_outputs != 1 || nd->outputs[0] < 0) return false;
  const ir_value *a = in_val(g, nd, 0), *b = in_val(g, nd, 1), *bias = in_val(g, nd, 2), *res = in_val(g, nd, 3);
  const ir_value *y = &g->values[nd->outputs[0]];
  if (!concrete(a) || !concrete(b) || !concrete(y) || b->rank != 2 || a->rank < 2) return false;
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
    gs->act = act;
    p->trans_a = ir_attr_int(nd, "transA", 0) != 0;
    p->trans_b = ir_attr_int(nd, "transB", 0) != 0;
    p->alpha = ir_attr_float(nd, "alpha", 1.f);
    if (p->trans_a && a->rank != 2) return false;
    if ((bias && (!concrete(bias) || bias->dtype != y->dtype)) || (res && (!concrete(res) || res->dtype != y->dtype)))
      return false;
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
  gs->dt_a = a->dtype, gs->dt_b = b->dtype, gs->dt_y = y->dtype;
  /* reduced weights (passes/autocast.c) as the op takes them
   * (ops/fused_gemm.c), for a smelt.Gemm without transA: B's quantized
   * element type (int8 with per-channel scales, int4 with group scales,
   * bf16 / fp16 storage: ops/gemm_quant.h; the node's mark where B has no
   * declaration) */
  gs->w = GEMM_W_F32;
  if (fused && !p->trans_a) {
    static const gemm_wform forms[IR_QUANT_COUNT] = {[IR_QUANT_INT8_CHANNEL] = GEMM_W_INT8,
                                                     [IR_QUANT_INT4_GROUP] = GEMM_W_INT4,
                                                     [IR_QUANT_BF16] = GEMM_W_BF16, [IR_QUANT_F16] = GEMM_W_F16};
    ir_quant_scheme s = gemm_weight_scheme(g, nd, p->trans_b, &gs->bq);
    gs->w = s > IR_QUANT_NONE && s < IR_QUANT_COUNT ? forms[s] : GEMM_W_F32;
  }
  gs->kern = gemm_kernel_select(gs->dt_a, gs->dt_b, (ir_quant_scheme)gs->bq.scheme, gs->dt_y, gs->w, gs->isa,
                                gemm_shape_of(p->M, p->N, p->K));
  return gs->kern != NULL;
}

void gemm_step_prepare(gemm_step *gs, const gemm_io *io, smelt_pool *pool) {
  gs->kern->prepare(gs, io, pool);
}

smelt_status gemm_step_run(const gemm_step *gs, const gemm_io *io, smelt_pool *pool, int variant) {
  const gemm_params *p = &gs->tmpl;
  if (p->M == 0 || p->N == 0) return SMELT_OK;
  if (gs->has_res && io->Y != io->res) /* beta = 1: Y starts as the residual */
    memcpy(io->Y, io->res, dtype_size(gs->dt_y) * (size_t)(p->M * p->N));
  if (variant < 0 || variant >= GEMM_STEP_VARIANTS) variant = 0;
  return gs->kern->run(gs, io, pool, variant);
}

const char *gemm_step_variant_name(int variant) {
  static const char *const names[GEMM_STEP_VARIANTS] = {
      "auto", "small-M", "direct", "packed", "auto/1 thread", "small-M/1 thread", "direct/1 thread", "packed/1 thread"};
  return variant >= 0 && variant < GEMM_STEP_VARIANTS ? names[variant] : "?";
}
