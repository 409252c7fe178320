/* Static type and shape inference over a whole graph.
 *
 * Each node's op infer() runs in topological order on the types and shapes
 * known so far (dims may be symbolic).  Small nodes whose inputs are all known
 * constants are evaluated on the spot, so that the shape arithmetic exporters
 * write (Shape → Gather → Concat → Reshape) yields concrete shapes; where
 * dims are symbolic, the shape values of that arithmetic (ops/
 * infer_shape_values.h) give Reshape and Expand symbolic output dims.
 *
 * Complexity: O(n + v + e) plus the small constant evaluations. */
#include <stdlib.h>
#include <string.h>

#include "ops/infer.h"
#include "ops/infer_shape_values.h"
#include "ops/op.h"
#include "ops/node_run.h"
#include "util/err.h"
#include "util/quote.h"

#define INFER_FOLD_MAX_ELEMS 4096

static void value_to_tensor(const ir_value *v, tensor *t) {
  memset(t, 0, sizeof *t);
  t->dtype = v->dtype;
  t->rank = v->rank;
  t->kind = v->kind;
  if (v->rank > 0) memcpy(t->dims, v->dims, sizeof(int64_t) * (size_t)v->rank);
  if (v->constant) {
    t->data = v->constant->data;
    t->nbytes = v->constant->nbytes;
  }
}

static bool node_has_subgraph(const ir_node *nd) {
  for (int a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == IR_ATTR_GRAPH || nd->attrs[a].type == IR_ATTR_GRAPHS) return true;
  return false;
}

static bool op_is_random(const char *op) {
  return !strncmp(op, "Random", 6) || !strcmp(op, "Bernoulli") || !strcmp(op, "Multinomial");
}

/* Evaluates a node whose inputs are all small known constants; stores results
 * as the output values' constants.  Failures are not errors: the node simply
 * stays unfolded and the executor reports problems at run time. */
static void try_fold(ir_graph *g, int id, tensor *in_shapes, bool dims_as_values) {
  ir_node *nd = &g->nodes[id];
  if (!nd->op || node_has_subgraph(nd) || op_is_random(nd->op_type) || nd->n_outputs > 8) return;
  tensor *in[64], outs[8], *out[8];
  if (nd->n_inputs > 64) return;
  bool dims_only = dims_as_values && (!strcmp(nd->op_type, "Shape") || !strcmp(nd->op_type, "Size"));
  for (int i = 0; i < nd->n_inputs; i++) {
    if (nd->inputs[i] < 0) {
      in[i] = NULL;
      continue;
    }
    const ir_value *v = &g->values[nd->inputs[i]];
    if (dims_only && infer_dims_suffice(nd, v)) { /* the header alone: dims, no data */
      in[i] = &in_shapes[i];
      continue;
    }
    if (!v->constant || v->kind != TENSOR_KIND_TENSOR) return;
    if (tensor_numel(v->constant) > INFER_FOLD_MAX_ELEMS) return;
    in[i] = &in_shapes[i];
  }
  for (int o = 0; o < nd->n_outputs; o++) {
    int v = nd->outputs[o];
    if (v >= 0 && g->values[v].constant) return;
    memset(&outs[o], 0, sizeof outs[o]);
    out[o] = &outs[o];
  }
  smelt_status s = node_run(g, id, in, out, NULL, NULL, NULL);
  for (int o = 0; o < nd->n_outputs; o++) {
    int v = nd->outputs[o];
    tensor *t = NULL;
    if (!s && v >= 0 && outs[o].kind == TENSOR_KIND_TENSOR &&
        tensor_numel(&outs[o]) <= INFER_FOLD_MAX_ELEMS && (t = malloc(sizeof *t))) {
      *t = outs[o];
      g->values[v].constant = t;
    } else {
      tensor_release(&outs[o]);
    }
  }
  err_clear();
}

/* Merges an inferred shape into a value: inferred concrete dims win, declared
 * ones fill what inference could not know. */
