/* Algebraic simplification.
 *
 *  - Div(x, c) -> Mul(x, 1/c) for a float constant c whose elements are
 *    finite and nonzero with a finite reciprocal.  Exact when every 1/c is a
 *    power of two; otherwise x * (1/c) is within 1 ulp of x / c (the
 *    reciprocal is rounded once, the product once).
 *  - Mul by ones, Add/Sub by zeros, Div/Pow by one: removed when the result
 *    has x's type and shape (no broadcast up).  x + 0 turns -0 into +0, which
 *    no comparison can tell apart.
 *  - Pow(x, 2) -> Mul(x, x) for floats (both are correctly rounded squares).
 *  - Transpose(Transpose(x, p), q) -> Transpose(x, p o q), or nothing when that
 *    is the identity; done when the inner one has no other consumer.
 *  - A Transpose that moves only dims of size 1 (torch.nn.MultiheadAttention's
 *    [1, S, E] <-> [S, 1, E]) -> a Reshape, which copies nothing.
 *  - A reshape-like op (Reshape, Flatten, Squeeze, Unsqueeze) of a reshape-like
 *    op: reads the inner one's input directly, as a Reshape to the concrete
 *    output dims, or, for a Reshape whose target has no 0 ("copy this dim")
 *    entry, to the same target.
 *  - A Reshape or Expand to a target computed at run time whose output dims
 *    inference knows (concrete or symbolic): a constant target (Reshape: 0
 *    for a symbolic dim the input has at the same place, at most one -1;
 *    Expand: 1 for one the input has), so the shape computation dies.
 *  - Reshape(Gemm(Reshape(x, [-1, K]), W, b), x's leading dims + [N]) (a
 *    linear layer on flattened rows: GPT-2's Conv1D) -> MatMul(x, W) + b.
 * MatMul + bias Add is left to fuse_epilogue (smelt.Gemm).
 *
 * Complexity: O(n) per run: each rule looks at a node and its producer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/quote.h"

static bool is_float_dt(smelt_dtype t) { return t == SMELT_F32 || t == SMELT_F64; }

static bool same_type_and_shape(rewriter *w, int a, int b) {
  const ir_value *x = rw_val(w, a), *y = rw_val(w, b);
  return x->dtype == y->dtype && x->dtype != SMELT_UNDEFINED && rw_same_shape(x, y);
}

/* ---- Div by a constant ---- */

static smelt_status div_to_mul(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  const tensor *c = rw_const(w, nd->inputs[1]);
  if (!c || !is_float_dt(c->dtype) || c->dtype != rw_val(w, nd->inputs[0])->dtype) return SMELT_OK;
  int64_t n = tensor_numel(c);
  for (int64_t i = 0; i < n; i++) {
    double x = tensor_get_f64(c, i);
    double rcp = c->dtype == SMELT_F32 ? (double)(1.0f / (float)x) : 1.0 / x;
    if (!isfinite(x) || x == 0 || !isfinite(rcp) || rcp == 0) return SMELT_OK;
  }
  tensor *t = NULL;
  TRY(rw_tensor(&t, c->dtype, c->rank, c->dims));
  for (int64_t i = 0; i < n; i++) {
    if (c->dtype == SMELT_F32) ((float *)t->data)[i] = 1.0f / ((const float *)c->data)[i];
    else ((double *)t->data)[i] = 1.0 / ((const double *)c->data)[i];
  }
  int cv;
  TRY(rw_add_constant(w, "reciprocal", t, &cv));
  TRY(rw_set_input(w, id, 1, cv));
  TRY(rw_set_op(w, id, "Mul"));
  *done = true;
  return SMELT_OK;
}

/* ---- identity operands ---- */

/* Operand index (0/1) of x when the other operand is the op's identity. */
static int identity_operand(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  if (nd->n_inputs != 2 || nd->inputs[0] < 0 || nd->inputs[1] < 0) return -1;
  const char *op = nd->op_type;
  int a = nd->inputs[0], b = nd->inputs[1];
  if (!strcmp(op, "Mul")) return rw_all_equal(w, b, 1) ? 0 : rw_all_equal(w, a, 1) ? 1 : -1;
  if (!strcmp(op, "Add")) return rw_all_equal(w, b, 0) ? 0 : rw_all_equal(w, a, 0) ? 1 : -1;
  if (!strcmp(op, "Sub")) return rw_all_equal(w, b, 0) ? 0 : -1;
  if (!strcmp(op, "Div") || !strcmp(op, "Pow")) return rw_all_equal(w, b, 1) ? 0 : -1;
  return -1;
}

