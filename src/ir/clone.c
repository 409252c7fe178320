/* Copying graphs: ir_graph_clone (a deep copy for the compiler to rewrite) and
 * ir_graph_compact (dropping dead nodes and unreferenced values in place).
 *
 * Both build a new graph value by value and node by node, so names, the name
 * map, symbols and opsets come out consistent.  They differ in what happens to
 * the heap objects hanging off the graph (constants, attribute tensors,
 * subgraphs):
 *  - clone gives the copy its own tensor headers that VIEW the source's data
 *    (the source must outlive the clone) and deep copies of subgraphs;
 *  - compact hands the very same objects over to the new graph (no copy),
 *    then swaps the new contents into the old graph object.
 *
 * Complexity: O(n + v + e) (names go through the graph's hash map). */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "util/err.h"
#include "util/quote.h"

typedef struct copy_job {
  const ir_graph *src;
  ir_graph *dst;
  bool move;             /* compact: share heap objects instead of copying them */
  const bool *drop_node; /* NULL: keep every node */
  const bool *keep_val;  /* NULL: keep every value */
  int *vmap;             /* src value id -> dst value id, -1 if dropped */
  int *nmap;             /* src node id -> dst node id, -1 if dropped */
} copy_job;

static smelt_status graph_copy(copy_job *j);

/* A header of our own over the same bytes; sequences (never constants in
 * practice) are deep-copied since their elements are separate objects. */
static smelt_status tensor_view_copy(const tensor *src, tensor **out) {
  *out = NULL;
  if (!src) return SMELT_OK;
  tensor *t = malloc(sizeof *t);
  if (!t) return err_nomem("tensor header", sizeof *t);
  if (src->kind == TENSOR_KIND_SEQUENCE) {
    smelt_status s = tensor_clone(t, src);
    if (s) {
      free(t);
      return s;
    }
  } else {
    *t = *src;
    t->owns_data = false;
    t->seq = NULL;
    t->seq_len = 0;
  }
  *out = t;
  return SMELT_OK;
}

static smelt_status sub_copy(copy_job *j, ir_graph *sg, ir_graph **out) {
  *out = NULL;
  if (!sg) return SMELT_OK;
  if (j->move) { /* shared now; graph_adopt re-parents it once the copy succeeded */
    *out = sg;
    return SMELT_OK;
  }
  ir_graph *ng = ir_graph_new(j->dst);
  if (!ng) return err_nomem("subgraph", sizeof *ng);
  copy_job sj = {.src = sg, .dst = ng};
  smelt_status s = graph_copy(&sj);
  if (s) {
    ir_graph_free(ng);
    return s;
  }
  *out = ng;
  return SMELT_OK;
}

static void *arena_dup(arena *a, const void *p, size_t n) {
  void *d = arena_alloc(a, n ? n : 1);
  if (d && n) memcpy(d, p, n);
  return d;
}

static smelt_status attr_copy(copy_job *j, const ir_attr *s, ir_attr *d) {
  arena *a = &j->dst->arena;
  *d = (ir_attr){.type = s->type, .f = s->f, .i = s->i, .n = s->n, .s_len = s->s_len};
  size_t n = s->n > 0 ? (size_t)s->n : 0;
  d->name = s->name ? arena_strdup(a, s->name) : NULL;
  if (s->name && !d->name) return err_nomem("attribute name", strlen(s->name));
  if (s->s && !(d->s = arena_strndup(a, s->s, s->s_len))) return err_nomem("attribute", s->s_len);
  if (s->floats && !(d->floats = arena_dup(a, s->floats, n * sizeof(float))))
    return err_nomem("attribute floats", n * sizeof(float));
  if (s->ints && !(d->ints = arena_dup(a, s->ints, n * sizeof(int64_t))))
    return err_nomem("attribute ints", n * sizeof(int64_t));
  if (s->strings) {
    if (!(d->strings = arena_alloc(a, (n + 1) * sizeof(char *)))) return err_nomem("strings", n);
    for (size_t k = 0; k < n; k++)
      if (s->strings[k] && !(d->strings[k] = arena_strdup(a, s->strings[k])))
        return err_nomem("attribute string", strlen(s->strings[k]));
  }
  if (s->tensors && !(d->tensors = arena_alloc(a, (n + 1) * sizeof(tensor *))))
    return err_nomem("tensors", n);
  if (s->graphs && !(d->graphs = arena_alloc(a, (n + 1) * sizeof(ir_graph *))))
    return err_nomem("graphs", n);
  if (j->move) d->t = s->t;
  else TRY(tensor_view_copy(s->t, &d->t));
  TRY(sub_copy(j, s->g, &d->g));
  for (size_t k = 0; k < n; k++) {
    if (s->tensors) {
      if (j->move) d->tensors[k] = s->tensors[k];
      else TRY(tensor_view_copy(s->tensors[k], &d->tensors[k]));
    }
    if (s->graphs) TRY(sub_copy(j, s->graphs[k], &d->graphs[k]));
  }
  return SMELT_OK;
}

