/* smelt.Gemm: a matrix product with its epilogue, made by fuse_epilogue from
 * MatMul / Gemm + bias Add + residual Add + activation.
 *
 *   Y = act(alpha * op(A) op(B) + bias + residual)
 *
 * Inputs: A, B, bias (optional), residual (optional); float32 only.
 *   A  [..., M', K] (flattened to M = prod(leading dims) rows), or with
 *      transA = 1 exactly [K, M];
 *   B  [K, N], or with transB = 1 [N, K];
 *   bias: N values, shape [N] or [1, ..., 1, N] (added to every row);
 *   residual: exactly Y's shape.
 * Y: A's leading dims followed by N ([M, N] with transA).
 * Attributes: transA, transB, alpha (default 1), activation / clip_min /
 * clip_max (fused_act.h), has_bias / has_residual (documentation of the
 * inputs: they must agree with which inputs are present).
 *
 * Bias, relu and clip run in the GEMM's epilogue while the tile is in
 * registers; the residual is preloaded into Y (beta = 1).  Sigmoid, tanh and
 * gelu run on each block of rows right after its GEMM while it is in cache.
 *
 * Attribute precision = "int8" (set by passes/autocast.c): with a constant
 * B and no transA, the product runs as a dynamically quantized int8 GEMM
 * (ops/gemm_int8.h), then the activation over Y.  precision = "bf16": the
 * same with the weight stored in bf16 (ops/gemm_bf16.h; activations fp32);
 * "fp16" likewise in fp16.  bf16 with more than 16 rows on a CPU with
 * AVX512_BF16: A rounded to bf16 as well, products in bf16 (gemm_bf16dp_*).
 * precision = "int4": the weight in int4 groups of 32 (ops/gemm_int4.h). */
#include <stdatomic.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/gemm_bf16.h"
#include "ops/gemm_int4.h"
#include "ops/gemm_int8.h"
#include "ops/gemm_weights.h"
#include "ops/fused_act.h"
#include "ops/fused_util.h"
#include "ops/nn_util.h"
#include "util/err.h"

#define FGEMM_BLOCK_BYTES ((int64_t)256 << 10) /* rows per block: about this much of Y */

typedef struct fgemm_plan {
  bool ta, tb;
  int64_t M, N, K;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
} fgemm_plan;

static smelt_status fgemm_shape(op_ctx *c, fgemm_plan *p) {
  const tensor *a = c->in[0], *b = c->in[1];
  TRY(fused_check_inputs(c));
  p->ta = op_attr_int(c, "transA", 0) != 0;
  p->tb = op_attr_int(c, "transB", 0) != 0;
  if (b->rank >= 0 && b->rank != 2) return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (B) has rank %d, expected 2", b->rank);
  if (a->rank >= 0 && (a->rank < 2 || (p->ta && a->rank != 2)))
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (A) has rank %d, expected %s", a->rank,
                   p->ta ? "2 with transA" : "at least 2");
  p->rank = a->rank;
  if (a->rank < 0 || b->rank < 0) return SMELT_OK;
  p->K = a->dims[p->ta ? 0 : a->rank - 1];
  int64_t kb = b->dims[p->tb ? 1 : 0];
  p->N = b->dims[p->tb ? 0 : 1];
  if (dim_known(p->K) && dim_known(kb) && p->K != kb)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "inner dims do not match: A gives %lld, B %lld",
                   (long long)p->K, (long long)kb);
  if (p->ta) p->dims[0] = a->dims[1];
  else memcpy(p->dims, a->dims, sizeof(int64_t) * (size_t)(a->rank - 1));
  p->dims[p->rank - 1] = p->N;
  p->M = nn_prod(p->dims, 0, p->rank - 1);
  return SMELT_OK;
}

