/* Large copies split over short-lived threads (see copy_par.h). */
#include "util/copy_par.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct part {
  uint8_t *dst;
  const uint8_t *src;
  size_t n;
  copy_par_done done;
  void *ctx;
} part;

static void copy_part(const part *p) {
  for (size_t o = 0; o < p->n; o += COPY_PAR_STEP) {
    size_t k = p->n - o < COPY_PAR_STEP ? p->n - o : COPY_PAR_STEP;
    memcpy(p->dst + o, p->src + o, k);
    if (p->done) p->done(p->src + o, k, p->ctx);
  }
}

static void *part_main(void *arg) {
  copy_part(arg);
  return NULL;
}

static int cores(void) {
#ifdef CPU_COUNT
  cpu_set_t s;
  if (!sched_getaffinity(0, sizeof s, &s) && CPU_COUNT(&s) > 0) return CPU_COUNT(&s);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int copy_par_parts(size_t n) {
  size_t by_size = n / COPY_PAR_MIN_PART;
  if (by_size < 2) return 1; /* one part: no need to ask how many cores (a system call) */
  int k = cores();
  if (k > COPY_PAR_MAX_THREADS) k = COPY_PAR_MAX_THREADS;
  if (by_size < (size_t)k) k = (int)by_size;
  return k < 1 ? 1 : k;
}

void copy_par(void *dst, const void *src, size_t n, copy_par_done done, void *ctx) {
  int k = copy_par_parts(n);
  part parts[COPY_PAR_MAX_THREADS];
  pthread_t th[COPY_PAR_MAX_THREADS];
  bool started[COPY_PAR_MAX_THREADS] = {false};
  size_t each = (n / (size_t)k + 4095) & ~(size_t)4095; /* whole pages: no page faulted from two threads */
  for (int i = 0; i < k; i++) {
    size_t lo = each * (size_t)i < n ? each * (size_t)i : n, hi = lo + each < n && i < k - 1 ? lo + each : n;
    parts[i] = (part){(uint8_t *)dst + lo, (const uint8_t *)src + lo, hi - lo, done, ctx};
  }
  for (int i = 1; i < k; i++) started[i] = pthread_create(&th[i], NULL, part_main, &parts[i]) == 0;
  copy_part(&parts[0]);
  for (int i = 1; i < k; i++) {
    if (started[i]) pthread_join(th[i], NULL);
    else copy_part(&parts[i]);
  }
}
