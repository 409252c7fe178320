/* GraphProto → ir_graph.
 *
 * Nodes may appear in the file out of topological order, and a subgraph may
 * capture any value of its enclosing graphs, so a graph is read in passes:
 *   1. initializers, 2. inputs, 3. every node with its output values,
 *   4. graph outputs and value_info types, 5. node inputs and attributes
 *      (subgraphs last, once every name of the enclosing scopes exists).
 * An input that is also an initializer (older exporters list every weight as
 * an input with a default) stays an initializer: a constant, not a required
 * input of the model.
 *
 * Complexity: O(file size + n + v): one scan of the GraphProto per pass
 * above, names resolved through the graph's hash map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/import_internal.h"
#include "ops/op.h"
#include "util/err.h"
#include "util/quote.h"

enum { G_NODE = 1, G_NAME = 2, G_INIT = 5, G_INPUT = 11, G_OUTPUT = 12, G_VALUE_INFO = 13,
       G_SPARSE_INIT = 15 };
enum { N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP_TYPE = 4, N_ATTR = 5, N_DOMAIN = 7 };

/* Bounds node arity so int counts and arena sizes cannot overflow. */
#define MAX_NODE_ARITY (1 << 24)

typedef smelt_status (*field_fn)(onnx_imp *c, ir_graph *g, const pb_msg *sub, int index);

/* Calls fn on each message-typed field num of gm, with its index among them. */
static smelt_status for_each(onnx_imp *c, ir_graph *g, const pb_msg *gm, uint32_t num,
                             const char *what, const char *type, field_fn fn) {
  pb_msg m = *gm;
  pb_field f;
  bool more;
  for (int index = 0;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num != num) continue;
    TRY(pb_want(&m, &f, PB_LEN, what));
    pb_msg sub = pb_msg_sub(&m, &f, type);
    TRY(fn(c, g, &sub, index++));
  }
}

/* Where value vid comes from, for duplicate-definition messages. */
static const char *value_origin(const ir_graph *g, int vid, char *buf, size_t n) {
  const ir_value *v = &g->values[vid];
  if (v->producer >= 0) return ir_node_label(g, v->producer, buf, n);
  if (v->flags & IR_VALUE_INITIALIZER) return "an initializer";
  if (v->flags & IR_VALUE_INPUT) return "a graph input";
  return "another definition";
}

/* ---- 1. initializers ---- */

smelt_status imp_constant_value(ir_graph *g, const char *name, tensor *t) {
  int vid;
  TRY(ir_graph_add_value(g, name, &vid));
  ir_value *v = &g->values[vid];
  v->flags |= IR_VALUE_INITIALIZER;
  v->constant = t;
  v->dtype = t->dtype;
  v->rank = t->rank;
  memcpy(v->dims, t->dims, sizeof v->dims);
  return SMELT_OK;
}

static smelt_status add_initializer(onnx_imp *c, ir_graph *g, tensor *t, pb_str name, int index) {
  const char *cname;
  if (!name.n) return err_set(SMELT_ERR_INVALID_MODEL, "initializer[%d] has no name", index);
  TRY(imp_cstr(c, name, 0, &cname));
  if (ir_graph_find_value(g, cname) >= 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "initializer %s is defined more than once", q(cname));
  return imp_constant_value(g, cname, t);
}

static smelt_status imp_initializer(onnx_imp *c, ir_graph *g, const pb_msg *tm, int index) {
  tensor *t;
  pb_str name = {"", 0};
  bool viewed;
  c->discard_copied = true; /* each initializer is imported once */
  smelt_status s = imp_tensor_new(c, tm, &t, &name, &viewed);
  c->discard_copied = false;
  if (s) return imp_prefix(s, "initializer[%d] %s: ", index, q_n(name.s, name.n));
  s = add_initializer(c, g, t, name, index);
  if (s) {
    tensor_free(t);
    return s;
  }
  if (c->m) {
    c->m->weight_bytes += t->nbytes;
    c->m->weight_count += tensor_numel(t);
    if (viewed)
      c->m->n_viewed++;
    else
      c->m->n_copied++;
  }
  return SMELT_OK;
}

/* ---- 2. inputs ---- */

/* ValueInfoProto number index of list `what` ("graph input", ...): its type
 * and its name as a C string (scratch slot 0; "" where it has none, which
 * only `named` lists refuse). */
static smelt_status listed_info(onnx_imp *c, ir_graph *g, const pb_msg *vm, const char *what,
                                int index, bool named, imp_type *t, const char **cname) {
  pb_str name;
  smelt_status s = imp_value_info(c, vm, g, &name, t);
  if (s) return imp_prefix(s, "%s[%d]: ", what, index);
  if (named && !name.n) return err_set(SMELT_ERR_INVALID_MODEL, "%s[%d] has no name", what, index);
  return imp_cstr(c, name, 0, cname);
}

