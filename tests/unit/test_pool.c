#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "parallel/pool.h"

static atomic_long total;
static void add_range(void *ctx, int64_t b, int64_t e) {
  long s = 0;
  for (int64_t i = b; i < e; i++) s += (long)i;
  atomic_fetch_add(&total, s);
  (void)ctx;
}

/* Every index of a job is visited exactly once, by that job's fn and ctx:
 * a worker that joined late, or ran a chunk of the previous job, would show
 * as a count of 0 or 2, or as a write to the wrong job's array. */
typedef struct {
  atomic_int *hits;
  int64_t n;
  int job;
  atomic_int *wrong;
} job_ctx;

static void mark(void *ctx, int64_t b, int64_t e) {
  job_ctx *j = ctx;
  if (b < 0 || e > j->n || b >= e) atomic_fetch_add(j->wrong, 1);
  for (int64_t i = b; i < e && i < j->n; i++) atomic_fetch_add(&j->hits[i], 1);
}

static int run_jobs(smelt_pool *p, int jobs, int sleep_every) {
  atomic_int wrong = 0;
  int bad = 0;
  for (int k = 0; k < jobs; k++) {
    int64_t n = 1 + (k * 7919) % 257;
    atomic_int *hits = calloc((size_t)n, sizeof *hits);
    job_ctx j = {hits, n, k, &wrong};
    pool_parallel_for(p, n, 1 + k % 3, mark, &j);
    for (int64_t i = 0; i < n; i++) bad += atomic_load(&hits[i]) != 1;
    free(hits);
    if (sleep_every && k % sleep_every == 0) {
      struct timespec ts = {0, 300000}; /* past a short spin: workers go to sleep */
      nanosleep(&ts, NULL);
    }
  }
  return bad + atomic_load(&wrong);
}

typedef struct {
  smelt_pool *p;
  int bad;
} caller_arg;

static void *caller(void *arg) {
  caller_arg *a = arg;
  a->bad = run_jobs(a->p, 2000, 0);
  return NULL;
}

static void nested(void *ctx, int64_t b, int64_t e) {
  smelt_pool *p = ctx;
  for (int64_t i = b; i < e; i++) pool_parallel_for(p, 10, 1, add_range, NULL);
}

/* The chunks of a job (pool_set_observer): none past a quarter of an even
 * home range, whole units of `grain` items but for the one ending at n,
 * and each home range ending in a one-unit chunk, so a thread done early
 * can take over all but a sliver of a slower one's rest. */
typedef struct {
  pthread_mutex_t mu;
  int64_t b[4096], e[4096];
  int n;
} chunk_log;

static void log_chunk(void *ctx, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  chunk_log *l = ctx;
  (void)t0, (void)t1;
  pthread_mutex_lock(&l->mu);
  if (l->n < 4096) l->b[l->n] = b, l->e[l->n] = e, l->n++;
  pthread_mutex_unlock(&l->mu);
}

static void chunk_shapes(void) {
  static chunk_log l = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0};
  for (int threads = 2; threads <= 3; threads++) {
    smelt_pool *p = NULL;
    CHECK_OK(pool_create(threads, &p));
    pool_set_observer(p, log_chunk, &l);
    int64_t cases[][2] = {{1024, 1}, {1000, 3}, {37, 1}, {96, 4}};
    for (int c = 0; c < 4; c++) {
      int64_t n = cases[c][0], grain = cases[c][1], units = (n + grain - 1) / grain;
      int64_t first = (units + threads * 4 - 1) / (threads * 4);
      l.n = 0;
      atomic_store(&total, 0);
      pool_parallel_for(p, n, grain, add_range, NULL);
      CHECK(atomic_load(&total) == n * (n - 1) / 2);
      for (int i = 0; i < l.n; i++) {
        int64_t size = l.e[i] - l.b[i];
        CHECK(size >= 1 && size <= first * grain);
        CHECK(l.b[i] % grain == 0 && (size % grain == 0 || l.e[i] == n));
        for (int s = 1; s <= threads; s++) /* a home range's last chunk: one unit */
          if (l.e[i] == (s == threads ? n : s * units / threads * grain)) CHECK(size <= grain);
      }
    }
    pool_set_observer(p, NULL, NULL);
    pool_free(p);
  }
}

/* The contention score, fed by hand (no timing): late joins make the pool
 * dearer, joins on time and the passing of time make it cheap again. */
