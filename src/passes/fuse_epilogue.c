/* GEMM / Conv epilogue fusion.
 *
 * A float32 Gemm, MatMul (B of rank 2, A of rank >= 2) or Conv followed by,
 * in this order and each optional,
 *   bias Add      (MatMul: an Add of N values [N] or [1,..,1,N]; Conv: an Add
 *                  of a constant [M,1,..] / [1,M,1,..] folded into its bias),
 *   residual Add  (an Add of a tensor of exactly the result's shape that does
 *                  not depend on the product),
 *   activation    (Relu, Clip with constant bounds, Sigmoid, Tanh, Gelu, or
 *                  after a Conv SiLU: Sigmoid(y) and Mul(y, Sigmoid(y)),
 *                  activation "silu"),
 * becomes one smelt.Gemm / smelt.Conv node (ops/fused_gemm.c, fused_conv.c)
 * with attributes activation, clip_min, clip_max, has_bias, has_residual.
 * Each link must be the only consumer of the previous result.  A plain
 * product with nothing to fuse stays as it is, except MatMul(A, Transpose(W))
 * of a constant 2-D W (rw_transposed_weight): smelt.Gemm reads W with
 * transB = 1, so the transposed copy is never made.  One log line per fusion.
 *
 * Complexity: O(n) per run for the bounded chains; a residual's dependency
 * walk visits only ancestors placed after the anchor in a topological order. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/fused_act.h"
#include "passes/rewrite.h"
#include "util/err.h"

#define EPI_MAX_CHAIN 4

typedef struct epi_match {
  int anchor;           /* Gemm / MatMul / Conv node */
  int chain[EPI_MAX_CHAIN], n_chain; /* fused consumers, in order */
  int bias, residual;   /* values, -1 if none */
  tensor *new_bias;     /* a bias made here (owned until handed to the graph) */
  fused_act act;
  int out;              /* the value the fused node writes */
  int wt_t;             /* MatMul B = Transpose(this constant): read with transB (-1: none) */
  struct epi_order *ord;
} epi_match;

static bool is_f32(rewriter *w, int v) { return v >= 0 && rw_val(w, v)->dtype == SMELT_F32; }

/* The Add consuming v alone, and its other operand. */
static int sole_add(rewriter *w, int v, int *other) {
  int u = rw_sole_user(w, v);
  if (u < 0 || !rw_is_op(w, u, "Add")) return -1;
  const ir_node *nd = rw_node(w, u);
  if (nd->n_inputs != 2 || nd->inputs[0] == nd->inputs[1]) return -1;
  *other = nd->inputs[0] == v ? nd->inputs[1] : nd->inputs[0];
  return u;
}

/* Positions in a topological order, kept valid through the pass (a fused
 * node takes the place of the node whose output it writes: its inputs come
 * from before the chain, its consumers after it), so that a walk up from a
 * value can stop at nodes placed before the anchor. */
typedef struct epi_order {
  int *pos, *seen, *stack, gen, cap;
} epi_order;

static smelt_status order_fit(epi_order *o, int n) {
  if (n <= o->cap) return SMELT_OK;
  int nc = n * 2 + 16;
  int *p = realloc(o->pos, sizeof(int) * (size_t)nc);
  if (p) o->pos = p;
  int *sn = realloc(o->seen, sizeof(int) * (size_t)nc);
  if (sn) o->seen = sn;
  int *st = realloc(o->stack, sizeof(int) * (size_t)nc);
  if (st) o->stack = st;
  if (!p || !sn || !st) return err_nomem("dependency walk", sizeof(int) * (size_t)nc * 3);
  for (int i = o->cap; i < nc; i++) o->pos[i] = INT_MAX, o->seen[i] = 0;
  o->cap = nc;
  return SMELT_OK;
}

/* Does value v depend on node `anchor`?  (A residual that did would make the
 * fused node read its own output.)  Visits only ancestors of v placed after
 * the anchor. */
