/* The eager executor — the reference, like PyTorch eager: nodes in topological
 * order, each output allocated as it is produced and freed after its last use. */
#ifndef SMELT_RUNTIME_EAGER_H
#define SMELT_RUNTIME_EAGER_H

#include "ops/op.h"
#include "runtime/run_hook.h"

typedef struct eager_plan {
  const ir_graph *graph;
  int *order;     /* node ids in execution order */
  int *last_use;  /* per value: step after which it can be freed; INT32_MAX = keep */
  int *free_start; /* values to free after step k: free_list[free_start[k]..free_start[k+1]) */
  int *free_list;
  op_cache *caches; /* one per node: prepared weights, kept for the plan's lifetime */
  bool plain;       /* reference kernels only: ops get no cache (nothing prepared), subgraphs too */
  const struct backend *device; /* the device that made it (backend/backend.h); NULL outside a session */
} eager_plan;

typedef struct eager_stats {
  size_t live_bytes, peak_bytes; /* bytes of intermediate tensors owned by the run */
  int64_t nodes_run;
  const run_hook *hook; /* optional (profiling): told of each node, subgraphs included */
} eager_stats;

smelt_status eager_plan_build(const ir_graph *g, eager_plan *p);
void eager_plan_free(eager_plan *p);

/* Runs the graph.  inputs: one tensor per graph input, in order (views are fine,
 * they are not modified).  outputs: one zeroed tensor per graph output; receives
 * owning results (the caller releases them, on failure too).  parent is the
 * enclosing frame for subgraphs (NULL for the main graph).  stats may be NULL. */
struct eager_frame;
smelt_status eager_run(const eager_plan *p, smelt_pool *pool, struct eager_frame *parent,
                       tensor *const *inputs, tensor *outputs, eager_stats *stats);

#endif
