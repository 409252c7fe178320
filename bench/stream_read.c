/* Read bandwidth of this machine, the figure decode speed is set against
 * (bytes of weights read per token / time per token): 512 MB of floats summed
 * with AVX2 loads, S contiguous streams per thread, 1 and 2 threads (or
 * THREADS), best of 10 passes.
 *
 *   gcc -O2 -mavx2 -fopenmp bench/stream_read.c -o /tmp/stream_read
 *   /tmp/stream_read [STREAMS_PER_THREAD=1] [MAX_THREADS=2] */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t n = (size_t)128 << 20;
  int streams = argc > 1 ? atoi(argv[1]) : 1, max_threads = argc > 2 ? atoi(argv[2]) : 2;
  if (streams < 1) streams = 1;
  float *a = aligned_alloc(64, n * sizeof(float));
  if (!a) return 1;
  for (size_t i = 0; i < n; i++) a[i] = (float)(i & 1023);
  for (int th = 1; th <= max_threads; th++) {
    double best = 1e9;
    float total = 0;
    for (int r = 0; r < 10; r++) {
      double t = now();
#pragma omp parallel num_threads(th) reduction(+ : total)
      {
        size_t per = n / (size_t)th, base = per * (size_t)omp_get_thread_num(), seg = per / (size_t)streams;
        seg -= seg % 16;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (size_t i = 0; i < seg; i += 16)
          for (int k = 0; k < streams; k++) {
            const float *p = a + base + (size_t)k * seg + i;
            s0 = _mm256_add_ps(s0, _mm256_load_ps(p));
            s1 = _mm256_add_ps(s1, _mm256_load_ps(p + 8));
          }
        __m256 s = _mm256_add_ps(s0, s1);
        total += s[0] + s[7];
      }
      t = now() - t;
      if (t < best) best = t;
    }
    printf("threads %d, %d stream(s) each: read %.1f GB/s (checksum %g)\n", th, streams,
           (double)(n * sizeof(float)) / best / 1e9, (double)total);
  }
  free(a);
  return 0;
}