static smelt_status depends_on(rewriter *w, epi_order *o, int v, int anchor, bool *dep) {
  *dep = false;
  TRY(order_fit(o, w->g->n_nodes));
  int top = 0, p = rw_producer(w, v), lim = o->pos[anchor];
  o->gen++;
  if (p >= 0 && o->pos[p] >= lim) o->stack[top++] = p, o->seen[p] = o->gen;
  while (top > 0 && !*dep) {
    int id = o->stack[--top];
    if (id == anchor) *dep = true;
    int *deps = NULL, nd = 0;
    TRY(ir_node_deps(w->g, rw_node(w, id), &deps, &nd));
    for (int k = 0; k < nd; k++) {
      int q = rw_producer(w, deps[k]);
      if (q >= 0 && o->seen[q] != o->gen && o->pos[q] >= lim) o->seen[q] = o->gen, o->stack[top++] = q;
    }
    free(deps);
  }
  return SMELT_OK;
}

/* N values laid out [N] or [1, ..., 1, N]. */
static bool is_row_vector(const ir_value *b, int64_t N) {
  if (b->rank < 1 || !dim_known(N)) return false;
  for (int d = 0; d + 1 < b->rank; d++)
    if (b->dims[d] != 1) return false;
  return b->dims[b->rank - 1] == N;
}

/* A constant of M values along axis 1 of a rank-r result ([M,1,..] or [1,M,1,..]). */
static const tensor *channel_const(rewriter *w, int v, int64_t M, int r) {
  const tensor *t = rw_const(w, v);
  if (!t || t->dtype != SMELT_F32 || tensor_numel(t) != M || t->rank > r) return NULL;
  for (int d = 0; d < t->rank; d++) {
    int ax = r - t->rank + d;
    if (t->dims[d] != (ax == 1 ? M : 1)) return NULL;
  }
  return t;
}

static bool read_act(rewriter *w, int node, fused_act *a) {
  const ir_node *nd = rw_node(w, node);
  if (*nd->domain) return false;
  a->lo = -INFINITY;
  a->hi = INFINITY;
  if (!strcmp(nd->op_type, "Relu")) a->kind = FUSED_ACT_RELU;
  else if (!strcmp(nd->op_type, "Sigmoid")) a->kind = FUSED_ACT_SIGMOID;
  else if (!strcmp(nd->op_type, "Tanh")) a->kind = FUSED_ACT_TANH;
  else if (!strcmp(nd->op_type, "Gelu")) {
    const char *ap = ir_attr_string(nd, "approximate", "none");
    if (!strcmp(ap, "none")) a->kind = FUSED_ACT_GELU;
    else if (!strcmp(ap, "tanh")) a->kind = FUSED_ACT_GELU_TANH;
    else return false;
  } else if (!strcmp(nd->op_type, "Clip")) {
    a->kind = FUSED_ACT_CLIP;
    if (nd->opset < 11) {
      a->lo = ir_attr_float(nd, "min", -INFINITY);
      a->hi = ir_attr_float(nd, "max", INFINITY);
    } else {
      double x;
      if (nd->n_inputs > 1 && nd->inputs[1] >= 0) {
        if (!rw_scalar(w, nd->inputs[1], &x)) return false;
        a->lo = (float)x;
      }
      if (nd->n_inputs > 2 && nd->inputs[2] >= 0) {
        if (!rw_scalar(w, nd->inputs[2], &x)) return false;
        a->hi = (float)x;
      }
    }
    if (!(a->lo <= a->hi)) return false;
  } else {
    return false;
  }
  return nd->n_outputs == 1 && nd->outputs[0] >= 0;
}

/* Gemm's C as bias or residual; false if it can be neither. */
static smelt_status gemm_c(rewriter *w, epi_match *m, bool *ok) {
  const ir_node *nd = rw_node(w, m->anchor);
  *ok = true;
  if (nd->n_inputs < 3 || nd->inputs[2] < 0) return SMELT_OK;
  int c = nd->inputs[2];
  float beta = ir_attr_float(nd, "beta", 1.f);
  const ir_value *cv = rw_val(w, c), *y = rw_val(w, nd->outputs[0]);
  int64_t N = y->rank == 2 ? y->dims[1] : DIM_UNKNOWN;
  *ok = false;
  if (!is_f32(w, c)) return SMELT_OK;
  if (is_row_vector(cv, N)) {
    if (beta == 1.f) {
      m->bias = c;
    } else {
      const tensor *t = rw_const(w, c);
      if (!t) return SMELT_OK;
      TRY(rw_tensor(&m->new_bias, SMELT_F32, 1, &N));
      for (int64_t i = 0; i < N; i++) ((float *)m->new_bias->data)[i] = beta * ((const float *)t->data)[i];
    }
  } else if (beta == 1.f && rw_same_shape(cv, y)) {
    m->residual = c;
  } else {
    return SMELT_OK;
  }
  *ok = true;
  return SMELT_OK;
}

