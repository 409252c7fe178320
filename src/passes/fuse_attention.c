/* Scaled-dot-product attention fusion.
 *
 * Matches, from each float32 Softmax over the last axis:
 *   S  = MatMul(Q', K')             Q' [..., Sq, D], K' [..., D, Sk]
 *   S  = S * c | S / c              (any number, c a scalar constant)
 *   S  = S + mask | Where(cond, S, fill)   (optional; mask float, cond bool)
 *   P  = Softmax(S, axis = -1)
 *   P  = Where(IsNaN(P), 0, P)      (optional: fully masked rows give zeros)
 *   O  = MatMul(P, V')              V' [..., Sk, Dv]
 *   Y  = Transpose(O, p)            (optional)
 * In a generator's decode graph (pass_options.static_kv) K' and V' may also
 * come through repeat_kv, Reshape(Expand(Unsqueeze(KV, axes 2))) (its output
 * read by Shape nodes too): the op then reads KV's shared heads itself
 * (kv_group), checks the repeats' shapes at run time, and the Shape readers
 * get [B, Hq, S, D] from Shape(Q) and Shape(KV).
 * with every intermediate read only by the next step, and rewrites it as one
 * smelt.Attention node (ops/fused_attention.c; kernel kernels/attention.c).
 * Q', K' and V' are traced back through Transpose nodes and scalar Mul/Div
 * (folded into the scale), so the kernel reads the projections' outputs in
 * their own layout (q_perm, k_perm, v_perm) and writes Y's (out_perm).
 * Exporters write these in the forms of torch.nn.MultiheadAttention (rank 3,
 * scale on Q) and of hand-written GPT/BERT blocks (rank 4, scale on scores).
 *
 * A constant additive mask that is 0 where key j <= query i + Sk - Sq and
 * -inf (or <= -1e30) elsewhere, or such a boolean condition with a fill
 * <= -1e30, becomes causal = 1 and is dropped: the kernel then skips the
 * masked key blocks instead of reading a mask.  One log line per fusion.
 *
 * Complexity: O(n) per run: each Softmax matches a bounded pattern around it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "passes/view_chain.h"
#include "util/err.h"
#include "util/quote.h"

#define MASKED_BELOW (-1e30)

typedef struct operand {
  int v;                /* the value the kernel reads */
  int64_t perm[4];      /* canonical axis i is v's axis perm[i] */
  int rep_expand, rep_shape; /* repeat_kv read through: the Expand's and the Reshape's shape values; -1 none */
  int rep_out;          /* ... and the Reshape's output (Shape nodes may read it) */
  bool has_view;        /* v is read through `view` (a strided view of view.root) */
  view_chain view;
} operand;

typedef struct attn_match {
  int rank;
  operand q, k, v;
  double scale;
  int mask;             /* value or -1 */
  bool mask_bool, causal;
  double fill;
  bool zero_empty_rows; /* Where(IsNaN(P), 0, P) after the softmax */
  int y;                /* output value */
  int64_t out_perm[4];
  int first, last;      /* the Q K^T MatMul; the node writing y */
  int nodes[16], n;     /* pattern nodes (for the log) */
} attn_match;

static bool f32(rewriter *w, int v) { return v >= 0 && rw_val(w, v)->dtype == SMELT_F32; }

/* A scalar operation on x (the other operand s: one element) keeps x's
 * shape: known equal shapes, or -- in a generator's decode graph, where
 * lengths are symbolic -- s of a rank no higher than x's. */
static bool keeps_shape(rewriter *w, int x, int s, int out) {
  if (rw_same_shape(rw_val(w, x), rw_val(w, out))) return true;
  return w->o->static_kv && rw_val(w, x)->rank >= 0 && rw_val(w, s)->rank >= 0 &&
         rw_val(w, s)->rank <= rw_val(w, x)->rank;
}

static void identity(int64_t *p, int r) {
  for (int i = 0; i < r; i++) p[i] = i;
}

/* Reads a Transpose's permutation (default: reversed). */
static bool transpose_perm(rewriter *w, int id, int r, int64_t *p) {
  int n;
  const int64_t *a = ir_attr_ints(rw_node(w, id), "perm", &n);
  if (!a) {
    for (int i = 0; i < r; i++) p[i] = r - 1 - i;
    return true;
  }
  if (n != r) return false;
  memcpy(p, a, sizeof(int64_t) * (size_t)r);
  return true;
}

