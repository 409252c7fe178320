/* Shape values during inference (see infer_shape_values.h).
 *
 * A shape value is what a small integer tensor of a shape computation holds,
 * element by element: a known integer, a symbolic dim (a name the graph
 * interns: DIM_SYM_BASE - k), or unknown.  Shape(x) gives x's dims; Gather,
 * Slice, Unsqueeze, Squeeze, Identity, Cast and Concat carry them through,
 * Equal and Where too (torch's expand(-1) idiom: Where(Equal(t, -1), 1, t);
 * a dim is never negative), Reshape of such a value to [n], ConstantOfShape
 * of a known length, and Mul / Add / Sub of known elements;
 * a constant integer tensor of up to SV_MAX elements is all known.  Reshape
 * and Expand read them as their targets, so their outputs get symbolic dims
 * where the target is computed at run time (Shape -> Gather -> Concat:
 * [batch, seq, heads, head_dim]), and with dims_as_values a value whose
 * elements are all known becomes a constant, which folds the computation.
 * Range(0, n, 1) has n elements.
 *
 * Exact rules only: Reshape's 0 copies the input's dim (allowzero off), -1
 * is resolved only from concrete dims; Expand takes a target element c > 1
 * as c, 1 as the input's dim, and a symbol only where the input's dim is 1
 * or the same symbol (a symbol may stand for 1 at run time).
 *
 * Complexity: O(SV_MAX) per node. */
#include "ops/infer_shape_values.h"

#include <stdlib.h>
#include <string.h>

#include "ops/infer.h"
#include "util/err.h"

enum { SV_UNKNOWN = 0, SV_CONST = 1, SV_SYM = 2 };

static bool is_int_dt(smelt_dtype t) { return t == SMELT_I64 || t == SMELT_I32; }

static bool sv_compute(const ir_graph *g, const shape_val *tab, const ir_node *nd, shape_val *o);

/* The shape value of v: from the table, or from a small integer constant;
 * without a table (tab NULL), also what a Shape node gives v (one level). */
static bool sv_get(const ir_graph *g, const shape_val *tab, int v, shape_val *out) {
  if (v < 0) return false;
  if (tab && tab[v].n >= 0) {
    *out = tab[v];
    return true;
  }
  const ir_value *val = &g->values[v];
  const tensor *t = val->constant;
  if (!t && !tab && val->producer >= 0 && !strcmp(g->nodes[val->producer].op_type, "Shape"))
    return sv_compute(g, NULL, &g->nodes[val->producer], out);
  if (!t || t->kind != TENSOR_KIND_TENSOR || !is_int_dt(t->dtype) || t->rank > 1) return false;
  int64_t n = tensor_numel(t);
  if (n < 0 || n > SV_MAX || (n && !t->data)) return false;
  out->n = (int)n;
  out->scalar = t->rank == 0;
  for (int i = 0; i < n; i++) out->v[i] = tensor_get_i64(t, i), out->k[i] = SV_CONST;
  return true;
}

static void sv_from_dim(shape_val *s, int i, int64_t d) {
  s->v[i] = d;
  s->k[i] = dim_known(d) ? SV_CONST : d <= DIM_SYM_BASE ? SV_SYM : SV_UNKNOWN;
}

