/* See bufcache.h.  The block size comes from malloc_usable_size, so blocks
 * need no header; where the C library cannot tell a block's size nothing is
 * cached. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "util/bufcache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "util/err.h"

#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>
#define HAVE_USABLE_SIZE 1
#endif

#define SLOTS 64

/* Blocks this large start on a 2 MiB boundary and ask for transparent huge
 * pages: first touch then faults 512 times less often (prepared weights,
 * copied initializers: tens of MB at session start). */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

struct bufcache {
  pthread_mutex_t mu;
  void *p[SLOTS];
  size_t size[SLOTS];
  uint64_t age[SLOTS]; /* when it was cached: the oldest goes first when full */
  uint64_t clock;
  int n;
  size_t held, cap;
  /* the budget (0: none): tracked blocks, open addressing on the address */
  size_t budget, live;
  struct live_slot {
    void *p;
    size_t size;
  } *tab;
  size_t tab_cap, tab_n;
  size_t refused, refused_in_use; /* the last refusal, for a failure reported on another thread */
};

static _Thread_local bufcache *current;

/* Blocks freed with no cache current (outputs the caller released after a
 * run): kept here, up to the same cap, for the next run of any session to
 * take before it asks the system for fresh pages.  Emptied when a session
 * is freed (bufcache_handback_drain). */
static bufcache handback = {.mu = PTHREAD_MUTEX_INITIALIZER, .cap = (size_t)-1};
static pthread_once_t handback_once = PTHREAD_ONCE_INIT;
static void handback_init(void);

static size_t cap_from_env(void) {
  const size_t dflt = (size_t)256 << 20;
  const char *s = getenv("SMELT_BUFCACHE_MB");
  if (!s || !*s) return dflt;
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*end || v < 0) return dflt;
  if ((unsigned long long)v > (SIZE_MAX >> 21)) v = (long long)(SIZE_MAX >> 21);
  return (size_t)v << 20;
}

smelt_status bufcache_create(bufcache **out) {
  bufcache *c = calloc(1, sizeof *c);
  if (!c) return err_nomem("buffer cache", sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  c->cap = cap_from_env();
  *out = c;
  return SMELT_OK;
}

void bufcache_free_all(bufcache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) free(c->p[i]);
  free(c->tab);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void handback_init(void) { handback.cap = cap_from_env(); }

static bufcache *handback_cache(void) {
  pthread_once(&handback_once, handback_init);
  return &handback;
}

bufcache *bufcache_enter(bufcache *c) {
  bufcache *prev = current;
  current = c;
  return prev;
}

bufcache *bufcache_current(void) { return current; }

static size_t block_size(void *p) {
#ifdef HAVE_USABLE_SIZE
  return malloc_usable_size(p);
#else
  (void)p;
  return 0;
#endif
}

/* Takes slot i out (the last slot moves into its place); returns its block. */
static void *drop_slot(bufcache *c, int i) {
  void *p = c->p[i];
  c->held -= c->size[i];
  c->n--;
  c->p[i] = c->p[c->n];
  c->size[i] = c->size[c->n];
  c->age[i] = c->age[c->n];
  return p;
}

/* ---- budget: tracked blocks (all under c->mu) ---- */

static size_t slot_of(const bufcache *c, const void *p) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17) & (c->tab_cap - 1);
}

/* Index of p's slot, or of the empty slot where it would go. */
static size_t find_slot(const bufcache *c, const void *p) {
  size_t i = slot_of(c, p);
  while (c->tab[i].p && c->tab[i].p != p) i = (i + 1) & (c->tab_cap - 1);
  return i;
}

static bool grow_table(bufcache *c) {
  size_t cap = c->tab_cap ? c->tab_cap * 2 : 256;
  struct live_slot *old = c->tab, *t = calloc(cap, sizeof *t);
  if (!t) return false;
  size_t old_cap = c->tab_cap;
  c->tab = t;
  c->tab_cap = cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].p) c->tab[find_slot(c, old[i].p)] = old[i];
  free(old);
  return true;
}

/* Counts block p of size bytes (an address seen again replaces its stale
 * entry: that block was freed while the cache was not current).  When the
 * table cannot grow the block is simply not counted. */
static void track(bufcache *c, void *p, size_t size) {
  if ((c->tab_n + 1) * 2 > c->tab_cap && !grow_table(c)) return;
  size_t i = find_slot(c, p);
  if (c->tab[i].p) c->live -= c->tab[i].size;
  else c->tab_n++;
  c->tab[i] = (struct live_slot){p, size};
  c->live += size;
}

