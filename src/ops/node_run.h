/* Runs one node on concrete inputs: arity check, inference of the output
 * shapes, allocation, kernel.  Shared by the eager executor, the compiled
 * plan's graph breaks and the op unit tests. */
#ifndef SMELT_OPS_NODE_RUN_H
#define SMELT_OPS_NODE_RUN_H

#include "ops/op.h"

/* in: node->n_inputs tensors (NULL for absent optional ones).  out: node->n_outputs
 * zeroed tensors that receive owning results (the caller releases them, also on
 * failure).  Errors are prefixed with the node's label. */
smelt_status node_run(const ir_graph *g, int node_id, tensor **in, tensor **out, smelt_pool *pool,
                      op_subgraph_fn run_subgraph, void *exec);
/* The same with the node's session cache (op_ctx.cache; may be NULL). */
smelt_status node_run_cached(const ir_graph *g, int node_id, tensor **in, tensor **out,
                             smelt_pool *pool, op_subgraph_fn run_subgraph, void *exec,
                             op_cache *cache);
/* Arity check against the op's definition (also used at session creation). */
smelt_status node_check_arity(const ir_graph *g, int node_id);

#endif
