/* Steps, value locations and the arena of a plan.
 *
 * Units (a fused group, or one library / break node) are ordered
 * topologically, staying close to the model's order.  View nodes (Reshape,
 * Identity, ...) cost nothing: their output is their input's buffer.  Every
 * buffer gets a lifetime [producing step, last reading step]; an elementwise
 * kernel may write its output over an input that dies there (same bytes,
 * read and written at the same index), and a GEMM step its output over its
 * residual input; a channel Concat at batch 1 gets its inputs written into
 * its output's slices (find_concat_slices); then memplan places the buffers.
 *
 * Complexity: O(n + v + e) for units and locations, O((units + edges) log
 * units) for the order (a heap of ready units), then memplan (see there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"
#include "ops/conv_core.h"
#include "runtime/gemm_step.h"
#include "plan/memplan.h"
#include "util/err.h"

/* Ops whose reference kernel writes every output element (no need to clear
 * the buffer first; tensor_alloc zeroes it in eager mode). */
static bool writes_all(const ir_node *nd) {
  static const char *const ops[] = {
      "Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      "Transpose", "Concat", "Split", "Slice", "Gather", "Expand", "Tile", "Pad", "Softmax",
      "LogSoftmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization",
      "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Cast", "Where", "Add", "Sub", "Mul",
      "Div", "Relu", "Clip", "Erf", "Sqrt", "Pow", "Tanh", "Sigmoid", "Equal", "Less", "Greater",
      "Not", "Range", "Shape", "ConstantOfShape", "Trilu", "Resize", "DepthToSpace",
      "SpaceToDepth", "ArgMax", "ArgMin", "Neg", "Exp", "Log", NULL};
  if (!strcmp(nd->domain, "smelt")) return true;
  if (*nd->domain && strcmp(nd->domain, "ai.onnx")) return false;
  for (int i = 0; ops[i]; i++)
    if (!strcmp(nd->op_type, ops[i])) return true;
  return false;
}

static int64_t numel_of(const ir_graph *g, int v) {
  return v < 0 ? 0 : shape_numel(g->values[v].rank, g->values[v].dims);
}

/* The key count of a smelt.Attention node: K's canonical axis rank-2, which
 * is K's axis k_perm[rank-2] (ops/fused_attention.c: K laid out
 * [B, S, H, D] comes with k_perm [0, 2, 1, 3], so its own axis rank-2 is the
 * head count, not the keys); -1 when unknown. */
static int64_t attention_keys(const ir_node *nd, const ir_value *k) {
  if (k->rank < 2) return -1;
  int n = 0;
  const int64_t *perm = ir_attr_ints(nd, "k_perm", &n);
  int64_t axis = k->rank - 2;
  if (perm && n == k->rank) axis = perm[k->rank - 2];
  return axis >= 0 && axis < k->rank ? k->dims[axis] : -1;
}

/* Threads cost microseconds to wake (far more on a busy machine): small
 * library steps run on the calling thread.  Data movement below 256 KB of
 * output, attention below 0.5 MFLOP (4 x Q's elements x keys): the fused
 * kernel runs at a few tens of GFLOP/s on short sequences (softmax, small
 * blocks), so 0.5 MFLOP is already 10-20 us, several times the 1-2 us a
 * spinning worker takes to join.  (max-autotune measures instead.) */
static int default_variant(const ir_graph *g, const ir_node *nd) {
  static const char *const moves[] = {"Transpose", "Concat", "Split", "Slice", "Gather", "Pad",
                                      "Expand", "Tile", "Cast", "Where", "ScatterND", NULL};
  bool onnx = !*nd->domain || !strcmp(nd->domain, "ai.onnx");
  if (!strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Attention") && nd->n_inputs >= 2) {
    const ir_value *q = &g->values[nd->inputs[0]], *k = &g->values[nd->inputs[1]];
    int64_t nq = numel_of(g, nd->inputs[0]), sk = attention_keys(nd, k);
    if (q->rank >= 2 && nq > 0 && sk > 0 && (double)nq * (double)sk * 4.0 < 5e5) return LV_SERIAL;
    return LV_POOL;
  }
  for (int i = 0; onnx && moves[i]; i++)
    if (!strcmp(nd->op_type, moves[i])) {
      int64_t out = 0;
      for (int o = 0; o < nd->n_outputs; o++) out += numel_of(g, nd->outputs[o]);
      return out >= 0 && out * 4 < (256 << 10) ? LV_SERIAL : LV_POOL;
    }
  return LV_POOL;
}