static smelt_status check_extras(op_ctx *c, const fgemm_plan *p) {
  const tensor *bias = op_in(c, 2);
  if (bias && bias->rank >= 0) {
    for (int d = 0; d + 1 < bias->rank; d++)
      if (dim_known(bias->dims[d]) && bias->dims[d] != 1)
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "bias dim %d is %lld, expected 1", d, (long long)bias->dims[d]);
    int64_t bn = bias->rank ? bias->dims[bias->rank - 1] : 1;
    if (dim_known(bn) && dim_known(p->N) && bn != p->N)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "bias has %lld values for %lld columns", (long long)bn, (long long)p->N);
  }
  TRY(fused_check_residual(c, p->rank, p->dims));
  fused_act act;
  return fused_act_read(c->node, &act);
}

static smelt_status fgemm_infer(op_ctx *c) {
  fgemm_plan p;
  TRY(fgemm_shape(c, &p));
  TRY(check_extras(c, &p));
  if (p.rank < 0 || c->in[1]->rank < 0) nn_out_unknown(c, 0, SMELT_F32);
  else op_set_out(c, 0, SMELT_F32, p.rank, p.dims);
  return SMELT_OK;
}

typedef struct fgemm_job {
  gemm_params g; /* the whole product */
  const fused_act *act;
  int64_t rows;  /* per block */
  atomic_bool failed;
} fgemm_job;

/* Rows [m0, m1) of the product: A's rows (columns with transA) and Y's rows. */
static gemm_params rows_of(const gemm_params *g, int64_t m0, int64_t m1) {
  gemm_params p = *g;
  p.M = m1 - m0;
  p.A = g->trans_a ? g->A + m0 : g->A + m0 * g->lda;
  p.C = g->C + m0 * g->ldc;
  return p;
}

static void fgemm_blocks(void *ctx, int64_t b0, int64_t b1) {
  fgemm_job *j = ctx;
  for (int64_t b = b0; b < b1; b++) {
    int64_t m0 = b * j->rows, m1 = m0 + j->rows < j->g.M ? m0 + j->rows : j->g.M;
    gemm_params p = rows_of(&j->g, m0, m1);
    if (gemm_f32_ex(NULL, &p)) atomic_store(&j->failed, true); /* only on bad arguments: checked before */
    fused_act_apply(j->act, p.C, (m1 - m0) * j->g.N);
  }
}

/* precision int8 / bf16 / int4 (passes/autocast.c): the node's constant
 * weight in that form, made once (int8, int4: activations quantized at run
 * time; bf16: activations fp32); false, all NULL, when the node runs in
 * fp32. */
typedef struct fgemm_lowp {
  const qgemm_weights *q8;
  const wbf16_weights *h;
  const bf16dp_weights *dp; /* bf16 with A rounded too: many rows, AVX512_BF16 (gemm_bf16.h) */
  const q4gemm_weights *q4;
} fgemm_lowp;

static bool fgemm_reduced(op_ctx *c, const fgemm_plan *p, fgemm_lowp *w) {
  memset(w, 0, sizeof *w);
  if (p->ta) return false;
  if (gemm_int8_marked(c->node)) w->q8 = gemm_int8_weights(c, 1, p->tb, p->K, p->N);
  else if (gemm_bf16dp_for(c->node, p->M) && (w->dp = gemm_bf16dp_weights(c, 1, p->tb, p->K, p->N))) return true;
  else if (gemm_half_as_f32_for(c->node, p->M)) return false; /* the fp32 GEMM below (gemm_bf16.h) */
  else if (gemm_bf16_marked(c->node) || gemm_f16_marked(c->node))
    w->h = gemm_bf16_weights(c, 1, gemm_f16_marked(c->node), p->tb, p->K, p->N);
  else if (gemm_int4_marked(c->node)) w->q4 = gemm_int4_weights(c, 1, p->tb, p->K, p->N);
  return w->q8 || w->h || w->q4;
}