/* Only Shape nodes, besides `user`, read v. */
static bool shapes_besides(rewriter *w, int v, int user) {
  if (rw_is_output(w, v)) return false;
  for (int u = 0; u < w->uses[v].n; u++) {
    int id = w->uses[v].node[u];
    if (id != user && !(rw_is_op(w, id, "Shape") && !ir_attr_find(rw_node(w, id), "start") &&
                        !ir_attr_find(rw_node(w, id), "end")))
      return false;
  }
  return true;
}

/* Reshape(Expand(Unsqueeze(x, axes = [2]))) -- repeat_kv, each of x's heads
 * repeated for a group of query heads -- read through to x (rank 4 only):
 * the op checks the shapes at run time (fused_attention.c).  -1: not it. */
static int repeat_kv(rewriter *w, int p, operand *op) {
  const ir_node *rs = rw_node(w, p);
  if (!rw_is_op(w, p, "Reshape") || rs->n_inputs != 2 || ir_attr_int(rs, "allowzero", 0) != 0) return -1;
  int e = rw_producer_op(w, rs->inputs[0], "Expand");
  if (e < 0 || rw_n_uses(w, rs->inputs[0]) != 1 || rw_is_output(w, rs->inputs[0])) return -1;
  int u = rw_producer_op(w, rw_node(w, e)->inputs[0], "Unsqueeze");
  if (u < 0 || rw_n_uses(w, rw_node(w, e)->inputs[0]) != 1 || rw_is_output(w, rw_node(w, e)->inputs[0])) return -1;
  const ir_node *un = rw_node(w, u);
  int n_axes = 0;
  const int64_t *axes = ir_attr_ints(un, "axes", &n_axes);
  double a;
  bool at2 = axes ? n_axes == 1 && axes[0] == 2
                  : un->n_inputs == 2 && rw_scalar(w, un->inputs[1], &a) && a == 2;
  if (!at2 || rw_val(w, un->inputs[0])->rank != 4) return -1;
  op->rep_expand = rw_node(w, e)->inputs[1];
  op->rep_shape = rs->inputs[1];
  op->rep_out = rs->outputs[0];
  return un->inputs[0];
}

/* Walks back from v through Transposes and scalar Mul/Div, composing the view
 * permutation (view = Transpose(result, perm)) and the scale.  hop_perm
 * non-NULL: a repeat_kv met where the permutation is hop_perm is read
 * through (once); its output may also be read by Shape nodes. */
static void trace_operand(rewriter *w, int v, int r, operand *op, double *scale, const int64_t *hop_perm,
                          int user) {
  identity(op->perm, r);
  op->rep_expand = op->rep_shape = op->rep_out = -1;
  /* user: the node that read v */
  for (int guard = 0; guard < 8; guard++) {
    int p = rw_producer(w, v);
    if (p < 0) break;
    const ir_node *nd = rw_node(w, p);
    double c;
    int x;
    if (rw_is_op(w, p, "Transpose") && rw_val(w, nd->inputs[0])->rank == r) {
      int64_t tp[4], np[4];
      if (!transpose_perm(w, p, r, tp)) break;
      for (int i = 0; i < r; i++) np[i] = tp[op->perm[i]];
      memcpy(op->perm, np, sizeof np);
      v = nd->inputs[0];
    } else if ((rw_is_op(w, p, "Mul") || rw_is_op(w, p, "Div")) && nd->n_inputs == 2 &&
               rw_scalar(w, nd->inputs[1], &c) && c != 0 && isfinite(c) &&
               keeps_shape(w, nd->inputs[0], nd->inputs[1], nd->outputs[0])) {
      *scale = rw_is_op(w, p, "Mul") ? *scale * c : *scale / c;
      v = nd->inputs[0];
    } else if (rw_is_op(w, p, "Mul") && nd->n_inputs == 2 && rw_scalar(w, nd->inputs[0], &c) &&
               c != 0 && isfinite(c) && keeps_shape(w, nd->inputs[1], nd->inputs[0], nd->outputs[0])) {
      *scale *= c;
      v = nd->inputs[1];
    } else if (hop_perm && r == 4 && op->rep_expand < 0 && !memcmp(op->perm, hop_perm, sizeof(int64_t) * 4) &&
               user >= 0 && shapes_besides(w, v, user) && (x = repeat_kv(w, p, op)) >= 0) {
      v = x;
    } else {
      break;
    }
    user = p;
  }
  op->v = v;
}

