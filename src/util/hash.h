/* Non-cryptographic hashing: FNV-1a (64-bit) for small keys and tables;
 * hash_fast for bulk data (weights, cache entries), eight independent lanes
 * of xxHash64-style rounds, memory-bound on large buffers. */
#ifndef SMELT_UTIL_HASH_H
#define SMELT_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_SEED 0xcbf29ce484222325ull

static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h;
}
static inline uint64_t hash_str(const char *s) {
  uint64_t h = HASH_SEED;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

/* MurmurHash3's 64-bit finalizer: every input bit reaches every output bit. */
static inline uint64_t hash_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

uint64_t hash_fast(const void *p, size_t n);

#endif
