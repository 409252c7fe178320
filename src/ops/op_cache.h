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

struct op_cache {
  _Atomic(op_cache_entry *) head;
  /* Where prepared data may also be saved to and loaded from across sessions
   * (cache/prep_store.h); NULL: memory only.  Not owned. */
  struct prep_store *store;
};

/* The data stored under key, or NULL.  c may be NULL (returns NULL). */
void *op_cache_find(op_cache *c, const void *key, size_t key_len);

/* Publishes data under key and returns what the cache now holds for key:
 * data itself, or (when another thread published first) the earlier data,
 * in which case data has been freed with free_fn.  Returns NULL when c is
 * NULL or the entry cannot be allocated: the caller still owns data then. */
void *op_cache_add(op_cache *c, const void *key, size_t key_len, void *data,
                   void (*free_fn)(void *data));

/* Frees every entry's data (with its free_fn) and the entries of n caches. */
void op_cache_free_all(op_cache *caches, int n);

/* True when input i is a constant of the graph for the session's lifetime
 * (an initializer that is not also a graph input, bound as a view of its
 * stored value), so data prepared from it may be cached. */
bool op_input_is_constant(const op_ctx *c, int i);

#endif