typedef struct unit {
  int group; /* >= 0: a kernel */
  int node;  /* else: the node */
  int pos;   /* first member's position in the model's order */
} unit;

typedef struct sched {
  const cgraph *cg;
  fusion *fu;
  bool kernels;
  int *root;      /* per value: the buffer it is a view of (itself if none) */
  int *prod_unit; /* per value: the unit that writes it, -1 */
  unit *units;
  int n_units;
  int *unit_of;   /* per node */
  int *order;     /* units in execution order */
  int *tmp;       /* scratch for the values one unit reads or writes */
} sched;

static void sched_free(sched *s) {
  free(s->root);
  free(s->prod_unit);
  free(s->units);
  free(s->unit_of);
  free(s->order);
  free(s->tmp);
}

static bool is_group_unit(const sched *s, int n) {
  cn_kind k = s->cg->info[n].kind;
  return s->kernels && (k == CN_PW || k == CN_RED || k == CN_WIN) && s->fu->group_of[n] >= 0;
}

/* Values a unit reads (outside itself) and writes. */
static int unit_reads(const sched *s, const unit *u, int *out) {
  int n = 0;
  if (u->group >= 0) {
    const kir_group *k = s->fu->groups[u->group].kir;
    for (int i = 0; i < k->n_in; i++) out[n++] = k->in[i].value;
  } else {
    const ir_node *nd = &s->cg->g->nodes[u->node];
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i] >= 0) out[n++] = nd->inputs[i];
  }
  return n;
}

static int unit_writes(const sched *s, const unit *u, int *out) {
  int n = 0;
  if (u->group >= 0) {
    const kir_group *k = s->fu->groups[u->group].kir;
    for (int i = 0; i < k->n_out; i++) out[n++] = k->out[i].value;
  } else {
    const ir_node *nd = &s->cg->g->nodes[u->node];
    for (int i = 0; i < nd->n_outputs; i++)
      if (nd->outputs[i] >= 0) out[n++] = nd->outputs[i];
  }
  return n;
}

static smelt_status make_units(sched *s) {
  const cgraph *cg = s->cg;
  const ir_graph *g = cg->g;
  size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1;
  s->root = malloc(sizeof(int) * nv);
  s->prod_unit = malloc(sizeof(int) * nv);
  s->units = malloc(sizeof(unit) * nn);
  s->unit_of = malloc(sizeof(int) * nn);
  int *group_unit = malloc(sizeof(int) * nn);
  int maxio = 2 * KIR_MAX_OPERANDS;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].n_inputs > maxio) maxio = g->nodes[i].n_inputs;
    if (g->nodes[i].n_outputs > maxio) maxio = g->nodes[i].n_outputs;
  }
  s->tmp = malloc(sizeof(int) * (size_t)(maxio + 1));
  if (!s->tmp || !s->root || !s->prod_unit || !s->units || !s->unit_of || !group_unit) {
    free(group_unit);
    return err_nomem("schedule", sizeof(int) * nv * 4);
  }
  for (int v = 0; v < g->n_values; v++) s->root[v] = v, s->prod_unit[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) group_unit[i] = -1, s->unit_of[i] = -1;
  int *wr = s->tmp;
  for (int st = 0; st < g->n_nodes; st++) {
    int n = cg->order[st];
    const ir_node *nd = &g->nodes[n];
    cn_kind k = cg->info[n].kind;
    if (k == CN_CONST) continue;
    if (k == CN_VIEW) {
      s->root[nd->outputs[0]] = s->root[nd->inputs[0]];
      continue;
    }
    int u;
    if (is_group_unit(s, n)) {
      int grp = s->fu->group_of[n];
      if (group_unit[grp] < 0) {
        group_unit[grp] = s->n_units;
        s->units[s->n_units++] = (unit){grp, n, st};
      }
      u = group_unit[grp];
    } else {
      u = s->n_units;
      s->units[s->n_units++] = (unit){-1, n, st};
    }
    s->unit_of[n] = u;
  }
  free(group_unit);
  for (int u = 0; u < s->n_units; u++) {
    int n = unit_writes(s, &s->units[u], wr);
    for (int i = 0; i < n; i++) s->prod_unit[wr[i]] = u;
  }
  return SMELT_OK;
}

