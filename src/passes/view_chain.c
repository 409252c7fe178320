/* Strided views through layout ops (see view_chain.h).
 *
 * Complexity: O(VIEW_CHAIN_MAX * rank) per call. */
#include "passes/view_chain.h"

#include <string.h>

static bool reshape_like(rewriter *w, int id) {
  return rw_is_op(w, id, "Reshape") || rw_is_op(w, id, "Squeeze") || rw_is_op(w, id, "Unsqueeze") ||
         rw_is_op(w, id, "Flatten") || rw_is_op(w, id, "Identity");
}

static bool layout_op(rewriter *w, int id) {
  return reshape_like(w, id) || rw_is_op(w, id, "Transpose") || rw_is_op(w, id, "Gather") ||
         rw_is_op(w, id, "Split") || rw_is_op(w, id, "Slice");
}

/* A view whose axes may each be a run of sub-axes (dim, stride), outer
 * first: a reshape that merges dims which are not laid out as one (a head
 * axis B x H over a packed [S, B, 3, E] projection) keeps them apart until a
 * later Transpose or Reshape separates them again. */
#define VC_SUB 6
typedef struct vsub {
  int64_t d, s;
} vsub;
typedef struct sview {
  int rank;
  int64_t off;
  int n[SMELT_MAX_RANK];
  vsub ax[SMELT_MAX_RANK][VC_SUB];
} sview;

static int64_t axis_dim(const sview *v, int a) {
  int64_t d = 1;
  for (int k = 0; k < v->n[a]; k++) d *= v->ax[a][k].d;
  return d;
}

/* Neighbouring sub-axes laid out as one become one. */
static void merge_subs(sview *v, int a) {
  int m = 0;
  for (int k = 0; k < v->n[a]; k++) {
    vsub x = v->ax[a][k];
    if (x.d == 1) continue;
    if (m && v->ax[a][m - 1].s == x.d * x.s) v->ax[a][m - 1] = (vsub){v->ax[a][m - 1].d * x.d, x.s};
    else v->ax[a][m++] = x;
  }
  v->n[a] = m;
}

/* v to dims nd[nn]: the sub-axes, in order, are dealt out to the new axes;
 * a sub-axis that straddles two of them is split when its dim divides. */
static bool view_reshape(sview *v, int nn, const int64_t *nd) {
  vsub L[SMELT_MAX_RANK * VC_SUB];
  int nl = 0, at = 0;
  for (int a = 0; a < v->rank; a++)
    for (int k = 0; k < v->n[a]; k++)
      if (v->ax[a][k].d != 1) L[nl++] = v->ax[a][k];
  sview t = {.rank = nn, .off = v->off};
  for (int i = 0; i < nn; i++) {
    int64_t need = nd[i];
    t.n[i] = 0;
    while (need > 1) {
      if (at >= nl || t.n[i] >= VC_SUB) return false;
      vsub x = L[at];
      if (x.d <= need) {
        if (need % x.d) return false;
        t.ax[i][t.n[i]++] = x;
        need /= x.d;
        at++;
      } else { /* x splits: outer `need` for this axis, the rest stays */
        if (x.d % need) return false;
        int64_t inner = x.d / need;
        t.ax[i][t.n[i]++] = (vsub){need, x.s * inner};
        L[at] = (vsub){inner, x.s};
        need = 1;
      }
    }
    if (need != 1) return false;
    merge_subs(&t, i);
  }
  if (at != nl) return false;
  *v = t;
  return true;
}

static void drop_axis(sview *v, int a) {
  for (int i = a; i + 1 < v->rank; i++) {
    v->n[i] = v->n[i + 1];
    memcpy(v->ax[i], v->ax[i + 1], sizeof v->ax[i]);
  }
  v->rank--;
}

/* Offset by k along axis a (k in range), and the axis cut to len from there
 * with step: one sub-axis, or k = 0 with the whole axis kept. */
static bool cut_axis(sview *v, int a, int64_t k, int64_t len, int64_t step) {
  merge_subs(v, a);
  if (v->n[a] == 0) return k == 0 && len == 1;
  if (v->n[a] > 1) return k == 0 && step == 1 && len == axis_dim(v, a);
  v->off += k * v->ax[a][0].s;
  v->ax[a][0].d = len;
  v->ax[a][0].s *= step;
  return true;
}