static void contention(void) {
  smelt_pool *p = NULL;
  CHECK_OK(pool_create(2, &p));
  int64_t t = 1000000000LL;
  CHECK(pool_thread_cost_at(p, t) == 1);
  pool_note_join(p, 100000, 4, 8, 1000, false, t); /* on time */
  CHECK(pool_thread_cost_at(p, t) == 1);
  pool_note_join(p, 100000, 4, 8, 5000000, false, t); /* one late join: not yet */
  CHECK(pool_thread_cost_at(p, t) == 1);
  pool_note_join(p, 100000, 4, 8, 5000000, false, t + 1000); /* a second */
  CHECK(pool_thread_cost_at(p, t + 2000) == 1); /* contended: the first job is a probe */
  CHECK(pool_thread_cost_at(p, t + 2500) == POOL_CONTENDED_COST); /* the rest stay on the caller */
  /* a wait within two of the caller's chunks plus 30 us is on time */
  pool_note_join(p, 400000, 4, 8, 2 * 100000 + 29000, false, t + 3000);
  CHECK(pool_thread_cost_at(p, t + 4000) == POOL_CONTENDED_COST);
  for (int i = 0; i < 16; i++) pool_note_join(p, 100000, 4, 8, 0, false, t + 5000);
  CHECK(pool_thread_cost_at(p, t + 6000) == 1); /* recovered by joins on time */
  pool_note_join(p, 0, 0, 8, 5000000, false, t + 7000);
  pool_note_join(p, 0, 0, 8, 5000000, false, t + 8000);
  CHECK(pool_thread_cost_at(p, t + 9000) == POOL_CONTENDED_COST);
  CHECK(pool_thread_cost_at(p, t + 8000 + 60000000LL) == 1); /* 60 ms without a late join */
  pool_free(p);
  smelt_pool *one = NULL;
  CHECK_OK(pool_create(1, &one));
  for (int i = 0; i < 4; i++) pool_note_join(one, 0, 0, 8, 5000000, false, t);
  CHECK(pool_thread_cost_at(one, t) == 1); /* no workers to wait for */
  pool_free(one);
  CHECK(pool_thread_cost(NULL) == 1);

  /* a worker that takes no chunk of a 100 us job: three in a row count */
  CHECK_OK(pool_create(2, &p));
  pool_note_join(p, 100000, 8, 8, 0, false, t);
  pool_note_join(p, 100000, 8, 8, 0, false, t);
  CHECK(pool_thread_cost_at(p, t) == 1);
  pool_note_join(p, 100000, 8, 8, 0, false, t);
  CHECK(pool_thread_cost_at(p, t) == 1); /* the probe */
  CHECK(pool_thread_cost_at(p, t) == POOL_CONTENDED_COST);
  pool_free(p);

  /* probes: one job per gap goes to the threads; a late probe doubles the
   * gap, a probe on time takes points off and resets it */
  CHECK_OK(pool_create(2, &p));
  for (int i = 0; i < 6; i++) pool_note_join(p, 100000, 4, 8, 5000000, false, t); /* score 48 */
  CHECK(pool_thread_cost_at(p, t) == 1);
  CHECK(pool_thread_cost_at(p, t + 1900000) == POOL_CONTENDED_COST); /* within 2 ms */
  pool_note_join(p, 100000, 4, 8, 5000000, false, t + 100000);              /* the probe was late */
  CHECK(pool_thread_cost_at(p, t + 2100000) == POOL_CONTENDED_COST); /* gap now 4 ms */
  CHECK(pool_thread_cost_at(p, t + 4100000) == 1);
  for (int i = 0; i < 10; i++) pool_note_join(p, 100000, 4, 8, 0, false, t + 4200000); /* on time */
  CHECK(pool_thread_cost_at(p, t + 4300000) == 1); /* 48 - 10 * 4 < 12: back to every thread */
  CHECK(pool_thread_cost_at(p, t + 4300001) == 1);
  pool_free(p);
  /* but not for jobs too short for a worker to join, nor one-chunk jobs */
  CHECK_OK(pool_create(2, &p));
  for (int i = 0; i < 8; i++) pool_note_join(p, 15000, 8, 8, 0, false, t);
  for (int i = 0; i < 8; i++) pool_note_join(p, 100000, 1, 1, 0, false, t);
  CHECK(pool_thread_cost_at(p, t) == 1);
  pool_free(p);
  /* jobs that had to wake sleeping workers (the first job after a pause):
   * late or idle joins are the wake-up, not contention -- a session run at
   * intervals, one large product per run, keeps its threads -- while a job
   * on time still counts, and late joins of spinning workers still do */
  CHECK_OK(pool_create(2, &p));
  for (int i = 0; i < 20; i++) {
    pool_note_join(p, 100000, 4, 8, 5000000, true, t + i * 60000000LL); /* late after a wake-up */
    pool_note_join(p, 100000, 8, 8, 0, true, t + i * 60000000LL);       /* idle after a wake-up */
    CHECK(pool_thread_cost_at(p, t + i * 60000000LL + 1) == 1);
    CHECK(pool_thread_cost_at(p, t + i * 60000000LL + 2) == 1);
  }
  pool_note_join(p, 100000, 4, 8, 5000000, false, t);
  pool_note_join(p, 100000, 4, 8, 5000000, false, t + 1000);
  CHECK(pool_thread_cost_at(p, t + 2000) == 1); /* the probe */
  CHECK(pool_thread_cost_at(p, t + 2500) == POOL_CONTENDED_COST);
  for (int i = 0; i < 16; i++) pool_note_join(p, 100000, 4, 8, 0, true, t + 3000); /* on time */
  CHECK(pool_thread_cost_at(p, t + 4000) == 1);
  pool_free(p);
}

