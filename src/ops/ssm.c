/* Stateful sequence mixers of recent ONNX (opset 27): LinearAttention (the
 * linear / gated / delta / gated_delta recurrences of linear-attention and
 * DeltaNet-style layers, with GQA) and CausalConvWithState (the causal
 * depthwise Conv1d with carried state used by Mamba and Gated DeltaNet).
 *
 * Both run the recurrence exactly as the spec states it, token by token, in
 * f32 (like ONNX's reference); results are rounded once to the output type. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/quant_util.h"
#include "util/err.h"

/* ---- LinearAttention ---- */

typedef struct la_cfg {
  bool gating, delta;
  int64_t B, T, Hq, Hkv, dk, dv;
  int64_t decay_last, beta_last; /* decay: Hkv or Hkv*dk; beta: Hkv or 1 */
  float scale;
} la_cfg;

static smelt_status la_rule(op_ctx *c, la_cfg *g) {
  const char *r = ir_attr_string(c->node, "update_rule", "gated_delta");
  if (strcmp(r, "linear") && strcmp(r, "gated") && strcmp(r, "delta") && strcmp(r, "gated_delta"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute update_rule '%s' is unknown", r);
  g->gating = !strcmp(r, "gated") || !strcmp(r, "gated_delta");
  g->delta = !strcmp(r, "delta") || !strcmp(r, "gated_delta");
  if (g->gating != (op_in(c, 4) != NULL) || g->delta != (op_in(c, 5) != NULL))
    return err_set(SMELT_ERR_INVALID_MODEL, "update_rule '%s' %s the decay input and %s the beta input", r,
                   g->gating ? "needs" : "forbids", g->delta ? "needs" : "forbids");
  g->Hq = op_attr_int(c, "q_num_heads", 0);
  g->Hkv = op_attr_int(c, "kv_num_heads", 0);
  if (g->Hq < 1 || g->Hkv < 1 || g->Hq % g->Hkv)
    return err_set(SMELT_ERR_INVALID_MODEL, "q_num_heads (%lld) must be a positive multiple of kv_num_heads "
                   "(%lld)", (long long)g->Hq, (long long)g->Hkv);
  return SMELT_OK;
}

static smelt_status la_shapes(op_ctx *c, la_cfg *g) {
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *st = op_in(c, 3), *dc = op_in(c, 4),
               *bt = op_in(c, 5);
  for (int i = 0; i < 3; i++)
    if (c->in[i]->rank != 3) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d must be rank 3 [B, T, H*D]", i);
  g->B = q->dims[0], g->T = q->dims[1];
  if (q->dims[2] % g->Hq || k->dims[2] % g->Hkv || v->dims[2] % g->Hkv)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "packed head dims do not divide by the head counts");
  g->dk = q->dims[2] / g->Hq, g->dv = v->dims[2] / g->Hkv;
  for (int i = 1; i < 3; i++)
    if (c->in[i]->dims[0] != g->B || c->in[i]->dims[1] != g->T)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d's batch or length differs from query's", i);
  if (k->dims[2] != g->Hkv * g->dk)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "key has %lld values per token, expected %lld",
                   (long long)k->dims[2], (long long)(g->Hkv * g->dk));
  if (st && (st->rank != 4 || st->dims[0] != g->B || st->dims[1] != g->Hkv || st->dims[2] != g->dk ||
             st->dims[3] != g->dv))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "past_state must be [%lld, %lld, %lld, %lld]", (long long)g->B,
                   (long long)g->Hkv, (long long)g->dk, (long long)g->dv);
  g->decay_last = dc ? dc->dims[2] : 0;
  g->beta_last = bt ? bt->dims[2] : 0;
  if (dc && (dc->rank != 3 || dc->dims[0] != g->B || dc->dims[1] != g->T ||
             (g->decay_last != g->Hkv && g->decay_last != g->Hkv * g->dk)))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "decay must be [B, T, kv_num_heads] or [B, T, kv_num_heads*d_k]");
  if (bt && (bt->rank != 3 || bt->dims[0] != g->B || bt->dims[1] != g->T ||
             (g->beta_last != g->Hkv && g->beta_last != 1)))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "beta must be [B, T, kv_num_heads] or [B, T, 1]");
  float s = op_attr_float(c, "scale", 0.0f);
  g->scale = s != 0.0f ? s : 1.0f / sqrtf((float)g->dk);
  return SMELT_OK;
}

