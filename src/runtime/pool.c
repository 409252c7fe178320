/* Thread pool: workers block on a condition variable between jobs, so an idle
 * session costs no CPU.  One job at a time (callers serialize on job_lock);
 * work is split into chunks claimed with an atomic counter. */
#include "runtime/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"

struct smelt_pool {
  int n_threads;
  pthread_t *workers;
  pthread_mutex_t job_lock; /* one parallel_for at a time */
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  uint64_t generation;
  bool stop;
  /* the current job */
  void (*fn)(void *, int64_t, int64_t);
  void *ctx;
  int64_t n, chunk;
  atomic_int_fast64_t next;
  int active; /* workers still inside the current job */
  pool_chunk_observer obs, job_obs; /* set / in force for the current job */
  void *obs_ctx, *job_obs_ctx;
};

static _Thread_local const smelt_pool *in_pool_job;

int pool_machine_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

static void run_chunks(smelt_pool *p) {
  const smelt_pool *saved = in_pool_job;
  in_pool_job = p;
  for (;;) {
    int64_t b = atomic_fetch_add(&p->next, p->chunk);
    if (b >= p->n) break;
    int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
    if (!p->job_obs) {
      p->fn(p->ctx, b, e);
      continue;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    p->fn(p->ctx, b, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    p->job_obs(p->job_obs_ctx, b, e, t0.tv_sec * 1000000000LL + t0.tv_nsec,
               t1.tv_sec * 1000000000LL + t1.tv_nsec);
  }
  in_pool_job = saved;
}

static void *worker_main(void *arg) {
  smelt_pool *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_signal(&p->done);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

smelt_status pool_create(int n_threads, smelt_pool **out) {
  if (n_threads <= 0) n_threads = pool_machine_cores();
  if (n_threads > 1024) return err_set(SMELT_ERR_INVALID_ARGUMENT, "threads %d is more than 1024", n_threads);
  smelt_pool *p = calloc(1, sizeof *p);
  if (!p) return err_nomem("thread pool", sizeof *p);
  p->n_threads = n_threads;
  pthread_mutex_init(&p->job_lock, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  if (n_threads > 1) {
    p->workers = calloc((size_t)n_threads - 1, sizeof(pthread_t));
    if (!p->workers) {
      pool_free(p);
      return err_nomem("thread pool", sizeof(pthread_t) * (size_t)n_threads);
    }
    for (int i = 0; i < n_threads - 1; i++) {
      if (pthread_create(&p->workers[i], NULL, worker_main, p)) {
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
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; p->workers && i < p->n_threads - 1; i++) pthread_join(p->workers[i], NULL);
  free(p->workers);
  pthread_mutex_destroy(&p->job_lock);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p);
}

int pool_threads(const smelt_pool *p) { return p ? p->n_threads : 1; }

void pool_parallel_for(smelt_pool *p, int64_t n, int64_t grain,
                       void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->n_threads == 1 || n <= grain || in_pool_job) {
    fn(ctx, 0, n);
    return;
  }
  pthread_mutex_lock(&p->job_lock);
  /* ~4 chunks per thread balances load without much claiming overhead. */
  int64_t chunk = (n + (int64_t)p->n_threads * 4 - 1) / ((int64_t)p->n_threads * 4);
  if (chunk < grain) chunk = grain;
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->chunk = chunk;
  p->job_obs = p->obs;
  p->job_obs_ctx = p->obs_ctx;
  atomic_store(&p->next, 0);
  p->active = p->n_threads - 1;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  run_chunks(p);
  pthread_mutex_lock(&p->mu);
  while (p->active > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->job_lock);
}

void pool_set_observer(smelt_pool *p, pool_chunk_observer fn, void *ctx) {
  if (!p) return;
  pthread_mutex_lock(&p->job_lock);
  p->obs = fn;
  p->obs_ctx = fn ? ctx : NULL;
  pthread_mutex_unlock(&p->job_lock);
}