/* Waits (up to ~5 s, checking every ms) until n workers sleep; true if so. */
static bool sleepers_reach(smelt_pool *p, int n) {
  for (int i = 0; i < 5000; i++) {
    if (pool_sleepers(p) == n) return true;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return false;
}

/* pool_wake: sleeping workers wake and spin (none sleeps), go back to sleep
 * once their spin runs out, and the pool's jobs still run right; a wake-up
 * with no sleeper, on a NULL or one-thread pool, does nothing. */
static void wake(void) {
  /* a 20 ms spin: both woken workers must be seen awake at once by a 1 ms
   * poll; with 2 ms, the sanitizer run's 4 test processes on 2 cores kept
   * one worker off a core until the other had gone back to sleep */
  setenv("SMELT_SPIN_US", "20000", 1);
  smelt_pool *p = NULL;
  CHECK_OK(pool_create(3, &p));
  unsetenv("SMELT_SPIN_US");
  CHECK(sleepers_reach(p, 2));
  pool_wake(p);
  CHECK(sleepers_reach(p, 0)); /* a missed wake-up leaves them asleep for good */
  CHECK(sleepers_reach(p, 2));
  for (int k = 0; k < 20; k++) {
    pool_wake(p);
    atomic_store(&total, 0);
    pool_parallel_for(p, 500, 1, add_range, NULL);
    CHECK(atomic_load(&total) == 500L * 499 / 2);
  }
  pool_wake(NULL);
  pool_free(p);
  CHECK_OK(pool_create(1, &p));
  pool_wake(p);
  CHECK(pool_sleepers(p) == 0);
  pool_free(p);
}

int main(void) {
  chunk_shapes();
  contention();
  wake();
  for (int threads = 1; threads <= 4; threads++) {
    smelt_pool *p = NULL;
    CHECK_OK(pool_create(threads, &p));
    CHECK(pool_threads(p) == threads);
    for (int64_t n = 0; n < 2000; n += 37) {
      atomic_store(&total, 0);
      pool_parallel_for(p, n, 1, add_range, NULL);
      CHECK(atomic_load(&total) == n * (n - 1) / 2);
    }
    pool_free(p);
  }
  atomic_store(&total, 0);
  pool_parallel_for(NULL, 10, 1, add_range, NULL);
  CHECK(atomic_load(&total) == 45);

  /* spinning hand-over (default), short spins that run out, and no spin
   * (workers always sleep), each with back-to-back and spaced jobs */
  const char *spins[] = {NULL, "50", "0"};
  for (int s = 0; s < 3; s++) {
    if (spins[s]) setenv("SMELT_SPIN_US", spins[s], 1);
    for (int threads = 2; threads <= 5; threads += 3) {
      smelt_pool *p = NULL;
      CHECK_OK(pool_create(threads, &p));
      CHECK(run_jobs(p, 3000, 0) == 0);
      CHECK(run_jobs(p, 300, 7) == 0);
      /* two callers at once: jobs serialize */
      caller_arg a = {p, 0}, b = {p, 0};
      pthread_t ta, tb;
      CHECK(pthread_create(&ta, NULL, caller, &a) == 0);
      CHECK(pthread_create(&tb, NULL, caller, &b) == 0);
      pthread_join(ta, NULL);
      pthread_join(tb, NULL);
      CHECK(a.bad == 0 && b.bad == 0);
      /* a parallel_for inside a job runs inline */
      atomic_store(&total, 0);
      pool_parallel_for(p, 64, 1, nested, p);
      CHECK(atomic_load(&total) == 64 * 45);
      pool_free(p);
    }
  }
  unsetenv("SMELT_SPIN_US");
  return test_report("pool");
}