static smelt_status fgemm_run(op_ctx *c) {
  fgemm_plan p;
  TRY(fgemm_shape(c, &p));
  TRY(check_extras(c, &p));
  const tensor *a = c->in[0], *b = c->in[1], *bias = op_in(c, 2), *res = op_in(c, 3);
  tensor *y = c->out[0];
  if (p.M == 0 || p.N == 0) return SMELT_OK;
  fused_act act;
  TRY(fused_act_read(c->node, &act));
  if (res) {
    if (res->nbytes != y->nbytes) return err_set(SMELT_ERR_INTERNAL, "residual size differs from the output's");
    memcpy(y->data, res->data, y->nbytes);
  }
  fgemm_lowp lw;
  if (fgemm_reduced(c, &p, &lw)) {
    float alpha = op_attr_float(c, "alpha", 1.f);
    const float *bv = bias ? bias->data : NULL;
    TRY(lw.q8   ? gemm_int8_run(c, lw.q8, p.M, a->data, p.K, alpha, bv, res != NULL, y->data)
        : lw.dp ? gemm_bf16dp_run(c, lw.dp, p.M, a->data, p.K, alpha, bv, res != NULL, y->data)
        : lw.h  ? gemm_bf16_run(c, lw.h, p.M, a->data, p.K, alpha, bv, res != NULL, y->data)
                : gemm_int4_run(c, lw.q4, p.M, a->data, p.K, alpha, bv, res != NULL, y->data));
    fused_act_apply_pool(c->pool, &act, y->data, p.M * p.N);
    return SMELT_OK;
  }
  gemm_params g = gemm_params_default();
  g.trans_a = p.ta;
  g.trans_b = p.tb;
  g.M = p.M;
  g.N = p.N;
  g.K = p.K;
  g.alpha = op_attr_float(c, "alpha", 1.f);
  g.beta = res ? 1.f : 0.f;
  g.A = a->data;
  g.B = b->data;
  g.C = y->data;
  g.lda = p.ta ? p.M : p.K;
  g.ldb = p.tb ? p.K : p.N;
  g.ldc = p.N;
  g.packed_b = gemm_weights_b_input(c, 1, p.tb, p.K, p.N);
  if (bias) {
    g.epilogue.bias_kind = GEMM_BIAS_COL;
    g.epilogue.bias = bias->data;
  }
  bool in_tile = fused_act_in_gemm(&act, &g.epilogue);
  if (in_tile) return gemm_f32_ex(c->pool, &g);
  fgemm_job j = {.g = g, .act = &act};
  j.rows = FGEMM_BLOCK_BYTES / (int64_t)(sizeof(float) * (size_t)p.N);
  if (j.rows < 16) j.rows = 16;
  int64_t blocks = (p.M + j.rows - 1) / j.rows;
  if (blocks >= 2 * pool_threads(c->pool)) {
    pool_parallel_for(c->pool, blocks, 1, fgemm_blocks, &j);
    return atomic_load(&j.failed) ? err_set(SMELT_ERR_INTERNAL, "GEMM rejected a row block") : SMELT_OK;
  }
  /* few rows: one threaded GEMM, then the activation while Y is still in cache */
  TRY(gemm_f32_ex(c->pool, &g));
  fused_act_apply_pool(c->pool, &act, y->data, p.M * p.N);
  return SMELT_OK;
}

smelt_status fused_gemm_op_prepare(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  if (!c->cache || a->rank < 0 || b->rank != 2 || !op_input_is_constant(c, 1)) return SMELT_OK;
  fgemm_plan p;
  TRY(fgemm_shape(c, &p));
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return SMELT_OK;
  fgemm_lowp lw;
  if (fgemm_reduced(c, &p, &lw)) return SMELT_OK;
  (void)gemm_weights_b_input(c, 1, p.tb, p.K, p.N);
  return SMELT_OK;
}

const op_def op_family_fused_gemm[] = {
    {"Gemm", "smelt", 2, 4, 1, 1, fgemm_infer, fgemm_run, false},
    {0}};
