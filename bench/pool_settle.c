/* bench/pool_settle.c: parallel jobs after an idle pause, with and without
 * moving a worker off its caller's CPU (parallel/spread.h), in one process.
 *
 * usage: build/pool_settle [PAUSE_MS=50] [ROUNDS=30] [JOBS=12]
 *
 * Two 2-thread pools, one made with SMELT_POOL_SPREAD=0 and one with it on,
 * take turns: each turn pauses PAUSE_MS (the workers' spin runs out, they
 * sleep), then runs JOBS groups of 10 parallel jobs (64 chunks of ~1 us of
 * arithmetic each).  Prints each pool's median time per group position
 * after the pause, the share of worker chunks run on the CPU the caller ran
 * on when it posted the group, and how often the workers moved. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "parallel/pool.h"

static int64_t now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static pthread_t caller;
static atomic_int caller_cpu, on_caller, elsewhere;

static void work(void *ctx, int64_t b, int64_t e) {
  (void)ctx;
  volatile double x = 1;
  for (int64_t i = b; i < e; i++)
    for (int k = 0; k < 400; k++) x = x * 1.0000001 + 1e-9;
}

static void observe(void *ctx, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  (void)ctx, (void)b, (void)e, (void)t0, (void)t1;
  if (pthread_equal(pthread_self(), caller)) return;
  atomic_fetch_add(sched_getcpu() == atomic_load(&caller_cpu) ? &on_caller : &elsewhere, 1);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int pause_ms = argc > 1 ? atoi(argv[1]) : 50, rounds = argc > 2 ? atoi(argv[2]) : 30;
  int jobs = argc > 3 ? atoi(argv[3]) : 12;
  if (rounds < 1 || rounds > 1000 || jobs < 1 || jobs > 100 || pause_ms < 0) {
    fprintf(stderr, "usage: pool_settle [PAUSE_MS] [ROUNDS 1..1000] [JOBS 1..100]\n");
    return 2;
  }
  smelt_pool *p[2];
  for (int v = 0; v < 2; v++) {
    setenv("SMELT_POOL_SPREAD", v ? "1" : "0", 1);
    if (pool_create(2, &p[v])) return 1;
    pool_set_observer(p[v], observe, NULL);
  }
  caller = pthread_self();
  double *t = calloc((size_t)2 * rounds * jobs, sizeof *t);
  long chunks[2][2] = {{0, 0}, {0, 0}};
  if (!t) return 1;
  for (int r = 0; r < rounds; r++)
    for (int turn = 0; turn < 2; turn++) {
      int v = (r + turn) % 2;
      struct timespec ts = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
      atomic_store(&on_caller, 0);
      atomic_store(&elsewhere, 0);
      for (int j = 0; j < jobs; j++) {
        atomic_store(&caller_cpu, sched_getcpu());
        int64_t t0 = now();
        for (int q = 0; q < 10; q++) pool_parallel_for(p[v], 64, 1, work, NULL);
        t[((size_t)v * jobs + j) * rounds + r] = (now() - t0) / 1e3;
      }
      chunks[v][0] += atomic_load(&on_caller);
      chunks[v][1] += atomic_load(&elsewhere);
    }
  for (int v = 0; v < 2; v++) {
    printf("spread %s: median us per group after the pause:", v ? "on " : "off");
    for (int j = 0; j < jobs; j++) {
      double *a = &t[((size_t)v * jobs + j) * rounds];
      qsort(a, (size_t)rounds, sizeof *a, cmp);
      printf(" %.0f", a[rounds / 2]);
    }
    long all = chunks[v][0] + chunks[v][1];
    printf("\n  worker chunks %ld (%.1f%% on the caller's CPU), moves %d\n", all,
           all ? 100.0 * chunks[v][0] / all : 0.0, pool_spreads(p[v]));
    pool_free(p[v]);
  }
  free(t);
  return 0;
}
