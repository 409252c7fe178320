/* Running a compiled plan.
 *
 * default / max-autotune: the step list, pointers computed from the arena of
 * the run.  reduce-overhead: a flat array of {function, argument} calls whose
 * pointers were all bound to one arena when that arena was made (inputs are
 * copied into it, the CPU analogue of CUDA-graph replay): no allocation, no
 * per-step dispatch.  Each concurrent run takes its own arena from the plan's
 * pool of arenas (made on demand, kept for reuse). */
#ifndef SMELT_RUNTIME_PLAN_RUN_H
#define SMELT_RUNTIME_PLAN_RUN_H

#include "plan/plan.h"
#include "runtime/run_hook.h"

/* inputs: one per graph input, with the plan's shapes (the caller guards).
 * outputs: zeroed tensors that receive owning results. */
smelt_status plan_run(compiled_plan *p, tensor *const *inputs, tensor *outputs);
/* Like plan_run, telling hook (may be NULL) of every step (runtime/run_hook.h). */
smelt_status plan_run_hooked(compiled_plan *p, tensor *const *inputs, tensor *outputs, const run_hook *hook);

/* Like plan_run; step_seconds (n_steps entries) accumulates the time of
 * each step (steps then run one by one, in every mode).  outputs may be NULL. */
smelt_status plan_run_timed(compiled_plan *p, tensor *const *inputs, tensor *outputs,
                            double *step_seconds);


/* Prepares every library step's constant weights (ops_prepare_fn) into the
 * plan's op caches, so that the first run does no one-time work. */
smelt_status plan_prepare(compiled_plan *p);
/* One line naming the kernel library step `step` takes (the op's describe
 * function over the shapes the plan knows), for --explain; false when the op
 * has none or a shape is known only when it runs. */
bool plan_step_describe(const compiled_plan *p, int step, char *buf, size_t n);

/* Frees the plan's arenas (at plan destruction). */
void compiled_plan_instances_free(compiled_plan *p);

#endif
