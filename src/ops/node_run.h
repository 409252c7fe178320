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
/* A view op (op_def.view) whose input 0 the caller owns and reads nowhere
 * after this node: infers output 0's shape and hands it input 0's buffer
 * instead of allocating and copying (in[0] is left empty, owning nothing).
 * *aliased false: the op, input or shape does not allow it (a sequence, a
 * type change, a buffer another owns); nothing was done, run the node with
 * node_run_cached. */
smelt_status node_run_alias(const ir_graph *g, int node_id, tensor **in, tensor **out, bool *aliased);
/* Arity check against the op's definition (also used at session creation). */
smelt_status node_check_arity(const ir_graph *g, int node_id);

#endif
