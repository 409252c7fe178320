/* parallel/spread: a thread on a CPU moves off it and keeps its affinity; a
 * pool's worker that sits on its caller's CPU moves off before joining. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "parallel/pool.h"
#include "parallel/spread.h"

static cpu_set_t full;
static int home; /* a CPU of the full mask */

static bool pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0;
}

static bool mask_is_full(void) {
  cpu_set_t now;
  return sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, &full);
}

/* The helper on this thread: moves it off `home` (the OS may put it back
 * any time, so a few tries), leaves its affinity as it was. */
static void helper(void) {
  CHECK(!spread_off_cpu(-1));
  bool moved = false;
  for (int i = 0; i < 20 && !moved; i++) {
    CHECK(pin(home));
    CHECK(sched_setaffinity(0, sizeof full, &full) == 0); /* stays on home for now */
    if (spread_cpu() != home) continue;
    moved = spread_off_cpu(home) && spread_cpu() != home;
    CHECK(mask_is_full());
  }
  CHECK(moved);
  /* a thread elsewhere stays where it is */
  int here = spread_cpu();
  int other = -1;
  for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
    if (CPU_ISSET(c, &full) && c != here) other = c;
  if (spread_cpu() == here) CHECK(!spread_off_cpu(other) || spread_cpu() != other);
  /* a thread allowed only its own CPU cannot move */
  CHECK(pin(home));
  CHECK(spread_cpu() == home);
  CHECK(!spread_off_cpu(home));
  CHECK(spread_cpu() == home);
  cpu_set_t now;
  CHECK(sched_getaffinity(0, sizeof now, &now) == 0 && CPU_COUNT(&now) == 1 && CPU_ISSET(home, &now));
  CHECK(sched_setaffinity(0, sizeof full, &full) == 0);
}

/* The observer, in the worker: once per round, puts the worker on `home`
 * (the caller's only CPU) and gives it its full affinity back, so the next
 * job finds worker and caller on one CPU. */
static pthread_t caller_thread;
static atomic_bool put_home;
static void put_worker_home(void *ctx, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  (void)ctx, (void)b, (void)e, (void)t0, (void)t1;
  if (pthread_equal(pthread_self(), caller_thread) || !atomic_exchange(&put_home, false)) return;
  pin(home);
  sched_setaffinity(0, sizeof full, &full);
}

static atomic_long sum;
static void slow_add(void *ctx, int64_t b, int64_t e) {
  (void)ctx;
  volatile double x = 1;
  for (int64_t i = b; i < e; i++) {
    for (int k = 0; k < 2000; k++) x = x * 1.0000001 + 1e-9;
    atomic_fetch_add(&sum, (long)i);
  }
}

/* Rounds of: a job whose worker chunk puts the worker on the caller's CPU,
 * then jobs that find it there.  Returns the pool's spreads. */
static int colocate_rounds(bool spread_on) {
  setenv("SMELT_POOL_SPREAD", spread_on ? "1" : "0", 1);
  smelt_pool *p = NULL;
  CHECK_OK(pool_create(2, &p)); /* the worker starts with the full mask */
  unsetenv("SMELT_POOL_SPREAD");
  if (!p) return -1;
  CHECK(pin(home)); /* the caller: home only */
  caller_thread = pthread_self();
  pool_set_observer(p, put_worker_home, NULL);
  for (int round = 0; round < 20 && (!spread_on || pool_spreads(p) == 0); round++) {
    atomic_store(&put_home, true);
    for (int j = 0; j < 20; j++) {
      atomic_store(&sum, 0);
      pool_parallel_for(p, 64, 1, slow_add, NULL);
      CHECK(atomic_load(&sum) == 64 * 63 / 2);
    }
  }
  int n = pool_spreads(p);
  pool_free(p);
  CHECK(sched_setaffinity(0, sizeof full, &full) == 0);
  return n;
}

int main(void) {
  if (sched_getaffinity(0, sizeof full, &full) || CPU_COUNT(&full) < 2 || spread_cpu() < 0) {
    test_skip("spread", "needs two CPUs and sched_getcpu");
    return test_report("spread");
  }
  for (home = 0; !CPU_ISSET(home, &full); home++) {
  }
  helper();
  CHECK(colocate_rounds(true) > 0);
  CHECK(colocate_rounds(false) == 0);
  CHECK(pool_spreads(NULL) == 0);
  return test_report("spread");
}