/* Output 0's shape value from the node's inputs; false: none. */
static bool sv_compute(const ir_graph *g, const shape_val *tab, const ir_node *nd, shape_val *o) {
  const char *op = nd->op_type;
  if (*nd->domain || nd->n_outputs != 1 || nd->n_inputs < 1 || nd->inputs[0] < 0) return false;
  const ir_value *x = &g->values[nd->inputs[0]];
  shape_val a, b;
  memset(o, 0, sizeof *o);
  if (!strcmp(op, "Shape")) {
    if (x->rank < 0) return false;
    int64_t lo, hi;
    infer_shape_window(nd, x->rank, &lo, &hi);
    if (hi - lo > SV_MAX) return false;
    o->n = (int)(hi - lo);
    for (int64_t i = lo; i < hi; i++) sv_from_dim(o, (int)(i - lo), x->dims[i]);
    return true;
  }
  if (!strcmp(op, "ConstantOfShape")) { /* n copies of its value (0 when none is given) */
    if (!sv_get(g, tab, nd->inputs[0], &a) || a.n != 1 || a.k[0] != SV_CONST || a.v[0] < 0 || a.v[0] > SV_MAX)
      return false;
    const ir_attr *va = ir_attr_find(nd, "value");
    int64_t fill = 0;
    if (va && va->type == IR_ATTR_TENSOR && va->t) {
      if (!is_int_dt(va->t->dtype) || tensor_numel(va->t) != 1) return false;
      fill = tensor_get_i64(va->t, 0);
    } else if (va) {
      return false;
    }
    o->n = (int)a.v[0];
    for (int i = 0; i < o->n; i++) o->v[i] = fill, o->k[i] = SV_CONST;
    return true;
  }
  if (!sv_get(g, tab, nd->inputs[0], &a)) return false;
  if (!strcmp(op, "Reshape")) { /* a 1-D shape value reshaped to [n] or [-1] */
    shape_val t;
    if (nd->n_inputs < 2 || !sv_get(g, tab, nd->inputs[1], &t) || t.n != 1 || t.k[0] != SV_CONST ||
        (t.v[0] != -1 && t.v[0] != a.n))
      return false;
    *o = a;
    o->scalar = false;
    return true;
  }
  if (!strcmp(op, "Mul") || !strcmp(op, "Add") || !strcmp(op, "Sub")) { /* known elements only */
    if (nd->n_inputs != 2 || !sv_get(g, tab, nd->inputs[1], &b) || (a.n != b.n && a.n != 1 && b.n != 1)) return false;
    o->n = a.n > b.n ? a.n : b.n;
    o->scalar = a.scalar && b.scalar;
    for (int i = 0; i < o->n; i++) {
      int ia = a.n == 1 ? 0 : i, ib = b.n == 1 ? 0 : i;
      o->k[i] = a.k[ia] == SV_CONST && b.k[ib] == SV_CONST ? SV_CONST : SV_UNKNOWN;
      o->v[i] = op[0] == 'M' ? a.v[ia] * b.v[ib] : op[0] == 'A' ? a.v[ia] + b.v[ib] : a.v[ia] - b.v[ib];
      if (op[0] == 'M' && a.k[ia] == SV_SYM && b.k[ib] == SV_CONST && b.v[ib] == 1) o->k[i] = SV_SYM, o->v[i] = a.v[ia];
      if (op[0] == 'M' && b.k[ib] == SV_SYM && a.k[ia] == SV_CONST && a.v[ia] == 1) o->k[i] = SV_SYM, o->v[i] = b.v[ib];
    }
    return true;
  }
  if (!strcmp(op, "Identity") || !strcmp(op, "Cast") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
    if (!strcmp(op, "Cast") && !is_int_dt((smelt_dtype)ir_attr_int(nd, "to", 0))) return false;
    *o = a;
    if (!strcmp(op, "Unsqueeze")) o->scalar = false; /* a scalar made [1] (a 1-D one made 2-D is not tracked) */
    if (!strcmp(op, "Squeeze")) o->scalar = a.n == 1;
    return (strcmp(op, "Unsqueeze") || a.scalar) && (strcmp(op, "Squeeze") || a.n == 1);
  }
  if (!strcmp(op, "Gather")) {
    if (ir_attr_int(nd, "axis", 0) != 0 || nd->n_inputs < 2 || a.scalar || !sv_get(g, tab, nd->inputs[1], &b))
      return false;
    o->n = b.n;
    o->scalar = b.scalar;
    for (int i = 0; i < b.n; i++) {
      if (b.k[i] != SV_CONST) return false;
      int64_t j = b.v[i] < 0 ? b.v[i] + a.n : b.v[i];
      if (j < 0 || j >= a.n) return false;
      o->v[i] = a.v[j], o->k[i] = a.k[j];
    }
    return true;
  }
  if (!strcmp(op, "Slice")) {
    shape_val st, en, ax, sp;
    if (a.scalar || nd->n_inputs < 3 || !sv_get(g, tab, nd->inputs[1], &st) || !sv_get(g, tab, nd->inputs[2], &en) ||
        st.n != 1 || en.n != 1 || st.k[0] != SV_CONST || en.k[0] != SV_CONST)
      return false;
    if (nd->n_inputs > 3 && nd->inputs[3] >= 0 &&
        (!sv_get(g, tab, nd->inputs[3], &ax) || ax.n != 1 || ax.k[0] != SV_CONST || (ax.v[0] != 0 && ax.v[0] != -1)))
      return false;
    if (nd->n_inputs > 4 && nd->inputs[4] >= 0 &&
        (!sv_get(g, tab, nd->inputs[4], &sp) || sp.n != 1 || sp.k[0] != SV_CONST || sp.v[0] != 1))
      return false;
    int64_t lo = st.v[0] < 0 ? st.v[0] + a.n : st.v[0], hi = en.v[0] < 0 ? en.v[0] + a.n : en.v[0];
    lo = lo < 0 ? 0 : lo > a.n ? a.n : lo;
    hi = hi < lo ? lo : hi > a.n ? a.n : hi;
    o->n = (int)(hi - lo);
    for (int64_t i = lo; i < hi; i++) o->v[i - lo] = a.v[i], o->k[i - lo] = a.k[i];
    return true;
  }
  if (!strcmp(op, "Equal") || !strcmp(op, "Where")) { /* torch's expand(-1): Where(Equal(t, -1), 1, t) */
    shape_val c[3];
    int ni = !strcmp(op, "Equal") ? 2 : 3, n = 0;
    if (nd->n_inputs != ni) return false;
    for (int k = 0; k < ni; k++) {
      if (!sv_get(g, tab, nd->inputs[k], &c[k])) return false;
      n = c[k].n > n ? c[k].n : n;
    }
    for (int k = 0; k < ni; k++)
      if (c[k].n != n && c[k].n != 1) return false; /* one element broadcasts; nothing else is tracked */
    o->n = n;
    o->scalar = c[0].scalar && c[1].scalar && (ni == 2 || c[2].scalar);
    for (int i = 0; i < n; i++) {
      const int ia = c[0].n == 1 ? 0 : i, ib = c[1].n == 1 ? 0 : i;
      if (ni == 3) {
        if (c[0].k[ia] != SV_CONST) {
          o->k[i] = SV_UNKNOWN;
          continue;
        }
        const shape_val *pick = c[0].v[ia] ? &c[1] : &c[2];
        int ip = pick->n == 1 ? 0 : i;
        o->v[i] = pick->v[ip], o->k[i] = pick->k[ip];
        continue;
      }
      uint8_t ka = c[0].k[ia], kb = c[1].k[ib];
      o->k[i] = SV_CONST;
      if (ka == SV_CONST && kb == SV_CONST) o->v[i] = c[0].v[ia] == c[1].v[ib];
      else if ((ka == SV_SYM && kb == SV_CONST && c[1].v[ib] < 0) || (kb == SV_SYM && ka == SV_CONST && c[0].v[ia] < 0))
        o->v[i] = 0; /* a dim is never negative */
      else if (ka == SV_SYM && kb == SV_SYM && c[0].v[ia] == c[1].v[ib]) o->v[i] = 1;
      else o->k[i] = SV_UNKNOWN;
    }
    return true;
  }
  if (!strcmp(op, "Concat")) {
    if (ir_attr_int(nd, "axis", 0) != 0 && ir_attr_int(nd, "axis", 0) != -1) return false;
    for (int k = 0; k < nd->n_inputs; k++) {
      if (!sv_get(g, tab, nd->inputs[k], &b) || b.scalar || o->n + b.n > SV_MAX) return false;
      memcpy(o->v + o->n, b.v, sizeof(int64_t) * (size_t)b.n);
      memcpy(o->k + o->n, b.k, (size_t)b.n);
      o->n += b.n;
    }
    return true;
  }
  return false;
}

