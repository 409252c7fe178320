/* Normalization and GELU patterns.
 *
 * GELU (exact, erf form) in the shapes exporters write, x float:
 *   Mul(Mul(x, Add(Erf(x / sqrt2), 1)), 0.5)       (torch)
 *   Mul(Mul(x, 0.5), Add(Erf(x / sqrt2), 1))
 *   Mul(x, Mul(Add(Erf(x / sqrt2), 1), 0.5))
 * (x / sqrt2 also as x * (1/sqrt2); operands of Add/Mul in either order)
 * becomes ONNX Gelu (opset 20 semantics, approximate = "none"), which eager
 * runs and fuse_epilogue folds into a preceding GEMM.  The tanh form,
 *   0.5 x (1 + Tanh(sqrt(2/pi) (x + 0.044715 x^3)))   (x^3 as Pow or Muls)
 * becomes Gelu with approximate = "tanh" the same way.
 *
 * LayerNormalization from its decomposition over the trailing axes:
 *   m = ReduceMean(x), d = x - m, v = ReduceMean(d*d or d^2),
 *   y = d / Sqrt(v + eps) [* gamma] [+ beta]
 * becomes LayerNormalization(x, gamma (ones if absent), beta) with axis = the
 * first reduced axis and epsilon = eps.  Every intermediate must feed only
 * the pattern.  One log line per fusion.
 *
 * Complexity: O(n) per run: bounded patterns around each candidate node. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/quote.h"

static bool near(double x, double want) { return fabs(x - want) <= 1e-6 * fabs(want); }

/* Node `id` is a binary `op` with one operand v; *other gets the other one. */
static bool binary_with(rewriter *w, int id, const char *op, int v, int *other) {
  if (id < 0 || !rw_is_op(w, id, op)) return false;
  const ir_node *nd = rw_node(w, id);
  if (nd->n_inputs != 2 || nd->n_outputs != 1) return false;
  if (nd->inputs[0] == v) *other = nd->inputs[1];
  else if (nd->inputs[1] == v) *other = nd->inputs[0];
  else return false;
  return true;
}

static bool scalar_is(rewriter *w, int v, double want) {
  double x;
  return rw_scalar(w, v, &x) && near(x, want);
}

/* A scalar constant equal to want that cannot broadcast x (of known rank) up. */
static bool scalar_for(rewriter *w, int v, double want, int x) {
  return scalar_is(w, v, want) && rw_val(w, x)->rank >= 0 && rw_val(w, v)->rank <= rw_val(w, x)->rank;
}

/* ---- GELU ---- */

/* x such that u = x / sqrt2 (or x * 1/sqrt2). */
static int gelu_input(rewriter *w, int u) {
  int p = rw_producer(w, u);
  if (p < 0) return -1;
  const ir_node *nd = rw_node(w, p);
  if (nd->n_inputs != 2) return -1;
  int a = nd->inputs[0], b = nd->inputs[1];
  if (rw_is_op(w, p, "Div") && scalar_for(w, b, M_SQRT2, a)) return a;
  if (rw_is_op(w, p, "Mul")) {
    if (scalar_for(w, b, M_SQRT1_2, a)) return a;
    if (scalar_for(w, a, M_SQRT1_2, b)) return b;
  }
  return -1;
}

/* The common end of both GELU forms: s = Add(f, 1) (the sole user of f),
 * then y = (x * s) * 0.5, x * (s * 0.5) or (x * 0.5) * s.  Appends the
 * nodes on the way to nodes; *y_out gets y. */