/* Node id applied to view v (its input), making output `out`. */
static bool view_step(rewriter *w, int id, int out, sview *v) {
  const ir_node *nd = rw_node(w, id);
  const ir_value *ov = rw_val(w, out);
  if (reshape_like(w, id)) return view_reshape(v, ov->rank, ov->dims);
  if (rw_is_op(w, id, "Transpose")) {
    int n;
    const int64_t *p = ir_attr_ints(nd, "perm", &n);
    sview t = *v;
    for (int i = 0; i < v->rank; i++) {
      int64_t a = p ? (n == v->rank ? p[i] : -1) : v->rank - 1 - i;
      if (a < 0 || a >= v->rank) return false;
      t.n[i] = v->n[a];
      memcpy(t.ax[i], v->ax[a], sizeof t.ax[i]);
    }
    *v = t;
    return true;
  }
  if (rw_is_op(w, id, "Gather")) {
    const tensor *ix = nd->n_inputs == 2 ? rw_const(w, nd->inputs[1]) : NULL;
    int64_t a = ir_attr_int(nd, "axis", 0);
    if (a < 0) a += v->rank;
    if (!ix || !dtype_is_int(ix->dtype) || tensor_numel(ix) != 1 || ix->rank > 1 || a < 0 || a >= v->rank)
      return false;
    int64_t k = tensor_get_i64(ix, 0), da = axis_dim(v, (int)a);
    if (k < 0) k += da;
    if (k < 0 || k >= da) return false;
    for (int j = v->n[a] - 1; j >= 0; j--) { /* k in the sub-axes' mixed radix */
      v->off += (k % v->ax[a][j].d) * v->ax[a][j].s;
      k /= v->ax[a][j].d;
    }
    v->n[a] = 0;
    if (ix->rank == 0) drop_axis(v, (int)a);
    return true;
  }
  if (rw_is_op(w, id, "Split")) {
    int64_t a = ir_attr_int(nd, "axis", 0);
    if (a < 0) a += v->rank;
    if (a < 0 || a >= v->rank) return false;
    int64_t start = 0;
    for (int k = 0; k < nd->n_outputs && nd->outputs[k] != out; k++) {
      if (nd->outputs[k] < 0) return false;
      const ir_value *pv = rw_val(w, nd->outputs[k]);
      if (pv->rank != v->rank || !dim_known(pv->dims[a])) return false;
      start += pv->dims[a];
    }
    if (start + ov->dims[a] > axis_dim(v, (int)a)) return false;
    return cut_axis(v, (int)a, start, ov->dims[a], 1);
  }
  if (rw_is_op(w, id, "Slice")) {
    if (nd->opset < 10 || nd->n_inputs < 3) return false;
    const tensor *st = rw_const(w, nd->inputs[1]);
    const tensor *ax = nd->n_inputs > 3 && nd->inputs[3] >= 0 ? rw_const(w, nd->inputs[3]) : NULL;
    const tensor *sp = nd->n_inputs > 4 && nd->inputs[4] >= 0 ? rw_const(w, nd->inputs[4]) : NULL;
    if (!st || (nd->n_inputs > 3 && nd->inputs[3] >= 0 && !ax) || (nd->n_inputs > 4 && nd->inputs[4] >= 0 && !sp))
      return false;
    int64_t n = tensor_numel(st);
    if ((ax && tensor_numel(ax) != n) || (sp && tensor_numel(sp) != n)) return false;
    for (int64_t i = 0; i < n; i++) {
      int64_t a = ax ? tensor_get_i64(ax, i) : i, step = sp ? tensor_get_i64(sp, i) : 1;
      if (a < 0) a += v->rank;
      if (a < 0 || a >= v->rank || step <= 0) return false;
      int64_t s0 = tensor_get_i64(st, i), da = axis_dim(v, (int)a);
      if (s0 < 0) s0 += da;
      s0 = s0 < 0 ? 0 : s0 > da ? da : s0;
      if (ov->dims[a] < 1 || s0 + (ov->dims[a] - 1) * step >= da) return false;
      if (!cut_axis(v, (int)a, s0, ov->dims[a], step)) return false;
    }
    return true;
  }
  return false;
}

bool view_chain_trace(rewriter *w, int v, view_chain *vc) {
  int nodes[VIEW_CHAIN_MAX], outs[VIEW_CHAIN_MAX], n = 0;
  const ir_value *top = rw_val(w, v);
  if (top->dtype != SMELT_F32 || !rw_concrete(top)) return false;
  int x = v;
  while (n < VIEW_CHAIN_MAX) {
    int p = rw_producer(w, x);
    if (p < 0 || !layout_op(w, p)) break;
    int in = rw_node(w, p)->inputs[0];
    if (in < 0 || rw_val(w, in)->dtype != SMELT_F32 || !rw_concrete(rw_val(w, in))) break;
    nodes[n] = p, outs[n] = x, n++;
    x = in;
  }
  if (!n) return false;
  const ir_value *rv = rw_val(w, x);
  sview s = {.rank = rv->rank};
  int64_t numel = 1; /* root's: its contiguous strides as they accumulate */
  for (int d = rv->rank - 1; d >= 0; d--) {
    if (rv->dims[d] == 0) return false;
    s.n[d] = 1;
    s.ax[d][0] = (vsub){rv->dims[d], numel};
    numel *= rv->dims[d];
  }
  bool moves = false;
  for (int i = n - 1; i >= 0; i--) {
    if (!view_step(w, nodes[i], outs[i], &s)) return false;
    moves |= !reshape_like(w, nodes[i]);
    const ir_value *ov = rw_val(w, outs[i]);
    if (s.rank != ov->rank) return false;
    for (int d = 0; d < s.rank; d++)
      if (axis_dim(&s, d) != ov->dims[d]) return false;
  }
  int64_t last = s.off, dims[SMELT_MAX_RANK], strides[SMELT_MAX_RANK];
  for (int d = 0; d < s.rank; d++) { /* one stride per dim, and inside root */
    merge_subs(&s, d);
    if (s.n[d] > 1) return false;
    dims[d] = s.n[d] ? s.ax[d][0].d : 1;
    strides[d] = s.n[d] ? s.ax[d][0].s : 0;
    last += (dims[d] - 1) * strides[d];
  }
  if (s.off < 0 || last >= numel) return false;
  vc->root = x;
  vc->src_rank = rv->rank;
  memcpy(vc->src_dims, rv->dims, sizeof(int64_t) * (size_t)rv->rank);
  vc->rank = s.rank;
  vc->offset = s.off;
  memcpy(vc->dims, dims, sizeof(int64_t) * (size_t)s.rank);
  memcpy(vc->strides, strides, sizeof(int64_t) * (size_t)s.rank);
  vc->moves = moves;
  return true;
}
