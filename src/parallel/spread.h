/* Keeping a pool's worker off its caller's CPU.
 *
 * A woken thread is placed by the OS.  On a VM whose other virtual CPU has
 * been idle for a while (halted, so the guest scheduler avoids it), a worker
 * woken for a job lands on the caller's CPU, then spins there between jobs
 * and never gets placed again: both threads share one core until the load
 * balancer moves one (several ms later).  spread_off_cpu moves the calling
 * thread off a CPU by narrowing its affinity for a moment (which migrates it
 * at once) and restoring it right after: no lasting pinning. */
#ifndef SMELT_PARALLEL_SPREAD_H
#define SMELT_PARALLEL_SPREAD_H

#include <stdbool.h>

/* The CPU the calling thread runs on, or -1 where unknown. */
int spread_cpu(void);

/* If the calling thread runs on `cpu` and its affinity allows another CPU,
 * moves it to one of those and restores its affinity as it was; true if it
 * moved.  False (nothing changed) when cpu < 0, when the thread is elsewhere
 * already, when no other CPU is allowed or the OS refuses. */
bool spread_off_cpu(int cpu);

/* Whether pools move co-located workers (SMELT_POOL_SPREAD: 0 turns it off;
 * default on).  Read once per pool, at its creation. */
bool spread_enabled(void);

#endif
