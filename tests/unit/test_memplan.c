/* The memory planner: no two live buffers overlap, alignment, the arena is
 * no larger than the peak of live bytes would need on simple cases, and
 * best fit reuses the tightest gap. */
#include <stdint.h>
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

/* The planner as first written (every placed buffer scanned for each new
 * one, O(n^2)): the indexed one must place every buffer at the same offset. */
static int cmp_ref_order(const void *a, const void *b, void *ctx) {
  const mp_buffer *buf = ctx;
  int x = *(const int *)a, y = *(const int *)b;
  if (buf[x].size != buf[y].size) return buf[x].size > buf[y].size ? -1 : 1;
  if (buf[x].first != buf[y].first) return buf[x].first - buf[y].first;
  return x - y;
}
static int cmp_lo(const void *a, const void *b) {
  const size_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}
static size_t up64(size_t n) { return (n + 63) / 64 * 64; }
static void reference_solve(mp_buffer *b, int n) {
  int *order = malloc(sizeof(int) * (size_t)n), *placed = malloc(sizeof(int) * (size_t)n), n_placed = 0;
  size_t(*occ)[2] = malloc(sizeof *occ * (size_t)n);
  for (int i = 0; i < n; i++) order[i] = i;
  qsort_r(order, (size_t)n, sizeof *order, cmp_ref_order, b);
  for (int oi = 0; oi < n; oi++) {
    mp_buffer *cur = &b[order[oi]];
    cur->offset = 0;
    if (!cur->size) continue;
    int n_occ = 0;
    for (int j = 0; j < n_placed; j++) {
      const mp_buffer *o = &b[placed[j]];
      if (cur->first <= o->last && o->first <= cur->last) {
        occ[n_occ][0] = o->offset;
        occ[n_occ++][1] = o->offset + up64(o->size);
      }
    }
    qsort(occ, (size_t)n_occ, sizeof *occ, cmp_lo);
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (int i = 0; i < n_occ; i++) {
      if (occ[i][0] > cursor && occ[i][0] - cursor >= up64(cur->size) && occ[i][0] - cursor < best_gap) {
        best_gap = occ[i][0] - cursor;
        best = cursor;
      }
      if (occ[i][1] > cursor) cursor = occ[i][1];
    }
    cur->offset = best != SIZE_MAX ? best : cursor;
    placed[n_placed++] = order[oi];
  }
  free(order);
  free(placed);
  free(occ);
}

static void test_same_as_reference(void) {
  for (int trial = 0; trial < 60; trial++) {
    int n = 1 + (int)(rng() % (trial < 50 ? 200 : 3000)), steps = 1 + (int)(rng() % (trial % 2 ? 50 : 5000));
    int maxlen = 1 + (int)(rng() % (unsigned)steps);
    mp_buffer *b = calloc((size_t)n, sizeof *b), *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) {
      b[i].size = rng() % 7 ? 1 + rng() % (rng() % 2 ? 300 : 100000) : 0; /* ties in size too */
      b[i].first = (int)(rng() % (unsigned)steps) - 3;
      b[i].last = b[i].first + (int)(rng() % (unsigned)maxlen);
      r[i] = b[i];
    }
    size_t total = 0;
    CHECK_OK(memplan_solve(b, n, &total));
    reference_solve(r, n);
    int same = 1;
    for (int i = 0; i < n; i++) same &= b[i].offset == r[i].offset;
    CHECK(same);
    CHECK(memplan_check(b, n, total));
    free(b);
    free(r);
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
  test_same_as_reference();
  test_reuse();
  test_best_fit();
  return test_report("test_memplan");
}
