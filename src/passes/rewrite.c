/* The graph rewriting toolkit: use lists, dead marks, bypassing, new nodes.
 *
 * Complexity: rw_begin / rw_end O(n + v + e); an edit O(uses of the values it
 * touches); rw_add_value resumes its unique-name probe per base name. */
#include "passes/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "util/err.h"
#include "util/quote.h"

static smelt_status uses_push(rw_uses *u, int node) {
  if (u->n == u->cap) {
    int ncap = u->cap ? u->cap * 2 : 4;
    int *p = realloc(u->node, sizeof(int) * (size_t)ncap);
    if (!p) return err_nomem("use list", sizeof(int) * (size_t)ncap);
    u->node = p;
    u->cap = ncap;
  }
  u->node[u->n++] = node;
  return SMELT_OK;
}

static void uses_drop(rw_uses *u, int node) {
  for (int i = 0; i < u->n; i++)
    if (u->node[i] == node) {
      u->node[i] = u->node[--u->n];
      return;
    }
}

/* Calls fn on every OUTER value of node nd's direct subgraphs. */
static void each_capture(ir_node *nd, void (*fn)(ir_value *cv, void *ctx), void *ctx) {
  for (int a = 0; a < nd->n_attrs; a++) {
    ir_attr *at = &nd->attrs[a];
    int ng = at->type == IR_ATTR_GRAPH ? 1 : at->type == IR_ATTR_GRAPHS ? at->n : 0;
    for (int k = 0; k < ng; k++) {
      ir_graph *sg = at->type == IR_ATTR_GRAPH ? at->g : at->graphs[k];
      for (int v = 0; sg && v < sg->n_values; v++)
        if ((sg->values[v].flags & IR_VALUE_OUTER) && sg->values[v].outer_id >= 0) fn(&sg->values[v], ctx);
    }
  }
}

typedef struct cap_ctx {
  rewriter *w;
  int node, from, to;
  smelt_status s;
} cap_ctx;

static void cap_add(ir_value *cv, void *vctx) {
  cap_ctx *c = vctx;
  if (!c->s) c->s = uses_push(&c->w->uses[cv->outer_id], c->node);
}

static void cap_drop(ir_value *cv, void *vctx) {
  cap_ctx *c = vctx;
  uses_drop(&c->w->uses[cv->outer_id], c->node);
}

static void cap_move(ir_value *cv, void *vctx) {
  cap_ctx *c = vctx;
  if (cv->outer_id != c->from) return;
  cv->outer_id = c->to;
  uses_drop(&c->w->uses[c->from], c->node);
  if (!c->s) c->s = uses_push(&c->w->uses[c->to], c->node);
}

static smelt_status grow_nodes(rewriter *w) {
  if (w->g->n_nodes <= w->cap_nodes) return SMELT_OK;
  int ncap = w->g->n_nodes * 2 + 16;
  bool *d = realloc(w->dead, sizeof(bool) * (size_t)ncap);
  if (!d) return err_nomem("dead marks", (size_t)ncap);
  memset(d + w->cap_nodes, 0, sizeof(bool) * (size_t)(ncap - w->cap_nodes));
  w->dead = d;
  w->cap_nodes = ncap;
  return SMELT_OK;
}

static smelt_status grow_values(rewriter *w) {
  if (w->g->n_values <= w->cap_values) return SMELT_OK;
  int ncap = w->g->n_values * 2 + 16;
  rw_uses *u = realloc(w->uses, sizeof(rw_uses) * (size_t)ncap);
  if (!u) return err_nomem("use lists", sizeof(rw_uses) * (size_t)ncap);
  memset(u + w->cap_values, 0, sizeof(rw_uses) * (size_t)(ncap - w->cap_values));
  w->uses = u;
  w->cap_values = ncap;
  return SMELT_OK;
}

smelt_status rw_begin(rewriter *w, ir_graph *g, const pass_options *o, pass_report *r) {
  memset(w, 0, sizeof *w);
  w->g = g;
  w->o = o;
  w->r = r;
  smelt_status s = grow_nodes(w);
  if (!s) s = grow_values(w);
  for (int v = 0; v < g->n_values; v++) g->values[v].producer = -1;
  for (int i = 0; !s && i < g->n_nodes; i++) {
    ir_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->n_outputs; k++)
      if (nd->outputs[k] >= 0) g->values[nd->outputs[k]].producer = i;
    for (int k = 0; !s && k < nd->n_inputs; k++)
      if (nd->inputs[k] >= 0) s = uses_push(&w->uses[nd->inputs[k]], i);
    cap_ctx c = {w, i, -1, -1, s};
    each_capture(nd, cap_add, &c);
    s = c.s;
  }
  if (s) rw_end(w, s, NULL);
  return s;
}

