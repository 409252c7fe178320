/* LinearAttention (opset 27): the recurrent form of linear attention with an
 * optional gate (decay) and delta-rule correction (beta).
 * query [B, T, Hq*dk], key [B, T, Hkv*dk], value [B, T, Hkv*dv];
 * state S [B, Hkv, dk, dv] starts at past_state (zeros when absent).  Per
 * step t and kv head:
 *   gated:  S *= exp(decay_t)            (per head, or per dk row)
 *   delta:  v_t = beta_t * (v_t - S^T k_t)
 *   S += k_t v_t^T
 *   out_t[h] = scale * S^T q_t[h]  for the query heads h of this kv head
 * update_rule picks linear / gated / delta / gated_delta (the default).
 * Computed in double per (batch, kv head); output [B, T, Hq*dv] and
 * present_state = the final S. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

typedef struct la_geom {
  int64_t B, T, Hq, Hkv, dk, dv, decay_w, beta_w; /* decay/beta last dims (0: absent) */
  bool gating, delta;
  double scale;
} la_geom;

static smelt_status la_rule(op_ctx *c, la_geom *g) {
  const char *r = ir_attr_string(c->node, "update_rule", "gated_delta");
  if (!strcmp(r, "linear")) g->gating = false, g->delta = false;
  else if (!strcmp(r, "gated")) g->gating = true, g->delta = false;
  else if (!strcmp(r, "delta")) g->gating = false, g->delta = true;
  else if (!strcmp(r, "gated_delta")) g->gating = true, g->delta = true;
  else return err_set(SMELT_ERR_INVALID_MODEL, "update_rule %s is not one of linear, gated, delta, gated_delta", q(r));
  if (g->gating != (op_in(c, 4) != NULL))
    return err_set(SMELT_ERR_INVALID_MODEL, "update_rule %s %s the decay input", q(r), g->gating ? "requires" : "forbids");
  if (g->delta != (op_in(c, 5) != NULL))
    return err_set(SMELT_ERR_INVALID_MODEL, "update_rule %s %s the beta input", q(r), g->delta ? "requires" : "forbids");
  return SMELT_OK;
}

static smelt_status la_plan(op_ctx *c, la_geom *g) {
  static const char *const names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  memset(g, 0, sizeof *g);
  for (int i = 0; i < 6; i++) {
    TRY(nn_check_float(c, i, names[i]));
    if (i != 3) TRY(nn_check_rank(c, i, names[i], 3));
    if (i != 3 && i) TRY(nn_check_same_dtype(c, i, names[i], 0, "query"));
  }
  TRY(nn_check_rank(c, 3, "past_state", 4));
  TRY(la_rule(c, g));
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *ps = op_in(c, 3);
  g->Hq = op_attr_int(c, "q_num_heads", 0);
  g->Hkv = op_attr_int(c, "kv_num_heads", 0);
  if (g->Hq < 1 || g->Hkv < 1 || g->Hq % g->Hkv)
    return err_set(SMELT_ERR_INVALID_MODEL, "q_num_heads %lld must be a positive multiple of kv_num_heads %lld",
                   (long long)g->Hq, (long long)g->Hkv);
  g->B = q->dims[0];
  g->T = q->dims[1];
  for (int d = 0; d < 2; d++)
    for (int i = 1; i < 3; i++) {
      int64_t a = c->in[i]->dims[d], e = q->dims[d];
      if (dim_known(a) && dim_known(e) && a != e)
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d (%s) dim %d is %lld, but query's is %lld", i,
                       names[i], d, (long long)a, (long long)e);
    }
  int64_t hq = q->dims[2], hk = k->dims[2], hv = v->dims[2];
  if ((dim_known(hq) && hq % g->Hq) || (dim_known(hk) && hk % g->Hkv) || (dim_known(hv) && hv % g->Hkv))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "hidden sizes are not divisible by the head counts");
  g->dk = dim_known(hq) ? hq / g->Hq : DIM_UNKNOWN;
  g->dv = dim_known(hv) ? hv / g->Hkv : DIM_UNKNOWN;
  if (dim_known(hk) && dim_known(g->dk) && hk / g->Hkv != g->dk)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "key head size %lld does not match query's %lld",
                   (long long)(hk / g->Hkv), (long long)g->dk);
  if (ps) {
    const int64_t want[4] = {g->B, g->Hkv, g->dk, g->dv};
    for (int d = 0; d < 4; d++)
      if (dim_known(ps->dims[d]) && dim_known(want[d]) && ps->dims[d] != want[d])
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (past_state) dim %d is %lld, expected %lld", d,
                       (long long)ps->dims[d], (long long)want[d]);
  }
  float sc = op_attr_float(c, "scale", 0.f);
  g->scale = sc != 0.f ? sc : dim_known(g->dk) && g->dk > 0 ? 1.0 / sqrt((double)g->dk) : 1.0;
  return SMELT_OK;
}

