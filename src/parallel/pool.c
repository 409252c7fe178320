/* Thread pool.  Between jobs a worker spins for a short while (default
 * 200 us, SMELT_SPIN_US) watching for the next job, then sleeps on a
 * condition variable, so back-to-back parallel regions -- one per operator
 * in a model run -- hand work over without a kernel round trip, while an idle
 * session costs no CPU once the spin has run out.  The caller waits for the
 * workers the same way.  One job at a time (callers serialize on job_lock);
 * each thread claims chunks from its own contiguous home range of the items,
 * then from the others' (run_chunks), the chunks shrinking towards a
 * range's end (claim).  A job made
 * inside a run that can be stopped (parallel/run_ctl.h) checks the run before
 * each chunk and leaves the rest undone once it has stopped. */
#include "parallel/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "parallel/run_ctl.h"
#include "parallel/spread.h"
#include "util/bufcache.h"
#include "util/err.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define PROBE_MIN_NS 2000000LL /* a contended pool's first probe gap (see pool_note_join) */
#define SPREAD_GAP_NS 1000000LL /* a worker moves itself off the caller's CPU at most once per ms */

/* A claim word alone on its cache line: the threads claim from their own
 * word, so no line bounces between them while each works its home range. */
typedef struct pool_slot {
  atomic_uint_fast64_t w;
  char pad[64 - sizeof(atomic_uint_fast64_t)];
} pool_slot;

struct pool_worker {
  struct smelt_pool *p;
  int idx; /* 1..n_threads-1; the caller is 0 */
};

struct smelt_pool {
  int n_threads;
  int64_t spin_ns;
  bool spread;     /* move a worker that finds itself on the caller's CPU (parallel/spread.h) */
  pthread_t *workers;
  pthread_mutex_t job_lock; /* one parallel_for at a time */
  pthread_mutex_t mu;       /* guards the sleeping side of the handshakes */
  pthread_cond_t wake, done;
  atomic_uint_fast64_t generation; /* bumped once a job is published */
  atomic_bool stop;
  atomic_int sleepers;     /* workers asleep or going to sleep on `wake` */
  atomic_uint nudges;      /* bumped (under mu) by pool_wake: sleeping workers go back to spinning */
  atomic_bool caller_asleep;
  /* The current job: written only while no worker is in it (busy == 0 and
   * the claim word carries another job's tag). */
  void (*fn)(void *, int64_t, int64_t);
  void *ctx;
  int64_t n, unit, n_units, first; /* items, items a unit, units, a range's first chunks (units) */
  /* Claim words, one per thread (pool_slot): the job's tag in the high 32
   * bits, the next unit of that thread's home range in the low 32.  A
   * claim is a compare-and-swap that checks the tag (claim).  The caller
   * retags the words when it closes a job, so a worker that wakes late
   * never takes anything from them. */
  pool_slot *claims;
  atomic_int_fast64_t claimed; /* the job's chunks, all threads (added as each leaves it) */
  struct pool_worker *wargs; /* per worker: the pool and its thread index */
  atomic_int busy; /* workers inside the current job */
  atomic_int job_cpu; /* the CPU the caller posted the current job from (-1: unknown) */
  atomic_int spreads; /* workers moved off the caller's CPU so far (for tests) */
  struct bufcache *job_bufs; /* the caller's buffer cache, current in workers during the job */
  run_ctl *job_ctl; /* the caller's run control (parallel/run_ctl.h): checked before each chunk */
  pool_chunk_observer obs, job_obs; /* set / in force for the current job */
  void *obs_ctx, *job_obs_ctx;
  /* Contention (see pool_thread_cost): raised when the caller had to wait
   * for a worker long after finishing its own chunks, lowered by joins on
   * time.  Written under job_lock, read anywhere. */
  atomic_int late_score;
  atomic_int_fast64_t last_late_ns;
  atomic_int_fast64_t last_probe_ns; /* while contended: the last job let through as a probe */
  atomic_int_fast64_t probe_gap_ns;  /* ... and how long until the next one */
  atomic_bool probe_out;             /* a probe was let through and has not joined yet */
};

static _Thread_local const smelt_pool *in_pool_job;

int pool_machine_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Spins until pred(p, arg) holds or spin_ns has passed; true if it holds.
 * After the first few microseconds each round yields the CPU, so a thread
 * that shares its core with the one it waits for does not starve it. */
