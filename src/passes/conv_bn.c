/* Conv + BatchNormalization folding.
 *
 * BN(Conv(x, W, b)) with W, b and every BN parameter constant, and the Conv
 * read by nothing else, is Conv(x, W', b') with, per output channel m,
 *   s = scale[m] / sqrt(var[m] + eps),  W'[m] = W[m] * s,
 *   b'[m] = (b[m] - mean[m]) * s + B[m]
 * computed in double and rounded once to the weights' type.  Only the BN's
 * first output may be used (the others exist in training mode only).
 *
 * Complexity: O(n) per run plus the folded weights' size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/quote.h"

static bool float_const(rewriter *w, int v, int64_t n, const tensor **t) {
  *t = v >= 0 ? rw_const(w, v) : NULL;
  return *t && dtype_is_float((*t)->dtype) && dtype_size((*t)->dtype) && (n < 0 || tensor_numel(*t) == n);
}

static bool bn_inference_only(rewriter *w, const ir_node *bn) {
  for (int k = 1; k < bn->n_outputs; k++)
    if (bn->outputs[k] >= 0 && (rw_n_uses(w, bn->outputs[k]) || rw_is_output(w, bn->outputs[k])))
      return false;
  return bn->opset < 14 || !ir_attr_int(bn, "training_mode", 0);
}

/* New weights and bias for the folded conv; false if the shapes do not fit. */
static smelt_status fold_params(rewriter *w, const ir_node *conv, const ir_node *bn, tensor **nw,
                                tensor **nb, bool *ok) {
  *ok = false;
  const tensor *W, *b = NULL, *sc, *B, *mean, *var;
  if (!float_const(w, conv->inputs[1], -1, &W) || W->rank < 1) return SMELT_OK;
  int64_t M = W->dims[0], per = M > 0 ? tensor_numel(W) / M : 0;
  if (conv->n_inputs > 2 && conv->inputs[2] >= 0 && !float_const(w, conv->inputs[2], M, &b)) return SMELT_OK;
  if (!float_const(w, bn->inputs[1], M, &sc) || !float_const(w, bn->inputs[2], M, &B) ||
      !float_const(w, bn->inputs[3], M, &mean) || !float_const(w, bn->inputs[4], M, &var))
    return SMELT_OK;
  double eps = ir_attr_float(bn, "epsilon", 1e-5f);
  TRY(rw_tensor(nw, W->dtype, W->rank, W->dims));
  smelt_status s = rw_tensor(nb, W->dtype, 1, &M);
  if (s) {
    tensor_free(*nw);
    return s;
  }
  for (int64_t m = 0; m < M; m++) {
    double f = tensor_get_f64(sc, m) / sqrt(tensor_get_f64(var, m) + eps);
    for (int64_t i = 0; i < per; i++) tensor_set_f64(*nw, m * per + i, tensor_get_f64(W, m * per + i) * f);
    double b0 = b ? tensor_get_f64(b, m) : 0.0;
    tensor_set_f64(*nb, m, (b0 - tensor_get_f64(mean, m)) * f + tensor_get_f64(B, m));
  }
  *ok = true;
  return SMELT_OK;
}

static smelt_status fold_pair(rewriter *w, int conv_id, bool *done) {
  *done = false;
  const ir_node *conv = rw_node(w, conv_id);
  if (conv->n_inputs < 2 || conv->outputs[0] < 0) return SMELT_OK;
  int bn_id = rw_sole_user(w, conv->outputs[0]);
  if (bn_id < 0 || !rw_is_op(w, bn_id, "BatchNormalization")) return SMELT_OK;
  const ir_node *bn = rw_node(w, bn_id);
  if (bn->n_inputs != 5 || bn->inputs[0] != conv->outputs[0] || !bn_inference_only(w, bn) ||
      bn->outputs[0] < 0 || rw_val(w, bn->outputs[0])->dtype != rw_val(w, conv->outputs[0])->dtype)
    return SMELT_OK;
  tensor *nw = NULL, *nb = NULL;
  bool ok;
  TRY(fold_params(w, conv, bn, &nw, &nb, &ok));
  if (!ok) return SMELT_OK;
  int wv, bv, nid;
  smelt_status s = rw_add_constant(w, "conv_bn.weight", nw, &wv);
  if (s) {
    tensor_free(nb);
    return s;
  }
  TRY(rw_add_constant(w, "conv_bn.bias", nb, &bv));
  int x = rw_node(w, conv_id)->inputs[0], n_attrs = rw_node(w, conv_id)->n_attrs, y = bn->outputs[0];
  TRY(rw_replace_node(w, bn_id, "Conv", "", 3, n_attrs, &nid));
  rw_kill(w, conv_id);
  conv = rw_node(w, conv_id);
  for (int a = 0; a < n_attrs; a++) TRY(rw_attr_copy(w, nid, a, &conv->attrs[a]));
  rw_node(w, nid)->opset = conv->opset;
  TRY(rw_set_input(w, nid, 0, x));
  TRY(rw_set_input(w, nid, 1, wv));
  TRY(rw_set_input(w, nid, 2, bv));
  char a[160], b[160];
  pass_log(w->r, "folded %s (BatchNormalization) into %s (Conv) -> Conv writing %s",
           rw_name(w, bn_id, b, sizeof b), rw_name(w, conv_id, a, sizeof a), q(rw_val(w, y)->name));
  *done = true;
  return SMELT_OK;
}

smelt_status pass_conv_bn(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  int n = g->n_nodes;
  for (int id = 0; !s && id < n; id++) {
    if (!rw_is_op(&w, id, "Conv")) continue;
    bool done;
    s = fold_pair(&w, id, &done);
    w.changes += done;
  }
  return rw_end(&w, s, changes);
}