smelt_status rw_end(rewriter *w, smelt_status s, int *changes) {
  if (!s && w->touched) s = ir_graph_compact(w->g, w->dead);
  for (int v = 0; v < w->cap_values; v++) free(w->uses[v].node);
  free(w->uses);
  free(w->dead);
  if (changes) *changes += w->changes;
  memset(w, 0, sizeof *w);
  return s;
}

/* ---- queries ---- */

int rw_producer(const rewriter *w, int v) {
  int p = w->g->values[v].producer;
  return p >= 0 && !w->dead[p] ? p : -1;
}

int rw_n_uses(const rewriter *w, int v) { return w->uses[v].n; }

bool rw_is_output(const rewriter *w, int v) { return w->g->values[v].flags & IR_VALUE_OUTPUT; }

int rw_sole_user(const rewriter *w, int v) {
  if (w->uses[v].n != 1 || rw_is_output(w, v)) return -1;
  return w->uses[v].node[0];
}

int rw_transposed_weight(const rewriter *w, int v) {
  int t = rw_producer_op(w, v, "Transpose"), mm = rw_sole_user(w, v);
  if (t < 0 || mm < 0 || !rw_is_op(w, mm, "MatMul")) return -1;
  const ir_node *tn = &w->g->nodes[t], *mn = &w->g->nodes[mm];
  if (tn->n_inputs != 1 || mn->n_inputs != 2 || mn->inputs[1] != v || mn->inputs[0] == v) return -1;
  int src = tn->inputs[0], a = mn->inputs[0];
  const ir_value *sv = &w->g->values[src], *av = &w->g->values[a];
  if (!rw_const(w, src) || sv->dtype != SMELT_F32 || sv->rank != 2) return -1;
  if (av->dtype != SMELT_F32 || av->rank < 2) return -1;
  for (int k = 0; k < tn->n_attrs; k++) {
    const ir_attr *at = &tn->attrs[k];
    if (strcmp(at->name, "perm")) continue;
    if (at->type != IR_ATTR_INTS || at->n != 2 || at->ints[0] != 1 || at->ints[1] != 0) return -1;
  }
  return src;
}

bool *rw_live_nodes(const rewriter *w, const int *order) {
  int n = w->g->n_nodes;
  bool *live = calloc((size_t)n + 1, sizeof *live);
  for (int k = n - 1; live && k >= 0; k--) { /* consumers before producers */
    const ir_node *nd = &w->g->nodes[order[k]];
    for (int o = 0; o < nd->n_outputs && !live[order[k]]; o++) {
      int v = nd->outputs[o];
      if (v < 0) continue;
      if (rw_is_output(w, v)) live[order[k]] = true;
      for (int q = 0; q < w->uses[v].n && !live[order[k]]; q++) live[order[k]] = live[w->uses[v].node[q]];
    }
  }
  return live;
}

bool rw_is_op(const rewriter *w, int node, const char *op_type) {
  const ir_node *nd = &w->g->nodes[node];
  return !w->dead[node] && !*nd->domain && !strcmp(nd->op_type, op_type);
}

int rw_producer_op(const rewriter *w, int v, const char *op_type) {
  int p = v >= 0 ? rw_producer(w, v) : -1;
  return p >= 0 && rw_is_op(w, p, op_type) ? p : -1;
}

const tensor *rw_const(const rewriter *w, int v) {
  if (v < 0) return NULL;
  const tensor *t = w->g->values[v].constant;
  return t && t->kind == TENSOR_KIND_TENSOR && t->data ? t : NULL;
}

static bool numeric(smelt_dtype dt) {
  return dtype_is_float(dt) || dtype_is_int(dt) || dt == SMELT_BOOL;
}

bool rw_scalar(const rewriter *w, int v, double *x) {
  const tensor *t = rw_const(w, v);
  if (!t || tensor_numel(t) != 1 || !numeric(t->dtype) || !dtype_size(t->dtype)) return false;
  *x = tensor_get_f64(t, 0);
  return true;
}

