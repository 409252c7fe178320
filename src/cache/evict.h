/* Keeping the on-disk cache under its size cap (see cache.h for the rules).
 *
 * Recency is the mtime of an entry's meta file: a put writes it, a hit
 * touches it (cache.c).  Eviction lists the directory, adds up the files
 * that are entries of ours (KEY.kind and KEY.kind.meta: 32 hex digits, a
 * dot, a kind of letters, digits, '_' or '-'; regular files owned by this
 * user, never followed through a symlink) and deletes the least recently
 * used entries until they fill at most 90% of the cap.  Everything else in
 * the directory is left alone, except leftover temporary files of an
 * atomic write (NAME.tmp + 16 hex digits) older than an hour.
 *
 * No locks: several processes may evict at once.  A deleted entry is a miss
 * for a reader that gets there later, and a mapping of it stays valid. */
#ifndef SMELT_CACHE_EVICT_H
#define SMELT_CACHE_EVICT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cache/cache.h"

/* Whether a put of bytes (data and meta) to a cache capped at cap bytes
 * should be followed by a scan.  Deterministic in (key, kind). */
bool cache_evict_due(uint64_t cap, uint64_t bytes, const cache_key *k, const char *kind);

/* Evicts down to 90% of c->max_bytes if the entries exceed it; keep (an
 * entry name KEY.kind, or NULL) is never deleted.  Best effort: returns the
 * number of entries deleted, problems are ignored. */
int cache_evict(const smelt_cache *c, const char *keep);

/* Whether eviction recognises entries of this kind (1 to 32 letters, digits,
 * '_' or '-'): cache_put refuses any other, which would grow unbounded. */
bool cache_kind_ok(const char *kind);

/* Touches a meta file's mtime on a hit, unless it was touched in the last
 * minute (a hit then costs no write). */
void cache_touch(int meta_fd, const struct timespec *mtime);

#endif