/* The operand read in place from the value its layout ops start from
 * (torch.nn.MultiheadAttention's packed projection: Reshape, Transpose,
 * Squeeze, Gather per Q/K/V; GPT-2's Split), when they move elements --
 * a chain of reshapes alone is no copy anyway.  The layout ops are left to
 * dce: those that other nodes still read stay. */
static void strided_view(rewriter *w, operand *op, int r) {
  view_chain vc;
  if (!view_chain_trace(w, op->v, &vc) || !vc.moves || vc.rank != r) return;
  op->has_view = true;
  op->view = vc;
  op->v = vc.root;
}

static bool softmax_last_axis(rewriter *w, int sm, int r) {
  const ir_node *nd = rw_node(w, sm);
  int64_t axis = ir_attr_int(nd, "axis", nd->opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  return axis == r - 1;
}

/* v comes from a MatMul through scalar Mul/Div only. */
static bool leads_to_matmul(rewriter *w, int v) {
  for (int guard = 0; guard < 8; guard++) {
    int p = rw_producer(w, v);
    double c;
    if (p < 0) return false;
    const ir_node *nd = rw_node(w, p);
    if (rw_is_op(w, p, "MatMul")) return true;
    if ((rw_is_op(w, p, "Mul") || rw_is_op(w, p, "Div")) && nd->n_inputs == 2 && rw_scalar(w, nd->inputs[1], &c))
      v = nd->inputs[0];
    else if (rw_is_op(w, p, "Mul") && nd->n_inputs == 2 && rw_scalar(w, nd->inputs[0], &c))
      v = nd->inputs[1];
    else
      return false;
  }
  return false;
}

/* The scores chain back from the Softmax input: mask, scales, the Q K^T MatMul. */
static bool match_scores(rewriter *w, int s, attn_match *m) {
  int p = rw_producer(w, s), mm1 = -1;
  m->scale = 1.0;
  m->mask = -1;
  for (int guard = 0; guard < 8 && p >= 0 && mm1 < 0; guard++) {
    const ir_node *nd = rw_node(w, p);
    double c;
    if (rw_sole_user(w, nd->outputs[0]) < 0) return false;
    m->nodes[m->n++] = p;
    if (rw_is_op(w, p, "MatMul")) {
      mm1 = m->first = p;
    } else if ((rw_is_op(w, p, "Mul") || rw_is_op(w, p, "Div")) && rw_scalar(w, nd->inputs[1], &c) && c != 0 &&
               isfinite(c)) {
      m->scale = rw_is_op(w, p, "Mul") ? m->scale * c : m->scale / c;
      p = rw_producer(w, nd->inputs[0]);
    } else if (rw_is_op(w, p, "Mul") && rw_scalar(w, nd->inputs[0], &c) && c != 0 && isfinite(c)) {
      m->scale *= c;
      p = rw_producer(w, nd->inputs[1]);
    } else if (rw_is_op(w, p, "Add") && m->mask < 0 && nd->n_inputs == 2) {
      /* the operand the scores come from is the one with the MatMul behind it */
      int a = nd->inputs[0], b = nd->inputs[1];
      int sv = leads_to_matmul(w, a) ? a : b;
      m->mask = sv == a ? b : a;
      /* the mask must not broadcast the scores up; in a generator's decode
       * graph (static_kv) lengths are symbolic, and the op checks it at run time */
      if (!f32(w, m->mask) || !(rw_same_shape(rw_val(w, sv), rw_val(w, nd->outputs[0])) ||
                                (w->o->static_kv && rw_val(w, sv)->rank == rw_val(w, nd->outputs[0])->rank)))
        return false;
      p = rw_producer(w, sv);
    } else if (rw_is_op(w, p, "Where") && m->mask < 0 && nd->n_inputs == 3 && rw_scalar(w, nd->inputs[2], &m->fill) &&
               rw_val(w, nd->inputs[0])->dtype == SMELT_BOOL &&
               rw_same_shape(rw_val(w, nd->inputs[1]), rw_val(w, nd->outputs[0]))) {
      m->mask = nd->inputs[0];
      m->mask_bool = true;
      p = rw_producer(w, nd->inputs[1]);
    } else {
      return false;
    }
  }
  if (mm1 < 0) return false;
  const ir_node *mn = rw_node(w, mm1);
  int r = rw_val(w, mn->outputs[0])->rank;
  if (r != 3 && r != 4) return false;
  m->rank = r;
  double qs = 1.0, ks = 1.0;
  static const int64_t k_hop[4] = {0, 1, 3, 2}; /* K' is K^T */
  trace_operand(w, mn->inputs[0], r, &m->q, &qs, NULL, mm1);
  trace_operand(w, mn->inputs[1], r, &m->k, &ks, w->o->static_kv ? k_hop : NULL, mm1);
  /* K' is K^T: the canonical K swaps the last two axes of K' */
  int64_t t = m->k.perm[r - 1];
  m->k.perm[r - 1] = m->k.perm[r - 2];
  m->k.perm[r - 2] = t;
  m->scale *= qs * ks;
  return rw_val(w, m->q.v)->rank == r && rw_val(w, m->k.v)->rank == r && f32(w, m->q.v) && f32(w, m->k.v);
}

/* Masked means: the entry is -inf or below MASKED_BELOW. */
static bool is_causal_mask(rewriter *w, const attn_match *m, int64_t Sq, int64_t Sk) {
  const tensor *t = rw_const(w, m->mask);
  if (!t || t->rank < 2 || t->dims[t->rank - 2] != Sq || t->dims[t->rank - 1] != Sk) return false;
  if (tensor_numel(t) != Sq * Sk) return false; /* leading dims all 1 */
  if (m->mask_bool && !(m->fill <= MASKED_BELOW)) return false;
  for (int64_t i = 0; i < Sq; i++)
    for (int64_t j = 0; j < Sk; j++) {
      bool visible = j <= i + Sk - Sq;
      double x = tensor_get_f64(t, i * Sk + j);
      bool ok = m->mask_bool ? (x != 0) == visible : visible ? x == 0 : x <= MASKED_BELOW;
      if (!ok) return false;
    }
  return true;
}

static bool match_output(rewriter *w, int mm2, attn_match *m) {
  int o = rw_node(w, mm2)->outputs[0];
  m->y = o;
  m->last = mm2;
  identity(m->out_perm, m->rank);
  int t = rw_sole_user(w, o);
  if (t >= 0 && rw_is_op(w, t, "Transpose") && f32(w, rw_node(w, t)->outputs[0]) &&
      transpose_perm(w, t, m->rank, m->out_perm)) {
    m->y = rw_node(w, t)->outputs[0];
    m->last = t;
    m->nodes[m->n++] = t;
  }
  return true;
}

/* P -> IsNaN -> Where(isnan, 0, P): exporters guard fully masked rows so
 * (NaN) with zeros.  The Where's output, or -1. */
static int nan_guard(rewriter *w, int pv, attn_match *m) {
  if (rw_n_uses(w, pv) != 2 || rw_is_output(w, pv)) return -1;
  for (int u = 0; u < w->uses[pv].n; u++) {
    int isn = w->uses[pv].node[u];
    if (!rw_is_op(w, isn, "IsNaN")) continue;
    int cond = rw_node(w, isn)->outputs[0], wh = rw_sole_user(w, cond);
    if (wh < 0 || !rw_is_op(w, wh, "Where")) return -1;
    const ir_node *nd = rw_node(w, wh);
    if (nd->n_inputs != 3 || nd->inputs[0] != cond || nd->inputs[2] != pv || !rw_all_equal(w, nd->inputs[1], 0) ||
        rw_val(w, nd->outputs[0])->rank != rw_val(w, pv)->rank)
      return -1;
    m->nodes[m->n++] = isn;
    m->nodes[m->n++] = wh;
    m->zero_empty_rows = true;
    return nd->outputs[0];
  }
  return -1;
}

static bool match_at(rewriter *w, int sm, attn_match *m) {
  memset(m, 0, sizeof *m);
  const ir_node *sn = rw_node(w, sm);
  int s = sn->inputs[0], pv = sn->outputs[0];
  if (!f32(w, s) || !f32(w, pv) || rw_sole_user(w, s) != sm) return false;
  int r = rw_val(w, s)->rank;
  if ((r != 3 && r != 4) || !softmax_last_axis(w, sm, r)) return false;
  int guarded = nan_guard(w, pv, m);
  if (guarded >= 0) pv = guarded;
  int mm2 = rw_sole_user(w, pv);
  if (mm2 < 0 || !rw_is_op(w, mm2, "MatMul") || rw_node(w, mm2)->inputs[0] != pv) return false;
  if (!match_scores(w, s, m) || m->rank != r) return false;
  m->nodes[m->n++] = sm;
  m->nodes[m->n++] = mm2;
  double vs = 1.0;
  static const int64_t v_hop[4] = {0, 1, 2, 3};
  trace_operand(w, rw_node(w, mm2)->inputs[1], r, &m->v, &vs, m->k.rep_expand >= 0 ? v_hop : NULL, mm2);
  if ((m->k.rep_expand >= 0) != (m->v.rep_expand >= 0)) return false; /* both repeated, or neither */
  if (vs != 1.0) { /* a scaled V is not part of attention: read it as it is */
    if (m->v.rep_expand >= 0) return false;
    m->v.v = rw_node(w, mm2)->inputs[1];
    identity(m->v.perm, r);
  }
  if (rw_val(w, m->v.v)->rank != r || !f32(w, m->v.v)) return false;
  if (!match_output(w, mm2, m)) return false;
  if (m->k.rep_expand < 0) {
    strided_view(w, &m->q, r);
    strided_view(w, &m->k, r);
    strided_view(w, &m->v, r);
  }
  const ir_value *sv = rw_val(w, s);
  if (m->mask >= 0 && dim_known(sv->dims[r - 2]) && dim_known(sv->dims[r - 1]) &&
      is_causal_mask(w, m, sv->dims[r - 2], sv->dims[r - 1])) {
    m->causal = true;
    m->mask = -1;
  }
  return true;
}

/* Shape nodes reading a repeat_kv's output read [B, Hq, S, D] -- Q's heads,
 * the KV operand's other dims -- from Shape(Q) and Shape(KV) instead, so the
 * repeat (a copy) is no longer needed; the op checks at run time that the
 * repeat would have made exactly that. */
static smelt_status repeat_shapes(rewriter *w, const attn_match *m, const operand *kv) {
  int out = kv->rep_out, shapes[16], n = 0;
  for (int u = 0; u < w->uses[out].n && n < 16; u++)
    if (rw_is_op(w, w->uses[out].node[u], "Shape")) shapes[n++] = w->uses[out].node[u];
  if (!n) return SMELT_OK;
  int sq, sk, cat, idx, id;
  TRY(rw_add_value(w, "smelt_rep_shape", -1, &sq));
  TRY(rw_add_value(w, "smelt_rep_shape", -1, &sk));
  TRY(rw_add_value(w, "smelt_rep_shape", -1, &cat));
  const int srcs[2] = {m->q.v, kv->v}, outs[2] = {sq, sk};
  for (int i = 0; i < 2; i++) {
    TRY(rw_add_node(w, "smelt_rep_shape", "Shape", "", 1, 1, 0, &id));
    TRY(rw_set_input(w, id, 0, srcs[i]));
    rw_set_output(w, id, 0, outs[i]);
  }
  TRY(rw_add_node(w, "smelt_rep_shape", "Concat", "", 2, 1, 1, &id));
  TRY(rw_set_input(w, id, 0, sq));
  TRY(rw_set_input(w, id, 1, sk));
  rw_set_output(w, id, 0, cat);
  TRY(rw_attr_int(w, id, 0, "axis", 0));
  tensor *t;
  int64_t four = 4;
  TRY(rw_tensor(&t, SMELT_I64, 1, &four));
  int64_t *ix = t->data;
  ix[0] = 4 + kv->perm[0];
  ix[1] = m->q.perm[1];
  ix[2] = 4 + kv->perm[2];
  ix[3] = 4 + kv->perm[3];
  TRY(rw_add_constant(w, "smelt_rep_index", t, &idx));
  for (int i = 0; i < n; i++) {
    TRY(rw_replace_node(w, shapes[i], "Gather", "", 2, 1, &id));
    TRY(rw_set_input(w, id, 0, cat));
    TRY(rw_set_input(w, id, 1, idx));
    TRY(rw_attr_int(w, id, 0, "axis", 0));
  }
  return SMELT_OK;
}

static smelt_status build(rewriter *w, attn_match *m) {
  int id;
  char a[160], b[160];
  pass_log(w->r, "fused %s .. %s (%d nodes) -> smelt.Attention(rank %d, scale %g%s%s%s%s) writing %s",
           rw_name(w, m->first, a, sizeof a), rw_name(w, m->last, b, sizeof b),
           m->n, m->rank, m->scale, m->causal ? ", causal" : "", m->zero_empty_rows ? ", NaN guard" : "",
           m->k.rep_expand >= 0 ? ", shared KV heads" : "",
           m->mask >= 0 ? (m->mask_bool ? ", bool mask" : ", additive mask") : "", q(rw_val(w, m->y)->name));
  bool rep = m->k.rep_expand >= 0;
  if (rep) {
    TRY(repeat_shapes(w, m, &m->k));
    TRY(repeat_shapes(w, m, &m->v));
  }
  const operand *ops[3] = {&m->q, &m->k, &m->v};
  int n_views = m->q.has_view + m->k.has_view + m->v.has_view;
  TRY(rw_replace_node(w, m->last, "Attention", "smelt", rep ? 8 : 4, 10 + 2 * n_views, &id));
  for (int k = 0; k < m->n; k++) rw_kill(w, m->nodes[k]);
  TRY(rw_set_input(w, id, 0, m->q.v));
  TRY(rw_set_input(w, id, 1, m->k.v));
  TRY(rw_set_input(w, id, 2, m->v.v));
  TRY(rw_set_input(w, id, 3, m->mask));
  if (rep) { /* shared KV heads: the repeats' shapes, checked at run time */
    TRY(rw_set_input(w, id, 4, m->k.rep_expand));
    TRY(rw_set_input(w, id, 5, m->k.rep_shape));
    TRY(rw_set_input(w, id, 6, m->v.rep_expand));
    TRY(rw_set_input(w, id, 7, m->v.rep_shape));
  }
  TRY(rw_attr_float(w, id, 0, "scale", (float)m->scale));
  TRY(rw_attr_int(w, id, 1, "causal", m->causal));
  TRY(rw_attr_float(w, id, 2, "mask_fill", m->mask_bool ? (float)m->fill : -INFINITY));
  TRY(rw_attr_ints(w, id, 3, "q_perm", m->q.perm, m->rank));
  TRY(rw_attr_ints(w, id, 4, "k_perm", m->k.perm, m->rank));
  TRY(rw_attr_ints(w, id, 5, "v_perm", m->v.perm, m->rank));
  TRY(rw_attr_ints(w, id, 6, "out_perm", m->out_perm, m->rank));
  TRY(rw_attr_int(w, id, 8, "zero_empty_rows", m->zero_empty_rows));
  TRY(rw_attr_int(w, id, 9, "kv_group", rep));
  static const char *const view_names[3][2] = {{"q_view", "q_view_src"}, {"k_view", "k_view_src"},
                                               {"v_view", "v_view_src"}};
  for (int i = 0, slot = 10; i < 3; i++) {
    if (!ops[i]->has_view) continue;
    const view_chain *vc = &ops[i]->view;
    int64_t a[1 + 2 * 4];
    a[0] = vc->offset;
    for (int d = 0; d < vc->rank; d++) a[1 + d] = vc->dims[d], a[1 + vc->rank + d] = vc->strides[d];
    TRY(rw_attr_ints(w, id, slot++, view_names[i][0], a, 1 + 2 * vc->rank));
    TRY(rw_attr_ints(w, id, slot++, view_names[i][1], vc->src_dims, vc->src_rank));
  }
  return rw_attr_int(w, id, 7, "has_mask", m->mask >= 0);
}

smelt_status pass_fuse_attention(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  int n = g->n_nodes;
  for (int id = 0; !s && id < n; id++) {
    attn_match m;
    if (!rw_is_op(&w, id, "Softmax") || !match_at(&w, id, &m)) continue;
    s = build(&w, &m);
    w.changes += !s;
  }
  return rw_end(&w, s, changes);
}
