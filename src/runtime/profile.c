#include "runtime/profile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/err.h"

#define PROFILE_MAX_DEPTH 64
#define PROFILE_MAX_TRACKS 1024

struct profiler {
  pthread_mutex_t mu; /* guards events and threads: chunks arrive from every thread */
  profile_event *events;
  size_t n, cap;
  pthread_t threads[PROFILE_MAX_TRACKS];
  int n_threads;
  int64_t origin_ns;
  int64_t dropped;
  /* the run in progress, touched only by the thread running the graph */
  size_t stack[PROFILE_MAX_DEPTH];
  int depth, overflow; /* overflow: begins past the stack, ended without a record */
  int run;
  size_t run_event;
  const char *current_kind; /* kind of the open top-level step, named on its chunks */
  run_hook hook;
  smelt_pool *pool;
};

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Track of the calling thread; the lock is held. */
static int track_of_self(profiler *p) {
  pthread_t self = pthread_self();
  for (int i = 0; i < p->n_threads; i++)
    if (pthread_equal(p->threads[i], self)) return i;
  if (p->n_threads == PROFILE_MAX_TRACKS) return PROFILE_MAX_TRACKS - 1;
  p->threads[p->n_threads] = self;
  return p->n_threads++;
}

/* Appends an event (lock held); returns its index or SIZE_MAX when dropped. */
static size_t push_event(profiler *p, const profile_event *e) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    profile_event *ev = cap > SIZE_MAX / sizeof *ev ? NULL : realloc(p->events, cap * sizeof *ev);
    if (!ev) {
      p->dropped++;
      return SIZE_MAX;
    }
    p->events = ev;
    p->cap = cap;
  }
  p->events[p->n] = *e;
  return p->n++;
}

static size_t open_event(profiler *p, profile_event_type type, const char *kind, const char *name) {
  pthread_mutex_lock(&p->mu);
  profile_event e = {type, kind ? kind : "", name ? name : "", track_of_self(p), p->depth, p->run,
                     now_ns() - p->origin_ns, -1, -1, -1};
  size_t i = push_event(p, &e);
  pthread_mutex_unlock(&p->mu);
  return i;
}

static void close_event(profiler *p, size_t i) {
  int64_t t = now_ns() - p->origin_ns;
  pthread_mutex_lock(&p->mu);
  if (i != SIZE_MAX) p->events[i].t1_ns = t;
  pthread_mutex_unlock(&p->mu);
}

static void hook_begin(void *ctx, const char *kind, const char *name) {
  profiler *p = ctx;
  if (p->depth == PROFILE_MAX_DEPTH) {
    p->overflow++;
    p->dropped++;
    return;
  }
  if (p->depth == 0) {
    pthread_mutex_lock(&p->mu);
    p->current_kind = kind;
    pthread_mutex_unlock(&p->mu);
  }
  p->stack[p->depth] = open_event(p, PROFILE_STEP, kind, name);
  p->depth++;
}

static void hook_end(void *ctx) {
  profiler *p = ctx;
  if (p->overflow) {
    p->overflow--;
    return;
  }
  if (p->depth == 0) return; /* an end without a begin: ignore rather than corrupt */
  close_event(p, p->stack[--p->depth]);
}

static void on_chunk(void *ctx, int64_t begin, int64_t end, int64_t t0, int64_t t1) {
  profiler *p = ctx;
  pthread_mutex_lock(&p->mu);
  profile_event e = {PROFILE_CHUNK, p->current_kind ? p->current_kind : "", "", track_of_self(p), 0,
                     p->run, t0 - p->origin_ns, t1 - p->origin_ns, begin, end};
  push_event(p, &e);
  pthread_mutex_unlock(&p->mu);
}

smelt_status profiler_create(profiler **out) {
  profiler *p = calloc(1, sizeof *p);
  if (!p) return err_nomem("profiler", sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  p->origin_ns = now_ns();
  p->hook = (run_hook){p, hook_begin, hook_end};
  p->run = -1;
  *out = p;
  return SMELT_OK;
}

void profiler_free(profiler *p) {
  if (!p) return;
  profiler_detach_pool(p);
  pthread_mutex_destroy(&p->mu);
  free(p->events);
  free(p);
}

const run_hook *profiler_hook(profiler *p) { return &p->hook; }

void profiler_attach_pool(profiler *p, smelt_pool *pool) {
  profiler_detach_pool(p);
  p->pool = pool;
  pool_set_observer(pool, on_chunk, p);
}

void profiler_detach_pool(profiler *p) {
  if (p->pool) pool_set_observer(p->pool, NULL, NULL);
  p->pool = NULL;
}

void profiler_run_begin(profiler *p) {
  p->run++;
  p->depth = p->overflow = 0;
  p->current_kind = NULL;
  p->run_event = open_event(p, PROFILE_RUN, "run", "");
}

void profiler_run_end(profiler *p) { close_event(p, p->run_event); }

const profile_event *profiler_events(const profiler *p, size_t *n) {
  *n = p->n;
  return p->events;
}

int profiler_tracks(const profiler *p) { return p->n_threads; }
int64_t profiler_dropped(const profiler *p) { return p->dropped; }