/* A min-heap of ready units by their position in the model's order. */
static void heap_push(int *h, int *n, const unit *units, int u) {
  int i = (*n)++;
  for (; i > 0 && units[h[(i - 1) / 2]].pos > units[u].pos; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = u;
}

static int heap_pop(int *h, int *n, const unit *units) {
  int top = h[0], last = h[--*n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && units[h[c + 1]].pos < units[h[c]].pos) c++;
    if (units[h[c]].pos >= units[last].pos) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

/* Kahn's algorithm, always taking the ready unit that came first in the
 * model (a heap: O((units + edges) log units)). */
static smelt_status order_units(sched *s) {
  int nu = s->n_units;
  int *indeg = calloc((size_t)nu + 1, sizeof(int)), *adj_start = calloc((size_t)nu + 2, sizeof(int));
  int *adj = NULL, *fill = NULL, *heap = malloc(sizeof(int) * ((size_t)nu + 1)), n_heap = 0;
  s->order = malloc(sizeof(int) * ((size_t)nu + 1));
  smelt_status st = (!indeg || !adj_start || !heap || !s->order) ? err_nomem("schedule", sizeof(int) * (size_t)nu) : SMELT_OK;
  int *rd = s->tmp, n_edges = 0;
  for (int pass = 0; !st && pass < 2; pass++) {
    for (int u = 0; u < nu; u++) {
      int n = unit_reads(s, &s->units[u], rd);
      for (int i = 0; i < n; i++) {
        int pu = s->prod_unit[s->root[rd[i]]];
        if (pu < 0 || pu == u) continue;
        if (pass == 0) {
          adj_start[pu + 1]++;
          n_edges++;
        } else {
          adj[adj_start[pu] + fill[pu]++] = u;
          indeg[u]++;
        }
      }
    }
    if (pass == 0) {
      for (int u = 0; u < nu; u++) adj_start[u + 1] += adj_start[u];
      adj = malloc(sizeof(int) * ((size_t)n_edges + 1));
      fill = calloc((size_t)nu + 1, sizeof(int));
      if (!adj || !fill) st = err_nomem("schedule edges", sizeof(int) * (size_t)n_edges);
    }
  }
  for (int u = 0; !st && u < nu; u++)
    if (!indeg[u]) heap_push(heap, &n_heap, s->units, u);
  for (int k = 0; !st && k < nu; k++) {
    if (!n_heap) {
      st = err_set(SMELT_ERR_INTERNAL, "fusion produced a cycle between steps");
      break;
    }
    int best = heap_pop(heap, &n_heap, s->units);
    s->order[k] = best;
    for (int e = adj_start[best]; e < adj_start[best + 1]; e++)
      if (--indeg[adj[e]] == 0) heap_push(heap, &n_heap, s->units, adj[e]);
  }
  free(indeg);
  free(adj_start);
  free(adj);
  free(fill);
  free(heap);
  return st;
}

static smelt_status make_steps(sched *s, compiled_plan *p) {
  p->steps = calloc((size_t)s->n_units + 1, sizeof(pstep));
  if (!p->steps) return err_nomem("plan steps", sizeof(pstep) * (size_t)s->n_units);
  p->n_steps = s->n_units;
  for (int k = 0; k < s->n_units; k++) {
    const unit *u = &s->units[s->order[k]];
    pstep *st = &p->steps[k];
    st->node = u->node;
    st->group = u->group;
    const ir_node *nd = &s->cg->g->nodes[u->node];
    if (u->group >= 0) { /* named after the group's reduction or window, else its first node */
      const fgroup *fg = &s->fu->groups[u->group];
      const ir_node *m = &s->cg->g->nodes[fg->nodes[0]];
      for (int i = 0; i < fg->n; i++)
        if (s->cg->info[fg->nodes[i]].kind != CN_PW) m = &s->cg->g->nodes[fg->nodes[i]];
      snprintf(st->kind_label, sizeof st->kind_label, "fused(%.24s%s)", m->op_type, fg->n > 1 ? "+" : "");
    }
    else snprintf(st->kind_label, sizeof st->kind_label, "%s%s%.32s", nd->domain, *nd->domain ? "." : "", nd->op_type);
    if (u->group >= 0) {
      const kir_group *kg = s->fu->groups[u->group].kir;
      st->kind = PS_KERNEL;
      st->n_args = kg->n_in + kg->n_out;
      st->args = malloc(sizeof(int) * (size_t)st->n_args);
      if (!st->args) return err_nomem("kernel arguments", sizeof(int) * (size_t)st->n_args);
      for (int i = 0; i < kg->n_in; i++) st->args[i] = kg->in[i].value;
      for (int i = 0; i < kg->n_out; i++) st->args[kg->n_in + i] = kg->out[i].value;
      st->lib_alt = s->fu->groups[u->group].win != NULL; /* the same node's library op: another algorithm */
      st->zero_out = st->lib_alt && !writes_all(&s->cg->g->nodes[u->node]);
      p->n_kernels++;
    } else if (s->cg->info[u->node].kind == CN_BREAK) {
      st->kind = PS_BREAK;
      p->n_breaks++;
    } else {
      st->kind = PS_LIBRARY;
      st->zero_out = !writes_all(&s->cg->g->nodes[u->node]);
      st->variant = default_variant(s->cg->g, &s->cg->g->nodes[u->node]);
      gemm_step gs;
      if (gemm_step_make(s->cg->g, u->node, &gs)) {
        st->gemm = malloc(sizeof gs);
        if (!st->gemm) return err_nomem("GEMM step", sizeof gs);
        *st->gemm = gs;
      }
      p->n_library++;
    }
  }
  return SMELT_OK;
}

static size_t value_bytes(const ir_value *v) {
  int64_t n = shape_numel(v->rank, v->dims);
  size_t nb; /* packed sub-byte types: ceil(n * bits / 8) */
  return n > 0 && dtype_nbytes(v->dtype, n, &nb) ? nb : 0;
}

/* Where every value lives (offsets come later). */
static void assign_locations(sched *s, compiled_plan *p) {
  const ir_graph *g = s->cg->g;
  for (int k = 0; k < g->n_inputs; k++) {
    int v = g->inputs[k];
    p->loc[v].kind = p->mode == SMELT_MODE_REDUCE_OVERHEAD ? VL_ARENA : VL_INPUT;
    p->loc[v].input = k;
  }
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].constant && !(g->values[v].flags & IR_VALUE_INPUT)) {
      p->loc[v].kind = VL_CONST;
      p->loc[v].cst = g->values[v].constant;
    }
  int *wr = s->tmp;
  for (int u = 0; u < s->n_units; u++) {
    int n = unit_writes(s, &s->units[u], wr);
    for (int i = 0; i < n; i++)
      p->loc[wr[i]].kind = value_concrete(&g->values[wr[i]]) ? VL_ARENA : VL_DYN;
  }
}