static smelt_status drop_identity_op(rewriter *w, int id, bool *done) {
  int k = identity_operand(w, id);
  if (k < 0) return SMELT_OK;
  const ir_node *nd = rw_node(w, id);
  int x = nd->inputs[k], y = nd->outputs[0];
  if (y < 0 || !same_type_and_shape(w, x, y)) return SMELT_OK;
  return rw_bypass(w, id, x, y, done);
}

static smelt_status square(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  double e;
  if (!rw_scalar(w, nd->inputs[1], &e) || e != 2 || !is_float_dt(rw_val(w, nd->inputs[0])->dtype) ||
      rw_val(w, nd->inputs[0])->dtype != rw_val(w, nd->outputs[0])->dtype)
    return SMELT_OK;
  TRY(rw_set_input(w, id, 1, nd->inputs[0]));
  TRY(rw_set_op(w, id, "Mul"));
  *done = true;
  return SMELT_OK;
}

/* ---- Transpose pairs ---- */

static bool get_perm(rewriter *w, const ir_node *nd, int64_t *perm, int *n) {
  const int64_t *p = ir_attr_ints(nd, "perm", n);
  int rank = rw_val(w, nd->inputs[0])->rank;
  if (!p) { /* default: reverse */
    if (rank < 0) return false;
    *n = rank;
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return true;
  }
  if (*n > SMELT_MAX_RANK || *n != rank) return false;
  memcpy(perm, p, sizeof(int64_t) * (size_t)*n);
  for (int i = 0; i < *n; i++)
    if (perm[i] < 0 || perm[i] >= *n) return false;
  return true;
}

static smelt_status transpose_pair(rewriter *w, int id, bool *done) {
  const ir_node *outer = rw_node(w, id);
  int inner_id = rw_producer_op(w, outer->inputs[0], "Transpose");
  if (inner_id < 0 || rw_sole_user(w, outer->inputs[0]) != id) return SMELT_OK;
  const ir_node *inner = rw_node(w, inner_id);
  int64_t p[SMELT_MAX_RANK], q[SMELT_MAX_RANK], c[SMELT_MAX_RANK];
  int np, nq;
  if (!get_perm(w, inner, p, &np) || !get_perm(w, outer, q, &nq) || np != nq) return SMELT_OK;
  bool ident = true;
  for (int i = 0; i < nq; i++) {
    c[i] = p[q[i]]; /* out[i] = mid[q[i]] = x[p[q[i]]] */
    ident &= c[i] == i;
  }
  int x = inner->inputs[0], y = outer->outputs[0];
  if (ident) return rw_bypass(w, id, x, y, done);
  int nid;
  TRY(rw_replace_node(w, id, "Transpose", "", 1, 1, &nid));
  TRY(rw_set_input(w, nid, 0, x));
  TRY(rw_attr_ints(w, nid, 0, "perm", c, nq));
  *done = true;
  return SMELT_OK;
}

/* A new int64 constant holding the n entries of a Reshape / Expand target. */
static smelt_status shape_constant(rewriter *w, const int64_t *target, int n, int *v) {
  tensor *t = NULL;
  int64_t r = n;
  TRY(rw_tensor(&t, SMELT_I64, 1, &r));
  memcpy(t->data, target, sizeof(int64_t) * (size_t)n);
  return rw_add_constant(w, "shape", t, v);
}

/* Node id becomes Reshape(x) to the dims of yv, at most one of them unknown
 * (-1 in the target); otherwise it stays. */