bool rw_all_equal(const rewriter *w, int v, double x) {
  const tensor *t = rw_const(w, v);
  if (!t || !numeric(t->dtype) || !dtype_size(t->dtype)) return false;
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (tensor_get_f64(t, i) != x) return false;
  return n > 0;
}

bool rw_same_shape(const ir_value *a, const ir_value *b) {
  if (a->rank < 0 || a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d] || a->dims[d] == DIM_UNKNOWN) return false;
  return true;
}

bool rw_concrete(const ir_value *v) {
  if (v->rank < 0) return false;
  for (int d = 0; d < v->rank; d++)
    if (!dim_known(v->dims[d])) return false;
  return true;
}

bool rw_has_subgraph(const ir_node *nd) {
  for (int a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == IR_ATTR_GRAPH || nd->attrs[a].type == IR_ATTR_GRAPHS) return true;
  return false;
}

/* ---- edits ---- */

smelt_status rw_set_input(rewriter *w, int node, int k, int v) {
  ir_node *nd = &w->g->nodes[node];
  if (nd->inputs[k] >= 0) uses_drop(&w->uses[nd->inputs[k]], node);
  nd->inputs[k] = v;
  w->touched = true;
  return v >= 0 ? uses_push(&w->uses[v], node) : SMELT_OK;
}

void rw_set_output(rewriter *w, int node, int k, int v) {
  ir_node *nd = &w->g->nodes[node];
  int old = nd->outputs[k];
  if (old >= 0 && w->g->values[old].producer == node) w->g->values[old].producer = -1;
  nd->outputs[k] = v;
  if (v >= 0) w->g->values[v].producer = node;
  w->touched = true;
}

void rw_kill(rewriter *w, int node) {
  ir_node *nd = &w->g->nodes[node];
  if (w->dead[node]) return;
  for (int k = 0; k < nd->n_inputs; k++)
    if (nd->inputs[k] >= 0) uses_drop(&w->uses[nd->inputs[k]], node);
  cap_ctx c = {w, node, -1, -1, SMELT_OK};
  each_capture(nd, cap_drop, &c);
  for (int k = 0; k < nd->n_outputs; k++)
    if (nd->outputs[k] >= 0 && w->g->values[nd->outputs[k]].producer == node)
      w->g->values[nd->outputs[k]].producer = -1;
  w->dead[node] = true;
  w->touched = true;
}

smelt_status rw_replace_uses(rewriter *w, int from, int to) {
  if (from == to) return SMELT_OK;
  w->touched = true;
  while (w->uses[from].n > 0) {
    int u = w->uses[from].node[0], before = w->uses[from].n;
    ir_node *nd = &w->g->nodes[u];
    for (int k = 0; k < nd->n_inputs; k++)
      if (nd->inputs[k] == from) TRY(rw_set_input(w, u, k, to));
    cap_ctx c = {w, u, from, to, SMELT_OK};
    each_capture(nd, cap_move, &c);
    TRY(c.s);
    if (w->uses[from].n == before) uses_drop(&w->uses[from], u); /* stale entry */
  }
  return SMELT_OK;
}

smelt_status rw_bypass(rewriter *w, int node, int in, int out, bool *done) {
  *done = false;
  if (in < 0 || out < 0 || in == out) return SMELT_OK;
  if (!rw_is_output(w, out)) {
    TRY(rw_replace_uses(w, out, in));
    rw_kill(w, node);
    *done = true;
    return SMELT_OK;
  }
  int p = rw_producer(w, in);
  if (p < 0 || p == node || rw_is_output(w, in)) return SMELT_OK;
  const ir_value *vi = &w->g->values[in], *vo = &w->g->values[out];
  if (vi->dtype != vo->dtype || vi->kind != vo->kind) return SMELT_OK;
  rw_kill(w, node);
  ir_node *pn = &w->g->nodes[p];
  for (int k = 0; k < pn->n_outputs; k++)
    if (pn->outputs[k] == in) rw_set_output(w, p, k, out);
  *done = true;
  return rw_replace_uses(w, in, out);
}

smelt_status rw_set_op(rewriter *w, int node, const char *op_type) {
  ir_node *nd = &w->g->nodes[node];
  const char *t = arena_strdup(&w->g->arena, op_type);
  if (!t) return err_nomem("op type", strlen(op_type));
  nd->op_type = t;
  nd->op = ops_find(nd->domain, op_type);
  w->touched = true;
  return SMELT_OK;
}

/* ---- new things ---- */

