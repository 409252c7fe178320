/* Prepared weights on disk (see prep_store.h). */
#include "cache/prep_store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/err.h"
#include "util/hash_memo.h"

typedef struct mapping {
  const void *p;
  size_t len;
} mapping;

/* A reserved buffer (prep_store_reserve): a new cache file mapped, which
 * the writer commits; or (anon) memory of the store's, which the writer
 * puts. */
typedef struct reserved {
  cache_slot cs;
  bool anon;
} reserved;

/* A save waiting for the writer thread: data is the caller's, valid until
 * the store drains; or (slot >= 0) a reserved buffer the writer saves. */
typedef struct pending {
  prep_key key;
  const void *data;
  int slot;
} pending;

struct prep_store {
  const smelt_cache *cache;
  const smelt_logger *log;
  hash_memo *memo;     /* source hashes known already; NULL: none */
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* signalled when work arrives, a write ends or the store stops */
  mapping *maps;
  int n_maps, cap_maps;
  reserved *slots;     /* reserved buffers (their mappings are in maps too) */
  int n_slots, cap_slots;
  int loaded, saved;
  bool warned;
  bool sync;           /* SMELT_CACHE_WRITE=sync: puts write on the caller's thread */
  bool started, stop;  /* the writer thread */
  pthread_t writer;
  pending *queue;      /* FIFO: queue[head..n_queue) waits */
  int head, n_queue, cap_queue;
  bool writing;        /* the writer holds an item it took off the queue: cur */
  pending cur;
};

smelt_status prep_store_create(const smelt_cache *c, const smelt_logger *log, prep_store **out) {
  prep_store *s = calloc(1, sizeof *s);
  if (!s) return err_nomem("prepared-weight store", sizeof *s);
  s->cache = c;
  s->log = log;
  const char *w = getenv("SMELT_CACHE_WRITE");
  s->sync = w && !strcmp(w, "sync");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  *out = s;
  return SMELT_OK;
}

void prep_store_free(prep_store *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = true; /* the writer finishes what is queued first */
  pthread_cond_broadcast(&s->cv);
  bool joined = s->started;
  pthread_mutex_unlock(&s->mu);
  if (joined) pthread_join(s->writer, NULL);
  free(s->queue);
  pthread_cond_destroy(&s->cv);
  for (int i = 0; i < s->n_maps; i++) cache_unmap(s->maps[i].p, s->maps[i].len);
  free(s->maps);
  for (int i = 0; i < s->n_slots; i++) { /* committed or aborted: NULL; else never filled */
    if (s->slots[i].cs.tmp) unlink(s->slots[i].cs.tmp);
    free(s->slots[i].cs.tmp);
  }
  free(s->slots);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

void prep_store_set_hash_memo(prep_store *s, hash_memo *m) {
  if (s) s->memo = m;
}

bool prep_store_key(prep_store *s, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                    const void *src, size_t src_len, size_t len, prep_key *out) {
  if (!s || !s->cache->enabled || len == 0) return false;
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "prepared");
  key_add_str(&h, smelt_version());
  key_add_str(&h, kind);
  key_add_i64(&h, (int64_t)desc_len);
  key_add(&h, desc, desc_len);
  key_add_i64(&h, (int64_t)src_len);
  uint64_t sh;
  if (!hash_memo_get(s->memo, src, src_len, HASH_MEMO_CONTENT, &sh)) {
    sh = cache_checksum_pool(pool, src, src_len);
    hash_memo_set(s->memo, src, src_len, HASH_MEMO_CONTENT, sh);
  }
  key_add_i64(&h, (int64_t)sh);
  key_add_i64(&h, (int64_t)len);
  *out = (prep_key){key_final(&h), kind, len};
  return true;
}

static bool same_key(const prep_key *a, const prep_key *b) {
  return !strcmp(a->key.hex, b->key.hex) && !strcmp(a->kind, b->kind);
}

/* A get for an entry still queued (or being written) waits for it, so that
 * what this store saved is found again as with a synchronous put -- but for
 * a reserved buffer of the store's own memory, which is the entry's data
 * already and is returned (NULL: go on to the cache). */
