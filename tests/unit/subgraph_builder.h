/* Builds small IR graphs (with subgraphs) by hand and runs them on the eager
 * executor, for tests of ops that need one: control flow, SequenceMap,
 * FlexAttention's modifier graphs.
 *
 *   ir_graph *g = gb_new(NULL);
 *   gb_input(g, "x");
 *   gb_node(g, "Add", GB_IN("x", "x"), GB_OUT("y"), NULL, 0);
 *   gb_output(g, "y");
 *   gb_run(g, ins, outs);   // ins/outs: one tensor per graph input/output
 *
 * Names are resolved in the graph, then its parents (captured as outer
 * values); "" is an absent optional input.  Attributes are copied; GRAPH
 * attributes become owned by the node (freed with the graph). */
#ifndef SMELT_TEST_SUBGRAPH_BUILDER_H
#define SMELT_TEST_SUBGRAPH_BUILDER_H

#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "runtime/eager.h"
#include "util/err.h"

#define GB_IN(...) ((const char *const[]){__VA_ARGS__}), \
                   (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))
#define GB_OUT(...) GB_IN(__VA_ARGS__)
#define GB_NONE NULL, 0

static inline ir_graph *gb_new(ir_graph *parent) {
  ir_graph *g = ir_graph_new(parent);
  if (g) g->name = "test";
  return g;
}

/* The id of name in g (resolving outer scopes), created if new. */
static inline int gb_value(ir_graph *g, const char *name) {
  int id = ir_graph_resolve_value(g, name);
  if (id < 0 && ir_graph_add_value(g, name, &id)) return -1;
  return id;
}

static inline void gb_input(ir_graph *g, const char *name) {
  int id = -1;
  if (!ir_graph_add_value(g, name, &id)) ir_graph_add_input(g, id);
}

static inline void gb_output(ir_graph *g, const char *name) {
  int id = gb_value(g, name);
  if (id >= 0) ir_graph_add_output(g, id);
}

/* Adds a node of the default domain at opset 21 (see gb_node_dom). */
static inline int gb_node_dom(ir_graph *g, const char *domain, const char *op, int opset,
                              const char *const *ins, int n_in, const char *const *outs, int n_out,
                              const ir_attr *attrs, int n_attrs) {
  int id;
  if (ir_graph_add_node(g, "", op, domain, n_in, n_out, n_attrs, &id)) return -1;
  ir_node *n = &g->nodes[id];
  for (int i = 0; i < n_in; i++) n->inputs[i] = ins[i][0] ? gb_value(g, ins[i]) : -1;
  for (int i = 0; i < n_out; i++) {
    n->outputs[i] = gb_value(g, outs[i]);
    g->values[n->outputs[i]].producer = id;
  }
  if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
  n->opset = opset;
  n->op = ops_find(domain, op);
  return id;
}

static inline int gb_node(ir_graph *g, const char *op, const char *const *ins, int n_in,
                          const char *const *outs, int n_out, const ir_attr *attrs, int n_attrs) {
  return gb_node_dom(g, "", op, 21, ins, n_in, outs, n_out, attrs, n_attrs);
}

static inline ir_attr gb_graph_attr(const char *name, ir_graph *body) {
  return (ir_attr){.name = name, .type = IR_ATTR_GRAPH, .g = body};
}

/* Runs g on inputs (views are fine); outs receive owning results. */
static inline smelt_status gb_run(const ir_graph *g, tensor *const *ins, tensor *outs) {
  eager_plan p;
  smelt_pool *pool = NULL;
  TRY(pool_create(2, &pool));
  smelt_status s = eager_plan_build(g, &p);
  for (int k = 0; k < g->n_outputs; k++) memset(&outs[k], 0, sizeof(tensor));
  if (!s) {
    s = eager_run(&p, pool, NULL, ins, outs, NULL);
    eager_plan_free(&p);
  }
  if (s)
    for (int k = 0; k < g->n_outputs; k++) tensor_release(&outs[k]);
  pool_free(pool);
  return s;
}

#endif
