/* hash_fast (see hash.h): the accumulate step of XXH3 (Collet): per 64-byte
 * stripe, eight 64-bit lanes each take one word w, add it to the
 * neighbouring lane and add lo32(w ^ k) * hi32(w ^ k) to their own, with a
 * fixed per-lane k; every 1 KiB the lanes are scrambled.  The 32x32->64
 * multiplies vectorize even on baseline x86-64 (pmuludq), so large buffers
 * hash at memory speed.  Not cryptographic: a checksum and a content key. */
#include "util/hash.h"

#include <string.h>

#define P1 0x9e3779b185ebca87ull
#define P2 0xc2b2ae3d27d4eb4full
#define STRIPES_PER_BLOCK 16

static const uint64_t lane_key[8] = {0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull,
                                     0x1f67b3b7a4a44072ull, 0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull,
                                     0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull};

static uint64_t avalanche(uint64_t x) {
  x ^= x >> 33;
  x *= P2;
  x ^= x >> 29;
  x *= 0x165667b19e3779f9ull;
  return x ^ (x >> 32);
}

static void accumulate(uint64_t *acc, const unsigned char *s) {
  uint64_t w[8];
  memcpy(w, s, sizeof w);
  for (int k = 0; k < 8; k++) {
    uint64_t dk = w[k] ^ lane_key[k];
    acc[k ^ 1] += w[k];
    acc[k] += (dk & 0xffffffffu) * (dk >> 32);
  }
}

static void scramble(uint64_t *acc) {
  for (int k = 0; k < 8; k++) acc[k] = (acc[k] ^ (acc[k] >> 47) ^ lane_key[7 - k]) * P1;
}

uint64_t hash_fast(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t acc[8];
  for (int k = 0; k < 8; k++) acc[k] = P1 * (uint64_t)(k + 1) ^ n;
  size_t i = 0;
  for (int stripe = 0; i + 64 <= n; i += 64) {
    accumulate(acc, s + i);
    if (++stripe == STRIPES_PER_BLOCK) {
      scramble(acc);
      stripe = 0;
    }
  }
  uint64_t h = (uint64_t)n * P1;
  for (int k = 0; k < 8; k++) h = avalanche(h ^ acc[k]) + P2;
  return avalanche(hash_bytes(h, s + i, n - i));
}