static bool spin_until(const smelt_pool *p, bool (*pred)(const smelt_pool *, uint64_t), uint64_t arg) {
  if (pred(p, arg)) return true;
  if (p->spin_ns <= 0) return false;
  int64_t start = now_ns(), t = start;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      cpu_relax();
      if (pred(p, arg)) return true;
    }
    t = now_ns();
    if (t - start >= p->spin_ns) return false;
    if (t - start >= 20000) sched_yield();
  }
}

static bool job_posted(const smelt_pool *p, uint64_t seen) {
  return atomic_load(&p->generation) != seen || atomic_load(&p->stop);
}

static bool job_idle(const smelt_pool *p, uint64_t unused) {
  (void)unused;
  return atomic_load(&p->busy) == 0;
}

static uint32_t job_tag(uint64_t gen) { return (uint32_t)gen; }

/* Thread s's home range of units: [home(s), home(s + 1)). */
static int64_t home(const smelt_pool *p, int s) { return (int64_t)s * p->n_units / p->n_threads; }

/* Claims the next chunk of range s for the job tagged `tag`: its first
 * unit in *u, its size returned; 0 when the range is drained, -1 when the
 * job is closed.  A chunk is a quarter of an even home range (p->first)
 * while more than twice that is left, then half of what is left: the
 * last chunks of a range are a unit or two, so a thread that finishes
 * early takes over all but a sliver of a slower thread's rest instead of
 * waiting out one of its quarter-range chunks (on a 2-core machine the
 * threads of a resnet50 run waited 3 ms of 66 that way). */
static int64_t claim(smelt_pool *p, int s, uint32_t tag, int64_t *u) {
  uint64_t w = atomic_load_explicit(&p->claims[s].w, memory_order_relaxed);
  for (;;) {
    if ((uint32_t)(w >> 32) != tag) return -1;
    int64_t i = (int64_t)(uint32_t)w, left = home(p, s + 1) - i;
    if (left <= 0) return 0;
    int64_t size = (left + 1) / 2 < p->first ? (left + 1) / 2 : p->first;
    if (atomic_compare_exchange_weak(&p->claims[s].w, &w, w + (uint64_t)size)) {
      *u = i;
      return size;
    }
  }
}

/* Runs chunks of the job tagged `tag` until none is left; how many it ran.
 * Thread `self` takes its home range first, in order, then what is left
 * of the others' (the next thread's first), so a thread that starts late
 * or loses its core holds up at most the chunk it has claimed.  Home
 * ranges are contiguous: in back-to-back jobs split the same way (one
 * layer's output rows, the next layer's input rows) a thread mostly
 * reads what it wrote itself, from its own cache, instead of lines the
 * other cores hold (docs/PARALLEL.md). */
static int64_t run_chunks(smelt_pool *p, uint32_t tag, int self) {
  int64_t ran = 0;
  const smelt_pool *saved = in_pool_job;
  in_pool_job = p;
  bufcache *saved_bufs = bufcache_enter(p->job_bufs);
  for (int k = 0, s = self; k < p->n_threads;) {
    /* a stopped run leaves its remaining chunks undone */
    if (p->job_ctl && run_ctl_poll(p->job_ctl)) break;
    int64_t u = 0, size = claim(p, s, tag, &u);
    if (size < 0) break; /* the job is closed */
    if (size == 0) { /* range s is drained: the next one */
      k++, s = s + 1 < p->n_threads ? s + 1 : 0;
      continue;
    }
    ran++;
    int64_t b = u * p->unit, e = (u + size) * p->unit < p->n ? (u + size) * p->unit : p->n;
    if (!p->job_obs) {
      p->fn(p->ctx, b, e);
      continue;
    }
    int64_t t0 = now_ns();
    p->fn(p->ctx, b, e);
    p->job_obs(p->job_obs_ctx, b, e, t0, now_ns());
  }
  atomic_fetch_add_explicit(&p->claimed, ran, memory_order_relaxed);
  bufcache_enter(saved_bufs);
  in_pool_job = saved;
  return ran;
}

/* A worker sharing the caller's CPU only takes turns with it (and, once
 * spinning, is never placed again by the OS): it moves off (spread.h), at
 * most once per SPREAD_GAP_NS. */
static void keep_off_caller(smelt_pool *p, int64_t *last_spread) {
  if (!p->spread) return;
  int64_t t = now_ns();
  if (t - *last_spread >= SPREAD_GAP_NS && spread_off_cpu(atomic_load_explicit(&p->job_cpu, memory_order_relaxed))) {
    *last_spread = t;
    atomic_fetch_add_explicit(&p->spreads, 1, memory_order_relaxed);
  }
}

