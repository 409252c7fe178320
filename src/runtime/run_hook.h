/* Observing a run step by step (for the profiler).
 *
 * An executor that is given a run_hook calls begin before each step of the
 * graph and end after it, on the thread that runs the graph (never from pool
 * workers), properly nested: steps inside a subgraph (If, Loop, Scan bodies)
 * come as begin/end pairs between the enclosing step's begin and end.
 *
 *   - the eager executor calls it per node: kind = the op type, name = the node
 *     name (both owned by the model);
 *   - the compiled plan executor (plan_run_hooked, runtime/plan_run.h) calls
 *     it per step of its plan: kind = "smelt.kernel" for a generated kernel,
 *     the op type for a library step, "break" for a graph break; name = the
 *     step's (first) node.  Strings handed over must stay valid until the
 *     session is freed (the profiler keeps the pointers, it does not copy).
 *
 * The hook reaches an executor through eager_stats.hook (runtime/eager.h),
 * which session_run_tensors passes down (session_compiled_run forwards it to
 * the plan, or to eager when the session fell back).  Time spent between begin and
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