smelt_status rw_add_node(rewriter *w, const char *name, const char *op_type, const char *domain,
                         int n_inputs, int n_outputs, int n_attrs, int *id) {
  TRY(ir_graph_add_node(w->g, name, op_type, domain, n_inputs, n_outputs, n_attrs, id));
  smelt_status s = grow_nodes(w);
  if (s) {
    w->g->n_nodes--; /* arena bytes stay allocated until the graph is freed */
    return s;
  }
  w->g->nodes[*id].op = ops_find(domain, op_type);
  w->touched = true;
  return SMELT_OK;
}

smelt_status rw_replace_node(rewriter *w, int old, const char *op_type, const char *domain,
                             int n_inputs, int n_attrs, int *id) {
  const ir_node *o = &w->g->nodes[old];
  int n_out = o->n_outputs;
  TRY(rw_add_node(w, o->name, op_type, domain, n_inputs, n_out, n_attrs, id));
  rw_kill(w, old); /* after the add: rw_add_node may move the node array */
  for (int k = 0; k < n_out; k++) rw_set_output(w, *id, k, w->g->nodes[old].outputs[k]);
  return SMELT_OK;
}

smelt_status rw_with_attr(rewriter *w, int id, int *nid, int *slot) {
  const ir_node *nd = rw_node(w, id);
  char op[64], dom[64];
  int ins[16], n_in = nd->n_inputs, n_attrs = nd->n_attrs + 1;
  if (n_in > 16 || snprintf(op, sizeof op, "%s", nd->op_type) >= (int)sizeof op ||
      snprintf(dom, sizeof dom, "%s", nd->domain) >= (int)sizeof dom)
    return err_set(SMELT_ERR_INTERNAL, "rewrite: node %d has too many inputs or too long a name to copy", id);
  for (int k = 0; k < n_in; k++) ins[k] = nd->inputs[k];
  TRY(rw_replace_node(w, id, op, dom, n_in, n_attrs, nid));
  nd = rw_node(w, id); /* the node array may have moved */
  for (int k = 0; k < nd->n_attrs; k++) TRY(rw_attr_copy(w, *nid, k, &nd->attrs[k]));
  for (int k = 0; k < n_in; k++) TRY(rw_set_input(w, *nid, k, ins[k]));
  *slot = n_attrs - 1;
  return SMELT_OK;
}

smelt_status rw_add_value(rewriter *w, const char *base, int like, int *id) {
  size_t n = strlen(base) + 24;
  char *name = malloc(n);
  if (!name) return err_nomem("value name", n);
  struct rw_name_hint *hint = NULL;
  for (int i = 0; i < w->n_hints && !hint; i++)
    if (!strcmp(w->hints[i].base, base)) hint = &w->hints[i];
  if (!hint && w->n_hints < (int)(sizeof w->hints / sizeof *w->hints) && strlen(base) < sizeof hint->base) {
    hint = &w->hints[w->n_hints++];
    snprintf(hint->base, sizeof hint->base, "%s", base);
    hint->next = 1;
  }
  int k = hint ? hint->next : 1;
  if (k == 1) snprintf(name, n, "%s", base);
  else snprintf(name, n, "%s_%d", base, k - 1);
  /* the first free name of base, base_1, base_2...: resumed where the last call stopped */
  for (; ir_graph_find_value(w->g, name) >= 0; k++) snprintf(name, n, "%s_%d", base, k);
  if (hint) hint->next = k;
  smelt_status s = ir_graph_add_value(w->g, name, id);
  free(name);
  if (!s) s = grow_values(w);
  if (s) return s;
  ir_value *v = &w->g->values[*id];
  if (like >= 0) {
    const ir_value *l = &w->g->values[like];
    v->dtype = l->dtype;
    v->rank = l->rank;
    v->kind = l->kind;
    memcpy(v->dims, l->dims, sizeof v->dims);
  }
  w->touched = true;
  return SMELT_OK;
}

void rw_make_constant(rewriter *w, int v, tensor *t) {
  ir_value *val = &w->g->values[v];
  if (t && t != val->constant) {
    tensor_free(val->constant);
    val->constant = t;
  }
  val->flags |= IR_VALUE_INITIALIZER;
  val->producer = -1;
  val->dtype = val->constant->dtype;
  val->rank = val->constant->rank;
  memcpy(val->dims, val->constant->dims, sizeof val->dims);
  val->kind = TENSOR_KIND_TENSOR;
  w->touched = true;
}

