/* Hashes of fixed, immutable byte ranges, computed once.
 *
 * The owner of some memory that never changes while it lives (a loaded
 * model's weights) lists its ranges once; anyone hashing exactly one of those
 * ranges (the prepared-weight store keying a packed weight by its source)
 * may look the hash up instead of reading the bytes again, and records it
 * after computing it.  Only exact ranges that were listed are ever answered:
 * memory the owner does not own (a plan's folded constant, freed and reused
 * by another with other bytes) never gets a remembered hash.  The memo must
 * not outlive the memory it lists.
 *
 * hash_memo_add, then hash_memo_seal, before sharing the memo; get/set are
 * thread-safe (and answer nothing before the seal). */
#ifndef SMELT_UTIL_HASH_MEMO_H
#define SMELT_UTIL_HASH_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hash_memo hash_memo;

/* The seed (which hash a value is) of cache_checksum_pool's hashes of the
 * bytes: what the prepared-weight store keys by (a new algorithm needs a
 * new seed). */
#define HASH_MEMO_CONTENT 0x736d656c74737263ull

/* NULL when out of memory (callers then simply hash every time). */
hash_memo *hash_memo_new(void);
void hash_memo_free(hash_memo *m); /* NULL ok */

/* Lists [p, p+len); false (nothing listed) without memory.  Not thread-safe:
 * before the memo is shared. */
bool hash_memo_add(hash_memo *m, const void *p, size_t len);

/* Ends the adds (sorts the ranges for lookups). */
void hash_memo_seal(hash_memo *m);

/* The hash remembered for exactly [p, p+len) under seed (which hash it is),
 * if any.  m NULL: false. */
bool hash_memo_get(hash_memo *m, const void *p, size_t len, uint64_t seed, uint64_t *h);
/* Remembers h for [p, p+len) under seed when that range is listed (else
 * nothing).  m NULL: nothing. */
void hash_memo_set(hash_memo *m, const void *p, size_t len, uint64_t seed, uint64_t h);

/* Lookups answered from the memo so far (tests, reports). */
uint64_t hash_memo_hits(const hash_memo *m);

#endif