static smelt_status to_reshape(rewriter *w, int id, int x, const ir_value *yv, bool *done) {
  int unknown = 0;
  for (int i = 0; i < yv->rank; i++) unknown += !dim_known(yv->dims[i]);
  if (yv->rank < 0 || unknown > 1) return SMELT_OK;
  int64_t sh[SMELT_MAX_RANK];
  for (int i = 0; i < yv->rank; i++) sh[i] = dim_known(yv->dims[i]) ? yv->dims[i] : -1;
  int shape_v, nid;
  TRY(shape_constant(w, sh, yv->rank, &shape_v));
  TRY(rw_replace_node(w, id, "Reshape", "", 2, 0, &nid));
  TRY(rw_set_input(w, nid, 0, x));
  TRY(rw_set_input(w, nid, 1, shape_v));
  *done = true;
  return SMELT_OK;
}

/* A Transpose that moves only dims of size 1 keeps every element where it
 * was: a Reshape to its output's dims (at most one of them unknown: -1). */
static smelt_status transpose_unit(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  const ir_value *xv = rw_val(w, nd->inputs[0]), *yv = rw_val(w, nd->outputs[0]);
  int64_t p[SMELT_MAX_RANK];
  int n;
  if (!get_perm(w, nd, p, &n) || yv->rank != n) return SMELT_OK;
  int64_t last = -1;
  for (int i = 0; i < n; i++) {
    if (xv->dims[p[i]] == 1) continue;
    if (p[i] < last) return SMELT_OK; /* a dim other than 1 changes place */
    last = p[i];
  }
  return to_reshape(w, id, nd->inputs[0], yv, done);
}

/* ---- reshape chains ---- */

static bool reshape_like(rewriter *w, int node) {
  return node >= 0 && (rw_is_op(w, node, "Reshape") || rw_is_op(w, node, "Flatten") ||
                       rw_is_op(w, node, "Squeeze") || rw_is_op(w, node, "Unsqueeze"));
}

/* A Reshape target without 0 entries means the same for any input. */
static bool target_input_free(rewriter *w, const ir_node *nd) {
  if (!rw_is_op(w, (int)(nd - w->g->nodes), "Reshape") || nd->n_inputs < 2) return false;
  const tensor *t = rw_const(w, nd->inputs[1]);
  if (!t || !dtype_is_int(t->dtype)) return false;
  if (ir_attr_int(nd, "allowzero", 0)) return true;
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (tensor_get_i64(t, i) == 0) return false;
  return true;
}

/* A Reshape or Expand whose target is computed at run time (Shape ->
 * Gather -> Concat: what exporters write for [batch, seq, heads, head_dim])
 * gets a constant target when inference knows its output dims (concrete or
 * symbolic, ops/infer_shape_values.h), so the computation dies (dce).
 * Reshape: a concrete dim as itself, a symbolic one the input has at the
 * same place as 0 ("copy", allowzero off), at most one other as -1.
 * Expand: a concrete dim as itself (1 where the input's dim is 1), a
 * symbolic one the input has at the aligned place as 1 ("keep"). */
static smelt_status computed_target(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  bool expand = rw_is_op(w, id, "Expand");
  if (nd->n_inputs != 2 || nd->inputs[1] < 0 || rw_const(w, nd->inputs[1])) return SMELT_OK;
  if (!expand && ir_attr_int(nd, "allowzero", 0)) return SMELT_OK;
  const ir_value *xv = rw_val(w, nd->inputs[0]), *yv = rw_val(w, nd->outputs[0]);
  if (xv->rank < 0 || yv->rank < 0 || (expand && yv->rank < xv->rank)) return SMELT_OK;
  int64_t target[SMELT_MAX_RANK];
  int unknown = 0;
  for (int i = 0; i < yv->rank; i++) {
    int64_t d = yv->dims[i];
    int xi = expand ? i - (yv->rank - xv->rank) : i; /* Expand aligns at the right */
    int64_t xd = xi >= 0 && xi < xv->rank ? xv->dims[xi] : DIM_UNKNOWN;
    if (expand && dim_known(d)) target[i] = d;
    else if (expand && d <= DIM_SYM_BASE && xd == d) target[i] = 1;
    else if (expand) return SMELT_OK;
    else if (dim_known(d) && d > 0) target[i] = d;
    else if (d <= DIM_SYM_BASE && xd == d) target[i] = 0;
    else if (d != 0 && unknown++ == 0) target[i] = -1;
    else return SMELT_OK; /* a 0 dim would read as "copy"; or two unknown dims */
  }
  int shape_v;
  TRY(shape_constant(w, target, yv->rank, &shape_v));
  TRY(rw_set_input(w, id, 1, shape_v));
  *done = true;
  return SMELT_OK;
}