static void *worker_main(void *arg) {
  smelt_pool *p = ((struct pool_worker *)arg)->p;
  int self = ((struct pool_worker *)arg)->idx;
  uint64_t seen = 0;
  int64_t last_spread = -SPREAD_GAP_NS;
  for (;;) {
    if (!spin_until(p, job_posted, seen)) {
      /* Dekker with the poster: it bumps generation then reads sleepers;
       * we raise sleepers then re-read generation under mu. */
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      unsigned nudge = atomic_load(&p->nudges);
      while (!job_posted(p, seen) && atomic_load(&p->nudges) == nudge) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
      if (!job_posted(p, seen)) { /* woken by pool_wake ahead of a run: spin for its first job */
        keep_off_caller(p, &last_spread);
        continue;
      }
    }
    if (atomic_load(&p->stop)) break;
    seen = atomic_load(&p->generation);
    keep_off_caller(p, &last_spread);
    /* Join, then check the job is still open (Dekker with the closer:
     * it retags the claim words, then reads busy). */
    atomic_fetch_add(&p->busy, 1);
    if ((uint32_t)(atomic_load(&p->claims[0].w) >> 32) == job_tag(seen)) run_chunks(p, job_tag(seen), self);
    if (atomic_fetch_sub(&p->busy, 1) == 1 && atomic_load(&p->caller_asleep)) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
  return NULL;
}

static int64_t spin_from_env(void) {
  const char *s = getenv("SMELT_SPIN_US");
  if (!s || !*s) return 200000;
  char *end;
  long v = strtol(s, &end, 10);
  if (*end || v < 0) return 200000;
  return (int64_t)(v > 1000000 ? 1000000 : v) * 1000;
}

smelt_status pool_create(int n_threads, smelt_pool **out) {
  if (n_threads <= 0) n_threads = pool_machine_cores();
  if (n_threads > 1024) return err_set(SMELT_ERR_INVALID_ARGUMENT, "threads %d is more than 1024", n_threads);
  smelt_pool *p = calloc(1, sizeof *p);
  if (!p) return err_nomem("thread pool", sizeof *p);
  p->n_threads = n_threads;
  p->spin_ns = spin_from_env();
  p->spread = spread_enabled();
  pthread_mutex_init(&p->job_lock, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->generation, 0);
  atomic_init(&p->stop, false);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->nudges, 0);
  atomic_init(&p->caller_asleep, false);
  atomic_init(&p->busy, 0);
  atomic_init(&p->job_cpu, -1);
  atomic_init(&p->spreads, 0);
  atomic_init(&p->late_score, 0);
  atomic_init(&p->last_late_ns, 0);
  atomic_init(&p->last_probe_ns, 0);
  atomic_init(&p->probe_gap_ns, PROBE_MIN_NS);
  atomic_init(&p->probe_out, false);
  atomic_init(&p->claimed, 0);
  p->claims = aligned_alloc(64, sizeof(pool_slot) * (size_t)n_threads);
  if (!p->claims) {
    pool_free(p);
    return err_nomem("thread pool", sizeof(pool_slot) * (size_t)n_threads);
  }
  for (int i = 0; i < n_threads; i++) atomic_init(&p->claims[i].w, 0);
  if (n_threads > 1) {
    p->workers = calloc((size_t)n_threads - 1, sizeof(pthread_t));
    p->wargs = calloc((size_t)n_threads - 1, sizeof(struct pool_worker));
    if (!p->workers || !p->wargs) {
      pool_free(p);
      return err_nomem("thread pool", (sizeof(pthread_t) + sizeof(struct pool_worker)) * (size_t)n_threads);
    }
    for (int i = 0; i < n_threads - 1; i++) {
      p->wargs[i] = (struct pool_worker){p, i + 1};
      if (pthread_create(&p->workers[i], NULL, worker_main, &p->wargs[i])) {
        p->n_threads = i + 1; /* only i workers were started */
        pool_free(p);
        return err_set(SMELT_ERR_NOMEM, "could not start thread %d of %d", i + 1, n_threads);
      }
    }
  }
  *out = p;
  return SMELT_OK;
}

void pool_free(smelt_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, true);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; p->workers && i < p->n_threads - 1; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  free(p->wargs);
  free(p->claims);
  pthread_mutex_destroy(&p->job_lock);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p);
}