typedef struct bufs {
  int *buf_of;  /* per value root: buffer index, -1 */
  mp_buffer *b;
  int n;
  int *uf;      /* in-place merges: buffer -> representative */
  int *parent;  /* concat in place: -1 none, -2 a concat's output holding slices,
                 * >= 0 a slice of that buffer, at delta[b] bytes into it */
  size_t *delta;
} bufs;

static int uf_find(int *uf, int x) {
  while (uf[x] != x) x = uf[x] = uf[uf[x]];
  return x;
}

/* In-place: output o of kernel step k may take the buffer of an input that
 * is last read here, with the same bytes and access pattern. */
static void find_inplace(sched *s, compiled_plan *p, bufs *B, int k) {
  pstep *st = &p->steps[k];
  if (s->fu->groups[st->group].win) return; /* windows read around the element they write */
  kir_group *kg = s->fu->groups[st->group].kir;
  bool used[KIR_MAX_OPERANDS] = {false};
  const ir_graph *g = s->cg->g;
  for (int o = 0; o < kg->n_out; o++) {
    int vo = kg->out[o].value;
    if (p->loc[vo].kind != VL_ARENA || B->buf_of[vo] < 0 || B->parent[B->buf_of[vo]] != -1) continue;
    for (int i = 0; i < kg->n_in; i++) {
      int vi = kg->in[i].value, ri = s->root[vi];
      if (used[i] || p->loc[ri].kind != VL_ARENA || B->buf_of[ri] < 0) continue;
      int bi = uf_find(B->uf, B->buf_of[ri]);
      if (B->parent[bi] != -1) continue; /* concat slices and their whole stay as they are */
      if (B->b[bi].last != k || kg->in[i].dt != kg->out[o].dt) continue;
      if (value_bytes(&g->values[vi]) != value_bytes(&g->values[vo])) continue;
      if (memcmp(kg->in[i].stride, kg->out[o].stride, sizeof(int64_t) * (size_t)kg->rank)) continue;
      bool twice = false; /* the same value loaded with another pattern */
      for (int j = 0; j < kg->n_in; j++) twice |= j != i && kg->in[j].value == vi;
      if (twice) continue;
      int bo = B->buf_of[vo];
      B->uf[bo] = bi;
      B->b[bi].last = B->b[bo].last;
      if (B->b[bo].size > B->b[bi].size) B->b[bi].size = B->b[bo].size;
      kg->inplace[o] = i;
      used[i] = true;
      break;
    }
  }
}