/* Two dims that are the same: concrete and equal, or the same symbol. */
static bool same_dim(int64_t a, int64_t b) { return a == b && a != DIM_UNKNOWN; }

/* Reshape node id flattens rows for a Gemm whose result a Reshape reads
 * back (flat_gemm's inner Reshape): left as it is for flat_gemm, which
 * needs its input unflattened (reshape_chain would have it read the
 * Reshape before it, of another rank). */
static bool flattens_for_gemm(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  if (!rw_is_op(w, id, "Reshape") || nd->outputs[0] < 0) return false;
  int gm = rw_sole_user(w, nd->outputs[0]);
  if (gm < 0 || !rw_is_op(w, gm, "Gemm") || rw_node(w, gm)->inputs[0] != nd->outputs[0]) return false;
  int out = rw_node(w, gm)->outputs[0];
  int next = out >= 0 ? rw_sole_user(w, out) : -1;
  return next >= 0 && rw_is_op(w, next, "Reshape");
}

/* Reshape(Gemm(Reshape(x, [-1, K]), W, b), x's leading dims + [N]) -- a
 * linear layer on flattened rows, as GPT-2's Conv1D (addmm on x.view(-1,
 * K)) exports -- becomes MatMul(x, W) + b on x as it is (W transposed by a
 * Transpose node for transB, which fuse_epilogue takes as transB; the Add
 * becomes the GEMM's bias): the two Reshapes and the shape computation of
 * the second one's target go, and with them a dynamic plan's per-run work
 * for them.  Node id is the outer Reshape; the inner one and the Gemm must
 * feed only the next, alpha and beta 1, A not transposed, W a 2-D constant,
 * b absent or [N]. */
static smelt_status flat_gemm(rewriter *w, int id, bool *done) {
  const ir_node *outer = rw_node(w, id);
  int gm = rw_producer_op(w, outer->inputs[0], "Gemm");
  if (gm < 0 || rw_sole_user(w, outer->inputs[0]) != id) return SMELT_OK;
  const ir_node *g = rw_node(w, gm);
  int inner = g->n_inputs >= 2 ? rw_producer_op(w, g->inputs[0], "Reshape") : -1;
  if (inner < 0 || rw_sole_user(w, g->inputs[0]) != gm || g->inputs[1] == g->inputs[0]) return SMELT_OK;
  if (ir_attr_int(g, "transA", 0) || ir_attr_float(g, "alpha", 1.f) != 1.f || ir_attr_float(g, "beta", 1.f) != 1.f)
    return SMELT_OK;
  int x = rw_node(w, inner)->inputs[0], wv = g->inputs[1], bias = g->n_inputs > 2 ? g->inputs[2] : -1;
  bool tb = ir_attr_int(g, "transB", 0) != 0;
  const ir_value *xv = rw_val(w, x), *av = rw_val(w, g->inputs[0]), *yv = rw_val(w, outer->outputs[0]);
  const tensor *W = rw_const(w, wv);
  if (!W || W->rank != 2 || W->dtype != SMELT_F32 || xv->dtype != SMELT_F32 || xv->rank < 3 || av->rank != 2 ||
      yv->rank != xv->rank)
    return SMELT_OK;
  int64_t K = W->dims[tb ? 1 : 0], N = W->dims[tb ? 0 : 1];
  if (!same_dim(xv->dims[xv->rank - 1], K) || !same_dim(av->dims[1], K) || !same_dim(yv->dims[yv->rank - 1], N))
    return SMELT_OK;
  for (int d = 0; d + 1 < xv->rank; d++)
    if (!same_dim(xv->dims[d], yv->dims[d])) return SMELT_OK;
  if (bias >= 0) {
    const ir_value *bv = rw_val(w, bias);
    if (bv->dtype != SMELT_F32 || bv->rank != 1 || !same_dim(bv->dims[0], N)) return SMELT_OK;
  }
  int y = outer->outputs[0], b_in = wv, nid;
  if (tb) { /* MatMul reads W^T: a Transpose fuse_epilogue turns into transB */
    TRY(rw_add_value(w, "smelt_flat_gemm_wt", -1, &b_in));
    TRY(rw_add_node(w, "smelt_flat_gemm_wt", "Transpose", "", 1, 1, 1, &nid));
    TRY(rw_set_input(w, nid, 0, wv));
    rw_set_output(w, nid, 0, b_in);
    TRY(rw_attr_ints(w, nid, 0, "perm", (const int64_t[]){1, 0}, 2));
    ir_value *t = rw_val(w, b_in);
    t->dtype = SMELT_F32, t->rank = 2, t->dims[0] = N, t->dims[1] = K;
  }
  if (bias < 0) { /* the outer Reshape becomes the MatMul, writing y */
    TRY(rw_replace_node(w, id, "MatMul", "", 2, 0, &nid));
  } else { /* a MatMul, and the outer Reshape becomes the bias Add writing y */
    int mm_out, add;
    TRY(rw_add_value(w, "smelt_flat_gemm", y, &mm_out));
    TRY(rw_add_node(w, "smelt_flat_gemm", "MatMul", "", 2, 1, 0, &nid));
    rw_set_output(w, nid, 0, mm_out);
    TRY(rw_replace_node(w, id, "Add", "", 2, 0, &add));
    TRY(rw_set_input(w, add, 0, mm_out));
    TRY(rw_set_input(w, add, 1, bias));
  }
  TRY(rw_set_input(w, nid, 0, x));
  TRY(rw_set_input(w, nid, 1, b_in));
  char a[160];
  pass_log(w->r, "flattened GEMM %s on %s: MatMul%s on the unflattened input", rw_name(w, gm, a, sizeof a),
           q(xv->name), bias >= 0 ? " + bias" : "");
  *done = true;
  return SMELT_OK;
}