static bool match_gelu_tail(rewriter *w, int f, int x, int *y_out, int *nodes, int *n_nodes) {
  int other, add = rw_sole_user(w, f);
  if (!binary_with(w, add, "Add", f, &other) || !scalar_for(w, other, 1.0, x)) return false;
  nodes[(*n_nodes)++] = add;
  int s = rw_node(w, add)->outputs[0], m1 = rw_sole_user(w, s);
  if (!binary_with(w, m1, "Mul", s, &other)) return false;
  nodes[(*n_nodes)++] = m1;
  int m1v = rw_node(w, m1)->outputs[0];
  int half = rw_producer_op(w, other, "Mul"), hx;
  if (other == x) { /* (x * s) * 0.5 */
    int m2 = rw_sole_user(w, m1v);
    if (!binary_with(w, m2, "Mul", m1v, &other) || !scalar_for(w, other, 0.5, x)) return false;
    nodes[(*n_nodes)++] = m2;
    *y_out = rw_node(w, m2)->outputs[0];
  } else if (scalar_for(w, other, 0.5, x)) { /* x * (s * 0.5) */
    int m2 = rw_sole_user(w, m1v);
    if (!binary_with(w, m2, "Mul", m1v, &other) || other != x) return false;
    nodes[(*n_nodes)++] = m2;
    *y_out = rw_node(w, m2)->outputs[0];
  } else if (half >= 0 && binary_with(w, half, "Mul", x, &hx) && scalar_for(w, hx, 0.5, x) &&
             rw_sole_user(w, other) == m1) { /* (x * 0.5) * s */
    nodes[(*n_nodes)++] = half;
    *y_out = m1v;
  } else {
    return false;
  }
  /* every step is elementwise on x's shape: scalars of rank <= x's cannot broadcast it */
  return rw_val(w, *y_out)->dtype == rw_val(w, x)->dtype;
}

/* From Erf node e, the value y = gelu(x) and the nodes on the way. */
static bool match_gelu(rewriter *w, int e, int *x_out, int *y_out, int *nodes, int *n_nodes) {
  const ir_node *en = rw_node(w, e);
  int x = gelu_input(w, en->inputs[0]);
  *n_nodes = 0;
  if (x < 0 || !dtype_is_float(rw_val(w, x)->dtype) || rw_sole_user(w, en->inputs[0]) != e) return false;
  nodes[(*n_nodes)++] = rw_producer(w, en->inputs[0]);
  nodes[(*n_nodes)++] = e;
  *x_out = x;
  return match_gelu_tail(w, en->outputs[0], x, y_out, nodes, n_nodes);
}

/* c = x^3: Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)), c its sole
 * product's only use.  Appends the nodes. */
static bool match_cube(rewriter *w, int c, int x, int *nodes, int *n_nodes) {
  int p = rw_producer(w, c), other, sq;
  if (p < 0) return false;
  const ir_node *nd = rw_node(w, p);
  if (rw_is_op(w, p, "Pow") && nd->n_inputs == 2 && nd->inputs[0] == x && scalar_for(w, nd->inputs[1], 3.0, x)) {
    nodes[(*n_nodes)++] = p;
    return true;
  }
  if (!binary_with(w, p, "Mul", x, &other)) return false;
  sq = rw_producer_op(w, other, "Mul");
  if (sq < 0 || rw_sole_user(w, other) != p) return false;
  const ir_node *sn = rw_node(w, sq);
  if (sn->n_inputs != 2 || sn->inputs[0] != x || sn->inputs[1] != x) return false;
  nodes[(*n_nodes)++] = p;
  nodes[(*n_nodes)++] = sq;
  return true;
}

/* From Tanh node t, the tanh form:
 *   t = Tanh(Mul(Add(x, Mul(x^3, 0.044715)), sqrt(2/pi)))
 *   y = 0.5 x (1 + t)   (the tail's three shapes)
 * (operands of Add/Mul in either order), what GPT-2's gelu_new and
 * torch's gelu(approximate='tanh') export as. */
