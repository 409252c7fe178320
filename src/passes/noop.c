/* Removal of nodes that return their input unchanged: Identity, Dropout at
 * inference (its mask unused), Cast to the input's type, Reshape / Expand /
 * Squeeze / Unsqueeze / Flatten whose output shape is the input's, Transpose
 * by the identity permutation, Pad by zeros, Slice of the whole tensor with
 * positive steps, Concat and Split of a single piece.
 *
 * "Same shape" means the same rank and every dim equal, concrete or the same
 * symbol (inference only gives two values one symbol when they are equal).
 * A removed node's consumers read its input; when its output is a graph
 * output, the input's producer writes the output instead (rw_bypass), so
 * output names never change.  A node between a graph input (or an
 * initializer) and a graph output stays.
 *
 * Complexity: O(n + e) per run (a bypass moves the removed output's uses). */
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"

static bool same_type_and_shape(rewriter *w, int a, int b) {
  const ir_value *x = rw_val(w, a), *y = rw_val(w, b);
  return x->dtype == y->dtype && x->dtype != SMELT_UNDEFINED && x->kind == y->kind &&
         rw_same_shape(x, y);
}

/* Known integer input k of node nd with every element satisfying pred. */
static bool const_ints_all(rewriter *w, const ir_node *nd, int k, bool (*pred)(int64_t)) {
  if (k >= nd->n_inputs || nd->inputs[k] < 0) return false;
  const tensor *t = rw_const(w, nd->inputs[k]);
  if (!t || !dtype_is_int(t->dtype)) return false;
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (!pred(tensor_get_i64(t, i))) return false;
  return true;
}

static bool is_zero(int64_t x) { return x == 0; }
static bool is_positive(int64_t x) { return x > 0; }

static bool identity_perm(const ir_node *nd, int rank) {
  int n;
  const int64_t *p = ir_attr_ints(nd, "perm", &n);
  if (!p) return rank >= 0 && rank <= 1; /* default reverses the dims */
  for (int i = 0; i < n; i++)
    if (p[i] != i) return false;
  return true;
}

static bool pads_zero(rewriter *w, const ir_node *nd) {
  if (nd->opset < 11) {
    int n;
    const int64_t *p = ir_attr_ints(nd, "pads", &n);
    for (int i = 0; i < n; i++)
      if (p[i]) return false;
    return true;
  }
  return const_ints_all(w, nd, 1, is_zero);
}

static bool dropout_is_noop(rewriter *w, const ir_node *nd) {
  if (nd->n_outputs > 1 && nd->outputs[1] >= 0 &&
      (rw_n_uses(w, nd->outputs[1]) || rw_is_output(w, nd->outputs[1])))
    return false;
  if (nd->n_inputs > 2 && nd->inputs[2] >= 0) {
    double training;
    if (!rw_scalar(w, nd->inputs[2], &training) || training != 0) return false;
  }
  return true;
}

/* The node returns input 0 unchanged (as output 0). */
static bool is_noop(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  if (*nd->domain || nd->n_inputs < 1 || nd->inputs[0] < 0 || nd->n_outputs < 1 || nd->outputs[0] < 0)
    return false;
  const char *op = nd->op_type;
  int in = nd->inputs[0], out = nd->outputs[0];
  if (!strcmp(op, "Identity")) return nd->n_outputs == 1;
  if (!strcmp(op, "Dropout")) return dropout_is_noop(w, nd);
  if (nd->n_outputs != 1) return false;
  bool same = same_type_and_shape(w, in, out);
  if (!strcmp(op, "Cast")) return rw_val(w, in)->dtype == rw_val(w, out)->dtype && same;
  if (!strcmp(op, "Reshape") || !strcmp(op, "Expand") || !strcmp(op, "Squeeze") ||
      !strcmp(op, "Unsqueeze") || !strcmp(op, "Flatten"))
    return same;
  if (!strcmp(op, "Transpose")) return same && identity_perm(nd, rw_val(w, in)->rank);
  if (!strcmp(op, "Pad")) return same && pads_zero(w, nd);
  if (!strcmp(op, "Slice")) {
    if (nd->opset < 10) return same; /* steps came with opset 10 */
    bool unit_steps = nd->n_inputs < 5 || nd->inputs[4] < 0 || const_ints_all(w, nd, 4, is_positive);
    return same && unit_steps;
  }
  if (!strcmp(op, "Concat")) return nd->n_inputs == 1 && same;
  if (!strcmp(op, "Split")) return same; /* one output: the whole input */
  return false;
}

smelt_status pass_noop(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  for (int id = 0; !s && id < g->n_nodes; id++) {
    if (!rw_live(&w, id) || !is_noop(&w, id)) continue;
    const ir_node *nd = rw_node(&w, id);
    bool done = false;
    s = rw_bypass(&w, id, nd->inputs[0], nd->outputs[0], &done);
    w.changes += done;
  }
  return rw_end(&w, s, changes);
}
