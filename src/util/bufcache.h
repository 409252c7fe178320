/* Large-buffer recycling, owned by a session.  A model run allocates and
 * frees the same buffer sizes every time (operator outputs, GEMM packing,
 * convolution scratch); through malloc each large block is mmapped, or carved
 * from a heap top that free() trims again, so every run pays page faults and
 * the kernel's zero-filling.  A session keeps blocks of BUFCACHE_MIN bytes
 * and more after they are freed and hands them out again for requests they
 * fit closely, up to a byte cap (SMELT_BUFCACHE_MB, default 256; 0 turns
 * caching off); the blocks go back to the system with the session.
 *
 * tensor_data_alloc/free use the cache made current on the calling thread
 * (bufcache_enter); a session run enters its session's cache, and a pool job
 * carries its caller's to the workers.  With no cache current they are
 * aligned_alloc and free.  Blocks carry no header: any block may be freed
 * with or without a cache current.  A block of BUFCACHE_MIN bytes or more
 * freed with no cache current (an output the caller released after a run)
 * goes to a process-wide hand-back cache (the same cap), from which the
 * next allocation of a close size under any cache is served before fresh
 * pages are asked for: a model's outputs (a language model's logits, tens
 * of MB) cost no page faults run after run; it is emptied when a session
 * is freed.  Thread-safe.  Buffers are 64-byte aligned, not cleared.
 *
 * A cache may carry a memory budget (the session's max_memory): blocks of
 * BUFCACHE_MIN bytes and more handed out while it is current are tracked
 * (address and size) until they come back, and a request that would take
 * the tracked bytes plus the cached ones past the budget first drops cached
 * blocks, then is refused before anything is allocated: bufcache_alloc
 * returns NULL and records the refusal for err_nomem (util/err.h).  A block
 * freed while the cache is not current stays counted until its address is
 * handed out again; results given away call bufcache_disown. */
#ifndef SMELT_UTIL_BUFCACHE_H
#define SMELT_UTIL_BUFCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "smelt.h"

#define BUFCACHE_MIN ((size_t)64 * 1024)

typedef struct bufcache bufcache;

/* *out owned by the caller: free with bufcache_free_all.  Cap from the
 * environment (SMELT_BUFCACHE_MB). */
smelt_status bufcache_create(bufcache **out);
void bufcache_free_all(bufcache *c); /* frees every cached block and c; NULL ok */

/* Makes c current on this thread (NULL: none); returns the one it replaces,
 * for the caller to restore. */
bufcache *bufcache_enter(bufcache *c);
bufcache *bufcache_current(void);

void *bufcache_alloc(size_t n); /* from the current cache; NULL when out of memory */
void bufcache_release(void *p); /* into the current cache, or the hand-back one; NULL ok */
/* n bytes, 64-byte aligned, fresh and in small (4 KiB) pages: never taken
 * from a cache, never advised onto huge pages, counted against no budget.
 * For a large buffer written once and then read rarely (an initializer's
 * aligned copy made at import), where the first touch is most of its cost:
 * on a VM whose host backs guest memory on demand, fresh huge pages were
 * touched at 0.3 GB/s against 2.5 GB/s in small pages (2-core test VM,
 * 512 MB after 30 s idle).  Freed as any block (bufcache_release). */
void *bufcache_alloc_small_pages(size_t n);
void bufcache_handback_drain(void); /* frees the hand-back cache's blocks */
size_t bufcache_handback_held(void); /* bytes it holds (for tests) */
size_t bufcache_held(const bufcache *c); /* bytes held now */

/* Sets the budget in bytes (0 or SIZE_MAX: none, nothing is tracked). */
void bufcache_set_budget(bufcache *c, size_t budget);
size_t bufcache_budget(const bufcache *c);
size_t bufcache_in_use(const bufcache *c); /* tracked bytes: handed out, not yet back */
/* p (from bufcache_alloc with c current) now belongs to someone else (a
 * result handed to the caller): it no longer counts against the budget.
 * c NULL: the current cache.  NULL or untracked p: nothing happens. */
void bufcache_disown(bufcache *c, void *p);
/* For scratch that is malloc'd and freed outside the cache: true when n
 * more bytes fit beside the tracked ones under the current cache's budget
 * (cached blocks are dropped to make room); false (the refusal recorded for
 * err_nomem) when they do not.  Nothing is tracked.  No cache, no budget or
 * n under BUFCACHE_MIN: true. */
bool bufcache_admit(size_t n);
/* True (and forgets it) when the current cache's last refusal was for bytes
 * (rounded up to 64): a pool worker's scratch refused while the caller
 * reports the failure on its own thread.  Used by err_nomem. */
bool bufcache_refusal(size_t bytes, size_t *in_use, size_t *budget);

#endif