/* Anchor check and its own operands. */
static smelt_status match_anchor(rewriter *w, int id, epi_match *m, bool *ok) {
  const ir_node *nd = rw_node(w, id);
  *ok = false;
  memset(m, 0, sizeof *m);
  m->anchor = id;
  m->bias = m->residual = m->wt_t = -1;
  if (nd->n_outputs != 1 || !is_f32(w, nd->outputs[0])) return SMELT_OK;
  m->out = nd->outputs[0];
  if (rw_is_op(w, id, "MatMul")) {
    const ir_value *a = rw_val(w, nd->inputs[0]), *b = rw_val(w, nd->inputs[1]);
    *ok = is_f32(w, nd->inputs[0]) && is_f32(w, nd->inputs[1]) && a->rank >= 2 && b->rank == 2;
    if (*ok) m->wt_t = rw_transposed_weight(w, nd->inputs[1]);
    return SMELT_OK;
  }
  if (rw_is_op(w, id, "Gemm")) {
    for (int k = 0; k < 2; k++)
      if (!is_f32(w, nd->inputs[k]) || rw_val(w, nd->inputs[k])->rank != 2) return SMELT_OK;
    return gemm_c(w, m, ok);
  }
  if (rw_is_op(w, id, "Conv")) {
    *ok = is_f32(w, nd->inputs[0]) && is_f32(w, nd->inputs[1]) && rw_val(w, nd->outputs[0])->rank >= 3;
    if (nd->n_inputs > 2 && nd->inputs[2] >= 0) m->bias = nd->inputs[2];
  }
  return SMELT_OK;
}

static int64_t last_dim(const ir_value *v) { return v->rank > 0 ? v->dims[v->rank - 1] : DIM_UNKNOWN; }

/* A bias Add after a MatMul / Gemm, or a constant per-channel Add after a
 * Conv (folded into a new bias).  The Add must not broadcast the result up:
 * the bias's dims are 1 except one equal to the result's (concrete) dim. */
static smelt_status match_bias(rewriter *w, epi_match *m) {
  int other, u = sole_add(w, m->out, &other);
  if (u < 0 || !is_f32(w, other)) return SMELT_OK;
  /* both forms below have a rank and dims that cannot broadcast the result up */
  int z = rw_node(w, u)->outputs[0];
  const ir_value *y = rw_val(w, m->out);
  if (rw_val(w, other)->rank > y->rank) return SMELT_OK;
  if (rw_is_op(w, m->anchor, "Conv")) {
    int64_t M = y->dims[1];
    const tensor *c = channel_const(w, other, M, y->rank);
    const tensor *b0 = m->bias >= 0 ? rw_const(w, m->bias) : NULL;
    if (!c || (m->bias >= 0 && (!b0 || b0->dtype != SMELT_F32 || tensor_numel(b0) != M))) return SMELT_OK;
    TRY(rw_tensor(&m->new_bias, SMELT_F32, 1, &M));
    for (int64_t i = 0; i < M; i++)
      ((float *)m->new_bias->data)[i] = ((const float *)c->data)[i] + (b0 ? ((const float *)b0->data)[i] : 0.f);
    m->bias = -1;
  } else {
    if (m->bias >= 0 || m->new_bias || !is_row_vector(rw_val(w, other), last_dim(y))) return SMELT_OK;
    bool dep;
    TRY(depends_on(w, m->ord, other, m->anchor, &dep));
    if (dep) return SMELT_OK;
    m->bias = other;
  }
  m->chain[m->n_chain++] = u;
  m->out = z;
  return SMELT_OK;
}

