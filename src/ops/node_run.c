#include "ops/node_run.h"

#include "util/err.h"
#include "util/quote.h"

smelt_status node_check_arity(const ir_graph *g, int node_id) {
  const ir_node *n = &g->nodes[node_id];
  const op_def *op = n->op;
  char lb[256];
  if (!op)
    return err_set(SMELT_ERR_UNSUPPORTED, "%s: operator %s%s%s is not supported by smelt",
                   ir_node_label(g, node_id, lb, sizeof lb), *n->domain ? q_ident(n->domain) : "",
                   *n->domain ? "." : "", q_ident(n->op_type));
  int ni = n->n_inputs;
  while (ni > 0 && n->inputs[ni - 1] < 0) ni--; /* trailing absent optionals */
  if (ni < op->min_inputs || (op->max_inputs >= 0 && ni > op->max_inputs))
    return err_set(SMELT_ERR_INVALID_MODEL, "%s: has %d inputs, expected %d..%d",
                   ir_node_label(g, node_id, lb, sizeof lb), ni, op->min_inputs, op->max_inputs);
  for (int i = 0; i < op->min_inputs && i < n->n_inputs; i++)
    if (n->inputs[i] < 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s: required input %d is missing",
                     ir_node_label(g, node_id, lb, sizeof lb), i);
  if (n->n_outputs < op->min_outputs || (op->max_outputs >= 0 && n->n_outputs > op->max_outputs))
    return err_set(SMELT_ERR_INVALID_MODEL, "%s: has %d outputs, expected %d..%d",
                   ir_node_label(g, node_id, lb, sizeof lb), n->n_outputs, op->min_outputs,
                   op->max_outputs);
  return SMELT_OK;
}

smelt_status node_run(const ir_graph *g, int node_id, tensor **in, tensor **out, smelt_pool *pool,
                      op_subgraph_fn run_subgraph, void *exec) {
  return node_run_cached(g, node_id, in, out, pool, run_subgraph, exec, NULL);
}

smelt_status node_run_cached(const ir_graph *g, int node_id, tensor **in, tensor **out,
                             smelt_pool *pool, op_subgraph_fn run_subgraph, void *exec,
                             op_cache *cache) {
  const ir_node *n = &g->nodes[node_id];
  char lb[256];
  TRY(node_check_arity(g, node_id));
  op_ctx c = {.graph = g, .node = n, .opset = n->opset, .n_in = n->n_inputs,
              .n_out = n->n_outputs, .in = in, .out = out, .pool = pool,
              .run_subgraph = run_subgraph, .exec = exec, .cache = cache};
  smelt_status s = SMELT_OK;
  if (!n->op->alloc_outputs_in_run) {
    for (int i = 0; i < n->n_outputs; i++) {
      out[i]->rank = -1;
      out[i]->dtype = SMELT_UNDEFINED;
    }
    s = n->op->infer(&c);
    for (int i = 0; !s && i < n->n_outputs; i++) {
      tensor shape = *out[i];
      if (shape.rank < 0 || tensor_numel(&shape) < 0)
        s = err_set(SMELT_ERR_INTERNAL, "output %d has no concrete shape after inference", i);
      else if (shape.kind == TENSOR_KIND_TENSOR &&
               (s = tensor_alloc_uninit(out[i], shape.dtype, shape.rank, shape.dims)) && n->outputs[i] >= 0)
        err_prefix(s, "output '%s': ", g->values[n->outputs[i]].name);
    }
  }
  if (!s) s = n->op->run(&c);
  if (s) return err_prefix(s, "%s: ", ir_node_label(g, node_id, lb, sizeof lb));
  return SMELT_OK;
}

smelt_status node_run_alias(const ir_graph *g, int node_id, tensor **in, tensor **out, bool *aliased) {
  const ir_node *n = &g->nodes[node_id];
  *aliased = false;
  tensor *x = n->n_inputs > 0 ? in[0] : NULL;
  if (!op_is_view(n->op) || n->n_outputs != 1 || !x || x->kind != TENSOR_KIND_TENSOR || !x->owns_data)
    return SMELT_OK;
  char lb[256];
  TRY(node_check_arity(g, node_id));
  op_ctx c = {.graph = g, .node = n, .opset = n->opset, .n_in = n->n_inputs, .n_out = 1, .in = in, .out = out};
  out[0]->rank = -1;
  out[0]->dtype = SMELT_UNDEFINED;
  smelt_status s = n->op->infer(&c);
  if (s) return err_prefix(s, "%s: ", ir_node_label(g, node_id, lb, sizeof lb));
  tensor *y = out[0];
  int64_t numel = y->rank >= 0 ? tensor_numel(y) : -1;
  size_t bytes = 0;
  if (y->kind != TENSOR_KIND_TENSOR || y->dtype != x->dtype || numel < 0 || !dtype_nbytes(y->dtype, numel, &bytes) ||
      bytes != x->nbytes) {
    y->rank = -1; /* the shape stays for node_run_cached to infer again */
    return SMELT_OK;
  }
  y->data = x->data;
  y->nbytes = x->nbytes;
  y->owns_data = true;
  y->device = x->device;
  x->data = NULL;
  x->nbytes = 0;
  x->owns_data = false;
  *aliased = true;
  return SMELT_OK;
}