/* Stops counting p (if it was); backward-shift deletion keeps probes short. */
static void untrack(bufcache *c, void *p) {
  if (!c->tab_n) return;
  size_t i = find_slot(c, p);
  if (!c->tab[i].p) return;
  c->live -= c->tab[i].size;
  c->tab_n--;
  size_t mask = c->tab_cap - 1;
  for (size_t j = (i + 1) & mask; c->tab[j].p; j = (j + 1) & mask) {
    size_t home = slot_of(c, c->tab[j].p);
    /* move j back into the hole at i unless its home lies in (i, j] */
    if (((j - home) & mask) >= ((j - i) & mask)) {
      c->tab[i] = c->tab[j];
      i = j;
    }
  }
  c->tab[i] = (struct live_slot){NULL, 0};
}

/* Makes room for sz more bytes under the budget: drops cached blocks (the
 * oldest first) into evict while tracked + cached + sz is over it.  False
 * when tracked + sz alone is over: the request is refused. */
static bool fit_budget(bufcache *c, size_t sz, void **evict, int *n_evict) {
  while (c->n > 0 && c->live + c->held + sz > c->budget) {
    int o = 0;
    for (int i = 1; i < c->n; i++)
      if (c->age[i] < c->age[o]) o = i;
    evict[(*n_evict)++] = drop_slot(c, o);
  }
  return c->live + sz <= c->budget && c->live + sz >= sz;
}

/* The smallest cached block that fits sz without wasting over a quarter
 * (huge blocks: or their alignment slack, up to 2 MiB of pages never
 * touched, which malloc_usable_size counts in). */
static void *take(bufcache *c, size_t sz) {
  size_t slack = sz / 4;
  if (sz >= HUGE_MIN && slack < HUGE_PAGE + BUFCACHE_MIN) slack = HUGE_PAGE + BUFCACHE_MIN;
  pthread_mutex_lock(&c->mu);
  int best = -1;
  for (int i = 0; i < c->n; i++)
    if (c->size[i] >= sz && c->size[i] - sz <= slack && (best < 0 || c->size[i] < c->size[best]))
      best = i;
  void *p = best >= 0 ? drop_slot(c, best) : NULL;
  if (p && c->budget) track(c, p, block_size(p)); /* from cached to in use: no new memory */
  pthread_mutex_unlock(&c->mu);
  return p;
}

static void *fresh(size_t sz) {
#ifdef MADV_HUGEPAGE
  if (sz >= HUGE_MIN) { /* not rounded up: the block's size must stay close to sz to be reused */
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, sz)) return NULL;
    madvise(p, sz & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* advice only: failure is harmless */
    return p;
  }
#endif
  return aligned_alloc(64, sz);
}

/* Room for sz more bytes under c's budget (reserve: counted as tracked
 * until the caller takes it back), or the refusal recorded. */
static bool admit(bufcache *c, size_t sz, bool reserve) {
  void *evict[SLOTS];
  int n_evict = 0;
  pthread_mutex_lock(&c->mu);
  bool ok = fit_budget(c, sz, evict, &n_evict);
  size_t live = c->live;
  if (ok && reserve) c->live += sz;
  if (!ok) c->refused = sz, c->refused_in_use = live;
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n_evict; i++) free(evict[i]);
  if (!ok) err_budget_refused(sz, live, c->budget);
  return ok;
}

bool bufcache_admit(size_t n) {
  bufcache *c = current;
  err_budget_clear();
  return !c || !c->budget || n < BUFCACHE_MIN || admit(c, n, false);
}

/* A fresh block under c's budget: room is reserved before the allocation,
 * so concurrent requests cannot overshoot together. */
static void *fresh_budgeted(bufcache *c, size_t sz) {
  if (!admit(c, sz, true)) return NULL;
  void *p = fresh(sz);
  pthread_mutex_lock(&c->mu);
  c->live -= sz;
  if (p) track(c, p, block_size(p));
  pthread_mutex_unlock(&c->mu);
  return p;
}

static void release_into(bufcache *c, void *p, size_t sz);

/* A block the caller handed back, counted against c's budget as a fresh
 * one would be (refused: it stays in the hand-back cache). */