int pool_threads(const smelt_pool *p) { return p ? p->n_threads : 1; }

void pool_wake(smelt_pool *p) {
  if (!p || p->n_threads == 1 || in_pool_job || atomic_load(&p->sleepers) == 0) return;
  if (p->spread) atomic_store_explicit(&p->job_cpu, spread_cpu(), memory_order_relaxed);
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->nudges, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
}

void pool_parallel_for(smelt_pool *p, int64_t n, int64_t grain,
                       void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->n_threads == 1 || n <= grain || in_pool_job) {
    run_ctl *ctl = p && !in_pool_job && n > grain ? run_ctl_current() : NULL;
    if (!ctl) {
      fn(ctx, 0, n);
      return;
    }
    /* one thread, in a run that may be stopped: 8 chunks with a check before each */
    int64_t chunk = (n + 7) / 8 > grain ? (n + 7) / 8 : grain;
    for (int64_t b = 0; b < n && !run_ctl_poll(ctl); b += chunk) fn(ctx, b, b + chunk < n ? b + chunk : n);
    return;
  }
  pthread_mutex_lock(&p->job_lock);
  /* Units of at least `grain` items, at most 2^31 of them; a home range's
   * first chunks ~a quarter of it (claim), which balances load without
   * much claiming overhead. */
  int64_t unit = (n + INT32_MAX - 1) / INT32_MAX > grain ? (n + INT32_MAX - 1) / INT32_MAX : grain;
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->unit = unit;
  p->n_units = (n + unit - 1) / unit;
  p->first = (p->n_units + (int64_t)p->n_threads * 4 - 1) / ((int64_t)p->n_threads * 4);
  atomic_store_explicit(&p->claimed, 0, memory_order_relaxed);
  p->job_obs = p->obs;
  p->job_obs_ctx = p->obs_ctx;
  p->job_bufs = bufcache_current();
  p->job_ctl = run_ctl_current();
  if (p->spread) atomic_store_explicit(&p->job_cpu, spread_cpu(), memory_order_relaxed);
  uint64_t gen = atomic_load(&p->generation) + 1;
  for (int s = 0; s < p->n_threads; s++) atomic_store(&p->claims[s].w, (uint64_t)job_tag(gen) << 32 | (uint64_t)home(p, s));
  atomic_store(&p->generation, gen); /* publishes the job */
  bool woke = atomic_load(&p->sleepers) > 0;
  if (woke) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  int64_t t0 = now_ns();
  int64_t ran = run_chunks(p, job_tag(gen), 0);
  int64_t t1 = now_ns();
  /* Close the job: workers that have not joined yet never will. */
  for (int s = 0; s < p->n_threads; s++) atomic_store(&p->claims[s].w, (uint64_t)(job_tag(gen) ^ 0x80000000u) << 32);
  if (!spin_until(p, job_idle, 0)) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_asleep, true);
    while (!job_idle(p, 0)) pthread_cond_wait(&p->done, &p->mu);
    atomic_store(&p->caller_asleep, false);
    pthread_mutex_unlock(&p->mu);
  }
  int64_t t2 = now_ns();
  pool_note_join(p, t1 - t0, ran, atomic_load_explicit(&p->claimed, memory_order_relaxed), t2 - t1, woke, t2);
  pthread_mutex_unlock(&p->job_lock);
}

bool pool_stopping(void) {
  run_ctl *c = in_pool_job ? in_pool_job->job_ctl : run_ctl_current();
  return c && run_ctl_poll(c);
}

/* A worker still inside the job well after the caller ran out of chunks
 * (more than two of the caller's chunks plus 30 us) was descheduled: the
 * machine has more runnable threads than cores.  So, less surely, was one
 * that took no chunk of a job that kept the caller busy for 20 us (a
 * spinning worker joins within a microsecond; the wake-up was paid for
 * nothing).  A late join adds 8 points, an idle worker 4 (at most 48 in
 * all), a join on time takes 1 off; from 12 points (two late joins, or
 * three idle ones, close together) the pool is contended until the points
 * fall below 12 or 50 ms pass without a late or idle join.
 *
 * A contended pool checks itself: every probe gap (2 ms at first) one job
 * that a threshold rule would have kept on the caller goes to the threads
 * (pool_thread_cost answers 1 once).  A probe joined on time takes 4 points
 * off and the gap back to 2 ms, so a pool that was only briefly crowded
 * (another runtime's threads spinning down, a burst of other work) returns
 * to every core within a few ms instead of staying serial for 50 ms; a late
 * or idle probe doubles the gap (up to 50 ms), so under lasting contention
 * probes cost little.
 *
 * A job that had to wake workers from their sleep (they sleep once their
 * spin, SMELT_SPIN_US, runs out between jobs: the first job of a run after
 * a pause) is not evidence either way: a condition-variable wake-up takes
 * tens to hundreds of microseconds, so such a worker joins late or takes
 * nothing on an idle machine too.  Its lateness adds no points.  Counting
 * it made a session run at intervals (a server between requests, a
 * benchmark taking turns with another runtime) look contended after a few
 * runs of one large product each, and run them on one thread. */