static bool match_gelu_tanh(rewriter *w, int t, int *x_out, int *y_out, int *nodes, int *n_nodes) {
  const ir_node *tn = rw_node(w, t);
  *n_nodes = 0;
  int s = tn->inputs[0], m = rw_producer_op(w, s, "Mul");
  if (m < 0 || rw_sole_user(w, s) != t || rw_node(w, m)->n_inputs != 2) return false;
  const ir_node *mn = rw_node(w, m);
  int r = -1;
  for (int k = 0; k < 2 && r < 0; k++) {
    double c;
    if (rw_scalar(w, mn->inputs[1 - k], &c) && near(c, 0.7978845608028654)) r = mn->inputs[k];
  }
  int add = r >= 0 ? rw_producer_op(w, r, "Add") : -1;
  if (add < 0 || rw_sole_user(w, r) != m || rw_node(w, add)->n_inputs != 2) return false;
  nodes[(*n_nodes)++] = m;
  nodes[(*n_nodes)++] = add;
  const ir_node *an = rw_node(w, add);
  for (int k = 0; k < 2; k++) { /* Add(x, q): which operand is x */
    int x = an->inputs[k], qv = an->inputs[1 - k], qm = rw_producer_op(w, qv, "Mul"), cube;
    if (qm < 0 || x == qv || rw_sole_user(w, qv) != add || rw_val(w, x)->rank < 0) continue;
    if (!dtype_is_float(rw_val(w, x)->dtype)) continue;
    const ir_node *qn = rw_node(w, qm);
    if (qn->n_inputs != 2) continue;
    if (scalar_for(w, qn->inputs[1], 0.044715, x)) cube = qn->inputs[0];
    else if (scalar_for(w, qn->inputs[0], 0.044715, x)) cube = qn->inputs[1];
    else continue;
    int n0 = *n_nodes;
    nodes[(*n_nodes)++] = qm;
    if (rw_sole_user(w, cube) == qm && match_cube(w, cube, x, nodes, n_nodes)) {
      nodes[(*n_nodes)++] = t;
      *x_out = x;
      return match_gelu_tail(w, tn->outputs[0], x, y_out, nodes, n_nodes);
    }
    *n_nodes = n0;
  }
  return false;
}

static smelt_status fuse_gelu(rewriter *w, int e, bool tanh_form, bool *done) {
  int x, y, nodes[12], n;
  *done = false;
  if (!(tanh_form ? match_gelu_tanh : match_gelu)(w, e, &x, &y, nodes, &n)) return SMELT_OK;
  int last = rw_producer(w, y), id;
  char a[160], b[160];
  pass_log(w->r, "fused %s .. %s (%d nodes, %s GELU) -> Gelu writing %s", rw_name(w, nodes[0], a, sizeof a),
           rw_name(w, last, b, sizeof b), n, tanh_form ? "tanh" : "erf", q(rw_val(w, y)->name));
  TRY(rw_replace_node(w, last, "Gelu", "", 1, tanh_form ? 1 : 0, &id));
  rw_node(w, id)->opset = 20;
  if (tanh_form) TRY(rw_attr_string(w, id, 0, "approximate", "tanh"));
  for (int k = 0; k < n; k++) rw_kill(w, nodes[k]);
  TRY(rw_set_input(w, id, 0, x));
  *done = true;
  return SMELT_OK;
}

/* ---- LayerNormalization ---- */

/* Reduced axes of a ReduceMean as the first of a trailing run; -1 if the axes
 * are not exactly the last ones or keepdims is off. */
static int trailing_axis(rewriter *w, int id, int rank) {
  const ir_node *nd = rw_node(w, id);
  if (!ir_attr_int(nd, "keepdims", 1) || rank <= 0) return -1;
  int64_t axes[SMELT_MAX_RANK];
  int n = 0;
  if (nd->opset < 18) {
    const int64_t *a = ir_attr_ints(nd, "axes", &n);
    if (!a || n > SMELT_MAX_RANK) return -1;
    memcpy(axes, a, sizeof(int64_t) * (size_t)n);
  } else {
    const tensor *t = nd->n_inputs > 1 && nd->inputs[1] >= 0 ? rw_const(w, nd->inputs[1]) : NULL;
    if (!t || !dtype_is_int(t->dtype) || tensor_numel(t) > SMELT_MAX_RANK) return -1;
    n = (int)tensor_numel(t);
    for (int i = 0; i < n; i++) axes[i] = tensor_get_i64(t, i);
  }
  bool seen[SMELT_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || seen[a]) return -1;
    seen[a] = true;
  }
  if (n == 0) return -1;
  for (int a = rank - n; a < rank; a++)
    if (!seen[a]) return -1;
  return rank - n;
}

