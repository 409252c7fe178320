/* Large copies split over threads (util/copy_par.h): every byte arrives,
 * nothing past the end is written, the done callback sees each source byte
 * exactly once in steps of at most COPY_PAR_STEP, and the split follows the
 * part size and thread cap. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/copy_par.h"

typedef struct seen {
  pthread_mutex_t mu;
  const uint8_t *base;
  unsigned char *hits; /* per source byte: how many done calls covered it */
  size_t n;
  int calls, too_long, outside;
} seen;

static void note(const void *src, size_t n, void *ctx) {
  seen *s = ctx;
  pthread_mutex_lock(&s->mu);
  s->calls++;
  if (n > COPY_PAR_STEP) s->too_long++;
  const uint8_t *p = src;
  if (p < s->base || p + n > s->base + s->n) s->outside++;
  else
    for (size_t i = 0; i < n; i++) s->hits[p - s->base + i]++;
  pthread_mutex_unlock(&s->mu);
}

static void one(size_t n) {
  uint8_t *src = malloc(n + 1), *dst = malloc(n + 64);
  CHECK(src && dst);
  if (!src || !dst) return;
  for (size_t i = 0; i < n; i++) src[i] = (uint8_t)(i * 131 + (i >> 12));
  memset(dst, 0xee, n + 64);
  seen s = {PTHREAD_MUTEX_INITIALIZER, src, calloc(n + 1, 1), n, 0, 0, 0};
  copy_par(dst, src, n, note, &s);
  CHECK(!memcmp(dst, src, n));
  bool tail = true;
  for (int i = 0; i < 64; i++) tail = tail && dst[n + i] == 0xee;
  CHECK(tail);
  bool once = true;
  for (size_t i = 0; i < n; i++) once = once && s.hits[i] == 1;
  CHECK(once && !s.too_long && !s.outside);
  CHECK(n == 0 || s.calls >= (int)((n + COPY_PAR_STEP - 1) / COPY_PAR_STEP));
  copy_par(dst, src, n, NULL, NULL); /* no callback */
  CHECK(!memcmp(dst, src, n));
  free(s.hits);
  free(src);
  free(dst);
}

int main(void) {
  CHECK(copy_par_parts(0) == 1 && copy_par_parts(COPY_PAR_MIN_PART - 1) == 1);
  CHECK(copy_par_parts((size_t)1 << 40) >= 1 && copy_par_parts((size_t)1 << 40) <= COPY_PAR_MAX_THREADS);
  CHECK(copy_par_parts(2 * COPY_PAR_MIN_PART) <= 2);
  size_t sizes[] = {0, 1, 4097, COPY_PAR_STEP + 3, 2 * COPY_PAR_MIN_PART + 12345, 5 * COPY_PAR_MIN_PART + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) one(sizes[i]);
  return test_report("test_copy_par");
}