/* Dim d of a value refined by what a rule knows: concrete beats symbolic
 * beats unknown (as inference's merge). */
static void refine(ir_value *v, int d, int64_t want) {
  int64_t cur = v->dims[d];
  if (dim_known(cur) || want == DIM_UNKNOWN) return;
  if (dim_known(want) || cur == DIM_UNKNOWN) v->dims[d] = want;
}

static int64_t sv_dim(const shape_val *s, int i) {
  return s->k[i] == SV_UNKNOWN ? DIM_UNKNOWN : s->v[i];
}

/* Reshape / Expand with a target computed at run time: their output dims. */
static void refine_target(ir_graph *g, const ir_node *nd, const shape_val *tab) {
  shape_val t;
  if (nd->n_inputs < 2 || nd->inputs[0] < 0 || nd->inputs[1] < 0 || nd->outputs[0] < 0) return;
  if (g->values[nd->inputs[1]].constant || !sv_get(g, tab, nd->inputs[1], &t) || t.scalar) return;
  const ir_value *x = &g->values[nd->inputs[0]];
  ir_value *y = &g->values[nd->outputs[0]];
  bool reshape = !strcmp(nd->op_type, "Reshape");
  int r = reshape || x->rank < t.n ? t.n : x->rank; /* Expand: aligned at the right */
  if (x->rank < 0 || (y->rank >= 0 && y->rank != r)) return;
  if (y->rank < 0) {
    y->rank = r;
    for (int i = 0; i < r; i++) y->dims[i] = DIM_UNKNOWN;
  }
  if (reshape) {
    bool allowzero = ir_attr_int(nd, "allowzero", 0) != 0;
    int neg = -1;
    for (int i = 0; i < t.n; i++) {
      if (t.k[i] == SV_CONST && t.v[i] == -1) {
        neg = i;
        continue;
      }
      if (t.k[i] == SV_CONST && t.v[i] == 0 && !allowzero) refine(y, i, i < x->rank ? x->dims[i] : DIM_UNKNOWN);
      else if (t.k[i] != SV_CONST || t.v[i] >= 0) refine(y, i, sv_dim(&t, i));
    }
    if (neg >= 0) { /* -1: the input's elements over the others', all concrete */
      int64_t in = 1, out = 1;
      for (int d = 0; d < x->rank; d++) in = dim_known(x->dims[d]) && in >= 0 ? in * x->dims[d] : -1;
      for (int i = 0; i < t.n; i++)
        if (i != neg) out = dim_known(y->dims[i]) && out >= 0 ? out * y->dims[i] : -1;
      if (in >= 0 && out > 0 && in % out == 0) refine(y, neg, in / out);
    }
    return;
  }
  for (int i = 0; i < r; i++) { /* Expand: the broadcast of x's dims and the target's */
    int xi = i - (r - x->rank), ti = i - (r - t.n);
    int64_t a = xi >= 0 ? x->dims[xi] : 1, b = ti >= 0 ? sv_dim(&t, ti) : 1, want = DIM_UNKNOWN;
    if (b == 1) want = a;
    else if (dim_known(b)) want = b; /* c > 1: x's dim is 1 or c */
    else if (b != DIM_UNKNOWN && (a == 1 || a == b)) want = b;
    else if (b == DIM_UNKNOWN && dim_known(a) && a > 1) want = a;
    refine(y, i, want);
  }
}

