/* util/hash.h's hash_fast: its vector paths (SSE2, AVX2 where the CPU has
 * it) give exactly the value of the plain definition below -- the accumulate
 * step of XXH3 written out one lane at a time, as the function was first
 * written -- for every length and alignment, so cache keys and checksums
 * written by any build or on any machine still match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/hash.h"

#define P1 0x9e3779b185ebca87ull
#define P2 0xc2b2ae3d27d4eb4full

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

static uint64_t reference(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t acc[8];
  for (int k = 0; k < 8; k++) acc[k] = P1 * (uint64_t)(k + 1) ^ n;
  size_t i = 0;
  for (int stripe = 0; i + 64 <= n; i += 64) {
    uint64_t w[8];
    memcpy(w, s + i, sizeof w);
    for (int k = 0; k < 8; k++) {
      uint64_t dk = w[k] ^ lane_key[k];
      acc[k ^ 1] += w[k];
      acc[k] += (dk & 0xffffffffu) * (dk >> 32);
    }
    if (++stripe == 16) {
      for (int k = 0; k < 8; k++) acc[k] = (acc[k] ^ (acc[k] >> 47) ^ lane_key[7 - k]) * P1;
      stripe = 0;
    }
  }
  uint64_t h = (uint64_t)n * P1;
  for (int k = 0; k < 8; k++) h = avalanche(h ^ acc[k]) + P2;
  return avalanche(hash_bytes(h, s + i, n - i));
}

static int compare_all(unsigned char *buf, size_t big) {
  int bad = 0;
  for (size_t n = 0; n < 4200; n += 13) /* around every block and stripe boundary */
    for (int off = 0; off < 4; off++) bad += hash_fast(buf + off, n) != reference(buf + off, n);
  static const size_t lens[] = {1023, 1024, 1025, 2048, 65536, 65537, 1u << 20};
  for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
    for (int off = 0; off < 2; off++) bad += hash_fast(buf + off, lens[i]) != reference(buf + off, lens[i]);
  bad += hash_fast(buf, big) != reference(buf, big);
  return bad;
}

int main(void) {
  size_t big = (3u << 20) + 777;
  unsigned char *buf = malloc(big + 8);
  CHECK(buf != NULL);
  if (!buf) return test_report("test_hash_fast");
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < big + 8; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    buf[i] = (unsigned char)x;
  }
  /* the machine's path (AVX2 where it has it), then SSE2 (SMELT_ISA=scalar) */
  const char *isa = getenv("SMELT_ISA");
  char saved[64] = "";
  if (isa) snprintf(saved, sizeof saved, "%s", isa);
  unsetenv("SMELT_ISA");
  CHECK(compare_all(buf, big) == 0);
  setenv("SMELT_ISA", "scalar", 1);
  CHECK(compare_all(buf, big) == 0);
  if (*saved) setenv("SMELT_ISA", saved, 1);
  else unsetenv("SMELT_ISA");
  /* one flipped bit anywhere changes it */
  uint64_t h0 = hash_fast(buf, 70000);
  buf[69999] ^= 4;
  CHECK(hash_fast(buf, 70000) != h0);
  buf[69999] ^= 4;
  buf[5] ^= 1;
  CHECK(hash_fast(buf, 70000) != h0);
  free(buf);
  return test_report("test_hash_fast");
}
