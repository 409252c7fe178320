/* Keeping a pool's worker off its caller's CPU (see spread.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "parallel/spread.h"

#include <stdlib.h>
#include <string.h>

#ifdef __linux__
#include <sched.h>

int spread_cpu(void) { return sched_getcpu(); }

bool spread_off_cpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return false;
  cpu_set_t was, away;
  if (sched_getaffinity(0, sizeof was, &was)) return false;
  if (!CPU_ISSET(cpu, &was)) return false;
  memcpy(&away, &was, sizeof away);
  CPU_CLR(cpu, &away);
  if (CPU_COUNT(&away) == 0) return false;
  /* the narrowed mask migrates the thread before the call returns; the
   * restored one leaves it where it now runs */
  if (sched_setaffinity(0, sizeof away, &away)) return false;
  if (sched_setaffinity(0, sizeof was, &was)) {
    /* the allowed CPUs changed meanwhile (a cpuset): every CPU, which the
     * kernel narrows to those now allowed, rather than stay pinned */
    cpu_set_t all;
    memset(&all, 0xff, sizeof all);
    sched_setaffinity(0, sizeof all, &all);
  }
  return true;
}
#else
int spread_cpu(void) { return -1; }
bool spread_off_cpu(int cpu) {
  (void)cpu;
  return false;
}
#endif

bool spread_enabled(void) {
  const char *s = getenv("SMELT_POOL_SPREAD");
  return !(s && !strcmp(s, "0"));
}