static smelt_status la_infer(op_ctx *c) {
  la_cfg g = {0};
  TRY(la_rule(c, &g));
  for (int i = 0; i < c->n_in; i++) TRY(nn_check_float(c, i, "inputs"));
  const tensor *q = c->in[0], *v = c->in[2], *st = op_in(c, 3);
  smelt_dtype sdt = st ? st->dtype : q->dtype;
  if (q->rank != 3 || v->rank != 3) {
    nn_out_unknown(c, 0, q->dtype);
    if (c->n_out > 1) nn_out_unknown(c, 1, sdt);
    return SMELT_OK;
  }
  int64_t dk = dim_known(q->dims[2]) ? q->dims[2] / g.Hq : DIM_UNKNOWN;
  int64_t dv = dim_known(v->dims[2]) ? v->dims[2] / g.Hkv : DIM_UNKNOWN;
  op_set_out(c, 0, q->dtype, 3, (int64_t[]){q->dims[0], q->dims[1], dim_known(dv) ? g.Hq * dv : DIM_UNKNOWN});
  if (c->n_out > 1) op_set_out(c, 1, sdt, 4, (int64_t[]){q->dims[0], g.Hkv, dk, dv});
  return SMELT_OK;
}

/* One (batch, kv head): the recurrence over all tokens; out is [T, Hq*dv]. */
static void la_head(const la_cfg *g, const float *Q, const float *K, const float *V, const float *D,
                    const float *Bt, int64_t b, int64_t h, float *S, float *tmp, float *out) {
  int64_t dk = g->dk, dv = g->dv, grp = g->Hq / g->Hkv;
  for (int64_t t = 0; t < g->T; t++) {
    int64_t row = b * g->T + t;
    const float *k = K + row * g->Hkv * dk + h * dk, *v = V + row * g->Hkv * dv + h * dv;
    if (g->gating) {
      const float *dec = D + row * g->decay_last + (g->decay_last == g->Hkv ? h : h * dk);
      for (int64_t d = 0; d < dk; d++) {
        float e = expf(g->decay_last == g->Hkv ? dec[0] : dec[d]);
        for (int64_t m = 0; m < dv; m++) S[d * dv + m] *= e;
      }
    }
    for (int64_t m = 0; m < dv; m++) tmp[m] = v[m];
    if (g->delta) {
      float beta = Bt[row * g->beta_last + (g->beta_last == 1 ? 0 : h)];
      for (int64_t m = 0; m < dv; m++) {
        float r = 0;
        for (int64_t d = 0; d < dk; d++) r += S[d * dv + m] * k[d];
        tmp[m] = beta * (v[m] - r);
      }
    }
    for (int64_t d = 0; d < dk; d++)
      for (int64_t m = 0; m < dv; m++) S[d * dv + m] += k[d] * tmp[m];
    for (int64_t hq = h * grp; hq < (h + 1) * grp; hq++) {
      const float *q = Q + row * g->Hq * dk + hq * dk;
      float *o = out + row * g->Hq * dv + hq * dv;
      for (int64_t m = 0; m < dv; m++) {
        float s = 0;
        for (int64_t d = 0; d < dk; d++) s += q[d] * S[d * dv + m];
        o[m] = g->scale * s;
      }
    }
  }
}

static smelt_status la_run(op_ctx *c) {
  la_cfg g = {0};
  TRY(la_rule(c, &g));
  TRY(la_shapes(c, &g));
  float *in[6] = {0}, *out = NULL, *state = NULL, *tmp = NULL;
  smelt_status s = SMELT_OK;
  for (int i = 0; !s && i < 6; i++)
    if (op_in(c, i)) s = nn_f32_acquire(c->in[i], &in[i]);
  int64_t SZ = g.B * g.Hkv * g.dk * g.dv;
  if (!s) s = nn_alloc((void **)&out, g.B * g.T * g.Hq * g.dv + 1, sizeof(float), "output");
  if (!s) s = nn_alloc((void **)&state, SZ + 1, sizeof(float), "state");
  if (!s) s = nn_alloc((void **)&tmp, g.dv + 1, sizeof(float), "row");
  if (!s) {
    for (int64_t i = 0; i < SZ; i++) state[i] = in[3] ? in[3][i] : 0.0f;
    for (int64_t b = 0; b < g.B; b++)
      for (int64_t h = 0; h < g.Hkv; h++)
        la_head(&g, in[0], in[1], in[2], in[4], in[5], b, h, state + (b * g.Hkv + h) * g.dk * g.dv, tmp, out);
    nn_store_f32(c->out[0]->dtype, c->out[0]->data, 0, 1, tensor_numel(c->out[0]), out);
    if (c->n_out > 1) nn_store_f32(c->out[1]->dtype, c->out[1]->data, 0, 1, SZ, state);
  }
  for (int i = 0; i < 6; i++)
    if (in[i]) nn_f32_release(c->in[i], in[i]);
  free(out), free(state), free(tmp);
  return s;
}