static smelt_status match_residual(rewriter *w, epi_match *m) {
  int other, u = sole_add(w, m->out, &other);
  if (u < 0 || m->residual >= 0 || !is_f32(w, other)) return SMELT_OK;
  int z = rw_node(w, u)->outputs[0];
  const ir_value *y = rw_val(w, m->out);
  if (!rw_same_shape(y, rw_val(w, other)) || !rw_same_shape(y, rw_val(w, z))) return SMELT_OK;
  bool dep;
  TRY(depends_on(w, m->ord, other, m->anchor, &dep));
  if (dep) return SMELT_OK;
  m->residual = other;
  m->chain[m->n_chain++] = u;
  m->out = z;
  return SMELT_OK;
}

/* SiLU as ONNX exports it: Sigmoid(y) and Mul(y, Sigmoid(y)) (either
 * operand order), the two the only readers of y, the Sigmoid's output read
 * by the Mul alone.  Taken after a Conv only (efficientnet's, mobilevit's
 * blocks); a MatMul's (SwiGLU's gate) is left to the transformer paths. */
static bool match_silu(rewriter *w, epi_match *m) {
  int y = m->out, s = -1, mul = -1;
  if (m->n_chain + 2 > EPI_MAX_CHAIN || w->uses[y].n != 2 || rw_is_output(w, y)) return false;
  for (int k = 0; k < 2; k++) {
    int u = w->uses[y].node[k];
    if (rw_is_op(w, u, "Sigmoid")) s = u;
    else if (rw_is_op(w, u, "Mul")) mul = u;
  }
  if (s < 0 || mul < 0) return false;
  const ir_node *sn = rw_node(w, s), *mn = rw_node(w, mul);
  if (sn->n_inputs != 1 || sn->n_outputs != 1 || sn->outputs[0] < 0 || mn->n_inputs != 2 ||
      mn->n_outputs != 1 || mn->outputs[0] < 0)
    return false;
  int sv = sn->outputs[0];
  bool pair = (mn->inputs[0] == y && mn->inputs[1] == sv) || (mn->inputs[0] == sv && mn->inputs[1] == y);
  if (!pair || rw_sole_user(w, sv) != mul || !is_f32(w, mn->outputs[0])) return false;
  m->act = (fused_act){FUSED_ACT_SILU, -INFINITY, INFINITY, NULL};
  m->chain[m->n_chain++] = s;
  m->chain[m->n_chain++] = mul;
  m->out = mn->outputs[0];
  return true;
}

static void match_act(rewriter *w, epi_match *m) {
  int u = rw_sole_user(w, m->out);
  if (u < 0 || !read_act(w, u, &m->act) || rw_node(w, u)->inputs[0] != m->out ||
      !is_f32(w, rw_node(w, u)->outputs[0])) {
    m->act = (fused_act){FUSED_ACT_NONE, -INFINITY, INFINITY, NULL};
    if (u < 0 && rw_is_op(w, m->anchor, "Conv")) match_silu(w, m); /* convs only: a GEMM's SiLU (SwiGLU) stays with the decode path's kernels */
    return;
  }
  m->chain[m->n_chain++] = u;
  m->out = rw_node(w, u)->outputs[0];
}

static smelt_status set_epilogue_attrs(rewriter *w, int id, int slot, const epi_match *m) {
  TRY(rw_attr_string(w, id, slot, "activation", fused_act_name(m->act.kind)));
  TRY(rw_attr_float(w, id, slot + 1, "clip_min", m->act.lo));
  TRY(rw_attr_float(w, id, slot + 2, "clip_max", m->act.hi));
  TRY(rw_attr_int(w, id, slot + 3, "has_bias", rw_node(w, id)->inputs[2] >= 0));
  return rw_attr_int(w, id, slot + 4, "has_residual", m->residual >= 0);
}

static void log_fusion(rewriter *w, const epi_match *m, const char *op) {
  char line[1024], nb[160];
  int n = snprintf(line, sizeof line, "fused %s", rw_name(w, m->anchor, nb, sizeof nb));
  for (int k = 0; k < m->n_chain && n < (int)sizeof line; k++)
    n += snprintf(line + n, sizeof line - (size_t)n, " + %s", rw_name(w, m->chain[k], nb, sizeof nb));
  bool bias = m->bias >= 0 || m->new_bias, res = m->residual >= 0, act = m->act.kind != FUSED_ACT_NONE;
  pass_log(w->r, "%s -> smelt.%s(%s%s%s%s%s)", line, op, bias ? "bias" : "", bias && (res || act) ? ", " : "",
           res ? "residual" : "", res && act ? ", " : "", act ? fused_act_name(m->act.kind) : "");
}

