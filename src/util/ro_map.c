/* See ro_map.h. */
#include "util/ro_map.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/env.h"

typedef struct ro_range {
  uintptr_t lo, hi;
  bool refill; /* a file mapping: dropped pages are read back from the file */
} ro_range;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ro_range *ranges;
static int n_ranges, cap_ranges;
static atomic_uint_least64_t released;

static void add(const void *p, size_t len, bool refill) {
  if (!p || !len) return;
  pthread_mutex_lock(&mu);
  if (n_ranges == cap_ranges) {
    int cap = cap_ranges ? 2 * cap_ranges : 8;
    ro_range *r = realloc(ranges, sizeof *r * (size_t)cap);
    if (!r) {
      pthread_mutex_unlock(&mu);
      return;
    }
    ranges = r;
    cap_ranges = cap;
  }
  ranges[n_ranges++] = (ro_range){(uintptr_t)p, (uintptr_t)p + len, refill};
  pthread_mutex_unlock(&mu);
}

void ro_map_add(const void *p, size_t len) { add(p, len, true); }

void ro_map_add_scratch(const void *p, size_t len) { add(p, len, false); }

void ro_map_remove(const void *p) {
  if (!p) return;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n_ranges; i++)
    if (ranges[i].lo == (uintptr_t)p) {
      ranges[i] = ranges[--n_ranges];
      break;
    }
  if (!n_ranges) { /* nothing mapped: no table left behind for leak checkers */
    free(ranges);
    ranges = NULL;
    cap_ranges = 0;
  }
  pthread_mutex_unlock(&mu);
}

static bool release_on(void) {
  static atomic_int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    v = env_flag_on("SMELT_WEIGHT_RELEASE");
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v;
}

static size_t drop(const void *p, size_t len, bool scratch_too) {
  if (!p || !len || !release_on()) return 0;
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  uintptr_t lo = (uintptr_t)p, hi = lo + len;
  if (hi < lo) return 0;
  uintptr_t a = (lo + page - 1) & ~(page - 1), b = hi & ~(page - 1);
  if (b <= a) return 0;
  size_t dropped = 0;
  /* under the lock, so the mapping cannot be unmapped (and the range reused
   * by other memory) between the check and the madvise */
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n_ranges; i++)
    if (ranges[i].lo <= lo && hi <= ranges[i].hi) {
      if ((ranges[i].refill || scratch_too) && madvise((void *)a, b - a, MADV_DONTNEED) == 0) dropped = b - a;
      break;
    }
  pthread_mutex_unlock(&mu);
  if (dropped) atomic_fetch_add_explicit(&released, dropped, memory_order_relaxed);
  return dropped;
}

size_t ro_map_release(const void *p, size_t len) { return drop(p, len, false); }

size_t ro_map_discard(const void *p, size_t len) { return drop(p, len, true); }

uint64_t ro_map_released_total(void) {
  return atomic_load_explicit(&released, memory_order_relaxed);
}
