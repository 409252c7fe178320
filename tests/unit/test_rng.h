/* xorshift64 test data shared by the GEMM tests: define TEST_RNG_SEED before
 * including it, so every run of a test sees the same values. */
#ifndef SMELT_TEST_RNG_H
#define SMELT_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state = TEST_RNG_SEED;
static inline uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 16);
}
/* uniform over {-1, -0.999, ..., 1} */
static inline float frand(void) { return (float)(rng() % 2001) / 1000.f - 1.f; }

#endif
