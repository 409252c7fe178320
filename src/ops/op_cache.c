#include "ops/op_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/run_ctl.h"
#include "util/hash.h"

struct op_cache_entry {
  op_cache_entry *next;  /* in the cache's list of every entry */
  op_cache_entry *bnext; /* in its bucket */
  void *data;
  void (*free_fn)(void *data);
  size_t key_len;
  unsigned char key[]; /* key_len bytes */
};

enum { OP_CACHE_BUCKETS = 128 };

/* The key's 8-byte words through util/hash.h's mixer, its tail bytes FNV-1a */
static unsigned bucket_of(const void *key, size_t key_len) {
  const unsigned char *p = key;
  uint64_t h = HASH_SEED ^ key_len;
  size_t i = 0;
  for (; i + 8 <= key_len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = hash_mix64(h ^ w);
  }
  return (unsigned)(hash_mix64(hash_bytes(h, p + i, key_len - i)) % OP_CACHE_BUCKETS);
}

static void *find_from(op_cache_entry *e, const void *key, size_t key_len) {
  for (; e; e = e->bnext)
    if (e->key_len == key_len && !memcmp(e->key, key, key_len)) return e->data;
  return NULL;
}

void *op_cache_find(op_cache *c, const void *key, size_t key_len) {
  if (!c) return NULL;
  _Atomic(op_cache_entry *) *b = atomic_load_explicit(&c->buckets, memory_order_acquire);
  if (!b) return NULL;
  return find_from(atomic_load_explicit(&b[bucket_of(key, key_len)], memory_order_acquire), key, key_len);
}

/* c's buckets, made now if there are none yet; NULL when they cannot be had */
static _Atomic(op_cache_entry *) *buckets_of(op_cache *c) {
  _Atomic(op_cache_entry *) *b = atomic_load_explicit(&c->buckets, memory_order_acquire);
  if (b) return b;
  _Atomic(op_cache_entry *) *made = calloc(OP_CACHE_BUCKETS, sizeof *made);
  if (!made) return NULL;
  if (atomic_compare_exchange_strong_explicit(&c->buckets, &b, made, memory_order_acq_rel, memory_order_acquire))
    return made;
  free(made); /* another thread's came first: b is it */
  return b;
}

void *op_cache_add(op_cache *c, const void *key, size_t key_len, void *data,
                   void (*free_fn)(void *data)) {
  if (!c || key_len > ((size_t)1 << 20)) return NULL;
  _Atomic(op_cache_entry *) *b = buckets_of(c);
  if (!b) return NULL;
  b += bucket_of(key, key_len);
  op_cache_entry *e = malloc(sizeof *e + key_len);
  if (!e) return NULL;
  e->data = data;
  e->free_fn = free_fn;
  e->key_len = key_len;
  memcpy(e->key, key, key_len);
  op_cache_entry *head = atomic_load_explicit(b, memory_order_acquire);
  for (;;) {
    /* entries are only ever pushed, so a key already present is in the list
     * this head leads to */
    void *old = find_from(head, key, key_len);
    if (old) {
      free(e);
      op_prep_drain(c); /* data may be queued for the store */
      if (free_fn) free_fn(data);
      return old;
    }
    e->bnext = head;
    if (atomic_compare_exchange_weak_explicit(b, &head, e, memory_order_release, memory_order_acquire)) break;
  }
  /* published: now also in the list of every entry, for op_cache_free_all */
  op_cache_entry *all = atomic_load_explicit(&c->head, memory_order_acquire);
  do e->next = all;
  while (!atomic_compare_exchange_weak_explicit(&c->head, &all, e, memory_order_release, memory_order_acquire));
  return data;
}

void op_cache_free_all(op_cache *caches, int n) {
  for (int i = 0; caches && i < n; i++) {
    op_prep_drain(&caches[i]); /* entries' data may be queued for the store */
    op_cache_entry *e = atomic_load_explicit(&caches[i].head, memory_order_acquire);
    while (e) {
      op_cache_entry *next = e->next;
      if (e->free_fn) e->free_fn(e->data);
      free(e);
      e = next;
    }
    atomic_store_explicit(&caches[i].head, NULL, memory_order_relaxed);
    free((void *)atomic_load_explicit(&caches[i].buckets, memory_order_acquire));
    atomic_store_explicit(&caches[i].buckets, NULL, memory_order_relaxed);
  }
}

const void *op_prep_get(op_cache *c, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                        const void *src, size_t src_len, size_t len, op_prep_key *k) {
  memset(k, 0, sizeof *k);
  if (!c || !c->store) return NULL;
  return c->store->get(c->store->self, pool, kind, desc, desc_len, src, src_len, len, k);
}

void op_prep_put(op_cache *c, smelt_pool *pool, const op_prep_key *k, const void *data) {
  if (c && c->store && k->stored) c->store->put(c->store->self, pool, k, data);
}

void *op_prep_reserve(op_cache *c, const op_prep_key *k) {
  if (!c || !c->store || !c->store->reserve || !k->stored) return NULL;
  return c->store->reserve(c->store->self, k);
}

void op_prep_commit(op_cache *c, smelt_pool *pool, const op_prep_key *k, void *buf) {
  if (c && c->store && c->store->commit && buf) c->store->commit(c->store->self, pool, k, buf);
}

void op_prep_abort(op_cache *c, void *buf) {
  if (c && c->store && c->store->abort && buf) c->store->abort(c->store->self, buf);
}

void op_prep_drain(op_cache *c) {
  if (c && c->store && c->store->drain) c->store->drain(c->store->self);
}

bool op_input_is_constant(const op_ctx *c, int i) {
  if (!c->graph || !c->node || i >= c->n_in || i >= c->node->n_inputs || !c->in[i]) return false;
  int v = c->node->inputs[i];
  if (v < 0 || v >= c->graph->n_values) return false;
  const ir_value *val = &c->graph->values[v];
  if (!(val->flags & IR_VALUE_INITIALIZER) || (val->flags & IR_VALUE_INPUT) || !val->constant)
    return false;
  return val->constant->data == c->in[i]->data;
}

void *op_cache_get_or_make(op_cache *c, const void *key, size_t key_len, void *(*make)(void *ctx), void *ctx,
                           void (*free_fn)(void *data)) {
  void *found = op_cache_find(c, key, key_len);
  if (found || !c) return found;
  run_ctl *saved = run_ctl_enter(NULL);
  void *made = make(ctx);
  run_ctl_enter(saved);
  if (!made) return NULL;
  void *kept = op_cache_add(c, key, key_len, made, free_fn);
  if (!kept) {
    op_prep_drain(c); /* made may be queued for the store */
    free_fn(made);
  }
  return kept;
}