/* Output vo of step k over residual vr (input 3 of its node): vo takes
 * vr's buffer when vr is last read here, has vo's bytes and shares its
 * buffer with none of the node's inputs 0-2 (read while vo is written). */
static void residual_inplace(sched *s, compiled_plan *p, bufs *B, int k, const ir_node *nd) {
  const ir_graph *g = s->cg->g;
  if (nd->n_inputs < 4 || nd->inputs[3] < 0 || nd->n_outputs < 1 || nd->outputs[0] < 0) return;
  int vr = nd->inputs[3], vo = nd->outputs[0], rr = s->root[vr];
  if (p->loc[vo].kind != VL_ARENA || B->buf_of[vo] < 0 || p->loc[rr].kind != VL_ARENA || B->buf_of[rr] < 0)
    return;
  int br = uf_find(B->uf, B->buf_of[rr]), bo = B->buf_of[vo];
  if (B->parent[br] != -1 || B->parent[bo] != -1) return;
  if (B->b[br].last != k || uf_find(B->uf, bo) != bo || br == bo) return;
  if (value_bytes(&g->values[vr]) != value_bytes(&g->values[vo])) return;
  for (int i = 0; i < 3 && i < nd->n_inputs; i++) {
    int vi = nd->inputs[i];
    if (vi >= 0 && B->buf_of[s->root[vi]] >= 0 && uf_find(B->uf, B->buf_of[s->root[vi]]) == br) return;
  }
  B->uf[bo] = br;
  B->b[br].last = B->b[bo].last;
  if (B->b[bo].size > B->b[br].size) B->b[br].size = B->b[bo].size;
}