static void *take_handback(bufcache *c, size_t sz) {
  void *p = take(handback_cache(), sz);
  if (!p || !c->budget) return p;
  size_t bs = block_size(p);
  if (!admit(c, bs, true)) {
    release_into(&handback, p, bs);
    return NULL;
  }
  pthread_mutex_lock(&c->mu);
  c->live -= bs;
  track(c, p, bs);
  pthread_mutex_unlock(&c->mu);
  return p;
}

void *bufcache_alloc(size_t n) {
  size_t sz = (n + 63) & ~(size_t)63;
  if (sz == 0) sz = 64;
  if (sz < n) return NULL;
  bufcache *c = current;
  err_budget_clear();
  if (c && sz >= BUFCACHE_MIN) {
    void *p = take(c, sz);
    if (!p) p = take_handback(c, sz);
    if (p) return p;
    if (c->budget) return fresh_budgeted(c, sz);
  }
  return fresh(sz);
}

void *bufcache_alloc_small_pages(size_t n) {
  size_t sz = (n + 4095) & ~(size_t)4095;
  if (sz == 0) sz = 4096;
  if (sz < n) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, 4096, sz)) return NULL;
#ifdef MADV_NOHUGEPAGE
  if (sz >= HUGE_MIN) madvise(p, sz, MADV_NOHUGEPAGE); /* THP "always": advice only */
#endif
  return p;
}

/* p (sz bytes) into c, dropping the oldest blocks for room; freed when
 * it is over the cap. */
static void release_into(bufcache *c, void *p, size_t sz) {
  void *evict[SLOTS];
  int n_evict = 0;
  pthread_mutex_lock(&c->mu);
  if (c->budget) untrack(c, p);
  if (sz > c->cap) {
    pthread_mutex_unlock(&c->mu);
    free(p);
    return;
  }
  /* room by dropping the oldest blocks: sizes no run asks for any more
   * (a shape that changed) age out instead of pinning the cap */
  while (c->n > 0 && (c->n == SLOTS || c->cap - c->held < sz)) {
    int o = 0;
    for (int i = 1; i < c->n; i++)
      if (c->age[i] < c->age[o]) o = i;
    evict[n_evict++] = drop_slot(c, o);
  }
  c->p[c->n] = p;
  c->size[c->n] = sz;
  c->age[c->n++] = ++c->clock;
  c->held += sz;
  pthread_mutex_unlock(&c->mu);
  for (int i = 0; i < n_evict; i++) free(evict[i]);
}

void bufcache_release(void *p) {
  if (!p) return;
  bufcache *c = current ? current : handback_cache();
  size_t sz = block_size(p);
  if (sz >= BUFCACHE_MIN) release_into(c, p, sz);
  else free(p);
}

void bufcache_handback_drain(void) {
  pthread_mutex_lock(&handback.mu);
  void *blocks[SLOTS];
  int n = 0;
  while (handback.n > 0) blocks[n++] = drop_slot(&handback, handback.n - 1);
  pthread_mutex_unlock(&handback.mu);
  for (int i = 0; i < n; i++) free(blocks[i]);
}

size_t bufcache_handback_held(void) { return bufcache_held(&handback); }

size_t bufcache_held(const bufcache *c) {
  if (!c) return 0;
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  size_t h = c->held;
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  return h;
}

void bufcache_set_budget(bufcache *c, size_t budget) {
  pthread_mutex_lock(&c->mu);
  c->budget = budget == SIZE_MAX ? 0 : budget;
  pthread_mutex_unlock(&c->mu);
}

size_t bufcache_budget(const bufcache *c) { return c ? c->budget : 0; }

size_t bufcache_in_use(const bufcache *c) {
  if (!c) return 0;
  pthread_mutex_lock((pthread_mutex_t *)&c->mu);
  size_t h = c->live;
  pthread_mutex_unlock((pthread_mutex_t *)&c->mu);
  return h;
}

bool bufcache_refusal(size_t bytes, size_t *in_use, size_t *budget) {
  bufcache *c = current;
  if (!c || !c->budget) return false;
  pthread_mutex_lock(&c->mu);
  bool hit = c->refused && c->refused >= bytes && c->refused - bytes < 64;
  if (hit) {
    *in_use = c->refused_in_use;
    *budget = c->budget;
    c->refused = 0;
  }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

void bufcache_disown(bufcache *c, void *p) {
  if (!c) c = current;
  if (!c || !p || !c->budget) return;
  pthread_mutex_lock(&c->mu);
  untrack(c, p);
  pthread_mutex_unlock(&c->mu);
}