static smelt_status build(rewriter *w, epi_match *m) {
  const ir_node *a = rw_node(w, m->anchor);
  bool conv = !strcmp(a->op_type, "Conv"), gemm = !strcmp(a->op_type, "Gemm");
  int x = a->inputs[0], wt = a->inputs[1], n_copy = conv ? a->n_attrs : 0, bias = m->bias;
  int64_t ta = gemm ? ir_attr_int(a, "transA", 0) : 0, tb = gemm ? ir_attr_int(a, "transB", 0) : 0;
  if (m->wt_t >= 0) { /* MatMul(x, Transpose(W)): W read as transB */
    wt = m->wt_t;
    tb = 1;
  }
  float alpha = gemm ? ir_attr_float(a, "alpha", 1.f) : 1.f;
  if (m->new_bias) {
    tensor *t = m->new_bias;
    m->new_bias = NULL;
    TRY(rw_add_constant(w, "fused.bias", t, &bias));
  }
  int last = m->n_chain ? m->chain[m->n_chain - 1] : m->anchor, id;
  int n_attrs = n_copy + 5 + (conv ? 0 : 3);
  log_fusion(w, m, conv ? "Conv" : "Gemm");
  TRY(rw_replace_node(w, last, conv ? "Conv" : "Gemm", "smelt", 4, n_attrs, &id));
  TRY(order_fit(m->ord, w->g->n_nodes));
  m->ord->pos[id] = m->ord->pos[last];
  for (int k = 0; k < m->n_chain - 1; k++) rw_kill(w, m->chain[k]);
  if (m->n_chain) rw_kill(w, m->anchor);
  const ir_node *anchor = rw_node(w, m->anchor);
  for (int k = 0; k < n_copy; k++) TRY(rw_attr_copy(w, id, k, &anchor->attrs[k]));
  if (!conv) {
    TRY(rw_attr_int(w, id, n_copy, "transA", ta));
    TRY(rw_attr_int(w, id, n_copy + 1, "transB", tb));
    TRY(rw_attr_float(w, id, n_copy + 2, "alpha", alpha));
  }
  TRY(rw_set_input(w, id, 0, x));
  TRY(rw_set_input(w, id, 1, wt));
  TRY(rw_set_input(w, id, 2, bias));
  TRY(rw_set_input(w, id, 3, m->residual));
  return set_epilogue_attrs(w, id, n_attrs - 5, m);
}

static smelt_status fuse_at(rewriter *w, epi_order *ord, int id, bool *done) {
  epi_match m;
  bool ok;
  *done = false;
  TRY(match_anchor(w, id, &m, &ok));
  m.ord = ord;
  smelt_status s = SMELT_OK;
  if (ok) s = match_bias(w, &m);
  if (ok && !s) s = match_residual(w, &m);
  if (ok && !s) match_act(w, &m);
  bool gemm_extra = rw_is_op(w, id, "Gemm") && (m.bias >= 0 || m.residual >= 0 || m.new_bias);
  if (!s && ok && (m.n_chain > 0 || gemm_extra || m.wt_t >= 0)) {
    s = build(w, &m);
    *done = !s;
  }
  tensor_free(m.new_bias);
  return s;
}

smelt_status pass_fuse_epilogue(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  int *order = NULL;
  epi_order ord = {0};
  smelt_status s = ir_graph_toposort(g, &order);
  int n = g->n_nodes;
  if (!s) s = order_fit(&ord, n);
  for (int k = 0; !s && k < n; k++) ord.pos[order[k]] = k;
  for (int k = 0; !s && k < n; k++) {
    int id = order[k];
    if (!rw_live(&w, id) || !(rw_is_op(&w, id, "MatMul") || rw_is_op(&w, id, "Gemm") || rw_is_op(&w, id, "Conv")))
      continue;
    bool done;
    s = fuse_at(&w, &ord, id, &done);
    w.changes += done;
  }
  free(order);
  free(ord.pos);
  free(ord.seen);
  free(ord.stack);
  return rw_end(&w, s, changes);
}