/* ---- CausalConvWithState ---- */

static smelt_status cc_act(op_ctx *c, bool *silu) {
  const char *a = ir_attr_string(c->node, "activation", "none");
  if (strcmp(a, "none") && strcmp(a, "silu") && strcmp(a, "swish"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute activation '%s' is unknown", a);
  *silu = strcmp(a, "none") != 0;
  return SMELT_OK;
}

static smelt_status cc_infer(op_ctx *c) {
  bool silu = false;
  TRY(cc_act(c, &silu));
  for (int i = 0; i < c->n_in; i++) TRY(nn_check_float(c, i, "inputs"));
  TRY(nn_check_rank(c, 0, "input", 3));
  TRY(nn_check_rank(c, 1, "weight", 3));
  const tensor *x = c->in[0], *w = c->in[1];
  op_out_like(c, 0, 0);
  if (c->n_out > 1) {
    int64_t k = w->rank == 3 && dim_known(w->dims[2]) ? w->dims[2] - 1 : DIM_UNKNOWN;
    int64_t d[3] = {x->rank == 3 ? x->dims[0] : DIM_UNKNOWN, x->rank == 3 ? x->dims[1] : DIM_UNKNOWN, k};
    op_set_out(c, 1, x->dtype, 3, d);
  }
  return SMELT_OK;
}

static smelt_status cc_check(op_ctx *c, int64_t *B, int64_t *C, int64_t *L, int64_t *K) {
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2), *ps = op_in(c, 3);
  *B = x->dims[0], *C = x->dims[1], *L = x->dims[2], *K = w->dims[2];
  if (w->dims[0] != *C || w->dims[1] != 1 || *K < 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "weight must be [%lld, 1, k>=1]", (long long)*C);
  if (b && tensor_numel(b) != *C)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bias must have %lld values", (long long)*C);
  if (ps && (ps->rank != 3 || ps->dims[0] != *B || ps->dims[1] != *C || ps->dims[2] != *K - 1))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "past_state must be [%lld, %lld, %lld]", (long long)*B,
                   (long long)*C, (long long)(*K - 1));
  return SMELT_OK;
}

static smelt_status cc_run(op_ctx *c) {
  bool silu = false;
  int64_t B, C, L, K;
  TRY(cc_act(c, &silu));
  TRY(cc_check(c, &B, &C, &L, &K));
  const tensor *x = c->in[0], *w = c->in[1], *bias = op_in(c, 2), *ps = op_in(c, 3);
  smelt_dtype dt = x->dtype;
  double *pad = NULL, *wv = NULL, *y = NULL, bv = 0;
  smelt_status s = nn_alloc((void **)&pad, L + K, sizeof(double), "padded row");
  if (!s) s = nn_alloc((void **)&wv, K, sizeof(double), "kernel");
  if (!s) s = nn_alloc((void **)&y, L + 1, sizeof(double), "output row");
  for (int64_t b = 0; !s && b < B; b++)
    for (int64_t ch = 0; ch < C; ch++) {
      for (int64_t j = 0; j < K - 1; j++) pad[j] = 0;
      if (ps) nn_load_f64(ps->dtype, ps->data, (b * C + ch) * (K - 1), 1, K - 1, pad);
      nn_load_f64(dt, x->data, (b * C + ch) * L, 1, L, pad + K - 1);
      nn_load_f64(w->dtype, w->data, ch * K, 1, K, wv);
      if (bias) nn_load_f64(bias->dtype, bias->data, ch, 1, 1, &bv);
      for (int64_t t = 0; t < L; t++) {
        double acc = bv;
        for (int64_t j = 0; j < K; j++) acc += wv[j] * pad[t + j];
        acc = q_round_to(dt, acc); /* the conv result is in the input type before the activation */
        if (silu) acc = (float)acc / (1.0f + expf(-(float)acc));
        y[t] = acc;
      }
      nn_store_f64(dt, c->out[0]->data, (b * C + ch) * L, 1, L, y);
      if (c->n_out > 1) nn_store_f64(dt, c->out[1]->data, (b * C + ch) * (K - 1), 1, K - 1, pad + L);
    }
  free(pad), free(wv), free(y);
  return s;
}

const op_def op_family_ssm[] = {
    {"LinearAttention", "", 3, 6, 1, 2, la_infer, la_run, false},
    {"CausalConvWithState", "", 2, 4, 1, 2, cc_infer, cc_run, false},
    {0}};
