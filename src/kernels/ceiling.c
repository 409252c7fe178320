#include "kernels/ceiling.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/tensor.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- peak ---- */

#define CHAINS16(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* 16 chains x 16 lanes x 2 flops per iteration */
__attribute__((target("avx512f"), noinline)) static float peak_avx512(long n, float seed) {
  __m512 m = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(seed + (float)(i));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  CHAINS16(DECL)
  for (long k = 0; k < n; k++) { CHAINS16(STEP) }
  __m512 s = _mm512_setzero_ps();
  CHAINS16(SUM)
  return _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}

/* 12 chains x 8 lanes x 2 flops (16 ymm registers) */
#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
__attribute__((target("avx2,fma"), noinline)) static float peak_avx2(long n, float seed) {
  __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(seed + (float)(i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
  CHAINS12(DECL)
  for (long k = 0; k < n; k++) { CHAINS12(STEP) }
  __m256 s = _mm256_setzero_ps();
  CHAINS12(SUM)
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0] + o[7];
#undef DECL
#undef STEP
#undef SUM
}
#endif

/* what plain C gets from independent multiply-adds: 16 chains x 2 flops */
__attribute__((noinline)) static float peak_scalar(long n, float seed) {
  float a[16];
  for (int i = 0; i < 16; i++) a[i] = seed + (float)i;
  for (long k = 0; k < n; k++)
    for (int i = 0; i < 16; i++) a[i] = a[i] * 0.999f + 1e-3f;
  float s = 0;
  for (int i = 0; i < 16; i++) s += a[i];
  return s;
}

static double flops_per_iter(isa_level isa) {
  return isa == ISA_AVX512 ? 16 * 16 * 2 : isa == ISA_AVX2 ? 12 * 8 * 2 : 16 * 2;
}

typedef struct peak_job {
  isa_level isa;
  long n;
  volatile float sink;
} peak_job;

static void peak_items(void *v, int64_t b, int64_t e) {
  peak_job *j = v;
  for (int64_t i = b; i < e; i++) {
#if defined(__x86_64__) || defined(__i386__)
    if (j->isa == ISA_AVX512) j->sink = peak_avx512(j->n, (float)i);
    else if (j->isa == ISA_AVX2) j->sink = peak_avx2(j->n, (float)i);
    else
#endif
      j->sink = peak_scalar(j->n, (float)i);
  }
}

double ceiling_peak_gflops(smelt_pool *pool, isa_level isa, int threads) {
  isa = isa_clamp(isa);
  if (threads < 1) threads = 1;
  peak_job j = {isa, isa == ISA_SCALAR ? 100000 : 200000, 0};
  double best = 0;
  for (int r = 0; r < 30; r++) { /* ~1-3 ms per trial */
    double t = now_s();
    pool_parallel_for(threads > 1 ? pool : NULL, threads, 1, peak_items, &j);
    t = now_s() - t;
    double g = flops_per_iter(isa) * (double)j.n * threads / t * 1e-9;
    if (g > best) best = g;
  }
  return best;
}

/* ---- stream triad ---- */

typedef struct triad_job {
  float *a;
  const float *b, *c;
  int64_t n;
} triad_job;

static void triad_part(void *v, int64_t p0, int64_t p1) {
  triad_job *j = v;
  int64_t per = (j->n + 63) / 64; /* 64 parts: each thread streams its own */
  for (int64_t p = p0; p < p1; p++) {
    int64_t e = (p + 1) * per < j->n ? (p + 1) * per : j->n;
    for (int64_t i = p * per; i < e; i++) j->a[i] = j->b[i] + 3.0f * j->c[i];
  }
}

double ceiling_stream_gbs(smelt_pool *pool, int threads) {
  int64_t n = (int64_t)24 << 20; /* 3 x 96 MiB: far beyond the caches */
  float *a = tensor_data_alloc(sizeof(float) * (size_t)n);
  float *b = tensor_data_alloc(sizeof(float) * (size_t)n);
  float *c = tensor_data_alloc(sizeof(float) * (size_t)n);
  double best = 0;
  if (a && b && c) {
    memset(a, 0, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) b[i] = (float)(i & 1023), c[i] = 1.0f;
    triad_job j = {a, b, c, n};
    for (int r = 0; r < 6; r++) {
      double t = now_s();
      pool_parallel_for(threads > 1 ? pool : NULL, 64, 1, triad_part, &j);
      t = now_s() - t;
      double g = 12.0 * (double)n / t * 1e-9;
      if (r > 0 && g > best) best = g; /* the first pass pages the arrays in */
    }
  }
  tensor_data_free(a);
  tensor_data_free(b);
  tensor_data_free(c);
  return best;
}
