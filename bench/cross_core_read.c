/* What a core pays to read data another core just wrote, against data it
 * wrote itself: the cost a parallel split pays when an operator's threads
 * read what the operator before wrote from other cores (docs/PARALLEL.md,
 * thirty-fifth session).  Core 0 reads SIZE MB of floats (one load per
 * 64-byte line) right after writing them itself, then right after core 1
 * wrote them; best of 20 passes each.
 *
 *   gcc -O2 -march=native -pthread bench/cross_core_read.c -o /tmp/cross_core_read
 *   /tmp/cross_core_read [MB...]          (default: 1 3 8 64)
 *
 * 2-core Zen 5 VM (2026-11-28): own-written 106 / 100 / 94 / 44 GB/s at
 * 1 / 3 / 8 / 64 MB, other-core-written 41 / 35 / 33 / 33 GB/s. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASSES 20

static size_t n;
static float *buf;
static atomic_int turn; /* 2r + 1: core 1 writes pass r; 2r + 2: it is done */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void write_all(float v) {
  for (size_t i = 0; i < n; i++) buf[i] = v;
}

static float read_all(void) {
  float s = 0;
  for (size_t i = 0; i < n; i += 16) s += buf[i];
  return s;
}

static void *writer(void *arg) {
  (void)arg;
  if (pin(1)) fprintf(stderr, "cross_core_read: could not pin the writer to CPU 1\n");
  for (int r = 0; r < PASSES; r++) {
    while (atomic_load(&turn) != 2 * r + 1) {
    }
    write_all((float)r);
    atomic_store(&turn, 2 * r + 2);
  }
  return NULL;
}

static int one(double mb) {
  n = (size_t)(mb * 1024 * 1024 / sizeof(float)) / 16 * 16;
  if (n == 0) return 0;
  buf = aligned_alloc(64, n * sizeof(float));
  if (!buf) {
    fprintf(stderr, "cross_core_read: %.1f MB: out of memory\n", mb);
    return 1;
  }
  memset(buf, 0, n * sizeof(float));
  double own = 1e9, other = 1e9;
  float sink = 0;
  for (int r = 0; r < PASSES; r++) {
    write_all((float)r);
    double t = now();
    sink += read_all();
    t = now() - t;
    own = t < own ? t : own;
  }
  atomic_store(&turn, 0);
  pthread_t th;
  if (pthread_create(&th, NULL, writer, NULL)) {
    fprintf(stderr, "cross_core_read: no second thread\n");
    free(buf);
    return 1;
  }
  for (int r = 0; r < PASSES; r++) {
    atomic_store(&turn, 2 * r + 1);
    while (atomic_load(&turn) != 2 * r + 2) {
    }
    double t = now();
    sink += read_all();
    t = now() - t;
    other = t < other ? t : other;
  }
  pthread_join(th, NULL);
  double bytes = (double)n * sizeof(float);
  volatile float keep = sink; /* the reads are not optimized away */
  (void)keep;
  printf("%6.1f MB: read after this core wrote it %6.1f GB/s, after the other core wrote it %6.1f GB/s\n", mb,
         bytes / own / 1e9, bytes / other / 1e9);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (pin(0)) fprintf(stderr, "cross_core_read: could not pin the reader to CPU 0\n");
  static const double dflt[] = {1, 3, 8, 64};
  int bad = 0;
  if (argc > 1)
    for (int i = 1; i < argc; i++) bad |= one(atof(argv[i]));
  else
    for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++) bad |= one(dflt[i]);
  return bad;
}