static smelt_status reshape_chain(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  int inner = rw_producer(w, nd->inputs[0]);
  if (!reshape_like(w, inner)) return SMELT_OK;
  int x = rw_node(w, inner)->inputs[0], y = nd->outputs[0];
  const ir_value *yv = rw_val(w, y);
  if (x < 0 || rw_val(w, x)->dtype != yv->dtype) return SMELT_OK;
  if (target_input_free(w, nd)) {
    TRY(rw_set_input(w, id, 0, x));
    *done = true;
    return SMELT_OK;
  }
  return rw_concrete(yv) ? to_reshape(w, id, x, yv, done) : SMELT_OK;
}

static smelt_status simplify_node(rewriter *w, int id, bool *done) {
  const ir_node *nd = rw_node(w, id);
  *done = false;
  if (*nd->domain || nd->n_outputs != 1 || nd->outputs[0] < 0 || nd->n_inputs < 1 || nd->inputs[0] < 0)
    return SMELT_OK;
  const char *op = nd->op_type;
  if (nd->n_inputs == 2 && nd->inputs[1] >= 0) {
    TRY(drop_identity_op(w, id, done));
    if (*done) return SMELT_OK;
    if (!strcmp(op, "Div")) return div_to_mul(w, id, done);
    if (!strcmp(op, "Pow")) return square(w, id, done);
  }
  if (!strcmp(op, "Transpose")) {
    TRY(transpose_pair(w, id, done));
    return *done ? SMELT_OK : transpose_unit(w, id, done);
  }
  if (reshape_like(w, id)) {
    if (flattens_for_gemm(w, id)) return SMELT_OK; /* flat_gemm takes it from the Reshape after the Gemm */
    TRY(reshape_chain(w, id, done));
    if (!*done && !strcmp(op, "Reshape")) TRY(flat_gemm(w, id, done));
    if (!*done && !strcmp(op, "Reshape")) TRY(computed_target(w, id, done));
    return SMELT_OK;
  }
  if (!strcmp(op, "Expand")) return computed_target(w, id, done);
  return SMELT_OK;
}

smelt_status pass_simplify(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  int *order = NULL;
  smelt_status s = ir_graph_toposort(g, &order);
  int n = g->n_nodes; /* nodes added on the way are already simplified */
  for (int k = 0; !s && k < n; k++) {
    if (!rw_live(&w, order[k])) continue;
    bool done;
    s = simplify_node(&w, order[k], &done);
    w.changes += done;
  }
  free(order);
  return rw_end(&w, s, changes);
}