static smelt_status imp_input(onnx_imp *c, ir_graph *g, const pb_msg *vm, int index) {
  imp_type t;
  const char *cname;
  TRY(listed_info(c, g, vm, "graph input", index, true, &t, &cname));
  int vid = ir_graph_find_value(g, cname);
  if (vid >= 0) {
    if (!(g->values[vid].flags & IR_VALUE_INITIALIZER))
      return err_set(SMELT_ERR_INVALID_MODEL, "graph input %s is listed more than once", q(cname));
    if (g->parent) /* subgraph inputs are bound by position: dropping one would shift them */
      return err_set(SMELT_ERR_UNSUPPORTED, "subgraph input %s is also an initializer", q(cname));
    return SMELT_OK; /* an input with a default value: keep the constant */
  }
  bool bound;
  TRY(imp_bound_input(c, g, cname, &t, &bound));
  if (bound) return SMELT_OK; /* given a value by the caller: a constant */
  TRY(ir_graph_add_value(g, cname, &vid));
  imp_apply_type(&g->values[vid], &t, false);
  return ir_graph_add_input(g, vid);
}

/* ---- 3. nodes and their outputs ---- */

typedef struct node_scan {
  pb_str name, op_type, domain;
  size_t n_in, n_out, n_attr;
} node_scan;

static smelt_status scan_node(const pb_msg *nm, node_scan *s) {
  pb_msg m = *nm;
  pb_field f;
  bool more;
  memset(s, 0, sizeof *s);
  s->name.s = s->op_type.s = s->domain.s = "";
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    switch (f.num) {
      case N_INPUT: TRY(pb_want(&m, &f, PB_LEN, "input")); s->n_in++; break;
      case N_OUTPUT: TRY(pb_want(&m, &f, PB_LEN, "output")); s->n_out++; break;
      case N_ATTR: TRY(pb_want(&m, &f, PB_LEN, "attribute")); s->n_attr++; break;
      case N_NAME: TRY(imp_name(&m, &f, "name", &s->name)); break;
      case N_OP_TYPE: TRY(imp_name(&m, &f, "op_type", &s->op_type)); break;
      case N_DOMAIN: TRY(imp_name(&m, &f, "domain", &s->domain)); break;
      default: break;
    }
  }
  if (s->n_in > MAX_NODE_ARITY || s->n_out > MAX_NODE_ARITY || s->n_attr > MAX_NODE_ARITY)
    return err_set(SMELT_ERR_UNSUPPORTED, "node has too many inputs, outputs or attributes");
  if (!s->op_type.n) return err_set(SMELT_ERR_INVALID_MODEL, "node has no op_type");
  return SMELT_OK;
}

static smelt_status node_outputs(onnx_imp *c, ir_graph *g, const pb_msg *nm, int id) {
  pb_msg m = *nm;
  pb_field f;
  bool more;
  char b1[160], b2[160];
  for (int k = 0;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num != N_OUTPUT) continue;
    pb_str on;
    const char *cname;
    TRY(imp_name(&m, &f, "output", &on));
    int slot = k++;
    if (!on.n) continue; /* "" : an optional output not wanted */
    TRY(imp_cstr(c, on, 0, &cname));
    int prev = ir_graph_find_value(g, cname);
    if (prev >= 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s: output %s is also produced by %s",
                     ir_node_label(g, id, b1, sizeof b1), q(cname),
                     value_origin(g, prev, b2, sizeof b2));
    int vid;
    TRY(ir_graph_add_value(g, cname, &vid));
    g->values[vid].producer = id;
    g->nodes[id].outputs[slot] = vid;
  }
}

static smelt_status imp_node(onnx_imp *c, ir_graph *g, const pb_msg *nm, int index) {
  node_scan s;
  smelt_status st = scan_node(nm, &s);
  if (st) return imp_prefix(st, "node[%d] %s: ", index, q_n(s.name.s, s.name.n));
  const char *name, *op_type, *domain;
  TRY(imp_cstr(c, s.name, 0, &name));
  TRY(imp_cstr(c, s.op_type, 1, &op_type));
  domain = s.domain.n ? arena_strndup(&g->arena, s.domain.s, s.domain.n) : "";
  if (!domain) return err_nomem("domain", s.domain.n);
  int id;
  TRY(ir_graph_add_node(g, name, op_type, domain, (int)s.n_in, (int)s.n_out, (int)s.n_attr, &id));
  ir_node *n = &g->nodes[id];
  n->op = ops_find(n->domain, n->op_type); /* NULL: unknown here, reported by the session */
  return node_outputs(c, g, nm, id);
}

/* ---- 4. outputs and value_info ---- */

static smelt_status imp_output(onnx_imp *c, ir_graph *g, const pb_msg *vm, int index) {
  imp_type t;
  const char *cname;
  TRY(listed_info(c, g, vm, "graph output", index, true, &t, &cname));
  int vid = ir_graph_resolve_value(g, cname);
  if (vid < 0)
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "graph output %s is not produced by any node, input or initializer", q(cname));
  ir_value *v = &g->values[vid];
  bool declared = v->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER);
  imp_apply_type(v, &t, declared);
  return ir_graph_add_output(g, vid);
}

