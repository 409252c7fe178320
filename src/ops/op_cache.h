/* Per-node prepared data owned by a session: packed or transformed constant
 * weights that a kernel computes on its first run and reuses on every later
 * run of the same session.
 *
 * Each node of a session's plan has one op_cache (reached as op_ctx.cache;
 * NULL when an op runs outside a session: tests, static inference,
 * subgraph bodies).  An entry is found by an exact byte key the op builds
 * from what the data was prepared from (algorithm, ISA, the weight tensor's
 * address and shape).  Entries are added lock-free and never removed before
 * the session is freed, so concurrent runs of one session may share a
 * cache: two threads preparing the same key at once both compute it, the
 * first to publish wins and the other's copy is freed. */
#ifndef SMELT_OPS_OP_CACHE_H
#define SMELT_OPS_OP_CACHE_H

#include <stdatomic.h>
#include <stddef.h>

#include "ops/op.h"

typedef struct op_cache_entry op_cache_entry;

typedef struct op_prep_store op_prep_store;

struct op_cache {
  _Atomic(op_cache_entry *) head; /* every entry, newest first (freeing) */
  /* OP_CACHE_BUCKETS lists by the key's hash, made on the first add: a
   * session's plans share one cache of every prepared weight, and a find
   * walks one short list, not all of them */
  _Atomic(_Atomic(op_cache_entry *) *) buckets;
  /* Where prepared data may also be saved to and loaded from across sessions:
   * an interface the runtime provides (runtime/weight_store.h, over
   * cache/prep_store.h; ops never include cache/).  NULL: memory only.  Not
   * owned. */
  const op_prep_store *store;
};

/* The data stored under key, or NULL.  c may be NULL (returns NULL). */
void *op_cache_find(op_cache *c, const void *key, size_t key_len);

/* Publishes data under key and returns what the cache now holds for key:
 * data itself, or (when another thread published first) the earlier data,
 * in which case data has been freed with free_fn.  Returns NULL when c is
 * NULL or the entry cannot be allocated: the caller still owns data then. */
void *op_cache_add(op_cache *c, const void *key, size_t key_len, void *data,
                   void (*free_fn)(void *data));

/* The data under key, else make(ctx) made now and published.  make runs
 * outside the current run's stop control (parallel/run_ctl.h): what it
 * makes outlives the run, so a run stopping meanwhile must not make the
 * pool skip part of it.  NULL when make returns NULL or the entry cannot be
 * published (then what make returned is freed with free_fn). */
void *op_cache_get_or_make(op_cache *c, const void *key, size_t key_len, void *(*make)(void *ctx), void *ctx,
                           void (*free_fn)(void *data));

/* ---- prepared arrays across sessions (the store behind op_cache.store) ----
 * An op asks for the array of len bytes it would prepare from (kind, desc,
 * src) -- kind a string literal ("conv", "gemm-b"), desc the layout it
 * prepares (algorithm, ISA, geometry), src the source weights -- and gets a
 * read-only copy an earlier session saved, or NULL; after a miss it prepares
 * the array itself and hands it to op_prep_put, which saves it (a failure is
 * reported once and otherwise ignored). */
typedef struct op_prep_key {
  bool stored;      /* false: there is nothing to save to (no store, cache off, len 0) */
  char hex[33];     /* the entry's key */
  const char *kind; /* borrowed */
  size_t len;
} op_prep_key;

struct op_prep_store {
  void *self;
  /* Fills *k (k->stored false: no store for this request) and returns the
   * saved array under it, or NULL.  Mappings stay valid while the store lives. */
  const void *(*get)(void *self, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                     const void *src, size_t src_len, size_t len, op_prep_key *k);
  /* May save later (on a writer thread): data must stay valid until drain
   * returns.  op_cache frees no data it holds before draining (free_all, a
   * copy that lost a race to publish); an op that frees data it put must
   * call op_prep_drain first. */
  void (*put)(void *self, smelt_pool *pool, const op_prep_key *k, const void *data);
  void (*drain)(void *self); /* waits for every put so far; NULL: puts are synchronous */
  /* Optional (NULL: not offered): preparing straight into the store.
   * reserve gives a writable, zero-filled buffer of k->len bytes (k from a
   * get that missed) or NULL (then prepare in memory and put); once it is
   * filled, commit saves it (maybe later) and it stays valid, read-only,
   * while the store lives; abort drops one that could not be filled. */
  void *(*reserve)(void *self, const op_prep_key *k);
  void (*commit)(void *self, smelt_pool *pool, const op_prep_key *k, void *buf);
  void (*abort)(void *self, void *buf);
};

/* Through c->store: NULL (and k->stored false) when c or its store is NULL. */
const void *op_prep_get(op_cache *c, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                        const void *src, size_t src_len, size_t len, op_prep_key *k);
/* Saves data (k->len bytes) under k, maybe later (see put above); nothing
 * when k->stored is false. */
void op_prep_put(op_cache *c, smelt_pool *pool, const op_prep_key *k, const void *data);
/* Through c->store's reserve/commit/abort (see above): NULL when c, its
 * store or reserve is missing, or k->stored is false. */
void *op_prep_reserve(op_cache *c, const op_prep_key *k);
void op_prep_commit(op_cache *c, smelt_pool *pool, const op_prep_key *k, void *buf);
void op_prep_abort(op_cache *c, void *buf);
/* Waits until everything put through c's store is written; nothing when c or
 * its store is NULL.  Call before freeing data handed to op_prep_put. */
void op_prep_drain(op_cache *c);

/* Frees every entry's data (with its free_fn) and the entries of n caches. */
void op_cache_free_all(op_cache *caches, int n);

/* True when input i is a constant of the graph for the session's lifetime
 * (an initializer that is not also a graph input, bound as a view of its
 * stored value), so data prepared from it may be cached. */
bool op_input_is_constant(const op_ctx *c, int i);

#endif