static smelt_status merge_value(ir_graph *g, int node_id, int o, ir_value *v, const tensor *t) {
  if (t->dtype != SMELT_UNDEFINED) {
    if (v->dtype != SMELT_UNDEFINED && v->dtype != t->dtype && !(v->flags & IR_VALUE_OUTER)) {
      char lb[256];
      return err_set(SMELT_ERR_INVALID_MODEL, "%s: output %d %s is declared %s but computes %s",
                     ir_node_label(g, node_id, lb, sizeof lb), o, q(v->name), dtype_name(v->dtype),
                     dtype_name(t->dtype));
    }
    v->dtype = t->dtype;
  }
  v->kind = t->kind;
  if (t->rank < 0) return SMELT_OK;
  if (v->rank != t->rank) {
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    return SMELT_OK;
  }
  for (int d = 0; d < t->rank; d++) {
    int64_t a = t->dims[d], b = v->dims[d];
    /* concrete beats symbolic; an input-derived symbol beats an exporter's name */
    v->dims[d] = dim_known(a) ? a : dim_known(b) ? b : a != DIM_UNKNOWN ? a : b;
  }
  return SMELT_OK;
}

static smelt_status infer_node(ir_graph *g, int id, bool dims_as_values, shape_val *sv) {
  ir_node *nd = &g->nodes[id];
  if (!nd->op || nd->n_inputs > 64 || nd->n_outputs > 64) return SMELT_OK;
  tensor ins[64], outs[64], *in[64], *out[64];
  for (int i = 0; i < nd->n_inputs; i++) {
    in[i] = NULL;
    if (nd->inputs[i] < 0) continue;
    const ir_value *v = &g->values[nd->inputs[i]];
    if (v->dtype == SMELT_UNDEFINED || v->rank < 0) return SMELT_OK; /* nothing to go on */
    value_to_tensor(v, &ins[i]);
    in[i] = &ins[i];
  }
  for (int o = 0; o < nd->n_outputs; o++) {
    memset(&outs[o], 0, sizeof outs[o]);
    outs[o].rank = -1;
    out[o] = &outs[o];
  }
  TRY(node_check_arity(g, id));
  op_ctx c = {.graph = g, .node = nd, .opset = nd->opset, .n_in = nd->n_inputs,
              .n_out = nd->n_outputs, .in = in, .out = out, .static_infer = true};
  char lb[256];
  smelt_status s = nd->op->infer(&c);
  if (s) return err_prefix(s, "%s: ", ir_node_label(g, id, lb, sizeof lb));
  for (int o = 0; o < nd->n_outputs; o++)
    if (nd->outputs[o] >= 0) TRY(merge_value(g, id, o, &g->values[nd->outputs[o]], &outs[o]));
  if (sv) TRY(shape_values_node(g, id, sv, dims_as_values));
  try_fold(g, id, ins, dims_as_values);
  return SMELT_OK;
}

void infer_shape_window(const ir_node *nd, int rank, int64_t *lo, int64_t *hi) {
  int64_t b = 0, e = rank;
  if (nd->opset >= 15) {
    b = ir_attr_int(nd, "start", 0), e = ir_attr_int(nd, "end", rank);
    if (b < 0) b += rank;
    if (e < 0) e += rank;
    b = b < 0 ? 0 : b > rank ? rank : b;
    e = e < b ? b : e > rank ? rank : e;
  }
  *lo = b, *hi = e;
}

bool infer_dims_suffice(const ir_node *nd, const ir_value *x) {
  if (x->rank < 0) return false;
  int64_t b = 0, e = x->rank;
  if (!strcmp(nd->op_type, "Shape")) infer_shape_window(nd, x->rank, &b, &e);
  for (int64_t d = b; d < e; d++)
    if (!dim_known(x->dims[d])) return false;
  return true;
}

static smelt_status infer_all(ir_graph *g, bool dims_as_values) {
  int *order = NULL;
  TRY(ir_graph_toposort(g, &order));
  smelt_status s = SMELT_OK;
  shape_val *sv = shape_values_new(g); /* NULL: no memory for it, inference goes on without */
  for (int k = 0; !s && k < g->n_nodes; k++) s = infer_node(g, order[k], dims_as_values, sv);
  free(sv);
  free(order);
  return s;
}

smelt_status ir_graph_infer(ir_graph *g) { return infer_all(g, false); }

smelt_status ir_graph_infer_dims(ir_graph *g) { return infer_all(g, true); }