/* In-place: a GEMM step with a residual (Y = A B + ... + R, run as beta = 1
 * over Y preloaded with R) writes Y over R (residual_inplace): the step
 * then skips copying R into Y (gemm_step_run copies only when the pointers
 * differ).  A smelt.Conv with a residual does the same where its kernel
 * reads each residual value just before writing its output over it (the
 * 1x1 route: ops/conv_core.h's conv_residual_in_place), saving a third of
 * the layer's memory traffic (resnet50's 64 -> 256 at 56x56 with its
 * residual, alone with the caches evicted, 1 thread: 0.855 -> 0.749 ms). */
static void find_residual_inplace(sched *s, compiled_plan *p, bufs *B, int k) {
  const pstep *st = &p->steps[k];
  const ir_node *nd = &s->cg->g->nodes[st->node];
  if (st->gemm ? st->gemm->has_res
               : nd->op && !strcmp(nd->op->domain, "smelt") && !strcmp(nd->op->name, "Conv") &&
                     conv_residual_in_place(s->cg->g, nd))
    residual_inplace(s, p, B, k, nd);
}

/* Concat in place: a Concat library step whose slices are contiguous (every
 * dim before the axis is 1, e.g. channels at batch 1) gets its inputs
 * written straight into its output by their producers.  An input becomes a
 * slice of the output's buffer when it is a buffer of its own in the arena
 * (no view, graph input or output), written by a kernel or library step, not
 * already another concat's slice or whole, at a 64-byte aligned place, and
 * last read by the Concat (an input read later, as DenseNet's features are
 * by every later Concat of the block, would keep the whole output alive as
 * long: the arena would grow with the square of the block's depth).  The
 * output's lifetime then starts at its earliest slice's producer.  Neither a
 * slice nor its whole is written in place by a later step (find_inplace,
 * find_residual_inplace skip them).  The Concat step then
 * copies only the inputs left out (concat_run skips a slice already in
 * place). */
static void find_concat_slices(sched *s, compiled_plan *p, bufs *B, int k) {
  const pstep *st = &p->steps[k];
  if (st->kind != PS_LIBRARY || st->gemm) return;
  const ir_graph *g = s->cg->g;
  const ir_node *nd = &g->nodes[st->node];
  if ((*nd->domain && strcmp(nd->domain, "ai.onnx")) || strcmp(nd->op_type, "Concat")) return;
  if (nd->n_outputs != 1 || nd->outputs[0] < 0) return;
  int vo = nd->outputs[0], bo = B->buf_of[vo];
  const ir_value *yo = &g->values[vo];
  if (bo < 0 || s->root[vo] != vo || p->loc[vo].kind != VL_ARENA || B->parent[bo] != -1 ||
      (yo->flags & IR_VALUE_OUTPUT) || yo->rank < 1)
    return;
  int64_t axis = ir_attr_int(nd, "axis", 1);
  if (axis < 0) axis += yo->rank;
  if (axis < 0 || axis >= yo->rank || shape_numel((int)axis, yo->dims) != 1) return;
  size_t off = 0;
  for (int i = 0; i < nd->n_inputs; i++) {
    int vi = nd->inputs[i];
    if (vi < 0) return;
    size_t nb = value_bytes(&g->values[vi]);
    int bi = B->buf_of[vi];
    const ir_value *x = &g->values[vi];
    bool ok = bi >= 0 && bi != bo && s->root[vi] == vi && p->loc[vi].kind == VL_ARENA &&
              B->parent[bi] == -1 && !(x->flags & (IR_VALUE_INPUT | IR_VALUE_OUTPUT)) &&
              x->dtype == yo->dtype && nb > 0 && off % MEMPLAN_ALIGN == 0 && B->b[bi].first < k &&
              B->b[bi].last == k &&
              p->steps[B->b[bi].first].kind != PS_BREAK;
    if (ok) {
      B->parent[bi] = bo;
      B->delta[bi] = off;
      B->parent[bo] = -2;
      if (B->b[bi].first < B->b[bo].first) B->b[bo].first = B->b[bi].first;
      if (B->b[bi].last > B->b[bo].last) B->b[bo].last = B->b[bi].last;
    }
    off += nb;
  }
}

