/* See hash_memo.h. */
#include "util/hash_memo.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct span {
  uintptr_t p;
  size_t len;
  uint64_t seed, h;
  atomic_int known; /* h and seed are set (written before, read after: release/acquire) */
  atomic_flag busy; /* a writer holds the entry */
} span;

struct hash_memo {
  span *s;
  int n, cap;
  bool sorted;
  atomic_uint_least64_t hits;
};

hash_memo *hash_memo_new(void) { return calloc(1, sizeof(hash_memo)); }

void hash_memo_free(hash_memo *m) {
  if (!m) return;
  free(m->s);
  free(m);
}

bool hash_memo_add(hash_memo *m, const void *p, size_t len) {
  if (!m || !p || !len) return false;
  if (m->n == m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    span *s = realloc(m->s, sizeof *s * (size_t)cap);
    if (!s) return false;
    m->s = s;
    m->cap = cap;
  }
  span *e = &m->s[m->n++];
  e->p = (uintptr_t)p;
  e->len = len;
  e->seed = e->h = 0;
  atomic_init(&e->known, 0);
  atomic_flag_clear(&e->busy);
  m->sorted = false;
  return true;
}

static int by_start(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

/* The listed span that is exactly [p, p+len), or NULL (also before the memo
 * is sealed). */
static span *find(hash_memo *m, const void *p, size_t len) {
  if (!m || !m->n) return NULL;
  if (!m->sorted) return NULL;
  uintptr_t k = (uintptr_t)p;
  int lo = 0, hi = m->n - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    if (m->s[mid].p == k) {
      /* equal starts (a range listed twice, or a shorter one inside): scan them */
      int i = mid;
      while (i > 0 && m->s[i - 1].p == k) i--;
      for (; i < m->n && m->s[i].p == k; i++)
        if (m->s[i].len == len) return &m->s[i];
      return NULL;
    }
    if (m->s[mid].p < k) lo = mid + 1;
    else hi = mid - 1;
  }
  return NULL;
}

bool hash_memo_get(hash_memo *m, const void *p, size_t len, uint64_t seed, uint64_t *h) {
  span *e = find(m, p, len);
  if (!e || !atomic_load_explicit(&e->known, memory_order_acquire) || e->seed != seed) return false;
  *h = e->h;
  atomic_fetch_add_explicit(&m->hits, 1, memory_order_relaxed);
  return true;
}

void hash_memo_set(hash_memo *m, const void *p, size_t len, uint64_t seed, uint64_t h) {
  span *e = find(m, p, len);
  if (!e || atomic_load_explicit(&e->known, memory_order_acquire)) return;
  if (atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire)) return; /* another thread sets it */
  e->seed = seed;
  e->h = h;
  atomic_store_explicit(&e->known, 1, memory_order_release);
}

uint64_t hash_memo_hits(const hash_memo *m) {
  return m ? atomic_load_explicit(&((hash_memo *)m)->hits, memory_order_relaxed) : 0;
}

void hash_memo_seal(hash_memo *m) {
  if (!m || m->sorted) return;
  if (m->n > 1) qsort(m->s, (size_t)m->n, sizeof *m->s, by_start); /* none yet: s may be NULL */
  m->sorted = true;
}