static smelt_status header_copy(copy_job *j) {
  const ir_graph *s = j->src;
  ir_graph *d = j->dst;
  if (!(d->name = arena_strdup(&d->arena, s->name ? s->name : ""))) return err_nomem("graph name", 0);
  if (s->n_opsets > 0) {
    d->opsets = arena_alloc(&d->arena, sizeof(ir_opset) * (size_t)s->n_opsets);
    if (!d->opsets) return err_nomem("opsets", sizeof(ir_opset) * (size_t)s->n_opsets);
    for (int i = 0; i < s->n_opsets; i++) {
      d->opsets[i].version = s->opsets[i].version;
      d->opsets[i].domain = arena_strdup(&d->arena, s->opsets[i].domain);
      if (!d->opsets[i].domain) return err_nomem("opset domain", 0);
    }
    d->n_opsets = s->n_opsets;
  }
  /* symbols keep their indices: dims encode them */
  for (int i = 0; i < s->n_syms; i++) {
    int64_t dim;
    TRY(ir_graph_sym(d, s->syms[i], &dim));
    if (dim != dim_sym(i))
      return err_set(SMELT_ERR_INTERNAL, "symbol %s appears twice in graph %s", q(s->syms[i]), q(s->name));
  }
  return SMELT_OK;
}

static smelt_status values_copy(copy_job *j) {
  const ir_graph *s = j->src;
  for (int v = 0; v < s->n_values; v++) {
    j->vmap[v] = -1;
    if (j->keep_val && !j->keep_val[v]) continue;
    const ir_value *sv = &s->values[v];
    int id;
    TRY(ir_graph_add_value(j->dst, sv->name, &id));
    ir_value *dv = &j->dst->values[id];
    dv->dtype = sv->dtype;
    dv->rank = sv->rank;
    memcpy(dv->dims, sv->dims, sizeof dv->dims);
    dv->kind = sv->kind;
    dv->outer_id = sv->outer_id; /* ids in the parent: unchanged by either copy of this graph */
    dv->flags = sv->flags & ~(uint32_t)(IR_VALUE_INPUT | IR_VALUE_OUTPUT); /* set by add_input/output */
    dv->quant = sv->quant; /* its scale / zero-point ids are mapped below, once every value has its id */
    if (j->move) dv->constant = sv->constant;
    else TRY(tensor_view_copy(sv->constant, &dv->constant));
    j->vmap[v] = id;
  }
  return SMELT_OK;
}

static int map_id(const int *map, int id) { return id < 0 ? -1 : map[id]; }

static smelt_status nodes_copy(copy_job *j) {
  const ir_graph *s = j->src;
  for (int i = 0; i < s->n_nodes; i++) {
    j->nmap[i] = -1;
    if (j->drop_node && j->drop_node[i]) continue;
    const ir_node *sn = &s->nodes[i];
    int id;
    TRY(ir_graph_add_node(j->dst, sn->name, sn->op_type, sn->domain, sn->n_inputs, sn->n_outputs,
                          sn->n_attrs, &id));
    j->nmap[i] = id;
    ir_node *dn = &j->dst->nodes[id];
    dn->opset = sn->opset;
    dn->op = sn->op;
    for (int k = 0; k < sn->n_inputs; k++) dn->inputs[k] = map_id(j->vmap, sn->inputs[k]);
    for (int k = 0; k < sn->n_outputs; k++) dn->outputs[k] = map_id(j->vmap, sn->outputs[k]);
    for (int k = 0; k < sn->n_attrs; k++) {
      /* count each attribute as it lands so that a failure frees exactly what was copied */
      dn->n_attrs = k;
      smelt_status st = attr_copy(j, &sn->attrs[k], &dn->attrs[k]);
      dn->n_attrs = k + 1;
      if (st) return st;
    }
    for (int k = 0; k < sn->n_inputs; k++)
      if (sn->inputs[k] >= 0 && dn->inputs[k] < 0)
        return err_set(SMELT_ERR_INTERNAL, "compaction dropped value %s that node %s reads",
                       q(s->values[sn->inputs[k]].name), q(sn->name));
  }
  for (int v = 0; v < s->n_values; v++)
    if (j->vmap[v] >= 0) {
      ir_value *dv = &j->dst->values[j->vmap[v]];
      dv->producer = map_id(j->nmap, s->values[v].producer);
      if (dv->quant.scale >= 0 && dv->quant.scheme) dv->quant.scale = j->vmap[dv->quant.scale];
      if (dv->quant.zero_point >= 0 && dv->quant.scheme) dv->quant.zero_point = j->vmap[dv->quant.zero_point];
    }
  return SMELT_OK;
}