#define LATE_POINTS 8
#define IDLE_POINTS 4
#define PROBE_POINTS 4
#define CONTENDED_SCORE 12
#define CONTENDED_NS 50000000LL
void pool_note_join(smelt_pool *p, int64_t own_ns, int64_t own_chunks, int64_t n_chunks, int64_t wait_ns,
                    bool woke, int64_t now) {
  if (!p) return;
  int64_t per = own_chunks > 0 ? own_ns / own_chunks : own_ns;
  int score = atomic_load_explicit(&p->late_score, memory_order_relaxed), add = 0;
  if (wait_ns > 2 * per + 30000) add = LATE_POINTS;
  else if (own_chunks >= n_chunks && n_chunks >= 2 && own_ns > 20000) add = IDLE_POINTS;
  if (add && woke) return; /* a wake-up's latency, not contention */
  bool contended = score >= CONTENDED_SCORE;
  if (add) {
    score = score + add > 4 * CONTENDED_SCORE ? 4 * CONTENDED_SCORE : score + add;
    atomic_store_explicit(&p->last_late_ns, now, memory_order_relaxed);
    if (contended && atomic_exchange_explicit(&p->probe_out, false, memory_order_relaxed)) {
      int64_t gap = atomic_load_explicit(&p->probe_gap_ns, memory_order_relaxed) * 2;
      atomic_store_explicit(&p->probe_gap_ns, gap > CONTENDED_NS ? CONTENDED_NS : gap, memory_order_relaxed);
    }
  } else if (contended) {
    score = score > PROBE_POINTS ? score - PROBE_POINTS : 0;
    atomic_store_explicit(&p->probe_out, false, memory_order_relaxed);
    atomic_store_explicit(&p->probe_gap_ns, PROBE_MIN_NS, memory_order_relaxed);
  } else if (score > 0) {
    score--;
  }
  atomic_store_explicit(&p->late_score, score, memory_order_relaxed);
}

int pool_thread_cost_at(const smelt_pool *cp, int64_t now) {
  if (!cp || cp->n_threads <= 1) return 1;
  smelt_pool *p = (smelt_pool *)cp; /* the probe clock is bookkeeping, not the pool's state */
  if (atomic_load_explicit(&p->late_score, memory_order_relaxed) < CONTENDED_SCORE) return 1;
  int64_t last = atomic_load_explicit(&p->last_late_ns, memory_order_relaxed);
  if (now - last >= CONTENDED_NS) return 1;
  int_fast64_t probe = atomic_load_explicit(&p->last_probe_ns, memory_order_relaxed);
  if (now - probe >= atomic_load_explicit(&p->probe_gap_ns, memory_order_relaxed) &&
      atomic_compare_exchange_strong_explicit(&p->last_probe_ns, &probe, now, memory_order_relaxed,
                                              memory_order_relaxed))
  {
    atomic_store_explicit(&p->probe_out, true, memory_order_relaxed);
    return 1; /* this job is the probe */
  }
  return POOL_CONTENDED_COST;
}

int pool_thread_cost(const smelt_pool *p) {
  if (!p || p->n_threads <= 1) return 1;
  return pool_thread_cost_at(p, now_ns());
}

void pool_set_observer(smelt_pool *p, pool_chunk_observer fn, void *ctx) {
  if (!p) return;
  pthread_mutex_lock(&p->job_lock);
  p->obs = fn;
  p->obs_ctx = fn ? ctx : NULL;
  pthread_mutex_unlock(&p->job_lock);
}

int pool_spreads(const smelt_pool *p) { return p ? atomic_load_explicit(&((smelt_pool *)p)->spreads, memory_order_relaxed) : 0; }

int pool_sleepers(const smelt_pool *p) { return p ? atomic_load(&((smelt_pool *)p)->sleepers) : 0; }