typedef struct ln_match {
  int x, gamma, beta, y, axis;
  float eps;
  int nodes[10], n;
} ln_match;

/* d = x - mean(x) read by exactly the square and the final Div. */
static bool match_variance(rewriter *w, int d, ln_match *m, int *div) {
  int n = rw_n_uses(w, d), sq = -1, other;
  *div = -1;
  if (n < 2 || n > 3 || rw_is_output(w, d)) return false;
  for (int k = 0; k < n; k++) {
    int u = w->uses[d].node[k];
    const ir_node *nd = rw_node(w, u);
    if (rw_is_op(w, u, "Div") && nd->inputs[0] == d && nd->inputs[1] != d) *div = u;
    else if ((rw_is_op(w, u, "Pow") && nd->inputs[0] == d && scalar_is(w, nd->inputs[1], 2.0)) ||
             (rw_is_op(w, u, "Mul") && nd->inputs[0] == d && nd->inputs[1] == d))
      sq = u;
    else
      return false;
  }
  /* d*d reads d twice: three uses then, else two */
  if (sq < 0 || *div < 0 || n != (rw_is_op(w, sq, "Mul") ? 3 : 2)) return false;
  int rv = rw_sole_user(w, rw_node(w, sq)->outputs[0]);
  if (rv < 0 || !rw_is_op(w, rv, "ReduceMean") ||
      trailing_axis(w, rv, rw_val(w, m->x)->rank) != m->axis)
    return false;
  int add = rw_sole_user(w, rw_node(w, rv)->outputs[0]);
  double eps;
  if (!binary_with(w, add, "Add", rw_node(w, rv)->outputs[0], &other) || !rw_scalar(w, other, &eps)) return false;
  int sqrt_id = rw_sole_user(w, rw_node(w, add)->outputs[0]);
  if (sqrt_id < 0 || !rw_is_op(w, sqrt_id, "Sqrt") || rw_node(w, *div)->inputs[1] != rw_node(w, sqrt_id)->outputs[0] ||
      rw_sole_user(w, rw_node(w, sqrt_id)->outputs[0]) != *div)
    return false;
  m->eps = (float)eps;
  int add_nodes[4] = {sq, rv, add, sqrt_id};
  for (int k = 0; k < 4; k++) m->nodes[m->n++] = add_nodes[k];
  return true;
}

/* Optional affine tail: * gamma, + beta (constants shaped within the normalized dims). */
static void match_affine(rewriter *w, ln_match *m) {
  int other, u = rw_sole_user(w, m->y);
  int norm_rank = rw_val(w, m->x)->rank - m->axis;
  m->gamma = m->beta = -1;
  if (binary_with(w, u, "Mul", m->y, &other) && rw_const(w, other) &&
      rw_val(w, other)->rank <= norm_rank && rw_val(w, other)->dtype == rw_val(w, m->x)->dtype) {
    m->gamma = other;
    m->nodes[m->n++] = u;
    m->y = rw_node(w, u)->outputs[0];
    u = rw_sole_user(w, m->y);
  }
  if (binary_with(w, u, "Add", m->y, &other) && rw_const(w, other) &&
      rw_val(w, other)->rank <= norm_rank && rw_val(w, other)->dtype == rw_val(w, m->x)->dtype) {
    m->beta = other;
    m->nodes[m->n++] = u;
    m->y = rw_node(w, u)->outputs[0];
  }
}

