/* Prepared weights on disk.  Kernels transform constant weights once per
 * session (Winograd's G g G^T, packed panels); for resnet18 that is 74 MB of
 * fresh memory, and first-touching fresh memory, not the arithmetic, is most
 * of a warm start.  The store keeps each prepared array in the session's
 * compile cache, keyed by what it was made from (a kind, the caller's
 * description of the layout -- algorithm, ISA, geometry -- and a hash of the
 * source weights' bytes), and maps it back read-only on later sessions:
 * page-cache pages, nothing to zero or copy.  An entry is checksummed like
 * every cache entry; a damaged one is a miss and is written again.
 *
 * Hashing and checksums run on pool (NULL: the calling thread).
 * Mappings belong to the store and stay valid until prep_store_free.
 * Thread-safe. */
#ifndef SMELT_CACHE_PREP_STORE_H
#define SMELT_CACHE_PREP_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "cache/cache.h"
#include "util/hash_memo.h"
#include "util/log.h"

typedef struct prep_store prep_store;

/* c (enabled, outliving the store) is where entries go; log (NULL: none,
 * else outliving the store) gets its warning.  *out owned by the caller:
 * prep_store_free. */
smelt_status prep_store_create(const smelt_cache *c, const smelt_logger *log, prep_store **out);
void prep_store_free(prep_store *s); /* finishes queued writes, unmaps everything it handed out; NULL ok */

/* Source hashes remembered across stores (util/hash_memo.h: a loaded
 * model's weights, hashed once per model instead of once per session); m
 * (NULL: none) must outlive the store.  Call before the store is shared. */
void prep_store_set_hash_memo(prep_store *s, hash_memo *m);

/* Where the prepared array of len bytes made from (kind, desc, src) lives:
 * computed once (it hashes src) for a get and, on a miss, the put. */
typedef struct prep_key {
  cache_key key;
  const char *kind; /* borrowed: a string literal */
  size_t len;
} prep_key;

/* false (nothing to get or put) when s is NULL, its cache is off or len 0. */
bool prep_store_key(prep_store *s, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                    const void *src, size_t src_len, size_t len, prep_key *out);
/* k: from prep_store_key on this store.  The prepared array under k if the
 * cache holds one of exactly k->len bytes, else NULL. */
const void *prep_store_get(prep_store *s, smelt_pool *pool, const prep_key *k);
/* Saves data (k->len bytes) under k.  A failure (disk full, read-only cache)
 * is logged once (a warning, possibly from the writer thread) and otherwise
 * ignored: the session goes on preparing in memory.
 *
 * The write happens later, on the store's writer thread (started on first
 * use), so that preparing the next weight need not wait for the page cache:
 * data must stay valid and unchanged until prep_store_drain or
 * prep_store_free returns.  Entries still go through a temporary file and a
 * rename (cache_put), so none is visible half-written.  SMELT_CACHE_WRITE=sync
 * (or no thread/memory for the queue) writes on the caller's thread at once. */
void prep_store_put(prep_store *s, smelt_pool *pool, const prep_key *k, const void *data);

/* A buffer to prepare into that the store saves itself: a writable,
 * zero-filled buffer of k->len bytes, fresh anonymous memory the store owns
 * (small pages), which the writer thread saves after prep_store_commit --
 * so a cold session is ready without waiting for the page cache, whose
 * fresh pages were the slow part of a creation after other runtimes'
 * sessions (bench/README.md) -- and which stays mapped, read-only, until
 * prep_store_free.  Under SMELT_CACHE_WRITE=sync: a new file in the cache
 * mapped (cache_reserve), so the prepared array is written once, into the
 * page cache, and never copied.  NULL when that cannot be (no memory; the
 * cache's cap, a full disk): prepare in memory and put instead.  The
 * caller fills all of it, then prep_store_commit (or, failing,
 * prep_store_abort).  k: from prep_store_key on this store. */
void *prep_store_reserve(prep_store *s, const prep_key *k);
/* buf (from prep_store_reserve under k) is filled: it becomes the entry --
 * written (or, a cache file, checksummed and renamed) into place on the
 * writer thread, at the lowest priority short of idle (at once under
 * SMELT_CACHE_WRITE=sync); a get of k on this store waits for it.  buf
 * stays mapped, read-only, until prep_store_free, whether or not saving it
 * succeeds (a failure is logged once, as for put). */
void prep_store_commit(prep_store *s, smelt_pool *pool, const prep_key *k, void *buf);
/* buf (reserved, not committed) is dropped: unmapped, nothing saved. */
void prep_store_abort(prep_store *s, void *buf);

/* Waits until every put so far is written (or has failed).  NULL ok. */
void prep_store_drain(prep_store *s);

/* Entries found (mapped from the cache, or a buffer of this store's still being
 * saved) / written so far (drains first, so every put is counted). */
void prep_store_counts(prep_store *s, int *loaded, int *saved);

#endif
