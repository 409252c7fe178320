/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (inference: the loss
 * value, no gradients).  Input [N, C, d1..dk], target [N, d1..dk].
 *
 * loss[n, d] = -logp[n, target, d] * w, with w = weight[target] (1 without
 * weights) and 0 where target == ignore_index.  reduction: "none" keeps the
 * target's shape, "sum" adds, "mean" divides the sum by the sum of w (the
 * count of non-ignored elements without weights), as the ONNX reference does.
 * SoftmaxCrossEntropyLoss takes logp = log_softmax over C, optionally output
 * as log_prob.  Computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

typedef enum loss_red { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_red;

static smelt_status loss_reduction(op_ctx *c, loss_red *r) {
  const char *s = ir_attr_string(c->node, "reduction", "mean");
  if (!strcmp(s, "none")) *r = LOSS_NONE;
  else if (!strcmp(s, "sum")) *r = LOSS_SUM;
  else if (!strcmp(s, "mean")) *r = LOSS_MEAN;
  else return err_set(SMELT_ERR_INVALID_MODEL, "reduction %s is not one of none, sum, mean", q(s));
  return SMELT_OK;
}

static smelt_status loss_infer(op_ctx *c) {
  const tensor *x = c->in[0], *t = c->in[1], *w = op_in(c, 2);
  TRY(nn_check_float(c, 0, "input"));
  TRY(nn_check_same_dtype(c, 2, "weight", 0, "input"));
  if (t->dtype != SMELT_I32 && t->dtype != SMELT_I64 && t->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (target) has type %s, expected int32 or int64",
                   dtype_name(t->dtype));
  loss_red red = LOSS_MEAN;
  TRY(loss_reduction(c, &red));
  if (x->rank >= 0 && x->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (input) has rank %d, expected at least 2", x->rank);
  if (x->rank >= 2 && t->rank >= 0) {
    if (t->rank != x->rank - 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (target) has rank %d, expected %d", t->rank,
                     x->rank - 1);
    for (int i = 0; i < t->rank; i++) {
      int64_t a = t->dims[i], b = x->dims[i == 0 ? 0 : i + 1];
      if (dim_known(a) && dim_known(b) && a != b)
        return err_set(SMELT_ERR_INVALID_ARGUMENT,
                       "target dim %d is %lld, but the input's matching dim is %lld", i,
                       (long long)a, (long long)b);
    }
  }
  if (w && w->rank >= 0 && x->rank >= 2) {
    if (w->rank != 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (weight) has rank %d, expected 1", w->rank);
    if (dim_known(w->dims[0]) && dim_known(x->dims[1]) && w->dims[0] != x->dims[1])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (weight) has %lld values for %lld classes",
                     (long long)w->dims[0], (long long)x->dims[1]);
  }
  if (red == LOSS_NONE) {
    if (t->rank < 0) nn_out_unknown(c, 0, x->dtype);
    else op_set_out(c, 0, x->dtype, t->rank, t->dims);
  } else {
    op_set_out(c, 0, x->dtype, 0, NULL);
  }
  if (c->n_out > 1) op_out_like(c, 1, 0);
  return SMELT_OK;
}

/* Loss from logp [N, C, D] (double). */
static smelt_status loss_from_logp(op_ctx *c, const double *logp, int64_t N, int64_t C, int64_t D) {
  const tensor *t = c->in[1], *wt = op_in(c, 2);
  tensor *y = c->out[0];
  loss_red red = LOSS_MEAN;
  TRY(loss_reduction(c, &red));
  const ir_attr *ia = ir_attr_find(c->node, "ignore_index");
  bool has_ignore = ia != NULL;
  int64_t ignore = ia ? ia->i : 0;
  int64_t nt = N * D;
  double *w = NULL, *loss = NULL;
  int64_t *tgt = NULL;
  smelt_status st = nn_alloc((void **)&tgt, nt, sizeof(int64_t), "loss targets");
  if (!st) st = nn_alloc((void **)&loss, nt, sizeof(double), "loss");
  if (!st && wt) st = nn_alloc((void **)&w, C, sizeof(double), "loss weights");
  if (!st) {
    nn_load_i64(t->dtype, t->data, 0, 1, nt, tgt);
    if (w) nn_load_f64(wt->dtype, wt->data, 0, 1, C, w);
    double sum = 0, wsum = 0;
    for (int64_t i = 0; i < nt && !st; i++) {
      int64_t k = tgt[i], n = i / D, d = i % D;
      if (has_ignore && k == ignore) {
        loss[i] = 0;
        continue;
      }
      if (k < 0 || k >= C) {
        st = err_set(SMELT_ERR_RUNTIME, "target %lld at %lld is not a class index in [0, %lld)",
                     (long long)k, (long long)i, (long long)C);
        break;
      }
      double wi = w ? w[k] : 1.0;
      loss[i] = -logp[(n * C + k) * D + d] * wi;
      sum += loss[i];
      wsum += wi;
    }
    if (!st) {
      if (red == LOSS_NONE) {
        nn_store_f64(y->dtype, y->data, 0, 1, nt, loss);
      } else {
        double v = red == LOSS_SUM ? sum : (w || has_ignore) ? sum / wsum : sum / (double)nt;
        nn_store_f64(y->dtype, y->data, 0, 1, 1, &v);
      }
    }
  }
  free(tgt);
  free(loss);
  free(w);
  return st;
}

static void loss_dims(const tensor *x, int64_t *N, int64_t *C, int64_t *D) {
  *N = x->dims[0];
  *C = x->dims[1];
  *D = nn_prod(x->dims, 2, x->rank);
}

static smelt_status nll_run(op_ctx *c) {
  TRY(loss_infer(c)); /* shapes of target and weight against the input */
  const tensor *x = c->in[0];
  int64_t N, C, D, n = tensor_numel(x);
  loss_dims(x, &N, &C, &D);
  double *logp = NULL;
  TRY(nn_alloc((void **)&logp, n, sizeof(double), "loss input"));
  nn_load_f64(x->dtype, x->data, 0, 1, n, logp);
  smelt_status st = loss_from_logp(c, logp, N, C, D);
  free(logp);
  return st;
}

static smelt_status sce_run(op_ctx *c) {
  TRY(loss_infer(c));
  const tensor *x = c->in[0];
  int64_t N, C, D, n = tensor_numel(x);
  loss_dims(x, &N, &C, &D);
  double *logp = NULL;
  TRY(nn_alloc((void **)&logp, n, sizeof(double), "log_prob"));
  nn_load_f64(x->dtype, x->data, 0, 1, n, logp);
  for (int64_t q = 0; q < N * D; q++) { /* log_softmax over C, stride D */
    double *v = logp + (q / D) * C * D + q % D, mx = -INFINITY, s = 0;
    for (int64_t k = 0; k < C; k++) mx = v[k * D] > mx ? v[k * D] : mx;
    for (int64_t k = 0; k < C; k++) s += exp(v[k * D] - mx);
    double lse = mx + log(s);
    for (int64_t k = 0; k < C; k++) v[k * D] -= lse;
  }
  if (c->n_out > 1) nn_store_f64(c->out[1]->dtype, c->out[1]->data, 0, 1, n, logp);
  smelt_status st = loss_from_logp(c, logp, N, C, D);
  free(logp);
  return st;
}

const op_def op_family_loss[] = {
    {"NegativeLogLikelihoodLoss", "", 2, 3, 1, 1, loss_infer, nll_run, false},
    {"SoftmaxCrossEntropyLoss", "", 2, 3, 1, 2, loss_infer, sce_run, false},
    {0}};