static bool match_ln(rewriter *w, int mean_id, ln_match *m) {
  const ir_node *mn = rw_node(w, mean_id);
  memset(m, 0, sizeof *m);
  m->x = mn->inputs[0];
  const ir_value *xv = rw_val(w, m->x);
  if (!dtype_is_float(xv->dtype) || xv->rank < 1) return false;
  m->axis = trailing_axis(w, mean_id, xv->rank);
  int sub = rw_sole_user(w, mn->outputs[0]), div;
  if (m->axis < 0 || sub < 0 || !rw_is_op(w, sub, "Sub") || rw_node(w, sub)->inputs[0] != m->x ||
      rw_node(w, sub)->inputs[1] != mn->outputs[0])
    return false;
  m->nodes[m->n++] = mean_id;
  m->nodes[m->n++] = sub;
  if (!match_variance(w, rw_node(w, sub)->outputs[0], m, &div)) return false;
  m->nodes[m->n++] = div;
  m->y = rw_node(w, div)->outputs[0];
  match_affine(w, m);
  return rw_same_shape(xv, rw_val(w, m->y)) && rw_val(w, m->y)->dtype == xv->dtype;
}

/* Ones (gamma when the pattern has none) over the normalized dims. */
static smelt_status ones_like_norm(rewriter *w, const ln_match *m, int *id) {
  const ir_value *xv = rw_val(w, m->x);
  int r = xv->rank - m->axis;
  for (int d = m->axis; d < xv->rank; d++)
    if (!dim_known(xv->dims[d])) return err_set(SMELT_ERR_UNSUPPORTED, "normalized dims are not concrete");
  tensor *t = NULL;
  TRY(rw_tensor(&t, xv->dtype, r, xv->dims + m->axis));
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) tensor_set_f64(t, i, 1.0);
  return rw_add_constant(w, "layernorm.ones", t, id);
}

static smelt_status fuse_ln(rewriter *w, int mean_id, bool *done) {
  ln_match m;
  *done = false;
  if (!match_ln(w, mean_id, &m)) return SMELT_OK;
  int gamma = m.gamma, id;
  if (gamma < 0) {
    const ir_value *xv = rw_val(w, m.x);
    for (int d = m.axis; d < xv->rank; d++)
      if (!dim_known(xv->dims[d])) return SMELT_OK;
    TRY(ones_like_norm(w, &m, &gamma));
  }
  int last = rw_producer(w, m.y);
  char a[160];
  pass_log(w->r, "fused %s .. (%d nodes, mean/variance) -> LayerNormalization(axis %d, eps %g) writing %s",
           rw_name(w, mean_id, a, sizeof a), m.n, m.axis, m.eps, q(rw_val(w, m.y)->name));
  TRY(rw_replace_node(w, last, "LayerNormalization", "", 3, 2, &id));
  rw_node(w, id)->opset = rw_node(w, mean_id)->opset > 17 ? rw_node(w, mean_id)->opset : 17;
  for (int k = 0; k < m.n; k++) rw_kill(w, m.nodes[k]);
  TRY(rw_set_input(w, id, 0, m.x));
  TRY(rw_set_input(w, id, 1, gamma));
  TRY(rw_set_input(w, id, 2, m.beta));
  TRY(rw_attr_int(w, id, 0, "axis", m.axis));
  TRY(rw_attr_float(w, id, 1, "epsilon", m.eps));
  *done = true;
  return SMELT_OK;
}

smelt_status pass_fuse_norm(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  int n = g->n_nodes;
  for (int id = 0; !s && id < n; id++) {
    bool done = false;
    if (rw_is_op(&w, id, "Erf")) s = fuse_gelu(&w, id, false, &done);
    else if (rw_is_op(&w, id, "Tanh")) s = fuse_gelu(&w, id, true, &done);
    else if (rw_is_op(&w, id, "ReduceMean")) s = fuse_ln(&w, id, &done);
    w.changes += done;
  }
  return rw_end(&w, s, changes);
}