static smelt_status graph_copy(copy_job *j) {
  const ir_graph *s = j->src;
  j->vmap = malloc(sizeof(int) * (size_t)(s->n_values + 1));
  j->nmap = malloc(sizeof(int) * (size_t)(s->n_nodes + 1));
  smelt_status st = SMELT_OK;
  if (!j->vmap || !j->nmap) st = err_nomem("graph copy maps", sizeof(int) * (size_t)(s->n_values + s->n_nodes));
  if (!st) st = header_copy(j);
  if (!st) st = values_copy(j);
  if (!st) st = nodes_copy(j);
  for (int k = 0; !st && k < s->n_inputs; k++) st = ir_graph_add_input(j->dst, j->vmap[s->inputs[k]]);
  for (int k = 0; !st && k < s->n_outputs; k++) st = ir_graph_add_output(j->dst, j->vmap[s->outputs[k]]);
  if (!j->move) { /* compaction still needs the maps */
    free(j->vmap);
    free(j->nmap);
    j->vmap = j->nmap = NULL;
  }
  return st;
}

smelt_status ir_graph_clone(const ir_graph *src, ir_graph **out) {
  *out = NULL;
  ir_graph *g = ir_graph_new(src->parent);
  if (!g) return err_nomem("graph", sizeof *g);
  copy_job j = {.src = src, .dst = g};
  smelt_status s = graph_copy(&j);
  if (s) {
    ir_graph_free(g);
    return err_prefix(s, "cloning graph %s: ", q(src->name ? src->name : ""));
  }
  *out = g;
  return SMELT_OK;
}

/* ---- compaction ---- */

/* Clears the heap objects a graph shares with another, so that freeing it
 * frees only its own arrays and arena.  Node attributes from nodes [0, n). */
static void disown(ir_graph *g, bool constants, int n_nodes) {
  for (int v = 0; constants && v < g->n_values; v++) g->values[v].constant = NULL;
  for (int i = 0; i < n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_attrs; k++) {
      ir_attr *a = &g->nodes[i].attrs[k];
      a->t = NULL;
      a->g = NULL;
      for (int m = 0; m < a->n; m++) {
        if (a->tensors) a->tensors[m] = NULL;
        if (a->graphs) a->graphs[m] = NULL;
      }
    }
}

static void reparent(ir_graph *sg, ir_graph *g, const int *vmap) {
  if (!sg) return;
  sg->parent = g;
  for (int v = 0; v < sg->n_values; v++)
    if ((sg->values[v].flags & IR_VALUE_OUTER) && sg->values[v].outer_id >= 0)
      sg->values[v].outer_id = vmap[sg->values[v].outer_id];
}

/* The moved subgraphs now belong to g (same address as before the swap) and
 * their captures name g's new value ids. */
static void adopt_subgraphs(ir_graph *g, const int *vmap) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_attrs; k++) {
      ir_attr *a = &g->nodes[i].attrs[k];
      reparent(a->g, g, vmap);
      for (int m = 0; a->graphs && m < a->n; m++) reparent(a->graphs[m], g, vmap);
    }
}

/* Marks what survives: graph inputs and outputs, every value a kept node
 * reads or writes, and what kept nodes' subgraphs capture. */
static smelt_status live_values(const ir_graph *g, const bool *dead, bool *keep) {
  for (int k = 0; k < g->n_inputs; k++) keep[g->inputs[k]] = true;
  for (int k = 0; k < g->n_outputs; k++) keep[g->outputs[k]] = true;
  for (int i = 0; i < g->n_nodes; i++) {
    if (dead && dead[i]) continue;
    const ir_node *nd = &g->nodes[i];
    int *deps = NULL, n = 0;
    TRY(ir_node_deps(g, nd, &deps, &n));
    for (int k = 0; k < n; k++) keep[deps[k]] = true;
    free(deps);
    for (int k = 0; k < nd->n_outputs; k++)
      if (nd->outputs[k] >= 0) keep[nd->outputs[k]] = true;
  }
  return SMELT_OK;
}

smelt_status ir_graph_compact(ir_graph *g, const bool *dead) {
  bool *keep = calloc((size_t)g->n_values + 1, sizeof(bool));
  ir_graph *ng = ir_graph_new(g->parent);
  copy_job j = {.src = g, .dst = ng, .move = true, .drop_node = dead, .keep_val = keep};
  smelt_status s = !keep || !ng ? err_nomem("compaction", (size_t)g->n_values) : SMELT_OK;
  if (!s) s = live_values(g, dead, keep);
  if (!s) s = graph_copy(&j);
  if (s) {
    if (ng) disown(ng, true, ng->n_nodes);
    ir_graph_free(ng);
    free(keep);
    free(j.vmap);
    free(j.nmap);
    return err_prefix(s, "compacting graph %s: ", q(g->name));
  }
  /* kept objects now belong to ng: take them off g before g's old body is freed */
  for (int v = 0; v < g->n_values; v++)
    if (j.vmap[v] >= 0) g->values[v].constant = NULL;
  for (int i = 0; i < g->n_nodes; i++)
    if (j.nmap[i] >= 0) {
      ir_node *nd = &g->nodes[i];
      ir_graph tmp = {.nodes = nd, .n_nodes = 1};
      disown(&tmp, false, 1);
    }
  ir_graph old = *g;
  *g = *ng;
  *ng = old;
  ir_graph_free(ng);
  adopt_subgraphs(g, j.vmap);
  free(keep);
  free(j.vmap);
  free(j.nmap);
  return SMELT_OK;
}