/* Graph outputs written in place: an output whose buffer (with whatever
 * shares it in place) is its own -- not a concat's slice or whole, not
 * shared with another output -- leaves the arena and becomes a buffer of
 * its own per run (VL_OUTPUT), handed to the caller as the output: the
 * step that produces it writes it there, and the run copies nothing out
 * of the arena (a language model's logits: tens of MB a run).  Not in
 * reduce-overhead, whose calls are bound to the addresses of one arena.
 * Marks the claimed buffers' representatives in claimed[] (output index,
 * else -1). */
static smelt_status claim_outputs(sched *s, compiled_plan *p, bufs *B, int *claimed) {
  const ir_graph *g = s->cg->g;
  for (int b = 0; b < B->n; b++) claimed[b] = -1;
  if (p->mode == SMELT_MODE_REDUCE_OVERHEAD || g->n_outputs <= 0) return SMELT_OK;
  p->out_bytes = calloc((size_t)g->n_outputs, sizeof(size_t));
  if (!p->out_bytes) return err_nomem("output buffers", sizeof(size_t) * (size_t)g->n_outputs);
  for (int k = 0; k < g->n_outputs; k++) {
    int b = B->buf_of[s->root[g->outputs[k]]];
    if (b < 0) continue;
    b = uf_find(B->uf, b);
    if (B->parent[b] != -1) continue;
    bool shared = false; /* with another output: each stays in the arena and is copied out */
    for (int j = 0; j < g->n_outputs && !shared; j++) {
      int bj = j == k ? -1 : B->buf_of[s->root[g->outputs[j]]];
      shared = bj >= 0 && uf_find(B->uf, bj) == b;
    }
    if (shared) continue;
    claimed[b] = k;
    p->out_bytes[k] = B->b[b].size ? B->b[b].size : 1;
  }
  for (int v = 0; v < g->n_values; v++) {
    int b = B->buf_of[v];
    if (b < 0 || p->loc[v].kind != VL_ARENA) continue;
    int k = claimed[uf_find(B->uf, b)];
    if (k >= 0) p->loc[v] = (vloc){.kind = VL_OUTPUT, .input = k};
  }
  return SMELT_OK;
}

