/* Observing a run step by step (for the profiler).
 *
 * An executor that is given a run_hook calls begin before each step of the
 * graph and end after it, on the thread that runs the graph (never from pool
 * workers), properly nested: steps inside a subgraph (If, Loop, Scan bodies)
 * come as begin/end pairs between the enclosing step's begin and end.
 *
 *   - the eager executor calls it per node: kind = the op type, name = the node
 *     name (both owned by the model);
 *   - a compiled plan executor should call it per call of its plan: kind = the
 *     kernel it runs ("smelt.fused_3", "gemm", or the op type of a graph break),
 *     name = the node(s) it covers; both strings must stay valid until the
 *     session is freed (the profiler keeps the pointers, it does not copy).
 *
 * The hook reaches an executor through eager_stats.hook (runtime/eager.h),
 * which session_run_tensors passes down: a compiled mode's run path should
 * forward the same field to its plan executor.  Time spent between begin and
 * end counts as that step's time, so an executor should call begin right
 * before the kernel and end right after it, leaving its own bookkeeping
 * outside; that is what lets `smelt profile` check that the steps add up to
 * the run's measured latency. */
#ifndef SMELT_RUNTIME_RUN_HOOK_H
#define SMELT_RUNTIME_RUN_HOOK_H

typedef struct run_hook {
  void *ctx;
  void (*begin)(void *ctx, const char *kind, const char *name);
  void (*end)(void *ctx);
} run_hook;

#endif