static smelt_status imp_value_info_entry(onnx_imp *c, ir_graph *g, const pb_msg *vm, int index) {
  imp_type t;
  const char *cname;
  TRY(listed_info(c, g, vm, "value_info", index, false, &t, &cname));
  int vid = cname[0] ? ir_graph_find_value(g, cname) : -1; /* names hold no NUL (imp_name) */
  if (vid >= 0) imp_apply_type(&g->values[vid], &t, true); /* unknown names: nothing to type */
  return SMELT_OK;
}

/* ---- 5. node inputs and attributes ---- */

static int cmp_attr_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static smelt_status check_attr_names(const ir_node *n) {
  if (n->n_attrs < 2) return SMELT_OK;
  const char **names = malloc(sizeof(char *) * (size_t)n->n_attrs);
  if (!names) return err_nomem("attribute names", sizeof(char *) * (size_t)n->n_attrs);
  for (int i = 0; i < n->n_attrs; i++) names[i] = n->attrs[i].name;
  qsort(names, (size_t)n->n_attrs, sizeof *names, cmp_attr_name);
  smelt_status s = SMELT_OK;
  for (int i = 1; i < n->n_attrs && !s; i++)
    if (!strcmp(names[i - 1], names[i]))
      s = err_set(SMELT_ERR_INVALID_MODEL, "attribute %s is given more than once", q(names[i]));
  free(names);
  return s;
}

static smelt_status node_links(onnx_imp *c, ir_graph *g, const pb_msg *nm, int id) {
  pb_msg m = *nm;
  pb_field f;
  bool more;
  int k = 0, a = 0;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    if (f.num == N_INPUT) {
      pb_str in;
      const char *cname;
      TRY(imp_name(&m, &f, "input", &in));
      int slot = k++;
      if (!in.n) continue; /* "" : an optional input not given */
      TRY(imp_cstr(c, in, 0, &cname));
      int vid = ir_graph_resolve_value(g, cname);
      if (vid < 0)
        return err_set(SMELT_ERR_INVALID_MODEL,
                       "input %d %s is not defined by any node, graph input or initializer",
                       slot, q(cname));
      g->nodes[id].inputs[slot] = vid;
    } else if (f.num == N_ATTR) {
      TRY(pb_want(&m, &f, PB_LEN, "attribute"));
      pb_msg am = pb_msg_sub(&m, &f, "AttributeProto");
      int slot = a++;
      TRY(imp_attr(c, &am, g, id, &g->nodes[id].attrs[slot]));
    }
  }
  return check_attr_names(&g->nodes[id]);
}

static smelt_status imp_node_links(onnx_imp *c, ir_graph *g, const pb_msg *nm, int index) {
  smelt_status s = node_links(c, g, nm, index);
  if (s) {
    char b[160];
    return imp_prefix(s, "%s: ", ir_node_label(g, index, b, sizeof b));
  }
  return SMELT_OK;
}

/* ---- the graph ---- */

static smelt_status scan_graph(const pb_msg *gm, ir_graph *g) {
  pb_msg m = *gm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num == G_SPARSE_INIT)
      return err_set(SMELT_ERR_UNSUPPORTED, "sparse initializers are not supported");
    if (f.num == G_NAME) {
      pb_str name;
      TRY(imp_name(&m, &f, "name", &name));
      if (name.n) TRY(imp_strdup(g, name, &g->name));
    }
  }
}

smelt_status imp_graph(onnx_imp *c, const pb_msg *gm, ir_graph *g) {
  TRY(scan_graph(gm, g));
  TRY(for_each(c, g, gm, G_INIT, "initializer", "TensorProto", imp_initializer));
  TRY(for_each(c, g, gm, G_INPUT, "input", "ValueInfoProto", imp_input));
  TRY(for_each(c, g, gm, G_NODE, "node", "NodeProto", imp_node));
  TRY(for_each(c, g, gm, G_OUTPUT, "output", "ValueInfoProto", imp_output));
  TRY(for_each(c, g, gm, G_VALUE_INFO, "value_info", "ValueInfoProto", imp_value_info_entry));
  return for_each(c, g, gm, G_NODE, "node", "NodeProto", imp_node_links);
}

smelt_status imp_subgraph(onnx_imp *c, const pb_msg *gm, ir_graph *parent, ir_graph **out) {
  *out = NULL;
  if (c->depth >= ONNX_MAX_GRAPH_DEPTH)
    return err_set(SMELT_ERR_UNSUPPORTED, "subgraphs nest deeper than %d levels",
                   ONNX_MAX_GRAPH_DEPTH);
  if (c->n_graphs >= ONNX_MAX_SUBGRAPHS)
    return err_set(SMELT_ERR_UNSUPPORTED, "model has more than %d subgraphs", ONNX_MAX_SUBGRAPHS);
  c->n_graphs++;
  ir_graph *g = ir_graph_new(parent);
  if (!g) return err_nomem("subgraph", sizeof *g);
  *out = g;
  c->depth++;
  smelt_status s = imp_graph(c, gm, g);
  c->depth--;
  if (s && *g->name) return imp_prefix(s, "graph %s: ", q(g->name));
  return s;
}
