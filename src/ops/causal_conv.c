/* CausalConvWithState: a stateful causal depthwise 1-D convolution.
 * input [B, C, L], weight [C, 1, k], bias [C], past_state [B, C, k-1] (zeros
 * when absent).  With xp = concat(past_state, input) along the length:
 *   output[b, c, t] = act(bias[c] + sum_j weight[c, 0, j] * xp[b, c, t + j])
 *   present_state   = the last k-1 positions of xp
 * act: none, or silu/swish (x * sigmoid(x)) of the convolution rounded to
 * the element type.  Computed in double per (batch, channel) row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

static smelt_status ccs_plan(op_ctx *c, int64_t *k, bool *silu) {
  const tensor *x = c->in[0], *w = c->in[1], *ps = op_in(c, 3);
  TRY(nn_check_float(c, 0, "input"));
  static const char *const names[] = {"input", "weight", "bias", "past_state"};
  for (int i = 1; i < 4; i++) TRY(nn_check_same_dtype(c, i, names[i], 0, "input"));
  TRY(nn_check_rank(c, 0, "input", 3));
  TRY(nn_check_rank(c, 1, "weight", 3));
  TRY(nn_check_rank(c, 2, "bias", 1));
  TRY(nn_check_rank(c, 3, "past_state", 3));
  const char *act = ir_attr_string(c->node, "activation", "none");
  if (strcmp(act, "none") && strcmp(act, "silu") && strcmp(act, "swish"))
    return err_set(SMELT_ERR_INVALID_MODEL, "activation %s is not one of none, silu, swish", q(act));
  *silu = strcmp(act, "none") != 0;
  *k = w->dims[2];
  if (dim_known(*k) && *k < 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "kernel size is 0");
  if (dim_known(w->dims[1]) && w->dims[1] != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (weight) dim 1 is %lld, expected 1",
                   (long long)w->dims[1]);
  if (dim_known(w->dims[0]) && dim_known(x->dims[1]) && w->dims[0] != x->dims[1])
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "weight has %lld channels, input %lld",
                   (long long)w->dims[0], (long long)x->dims[1]);
  if (ps && dim_known(ps->dims[2]) && dim_known(*k) && ps->dims[2] != *k - 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (past_state) holds %lld positions, expected %lld",
                   (long long)ps->dims[2], (long long)(*k - 1));
  return SMELT_OK;
}

static smelt_status ccs_infer(op_ctx *c) {
  int64_t k;
  bool silu;
  TRY(ccs_plan(c, &k, &silu));
  const tensor *x = c->in[0];
  op_out_like(c, 0, 0);
  if (c->n_out > 1)
    op_set_out(c, 1, x->dtype, 3, (int64_t[]){x->dims[0], x->dims[1], dim_known(k) ? k - 1 : DIM_UNKNOWN});
  return SMELT_OK;
}

static smelt_status ccs_run(op_ctx *c) {
  int64_t k;
  bool silu;
  TRY(ccs_plan(c, &k, &silu));
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2), *ps = op_in(c, 3);
  int64_t B = x->dims[0], C = x->dims[1], L = x->dims[2], P = L + k - 1;
  if ((ps && (ps->dims[0] != B || ps->dims[1] != C)) || (b && b->dims[0] != C))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bias/past_state do not match the input's batch and channels");
  double *xp = NULL, *wt = NULL, *y = NULL;
  smelt_status st = nn_alloc((void **)&xp, P, sizeof(double), "causal conv row");
  if (!st) st = nn_alloc((void **)&wt, k, sizeof(double), "causal conv row");
  if (!st) st = nn_alloc((void **)&y, L, sizeof(double), "causal conv row");
  for (int64_t q = 0; !st && q < B * C; q++) {
    int64_t ch = q % C;
    if (ps) nn_load_f64(ps->dtype, ps->data, q * (k - 1), 1, k - 1, xp);
    else memset(xp, 0, sizeof(double) * (size_t)(k - 1));
    nn_load_f64(x->dtype, x->data, q * L, 1, L, xp + k - 1);
    nn_load_f64(w->dtype, w->data, ch * k, 1, k, wt);
    double bv = 0;
    if (b) nn_load_f64(b->dtype, b->data, ch, 1, 1, &bv);
    for (int64_t t = 0; t < L; t++) {
      double acc = bv;
      for (int64_t j = 0; j < k; j++) acc += wt[j] * xp[t + j];
      if (silu) acc = nn_round_to(x->dtype, acc); /* the activation sees the stored value */
      y[t] = silu ? acc / (1.0 + exp(-acc)) : acc;
    }
    nn_store_f64(c->out[0]->dtype, c->out[0]->data, q * L, 1, L, y);
    if (c->n_out > 1) nn_store_f64(c->out[1]->dtype, c->out[1]->data, q * (k - 1), 1, k - 1, xp + L);
  }
  free(xp);
  free(wt);
  free(y);
  return st;
}

const op_def op_family_causal_conv[] = {
    {"CausalConvWithState", "", 2, 4, 1, 2, ccs_infer, ccs_run, false},
    {0}};
