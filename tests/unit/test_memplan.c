/* The memory planner: no two live buffers overlap, alignment, the arena is
 * no larger than the peak of live bytes would need on simple cases, and
 * best fit reuses the tightest gap. */
#include <stdlib.h>

#include "check.h"
#include "plan/memplan.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

static void test_random(void) {
  for (int trial = 0; trial < 200; trial++) {
    int n = 1 + (int)(rng() % 60), steps = 1 + (int)(rng() % 40);
    mp_buffer *b = calloc((size_t)n, sizeof *b);
    size_t peak_live = 0;
    for (int i = 0; i < n; i++) {
      b[i].size = rng() % 5 ? 1 + rng() % 100000 : 0;
      b[i].first = (int)(rng() % (unsigned)steps);
      b[i].last = b[i].first + (int)(rng() % (unsigned)(steps - b[i].first));
    }
    for (int s = 0; s < steps; s++) {
      size_t live = 0;
      for (int i = 0; i < n; i++)
        if (b[i].first <= s && s <= b[i].last) live += (b[i].size + 63) / 64 * 64;
      if (live > peak_live) peak_live = live;
    }
    size_t total = 0;
    CHECK_OK(memplan_solve(b, n, &total));
    CHECK(memplan_check(b, n, total));
    CHECK(total >= peak_live); /* a lower bound no plan beats */
    size_t sum = 0;
    for (int i = 0; i < n; i++) sum += (b[i].size + 63) / 64 * 64;
    CHECK(total <= sum);
    free(b);
  }
}

/* Disjoint lifetimes share everything; a chain a->b->c needs two slots. */
static void test_reuse(void) {
  mp_buffer b[3] = {{1000, 0, 1, 0}, {1000, 1, 2, 0}, {1000, 2, 3, 0}};
  size_t total;
  CHECK_OK(memplan_solve(b, 3, &total));
  CHECK(total == 2 * 1024);
  CHECK(b[0].offset == b[2].offset);
  mp_buffer d[2] = {{4096, 0, 0, 0}, {4096, 5, 5, 0}};
  CHECK_OK(memplan_solve(d, 2, &total));
  CHECK(total == 4096 && d[0].offset == d[1].offset);
}

/* Best fit: a small late buffer goes into the small gap a dead buffer left
 * between long-lived ones, not into the big gap at the start. */
static void test_best_fit(void) {
  mp_buffer b[] = {
      {10000, 0, 2, 0}, /* X1: dies early, placed first (largest): offset 0 */
      {9000, 0, 9, 0},  /* L1: long-lived, after X1 */
      {2000, 0, 2, 0},  /* X2: dies early, after L1 */
      {1500, 0, 9, 0},  /* L2: long-lived, after X2 */
      {1000, 5, 9, 0},  /* E: gaps left are X1's (10 KB) and X2's (2 KB) */
  };
  size_t total;
  CHECK_OK(memplan_solve(b, 5, &total));
  CHECK(memplan_check(b, 5, total));
  CHECK(b[0].offset == 0);
  CHECK(b[4].offset == b[2].offset);
}

int main(void) {
  test_random();
  test_reuse();
  test_best_fit();
  return test_report("test_memplan");
}