static const void *wait_if_queued(prep_store *s, const prep_key *k) {
  const void *own = NULL;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    const pending *q = s->writing && same_key(&s->cur.key, k) ? &s->cur : NULL;
    for (int i = s->head; i < s->n_queue && !q; i++)
      if (same_key(&s->queue[i].key, k)) q = &s->queue[i];
    if (q && q->slot >= 0 && s->slots[q->slot].anon && s->slots[q->slot].cs.data) {
      own = s->slots[q->slot].cs.data;
      s->loaded++; /* found, not prepared again */
    }
    if (!q || own) break;
    pthread_cond_wait(&s->cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return own;
}

/* Records a mapping to unmap at prep_store_free (lock held); false without memory. */
static bool keep_map(prep_store *s, const void *p, size_t len) {
  if (s->n_maps == s->cap_maps) {
    int cap = s->cap_maps ? 2 * s->cap_maps : 16;
    mapping *m = realloc(s->maps, sizeof *m * (size_t)cap);
    if (!m) return false;
    s->maps = m;
    s->cap_maps = cap;
  }
  s->maps[s->n_maps++] = (mapping){p, len};
  return true;
}

const void *prep_store_get(prep_store *s, smelt_pool *pool, const prep_key *k) {
  size_t len = k->len;
  const void *own = wait_if_queued(s, k);
  if (own) return own;
  const void *data;
  size_t got;
  bool hit;
  char why[1400];
  cache_map(s->cache, pool, &k->key, k->kind, &data, &got, &hit, why, sizeof why);
  if (!hit) return NULL;
  if (got != len) {
    cache_unmap(data, got);
    return NULL;
  }
  pthread_mutex_lock(&s->mu);
  bool kept = keep_map(s, data, got);
  if (kept) s->loaded++;
  pthread_mutex_unlock(&s->mu);
  if (!kept) cache_unmap(data, got);
  return kept ? data : NULL;
}

/* Writes one entry, or commits reserved slot `slot` (>= 0), with no lock
 * held, and counts it; the first failure is logged. */
static void write_entry(prep_store *s, smelt_pool *pool, const prep_key *k, const void *data, int slot) {
  smelt_status st;
  pthread_mutex_lock(&s->mu);
  reserved r = slot >= 0 ? s->slots[slot] : (reserved){0}; /* the array may move; the slot's own fields do not change meanwhile */
  pthread_mutex_unlock(&s->mu);
  if (slot >= 0 && r.anon) {
    st = cache_put_pool(s->cache, pool, &k->key, k->kind, r.cs.data, r.cs.len);
  } else if (slot >= 0) {
    st = cache_commit(s->cache, pool, &k->key, k->kind, &r.cs);
    pthread_mutex_lock(&s->mu);
    s->slots[slot].cs.tmp = NULL; /* freed by cache_commit */
    pthread_mutex_unlock(&s->mu);
  } else {
    st = cache_put_pool(s->cache, pool, &k->key, k->kind, data, k->len);
  }
  pthread_mutex_lock(&s->mu);
  if (!st) s->saved++;
  bool warn = st && !s->warned;
  if (warn) s->warned = true;
  pthread_mutex_unlock(&s->mu);
  if (warn)
    log_msg(s->log, SMELT_LOG_WARNING, "prepared weights not cached (%s); later sessions prepare them again",
            smelt_last_error());
}

static void *writer_main(void *arg) {
  prep_store *s = arg;
#ifdef SYS_gettid
  /* the lowest priority short of idle: the sessions' own threads first (a
   * cold creation is not slowed by the saves it queued), yet never starved
   * for good (a session's free waits for its saves) */
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19); /* advice: fine if refused */
#endif
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->head == s->n_queue && !s->stop) pthread_cond_wait(&s->cv, &s->mu);
    if (s->head == s->n_queue) break; /* stopping and nothing left */
    pending p = s->queue[s->head++];
    if (s->head == s->n_queue) s->head = s->n_queue = 0;
    s->writing = true;
    s->cur = p;
    pthread_mutex_unlock(&s->mu);
    write_entry(s, NULL, &p.key, p.data, p.slot);
    pthread_mutex_lock(&s->mu);
    s->writing = false;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* Queues (k, data) for the writer thread, starting it on first use; false
 * (nothing queued) when there is no room or no thread. */
