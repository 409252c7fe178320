/* Stopping a run early: the cancel flag and deadline of smelt_run_options.
 *
 * A run that was given options makes a run_ctl and makes it current on its
 * thread (run_ctl_enter, like bufcache_enter); NULL (the default) means the
 * run cannot be stopped, and every check is one pointer test.  Where a run
 * can stop:
 *   - the executors (eager.c, plan_run.c) check before the first node or
 *     step and after each one, and when a subgraph is entered (every If
 *     branch, Loop and Scan iteration, SequenceMap element);
 *   - the thread pool carries the caller's run_ctl to its job and checks it
 *     before each chunk, so a long kernel stops at a chunk boundary (its
 *     output is then garbage, but the executor's check after the node turns
 *     the run into SMELT_CANCELLED / SMELT_TIMEOUT before anything reads it).
 * Once a check sees the flag or the deadline the ctl is stopped for good
 * (sticky), so every later check, on any thread, agrees.
 *
 * Work whose result outlives the run -- compiles, prepared weights kept in
 * op caches and on disk -- must not be cut short: it runs inside
 * run_ctl_enter(NULL) ... run_ctl_enter(saved) (for op caches,
 * op_cache_get_or_make in ops/op_cache.h does this). */
#ifndef SMELT_PARALLEL_RUN_CTL_H
#define SMELT_PARALLEL_RUN_CTL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

typedef struct run_ctl {
  const volatile int *cancel; /* caller's flag, or NULL */
  int64_t deadline_ns;        /* run_ctl_now_ns() clock; 0 = none */
  double timeout_s;           /* for the message */
  atomic_int stop;            /* 0, or SMELT_CANCELLED / SMELT_TIMEOUT once seen */
} run_ctl;

/* Sets c up from options (NULL = none); checks them (SMELT_ERR_INVALID_ARGUMENT
 * with a message).  *active: false when nothing can stop the run (then c
 * need not be entered). */
smelt_status run_ctl_init(run_ctl *c, const smelt_run_options *o, bool *active);

/* Makes c current on this thread (NULL: none); returns the one it replaces. */
run_ctl *run_ctl_enter(run_ctl *c);
run_ctl *run_ctl_current(void);

/* The clock deadlines use (coarse monotonic: a few ns to read). */
int64_t run_ctl_now_ns(void);

/* Reads the flag and the clock; 0 or the status the run must stop with. */
int run_ctl_poll_slow(run_ctl *c);
static inline int run_ctl_poll(run_ctl *c) {
  int s = atomic_load_explicit(&c->stop, memory_order_relaxed);
  return s ? s : run_ctl_poll_slow(c);
}

/* For executors: s, unless c has stopped, in which case the stop's status
 * with its message ("cancelled: ..." / "timeout: ...").  A status that is
 * already SMELT_CANCELLED or SMELT_TIMEOUT is kept (with its message).
 * c may be NULL. */
smelt_status run_ctl_check(run_ctl *c, smelt_status s);

#endif