smelt_status rw_add_constant(rewriter *w, const char *base, tensor *t, int *id) {
  smelt_status s = rw_add_value(w, base, -1, id);
  if (s) {
    tensor_free(t);
    return s;
  }
  rw_make_constant(w, *id, t);
  return SMELT_OK;
}

static ir_attr *attr_slot(rewriter *w, int node, int slot, const char *name, ir_attr_type type) {
  ir_node *nd = &w->g->nodes[node];
  if (slot < 0 || slot >= nd->n_attrs) return NULL;
  ir_attr *a = &nd->attrs[slot];
  memset(a, 0, sizeof *a);
  a->name = arena_strdup(&w->g->arena, name);
  a->type = type;
  return a->name ? a : NULL;
}

smelt_status rw_attr_int(rewriter *w, int node, int slot, const char *name, int64_t v) {
  ir_attr *a = attr_slot(w, node, slot, name, IR_ATTR_INT);
  if (!a) return err_set(SMELT_ERR_INTERNAL, "attribute slot %d for %s unavailable", slot, q(name));
  a->i = v;
  return SMELT_OK;
}

smelt_status rw_attr_float(rewriter *w, int node, int slot, const char *name, float v) {
  ir_attr *a = attr_slot(w, node, slot, name, IR_ATTR_FLOAT);
  if (!a) return err_set(SMELT_ERR_INTERNAL, "attribute slot %d for %s unavailable", slot, q(name));
  a->f = v;
  return SMELT_OK;
}

smelt_status rw_attr_string(rewriter *w, int node, int slot, const char *name, const char *s) {
  ir_attr *a = attr_slot(w, node, slot, name, IR_ATTR_STRING);
  if (!a || !(a->s = arena_strdup(&w->g->arena, s)))
    return err_set(SMELT_ERR_INTERNAL, "attribute slot %d for %s unavailable", slot, q(name));
  a->s_len = strlen(s);
  return SMELT_OK;
}

smelt_status rw_attr_ints(rewriter *w, int node, int slot, const char *name, const int64_t *v, int n) {
  ir_attr *a = attr_slot(w, node, slot, name, IR_ATTR_INTS);
  if (!a || !(a->ints = arena_alloc(&w->g->arena, sizeof(int64_t) * (size_t)(n + 1))))
    return err_set(SMELT_ERR_INTERNAL, "attribute slot %d for %s unavailable", slot, q(name));
  if (n) memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
  a->n = n;
  return SMELT_OK;
}

smelt_status rw_attr_copy(rewriter *w, int node, int slot, const ir_attr *src) {
  arena *ar = &w->g->arena;
  switch (src->type) {
    case IR_ATTR_INT: return rw_attr_int(w, node, slot, src->name, src->i);
    case IR_ATTR_FLOAT: return rw_attr_float(w, node, slot, src->name, src->f);
    case IR_ATTR_STRING: {
      ir_attr *a = attr_slot(w, node, slot, src->name, IR_ATTR_STRING);
      if (!a || !(a->s = arena_strndup(ar, src->s ? src->s : "", src->s ? src->s_len : 0)))
        return err_nomem("attribute", src->s_len);
      a->s_len = src->s ? src->s_len : 0;
      return SMELT_OK;
    }
    case IR_ATTR_INTS: return rw_attr_ints(w, node, slot, src->name, src->ints, src->n);
    case IR_ATTR_FLOATS: {
      ir_attr *a = attr_slot(w, node, slot, src->name, IR_ATTR_FLOATS);
      if (!a || !(a->floats = arena_alloc(ar, sizeof(float) * (size_t)(src->n + 1))))
        return err_nomem("attribute", sizeof(float) * (size_t)src->n);
      if (src->n) memcpy(a->floats, src->floats, sizeof(float) * (size_t)src->n);
      a->n = src->n;
      return SMELT_OK;
    }
    default:
      return err_set(SMELT_ERR_INTERNAL, "cannot copy attribute %s of type %d", q(src->name),
                     (int)src->type);
  }
}

smelt_status rw_tensor(tensor **t, smelt_dtype dt, int rank, const int64_t *dims) {
  return tensor_new(t, dt, rank, dims);
}

const char *rw_name(const rewriter *w, int node, char *buf, size_t n) {
  const ir_node *nd = &w->g->nodes[node];
  if (*nd->name) snprintf(buf, n, "%s", q(nd->name));
  else snprintf(buf, n, "#%d %s", node, q_ident(nd->op_type));
  return buf;
}