static bool enqueue(prep_store *s, const prep_key *k, const void *data, int slot) {
  bool ok = false;
  pthread_mutex_lock(&s->mu);
  if (s->stop) goto out;
  if (s->n_queue == s->cap_queue) {
    int cap = s->cap_queue ? 2 * s->cap_queue : 32;
    pending *q = realloc(s->queue, sizeof *q * (size_t)cap);
    if (!q) goto out;
    s->queue = q;
    s->cap_queue = cap;
  }
  if (!s->started) {
    if (pthread_create(&s->writer, NULL, writer_main, s)) goto out;
    s->started = true;
  }
  s->queue[s->n_queue++] = (pending){*k, data, slot};
  pthread_cond_broadcast(&s->cv);
  ok = true;
out:
  pthread_mutex_unlock(&s->mu);
  return ok;
}

void prep_store_put(prep_store *s, smelt_pool *pool, const prep_key *k, const void *data) {
  if (s->sync || !enqueue(s, k, data, -1)) write_entry(s, pool, k, data, -1);
}

/* Fresh anonymous memory for a buffer the writer saves later: small pages
 * (the packer first-touches every byte once; fresh huge pages were the
 * slow part of that on a VM, see util/bufcache.h). */
static bool reserve_anon(size_t len, cache_slot *cs) {
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
#ifdef MADV_NOHUGEPAGE
  madvise(m, len, MADV_NOHUGEPAGE); /* advice only */
#endif
  *cs = (cache_slot){m, len, NULL};
  return true;
}

void *prep_store_reserve(prep_store *s, const prep_key *k) {
  cache_slot cs;
  bool anon = s && !s->sync;
  if (!s || (anon ? !reserve_anon(k->len, &cs) : !!cache_reserve(s->cache, &k->key, k->kind, k->len, &cs))) {
    err_clear(); /* the caller prepares in memory instead */
    return NULL;
  }
  bool ok = false;
  pthread_mutex_lock(&s->mu);
  if (s->n_slots == s->cap_slots) {
    int cap = s->cap_slots ? 2 * s->cap_slots : 16;
    reserved *n = realloc(s->slots, sizeof *n * (size_t)cap);
    if (n) {
      s->slots = n;
      s->cap_slots = cap;
    }
  }
  if (s->n_slots < s->cap_slots && keep_map(s, cs.data, cs.len)) {
    s->slots[s->n_slots++] = (reserved){cs, anon};
    ok = true;
  }
  pthread_mutex_unlock(&s->mu);
  if (!ok) cache_abort(&cs);
  return ok ? cs.data : NULL;
}

/* The index of the reserved slot at buf (lock held), or -1. */
static int slot_of(const prep_store *s, const void *buf) {
  for (int i = 0; i < s->n_slots; i++)
    if (s->slots[i].cs.data == buf) return i;
  return -1;
}

void prep_store_commit(prep_store *s, smelt_pool *pool, const prep_key *k, void *buf) {
  pthread_mutex_lock(&s->mu);
  int slot = slot_of(s, buf);
  bool anon = slot >= 0 && s->slots[slot].anon;
  pthread_mutex_unlock(&s->mu);
  if (slot < 0) return;
  /* filled: read-only from now on, like a mapped entry (cache_commit does
   * it for a cache file) */
  if (anon) mprotect(buf, k->len, PROT_READ);
  if (s->sync || !enqueue(s, k, buf, slot)) write_entry(s, pool, k, buf, slot);
}

void prep_store_abort(prep_store *s, void *buf) {
  pthread_mutex_lock(&s->mu);
  int slot = slot_of(s, buf);
  cache_slot cs = {0};
  if (slot >= 0) {
    cs = s->slots[slot].cs;
    s->slots[slot].cs.tmp = NULL;
    s->slots[slot].cs.data = NULL; /* never found again */
    for (int i = 0; i < s->n_maps; i++)
      if (s->maps[i].p == buf) {
        s->maps[i] = s->maps[--s->n_maps];
        break;
      }
  }
  pthread_mutex_unlock(&s->mu);
  if (slot >= 0) cache_abort(&cs);
}

void prep_store_drain(prep_store *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  while (s->head < s->n_queue || s->writing) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

void prep_store_counts(prep_store *s, int *loaded, int *saved) {
  prep_store_drain(s); /* saves still queued count once they are on disk */
  pthread_mutex_lock(&s->mu);
  *loaded = s->loaded;
  *saved = s->saved;
  pthread_mutex_unlock(&s->mu);
}