static smelt_status plan_memory(sched *s, compiled_plan *p) {
  const ir_graph *g = s->cg->g;
  bufs B = {0};
  size_t nv = (size_t)g->n_values + 1;
  B.buf_of = malloc(sizeof(int) * nv);
  B.b = calloc(nv, sizeof(mp_buffer));
  B.uf = malloc(sizeof(int) * nv);
  B.parent = malloc(sizeof(int) * nv);
  B.delta = calloc(nv, sizeof(size_t));
  if (!B.buf_of || !B.b || !B.uf || !B.parent || !B.delta) {
    free(B.buf_of);
    free(B.b);
    free(B.uf);
    free(B.parent);
    free(B.delta);
    return err_nomem("memory plan", sizeof(mp_buffer) * nv);
  }
  for (int v = 0; v < g->n_values; v++) {
    B.buf_of[v] = -1;
    if (s->root[v] == v && p->loc[v].kind == VL_ARENA) {
      B.uf[B.n] = B.n;
      B.parent[B.n] = -1;
      B.b[B.n] = (mp_buffer){.size = value_bytes(&g->values[v]), .first = p->n_steps, .last = -1};
      B.buf_of[v] = B.n++;
    }
  }
  for (int k = 0; k < g->n_inputs; k++) /* reduce-overhead: inputs copied in before step 0 */
    if (B.buf_of[g->inputs[k]] >= 0) B.b[B.buf_of[g->inputs[k]]].first = 0;
  int *vals = s->tmp;
  for (int k = 0; k < p->n_steps; k++) {
    const unit *u = &s->units[s->order[k]];
    int n = unit_writes(s, u, vals);
    for (int i = 0; i < n; i++) {
      int b = B.buf_of[vals[i]];
      if (b >= 0 && B.b[b].first > k) B.b[b].first = k;
      if (b >= 0 && B.b[b].last < k) B.b[b].last = k;
    }
    n = unit_reads(s, u, vals);
    for (int i = 0; i < n; i++) {
      int b = B.buf_of[s->root[vals[i]]];
      if (b >= 0 && B.b[b].last < k) B.b[b].last = k;
    }
  }
  for (int k = 0; k < g->n_outputs; k++) {
    int b = B.buf_of[s->root[g->outputs[k]]];
    if (b >= 0) B.b[b].last = p->n_steps;
  }
  for (int b = 0; b < B.n; b++)
    if (B.b[b].first > B.b[b].last) B.b[b].last = B.b[b].first; /* never read */
  for (int k = 0; k < p->n_steps; k++) find_concat_slices(s, p, &B, k);
  for (int k = 0; k < p->n_steps; k++)
    if (p->steps[k].kind == PS_KERNEL) find_inplace(s, p, &B, k);
    else if (p->steps[k].kind == PS_LIBRARY) find_residual_inplace(s, p, &B, k);
  /* solve over representatives only, those left in the arena */
  int *rep = malloc(sizeof(int) * ((size_t)B.n + 1));
  int *claimed = malloc(sizeof(int) * ((size_t)B.n + 1));
  mp_buffer *solve = malloc(sizeof(mp_buffer) * ((size_t)B.n + 1));
  smelt_status st = (!rep || !solve || !claimed) ? err_nomem("memory plan", sizeof(mp_buffer) * (size_t)B.n) : SMELT_OK;
  if (!st) st = claim_outputs(s, p, &B, claimed);
  int n_solve = 0;
  for (int b = 0; !st && b < B.n; b++) {
    rep[b] = -1;
    if (uf_find(B.uf, b) == b && B.parent[b] < 0 && claimed[b] < 0) {
      rep[b] = n_solve;
      solve[n_solve++] = B.b[b];
    }
  }
  if (!st) st = memplan_solve(solve, n_solve, &p->arena_bytes);
  for (int v = 0; !st && v < g->n_values; v++) {
    int b = B.buf_of[s->root[v]];
    if (b < 0 || p->loc[v].kind != VL_ARENA) continue;
    b = uf_find(B.uf, b);
    p->loc[v].off = B.parent[b] >= 0 ? solve[rep[B.parent[b]]].offset + B.delta[b] : solve[rep[b]].offset;
  }
  /* views share their root's place */
  for (int v = 0; !st && v < g->n_values; v++) {
    int r = s->root[v];
    if (r != v && p->loc[v].kind == VL_NONE) p->loc[v] = p->loc[r];
  }
  free(rep);
  free(claimed);
  free(solve);
  free(B.buf_of);
  free(B.b);
  free(B.uf);
  free(B.parent);
  free(B.delta);
  return st;
}

smelt_status schedule_plan(const cgraph *cg, fusion *fu, bool use_kernels, compiled_plan *p) {
  sched s = {.cg = cg, .fu = fu, .kernels = use_kernels};
  p->loc = calloc((size_t)cg->g->n_values + 1, sizeof(vloc));
  smelt_status st = p->loc ? make_units(&s) : err_nomem("value locations", sizeof(vloc));
  if (!st) st = order_units(&s);
  if (!st) st = make_steps(&s, p);
  if (!st) {
    assign_locations(&s, p);
    st = plan_memory(&s, p);
  }
  sched_free(&s);
  return st;
}
