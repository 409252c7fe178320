/* Runs one operator on hand-made tensors, the way the executor does, for op
 * unit tests.  Usage:
 *   ir_attr attrs[] = {{.name = "axis", .type = IR_ATTR_INT, .i = 1}};
 *   tensor *in[] = {&a, &b}; tensor out0 = {0}; tensor *out[] = {&out0};
 *   CHECK_OK(harness_run("Concat", 13, attrs, 1, in, 2, out, 1));
 * The attrs are borrowed (not freed).  Outputs are owning: tensor_release them. */
#ifndef SMELT_TEST_OP_HARNESS_H
#define SMELT_TEST_OP_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/node_run.h"
#include "ops/op_cache.h"
#include "util/err.h"

/* A one-node graph for op_type with borrowed attrs; inputs i (NULL = absent)
 * are values 0..n_in-1, outputs n_in.. .  Free with harness_graph_free. */
static inline smelt_status harness_graph(ir_graph **gout, const char *op_type, int opset,
                                         const ir_attr *attrs, int n_attrs, tensor **in, int n_in,
                                         int n_out) {
  ir_graph *g = ir_graph_new(NULL);
  if (!g) return err_nomem("graph", 0);
  int id;
  smelt_status s = ir_graph_add_node(g, "test", op_type, "", n_in, n_out, n_attrs, &id);
  if (s) {
    ir_graph_free(g);
    return s;
  }
  ir_node *n = &g->nodes[id];
  if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
  n->opset = opset;
  n->op = ops_find("", op_type);
  for (int i = 0; i < n_in; i++) n->inputs[i] = in[i] ? i : -1;
  for (int i = 0; i < n_out; i++) n->outputs[i] = n_in + i;
  *gout = g;
  return SMELT_OK;
}

static inline void harness_graph_free(ir_graph *g) {
  g->nodes[0].n_attrs = 0; /* borrowed */
  ir_graph_free(g);
}

/* Runs the op on a thread pool (pool may be NULL), the way the executor does. */
static inline smelt_status harness_run_pool(smelt_pool *pool, const char *op_type, int opset,
                                            const ir_attr *attrs, int n_attrs, tensor **in,
                                            int n_in, tensor **out, int n_out) {
  ir_graph *g = NULL;
  TRY(harness_graph(&g, op_type, opset, attrs, n_attrs, in, n_in, n_out));
  smelt_status s = node_run(g, 0, in, out, pool, NULL, NULL);
  harness_graph_free(g);
  return s;
}

/* The same with an op cache (zeroed op_cache; free with op_cache_free_all):
 * the routes the executor takes in a session (prepared weights, the fast
 * paths the reference device leaves out).  Inputs whose bit is set in
 * const_mask are the model's initializers (op_input_is_constant: weights
 * the op may prepare and cache). */
static inline smelt_status harness_run_cached(smelt_pool *pool, op_cache *cache, unsigned const_mask,
                                              const char *op_type, int opset, const ir_attr *attrs, int n_attrs,
                                              tensor **in, int n_in, tensor **out, int n_out) {
  ir_graph *g = NULL;
  TRY(harness_graph(&g, op_type, opset, attrs, n_attrs, in, n_in, n_out));
  for (int v = g->n_values; v < n_in + n_out; v++) { /* the values the node's inputs and outputs name */
    char name[16];
    int id;
    snprintf(name, sizeof name, "v%d", v);
    smelt_status s = ir_graph_add_value(g, name, &id);
    if (s) {
      harness_graph_free(g);
      return s;
    }
  }
  for (int i = 0; i < n_in && i < 32; i++)
    if (in[i] && (const_mask >> i & 1u)) {
      g->values[i].flags |= IR_VALUE_INITIALIZER;
      g->values[i].constant = in[i]; /* borrowed: taken back below */
    }
  smelt_status s = node_run_cached(g, 0, in, out, pool, NULL, NULL, cache);
  for (int i = 0; i < n_in && i < 32; i++)
    if (const_mask >> i & 1u) g->values[i].constant = NULL;
  harness_graph_free(g);
  return s;
}

static inline smelt_status harness_run(const char *op_type, int opset, const ir_attr *attrs,
                                       int n_attrs, tensor **in, int n_in, tensor **out, int n_out) {
  return harness_run_pool(NULL, op_type, opset, attrs, n_attrs, in, n_in, out, n_out);
}

/* Static inference only, on shape-only inputs (data NULL, dims may be
 * symbolic): outputs receive dtype and shape (rank -1 where unknown). */
static inline smelt_status harness_infer(const char *op_type, int opset, const ir_attr *attrs,
                                         int n_attrs, tensor **in, int n_in, tensor **out,
                                         int n_out) {
  ir_graph *g = NULL;
  TRY(harness_graph(&g, op_type, opset, attrs, n_attrs, in, n_in, n_out));
  ir_node *n = &g->nodes[0];
  for (int i = 0; i < n_out; i++) {
    memset(out[i], 0, sizeof *out[i]);
    out[i]->rank = -1;
  }
  op_ctx c = {.graph = g, .node = n, .opset = opset, .n_in = n_in, .n_out = n_out,
              .in = in, .out = out, .static_infer = true};
  smelt_status s = n->op ? n->op->infer(&c) : err_set(SMELT_ERR_UNSUPPORTED, "no op %s", op_type);
  harness_graph_free(g);
  return s;
}

/* A float32 tensor from a literal list: harness_f32(&t, 2, (int64_t[]){2,3}, (float[]){...}). */
static inline void harness_f32(tensor *t, int rank, const int64_t *dims, const float *vals) {
  tensor_alloc(t, SMELT_F32, rank, dims);
  if (t->nbytes) memcpy(t->data, vals, t->nbytes);
}
static inline void harness_i64(tensor *t, int rank, const int64_t *dims, const int64_t *vals) {
  tensor_alloc(t, SMELT_I64, rank, dims);
  if (t->nbytes) memcpy(t->data, vals, t->nbytes);
}

#endif