/* y's value as a constant when s knows all of it and y is an integer of
 * s's rank; *out NULL otherwise. */
static smelt_status sv_tensor(const ir_value *y, const shape_val *s, tensor **out) {
  *out = NULL;
  if (!is_int_dt(y->dtype) || y->rank != (s->scalar ? 0 : 1)) return SMELT_OK;
  for (int i = 0; i < s->n; i++)
    if (s->k[i] != SV_CONST) return SMELT_OK;
  tensor *t = malloc(sizeof *t);
  if (!t) return err_nomem("shape value", sizeof *t);
  int64_t n = s->n;
  smelt_status st = tensor_alloc(t, y->dtype, s->scalar ? 0 : 1, &n);
  if (st) {
    free(t);
    return st;
  }
  for (int i = 0; i < s->n; i++) {
    if (y->dtype == SMELT_I64) ((int64_t *)t->data)[i] = s->v[i];
    else ((int32_t *)t->data)[i] = (int32_t)s->v[i];
  }
  *out = t;
  return SMELT_OK;
}

smelt_status shape_values_fold(const ir_graph *g, int id, tensor **out) {
  shape_val o;
  *out = NULL;
  const ir_node *nd = &g->nodes[id];
  if (!nd->op || nd->outputs[0] < 0 || !sv_compute(g, NULL, nd, &o)) return SMELT_OK;
  return sv_tensor(&g->values[nd->outputs[0]], &o, out);
}

/* Range(0, n, 1): n elements, n known or a symbol (torch.arange(seq_len)). */
static void refine_range(ir_graph *g, const ir_node *nd, const shape_val *tab) {
  shape_val a, n, d;
  ir_value *y = &g->values[nd->outputs[0]];
  if (nd->n_inputs != 3 || !sv_get(g, tab, nd->inputs[0], &a) || !sv_get(g, tab, nd->inputs[1], &n) ||
      !sv_get(g, tab, nd->inputs[2], &d) || a.n != 1 || n.n != 1 || d.n != 1)
    return;
  if (a.k[0] != SV_CONST || a.v[0] != 0 || d.k[0] != SV_CONST || d.v[0] != 1 || n.k[0] == SV_UNKNOWN) return;
  if (n.k[0] == SV_CONST && n.v[0] < 0) return;
  if (y->rank < 0) y->rank = 1, y->dims[0] = DIM_UNKNOWN;
  if (y->rank == 1) refine(y, 0, n.v[0]);
}

smelt_status shape_values_node(ir_graph *g, int id, shape_val *tab, bool dims_as_values) {
  const ir_node *nd = &g->nodes[id];
  if (!nd->op || *nd->domain || nd->n_outputs < 1 || nd->outputs[0] < 0) return SMELT_OK;
  if (!strcmp(nd->op_type, "Range")) {
    refine_range(g, nd, tab);
    return SMELT_OK;
  }
  if (!strcmp(nd->op_type, "Reshape") || !strcmp(nd->op_type, "Expand")) {
    refine_target(g, nd, tab);
    if (!strcmp(nd->op_type, "Expand")) return SMELT_OK;
  }
  shape_val o;
  if (!sv_compute(g, tab, nd, &o)) return SMELT_OK;
  ir_value *y = &g->values[nd->outputs[0]];
  tab[nd->outputs[0]] = o;
  if (!dims_as_values || y->constant) return SMELT_OK;
  return sv_tensor(y, &o, &y->constant);
}

shape_val *shape_values_new(const ir_graph *g) {
  shape_val *tab = malloc(sizeof *tab * (size_t)(g->n_values + 1));
  for (int v = 0; tab && v < g->n_values; v++) tab[v].n = -1;
  return tab;
}
