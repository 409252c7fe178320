/* The on-disk compile cache.
 *
 * Where: the session's cache_dir, else $SMELT_CACHE_DIR, else
 * $XDG_CACHE_HOME/smelt, else ~/.cache/smelt; created with mode 0700.  A
 * directory that is not ours or that others may write is refused (the cache
 * is then off for the session, with a warning).  SMELT_CACHE=off disables it.
 *
 * An entry is KEY.so (or another kind suffix) plus KEY.<kind>.meta, the meta
 * holding a format line, the key, the byte count and a checksum of the data.
 * Both are written atomically (temporary file + rename), data first.  Reading
 * checks that both files belong to the current user and are not writable by
 * others, and that size and checksum match; anything else is a miss (the
 * caller rebuilds and the new entry replaces the bad one): a corrupt,
 * truncated or foreign entry is never used.  cache_map checks an entry's
 * checksum once per boot: an entry written or checked in this boot is mapped
 * again without reading it while its data file has the same device, inode,
 * size, modification and change time (any write to the file changes the
 * change time; a replaced file is another inode; see checked.h).
 *
 * Size: an entry is at most 1 GiB (a larger one is neither written nor
 * read).  SMELT_CACHE_MAX_MB caps the bytes of the entries' files (default
 * 2048; 0 = unlimited; anything but a whole number turns the cache off with
 * a warning, so that a cap meant to bound the disk is never ignored).  A hit
 * touches the entry's meta (its mtime is the entry's last use, updated at
 * most once a minute) and a put writes it; after some puts (see evict.c for
 * when) the least recently used entries are deleted, meta first, until the
 * entries fill at most 90% of the cap.  The entry just written is kept, and
 * one larger than the whole cap is not written.  Files that are not our
 * entries are left alone, but for temporaries of an interrupted write that
 * are over an hour old.  Processes may share the directory: eviction takes
 * no lock, a deleted entry is a miss, and a mapping of it stays valid. */
#ifndef SMELT_CACHE_CACHE_H
#define SMELT_CACHE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parallel/pool.h"
#include "smelt.h"

typedef struct smelt_cache {
  bool enabled;
  uint64_t max_bytes; /* the size cap; 0: none */
  char dir[1024];
  char why_off[1400]; /* when not enabled: the reason (for --explain / warnings) */
} smelt_cache;

/* Resolves and prepares the directory.  Never fails: problems disable the
 * cache and are described in why_off (warn says whether to print them). */
void cache_open(smelt_cache *c, const char *dir_option, bool *warn);

/* A 128-bit key as 32 hex digits. */
typedef struct cache_key {
  char hex[33];
} cache_key;

typedef struct key_hasher {
  uint64_t a, b;
} key_hasher;

void key_init(key_hasher *h);
void key_add(key_hasher *h, const void *p, size_t n);
void key_add_str(key_hasher *h, const char *s);
void key_add_i64(key_hasher *h, int64_t v);
cache_key key_final(const key_hasher *h);

/* Checksum of entry data (64-bit); the _pool form splits it over a thread
 * pool (NULL: this thread) and gives the same value. */
uint64_t cache_checksum(const void *p, size_t n);
uint64_t cache_checksum_pool(smelt_pool *pool, const void *p, size_t n);

/* Reads entry KEY.kind.  *hit false (and *data NULL) on a miss or a rejected
 * entry; *why then says why it was rejected ("" for a plain miss).  *data is
 * malloc'd (caller frees). */
void cache_get(const smelt_cache *c, const cache_key *k, const char *kind, uint8_t **data,
               size_t *len, bool *hit, char *why, size_t why_n);
/* As cache_get, but maps the data read-only instead of copying it (page-cache
 * pages, nothing to zero or copy: for large entries).  Release *data with
 * cache_unmap(*data, *len). */
void cache_map(const smelt_cache *c, smelt_pool *pool, const cache_key *k, const char *kind,
               const void **data, size_t *len, bool *hit, char *why, size_t why_n);
void cache_unmap(const void *data, size_t len);
/* Checksum passes cache_map has made in this process (tests). */
uint64_t cache_map_checks(void);
/* Writes entry KEY.kind atomically.  Failures are reported (the caller
 * warns); the entry is simply not cached. */
smelt_status cache_put(const smelt_cache *c, const cache_key *k, const char *kind, const void *data,
                       size_t len);
/* cache_put of the concatenation of parts[0..n), written with write() from
 * where they are (nothing is mapped, so the process's resident memory does
 * not grow by the entry). */
typedef struct cache_part {
  const void *data;
  size_t len;
} cache_part;
smelt_status cache_put_parts(const smelt_cache *c, const cache_key *k, const char *kind, const cache_part *parts,
                             int n);
/* cache_put with the checksum split over pool (NULL: this thread). */
smelt_status cache_put_pool(const smelt_cache *c, smelt_pool *pool, const cache_key *k,
                            const char *kind, const void *data, size_t len);
/* An entry written in place: cache_reserve maps a new temporary file of len
 * bytes (space allocated up front, so that filling it cannot fail on a full
 * disk) read-write, the caller fills it -- a prepared weight packed straight
 * into the page cache, no second copy -- and cache_commit checksums it and
 * renames it into place, meta last, as cache_put would write it.  Until the
 * commit the entry is invisible (an interrupted fill leaves a temporary that
 * eviction deletes once it is an hour old). */
typedef struct cache_slot {
  void *data; /* the mapping; after cache_commit read-only, released with cache_unmap(data, len) */
  size_t len;
  char *tmp;  /* the temporary's path (malloc'd) until commit or abort */
} cache_slot;

/* SMELT_ERR_* (nothing left behind, *slot zeroed) when the cache is off, the
 * entry cannot fit its cap, the file or its space cannot be made (full disk,
 * no fallocate on the file system) or mapped: the caller then prepares in
 * memory (and may cache_put). */
smelt_status cache_reserve(const smelt_cache *c, const cache_key *k, const char *kind, size_t len,
                           cache_slot *slot);
/* Publishes the filled slot as entry KEY.kind (checksum split over pool,
 * NULL: this thread).  On failure the entry is not written (the temporary is
 * removed) but slot->data stays mapped and valid all the same. */
smelt_status cache_commit(const smelt_cache *c, smelt_pool *pool, const cache_key *k, const char *kind,
                          cache_slot *slot);
/* Drops an unfilled slot: unmaps it, removes the temporary. */
void cache_abort(cache_slot *slot);

/* Bytes in the cache's entries and their number: a directory scan, for
 * reports (0 and 0 when the cache is off or unreadable). */
void cache_usage(const smelt_cache *c, uint64_t *bytes, int64_t *entries);
/* Path of entry data KEY.kind (for tests). */
void cache_entry_path(const smelt_cache *c, const cache_key *k, const char *kind, bool meta,
                      char *out, size_t n);

#endif
