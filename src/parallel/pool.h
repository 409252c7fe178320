/* A thread pool owned by a session.  Workers sleep on a condition variable
 * between jobs: no spinning while idle. */
#ifndef SMELT_PARALLEL_POOL_H
#define SMELT_PARALLEL_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "smelt.h"

typedef struct smelt_pool smelt_pool;

/* n_threads total threads including the caller; <= 0 means the machine's cores. */
smelt_status pool_create(int n_threads, smelt_pool **out);
void pool_free(smelt_pool *p);
int pool_threads(const smelt_pool *p); /* 1 for a NULL pool */
int pool_machine_cores(void);

/* Calls fn(ctx, begin, end) over [0, n) split into chunks across the pool's
 * threads, the caller taking part; returns when all are done.  Chunks are at
 * least `grain` items.  A NULL pool runs fn(ctx, 0, n) inline.  Safe to call
 * from several threads at once (calls are serialized), and from inside fn
 * (nested calls run inline).  Called in a run that can be stopped (a
 * run_ctl is current, parallel/run_ctl.h), chunks not yet started when the run
 * stops are skipped: the caller's executor then fails the run. */
void pool_parallel_for(smelt_pool *p, int64_t n, int64_t grain,
                       void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx);

/* Wakes workers that sleep (their spin ran out: the pool sat idle) so that
 * they spin again, ready for the next job, and returns at once; nothing
 * when none sleeps.  Called when a run starts: the wake-up (tens to
 * hundreds of us) then overlaps the run's first serial steps instead of
 * delaying its first parallel job.  Workers that get no job go back to
 * sleep after their spin (SMELT_SPIN_US). */
void pool_wake(smelt_pool *p);

/* True when the run this thread works for has stopped (cancelled or past its
 * deadline, parallel/run_ctl.h): inside a pool job, the job's run; otherwise
 * the calling thread's.  For kernels whose chunks are long (a work loop per
 * thread): check between items and return early; what is left unwritten is
 * garbage the executor never hands on.  A few ns; false outside such runs. */
bool pool_stopping(void);

/* How much dearer a thread is than on an idle machine: 1, or
 * POOL_CONTENDED_COST while workers keep joining late (descheduled: more
 * runnable threads than cores; see pool_note_join).  Threshold rules that
 * wake threads for work above some size multiply that size by it, so a
 * loaded machine runs small steps on the calling thread instead of waiting
 * for a worker that has no core.  1 for a NULL or one-thread pool. */
#define POOL_CONTENDED_COST 16
int pool_thread_cost(const smelt_pool *p);
int pool_thread_cost_at(const smelt_pool *p, int64_t now_ns);
/* Records one parallel job's join (what pool_parallel_for does after each
 * job; exposed for tests): the caller's own time and chunks, the job's
 * chunks, how long the caller then waited for the workers, whether the job
 * had to wake sleeping workers (then a late or idle join is their wake-up
 * latency and counts for nothing), and the time now (CLOCK_MONOTONIC ns). */
void pool_note_join(smelt_pool *p, int64_t own_ns, int64_t own_chunks, int64_t n_chunks, int64_t wait_ns,
                    bool woke, int64_t now_ns);

/* Profiling: an optional observer told of every chunk a parallel_for runs
 * through the pool's threads (inline calls are not reported), on the thread
 * that ran it, after fn returns, with the chunk's range and its start and end
 * times (CLOCK_MONOTONIC, ns).  It must be thread-safe.  fn NULL removes it.
 * Waits for a parallel_for in progress; applies from the next one. */
typedef void (*pool_chunk_observer)(void *ctx, int64_t begin, int64_t end, int64_t t0_ns,
                                    int64_t t1_ns);
void pool_set_observer(smelt_pool *p, pool_chunk_observer fn, void *ctx);

/* How many times a worker found itself on the CPU its job's caller ran on
 * and moved off it (parallel/spread.h; SMELT_POOL_SPREAD=0 turns that off).
 * For tests and diagnostics. */
int pool_spreads(const smelt_pool *p);
/* Workers asleep (or going to sleep) between jobs now; for tests. */
int pool_sleepers(const smelt_pool *p);

#endif