static smelt_status la_infer(op_ctx *c) {
  la_geom g;
  TRY(la_plan(c, &g));
  const tensor *q = c->in[0], *ps = op_in(c, 3);
  int64_t hv = dim_known(g.dv) ? g.Hq * g.dv : DIM_UNKNOWN;
  op_set_out(c, 0, q->dtype, 3, (int64_t[]){g.B, g.T, hv});
  if (c->n_out > 1) op_set_out(c, 1, ps ? ps->dtype : q->dtype, 4, (int64_t[]){g.B, g.Hkv, g.dk, g.dv});
  return SMELT_OK;
}

/* decay and beta widths: per head, per dk element (decay) or shared (beta). */
static smelt_status la_widths(op_ctx *c, la_geom *g) {
  const tensor *dc = op_in(c, 4), *bt = op_in(c, 5);
  if (dc) {
    g->decay_w = dc->dims[2];
    if (dc->dims[0] != g->B || dc->dims[1] != g->T || (g->decay_w != g->Hkv && g->decay_w != g->Hkv * g->dk))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 4 (decay) must be [B, T, kv_num_heads] or [B, T, kv_num_heads*d_k]");
  }
  if (bt) {
    g->beta_w = bt->dims[2];
    if (bt->dims[0] != g->B || bt->dims[1] != g->T || (g->beta_w != g->Hkv && g->beta_w != 1))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 5 (beta) must be [B, T, kv_num_heads] or [B, T, 1]");
  }
  return SMELT_OK;
}

/* Scratch per (batch, kv head): state, one k/v/q row, retrieved values. */
static void la_head(op_ctx *c, const la_geom *g, int64_t b, int64_t hk, double *S, double *buf) {
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *dc = op_in(c, 4), *bt = op_in(c, 5);
  tensor *y = c->out[0];
  int64_t dk = g->dk, dv = g->dv, grp = g->Hq / g->Hkv;
  double *kt = buf, *vt = kt + dk, *qt = vt + dv, *gt = qt + dk, *out = gt + dk;
  for (int64_t t = 0; t < g->T; t++) {
    int64_t row = b * g->T + t;
    nn_load_f64(k->dtype, k->data, row * g->Hkv * dk + hk * dk, 1, dk, kt);
    nn_load_f64(v->dtype, v->data, row * g->Hkv * dv + hk * dv, 1, dv, vt);
    if (g->gating) {
      int64_t w = g->decay_w == g->Hkv ? 1 : dk;
      nn_load_f64(dc->dtype, dc->data, row * g->decay_w + hk * w, 1, w, gt);
      for (int64_t i = 0; i < dk; i++) {
        double f = exp(gt[w == 1 ? 0 : i]);
        for (int64_t m = 0; m < dv; m++) S[i * dv + m] *= f;
      }
    }
    if (g->delta) {
      double beta;
      nn_load_f64(bt->dtype, bt->data, row * g->beta_w + (g->beta_w == 1 ? 0 : hk), 1, 1, &beta);
      for (int64_t m = 0; m < dv; m++) {
        double r = 0;
        for (int64_t i = 0; i < dk; i++) r += S[i * dv + m] * kt[i];
        vt[m] = beta * (vt[m] - r);
      }
    }
    for (int64_t i = 0; i < dk; i++)
      for (int64_t m = 0; m < dv; m++) S[i * dv + m] += kt[i] * vt[m];
    for (int64_t h = hk * grp; h < (hk + 1) * grp; h++) {
      nn_load_f64(q->dtype, q->data, row * g->Hq * dk + h * dk, 1, dk, qt);
      for (int64_t m = 0; m < dv; m++) {
        double acc = 0;
        for (int64_t i = 0; i < dk; i++) acc += qt[i] * S[i * dv + m];
        out[m] = g->scale * acc;
      }
      nn_store_f64(y->dtype, y->data, row * g->Hq * dv + h * dv, 1, dv, out);
    }
  }
}

static smelt_status la_run(op_ctx *c) {
  la_geom g;
  TRY(la_plan(c, &g));
  TRY(la_widths(c, &g));
  const tensor *ps = op_in(c, 3);
  int64_t ns = g.dk * g.dv;
  double *S = NULL, *buf = NULL;
  smelt_status st = nn_alloc((void **)&S, ns, sizeof(double), "LinearAttention state");
  if (!st) st = nn_alloc((void **)&buf, 3 * g.dk + 2 * g.dv, sizeof(double), "LinearAttention row");
  for (int64_t b = 0; !st && b < g.B; b++)
    for (int64_t hk = 0; hk < g.Hkv; hk++) {
      int64_t off = (b * g.Hkv + hk) * ns;
      if (ps) nn_load_f64(ps->dtype, ps->data, off, 1, ns, S);
      else memset(S, 0, sizeof(double) * (size_t)ns);
      la_head(c, &g, b, hk, S, buf);
      if (c->n_out > 1) nn_store_f64(c->out[1]->dtype, c->out[1]->data, off, 1, ns, S);
    }
  free(S);
  free(buf);
  return st;
}

const op_def op_family_linear_attention[] = {
    {"LinearAttention", "", 3, 6, 1, 2, la_infer, la_run, false},
    {0}};
