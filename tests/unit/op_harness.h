/* Runs one operator on hand-made tensors, the way the executor does, for op
 * unit tests.  Usage:
 *   ir_attr attrs[] = {{.name = "axis", .type = IR_ATTR_INT, .i = 1}};
 *   tensor *in[] = {&a, &b}; tensor out0 = {0}; tensor *out[] = {&out0};
 *   CHECK_OK(harness_run("Concat", 13, attrs, 1, in, 2, out, 1));
 * The attrs are borrowed (not freed).  Outputs are owning: tensor_release them. */
#ifndef SMELT_TEST_OP_HARNESS_H
#define SMELT_TEST_OP_HARNESS_H

#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "runtime/node_run.h"
#include "util/err.h"

static inline smelt_status harness_run(const char *op_type, int opset, const ir_attr *attrs,
                                       int n_attrs, tensor **in, int n_in, tensor **out, int n_out) {
  ir_graph *g = ir_graph_new(NULL);
  if (!g) return err_nomem("graph", 0);
  int id;
  smelt_status s = ir_graph_add_node(g, "test", op_type, "", n_in, n_out, n_attrs, &id);
  if (!s) {
    ir_node *n = &g->nodes[id];
    if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
    n->opset = opset;
    n->op = ops_find("", op_type);
    for (int i = 0; i < n_in; i++) n->inputs[i] = in[i] ? i : -1;
    for (int i = 0; i < n_out; i++) n->outputs[i] = n_in + i;
    s = node_run(g, id, in, out, NULL, NULL, NULL);
    n->n_attrs = 0; /* borrowed */
  }
  ir_graph_free(g);
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
