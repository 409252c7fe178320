#include <stdatomic.h>

#include "check.h"
#include "runtime/pool.h"

static atomic_long total;
static void add_range(void *ctx, int64_t b, int64_t e) {
  long s = 0;
  for (int64_t i = b; i < e; i++) s += (long)i;
  atomic_fetch_add(&total, s);
  (void)ctx;
}

int main(void) {
  for (int threads = 1; threads <= 4; threads++) {
    smelt_pool *p = NULL;
    CHECK_OK(pool_create(threads, &p));
    CHECK(pool_threads(p) == threads);
    for (int64_t n = 0; n < 2000; n += 37) {
      atomic_store(&total, 0);
      pool_parallel_for(p, n, 1, add_range, NULL);
      CHECK(atomic_load(&total) == n * (n - 1) / 2);
    }
    pool_free(p);
  }
  atomic_store(&total, 0);
  pool_parallel_for(NULL, 10, 1, add_range, NULL);
  CHECK(atomic_load(&total) == 45);
  return test_report("pool");
}
