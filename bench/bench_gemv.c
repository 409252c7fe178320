/* Decode-step GEMV benchmark: one "token" of a GPT-2 124M-sized decoder's
 * weight products (12 layers of 768x2304, 768x768, 768x3072, 3072x768 and a
 * 768x50257 LM head, ~497 MB of fp32 weights, far past the caches) at M rows,
 * each weight read once per token as a decode step reads them.  Paths, run
 * token by token in turn in one process (compare by ratio; the machine is
 * shared): "inplace" -- the small-M path reading B where it lies (what a
 * weight gets without packing), "packed" -- the small-M path over the weight
 * packed ahead (what a session gets for a constant weight), and "int8" --
 * the same products at precision int8 (row quantized, then kernels/qgemm.h
 * over the int8 weights; GB/s of the int8 bytes) and "bf16" -- at
 * precision bf16 (kernels/wbf16.h; GB/s of the bf16 bytes), "fp16" -- at
 * precision fp16 (the same kernels over fp16 weights, widened with F16C;
 * GB/s of the fp16 bytes), and "int4" --
 * at precision int4 (kernels/q4gemm.h: rows quantized to int8 groups, the
 * u4 x s8 kernel; GB/s of the int4 block's bytes).  Prints ms per
 * token and GB/s (weight bytes / time), best and median of the runs.
 *
 * usage: bench_gemv [--threads 1,2] [--rows 1,2] [--reps N] [--layers L] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h"
#include "kernels/q4gemm.h"
#include "kernels/qgemm.h"
#include "kernels/wbf16.h"
#include "ir/tensor.h"
#include "parallel/pool.h"

typedef struct weight {
  int64_t K, N;
  float *B;
  gemm_packed *pk;
  void *q8; /* int8 weights (qgemm) */
  qgemm_weights qw;
  void *h; /* bf16 weights (wbf16) */
  wbf16_weights hw;
  void *f; /* fp16 weights (wbf16's fp16 format) */
  wbf16_weights fw;
  void *q4; /* int4 weights (q4gemm) */
  q4gemm_weights w4;
} weight;

static double token(smelt_pool *pool, weight *w, int nw, int M, const float *A, float *C, gemm_path path) {
  double t0 = now_s();
  for (int i = 0; i < nw; i++) {
    gemm_params p = gemm_params_default();
    p.M = M, p.N = w[i].N, p.K = w[i].K;
    p.A = A, p.lda = w[i].K, p.B = w[i].B, p.ldb = w[i].N, p.C = C, p.ldc = w[i].N;
    p.packed_b = path == GEMM_PATH_SMALL_M_PACKED ? w[i].pk : NULL;
    if (gemm_f32_run(pool, &p, isa_active(), path, NULL)) abort();
  }
  return now_s() - t0;
}

/* The int8 path as a session runs it per product: quantize the row(s), then qgemm_run. */
static double token_q8(smelt_pool *pool, weight *w, int nw, int M, const float *A, float *C, uint8_t *qa) {
  double t0 = now_s();
  float sa[8];
  int32_t za[8];
  for (int i = 0; i < nw; i++) {
    qgemm_quantize_a(pool, isa_active(), M, w[i].K, A, w[i].K, qa, sa, za);
    qgemm_args a = {.M = M, .qa = qa, .sa = sa, .za = za, .w = &w[i].qw, .alpha = 1.f, .C = C, .ldc = w[i].N};
    qgemm_run(pool, isa_active(), &a);
  }
  return now_s() - t0;
}

/* The weight-only bf16 (fp16) path (kernels/wbf16.h). */
static double token_bf16(smelt_pool *pool, weight *w, int nw, int M, const float *A, float *C, bool f16) {
  double t0 = now_s();
  for (int i = 0; i < nw; i++) {
    wbf16_args a = {.M = M, .A = A, .lda = w[i].K, .w = f16 ? &w[i].fw : &w[i].hw, .alpha = 1.f, .C = C, .ldc = w[i].N};
    if (wbf16_run(pool, isa_active(), &a)) abort();
  }
  return now_s() - t0;
}

/* The int4 path (kernels/q4gemm.h), as a session runs it per product. */
static double token_q4(smelt_pool *pool, weight *w, int nw, int M, const float *A, float *C) {
  double t0 = now_s();
  for (int i = 0; i < nw; i++) {
    q4gemm_args a = {.M = M, .A = A, .lda = w[i].K, .w = &w[i].w4, .alpha = 1.f, .C = C, .ldc = w[i].N};
    if (q4gemm_run(pool, isa_active(), &a)) abort();
  }
  return now_s() - t0;
}

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    out[n++] = atoi(s);
    s = strchr(s, ',');
    if (!s) break;
    s++;
  }
  return n;
}

int main(int argc, char **argv) {
  int threads[4] = {1, 2}, n_threads = 2, rows[8] = {1}, n_rows = 1, reps = 15, layers = 12;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) n_threads = parse_list(argv[++i], threads, 4);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) n_rows = parse_list(argv[++i], rows, 8);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
    else {
      fprintf(stderr, "unknown argument '%s' (see the comment at the top of bench_gemv.c)\n", argv[i]);
      return 2;
    }
  }
  const int64_t shapes[4][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  int nw = 4 * layers + 1;
  weight *w = calloc((size_t)nw, sizeof *w);
  double bytes = 0, qbytes = 0, hbytes = 0, q4bytes = 0;
  smelt_pool *pool1 = NULL;
  if (!w || pool_create(2, &pool1)) return 1;
  for (int i = 0; i < nw; i++) {
    w[i].K = i < 4 * layers ? shapes[i % 4][0] : 768;
    w[i].N = i < 4 * layers ? shapes[i % 4][1] : 50257;
    size_t n = (size_t)(w[i].K * w[i].N);
    w[i].B = malloc(n * sizeof(float));
    if (!w[i].B) return 1;
    for (size_t j = 0; j < n; j++) w[i].B[j] = (float)((j * 2654435761u) % 1000) * 1e-3f - 0.5f;
    if (gemm_pack_b_prepare(pool1, isa_active(), false, w[i].K, w[i].N, w[i].B, w[i].N, &w[i].pk)) return 1;
    bytes += 4.0 * (double)n;
    w[i].q8 = tensor_data_alloc(qgemm_weights_bytes(w[i].K, w[i].N));
    if (!w[i].q8) return 1;
    qgemm_quantize_b(pool1, false, w[i].K, w[i].N, w[i].B, w[i].q8);
    qgemm_weights_view(w[i].K, w[i].N, w[i].q8, &w[i].qw);
    qbytes += (double)qgemm_weights_bytes(w[i].K, w[i].N);
    w[i].h = tensor_data_alloc(wbf16_weights_bytes(w[i].K, w[i].N));
    if (!w[i].h) return 1;
    wbf16_pack_b(pool1, false, w[i].K, w[i].N, w[i].B, w[i].h);
    wbf16_weights_view(w[i].K, w[i].N, w[i].h, &w[i].hw);
    hbytes += (double)wbf16_weights_bytes(w[i].K, w[i].N);
    w[i].f = tensor_data_alloc(wbf16_weights_bytes(w[i].K, w[i].N));
    if (!w[i].f) return 1;
    wf16_pack_b(pool1, false, w[i].K, w[i].N, w[i].B, w[i].f);
    wf16_weights_view(w[i].K, w[i].N, w[i].f, &w[i].fw);
    w[i].q4 = tensor_data_alloc(q4gemm_weights_bytes(w[i].K, w[i].N, false));
    if (!w[i].q4) return 1;
    q4gemm_quantize_b(pool1, false, w[i].K, w[i].N, w[i].B, w[i].q4);
    q4gemm_weights_view(w[i].K, w[i].N, false, w[i].q4, &w[i].w4);
    q4bytes += (double)q4gemm_weights_bytes(w[i].K, w[i].N, false);
  }
  pool_free(pool1);
  float *A = malloc(8 * 3072 * sizeof(float)), *C = malloc(8 * 50257 * sizeof(float));
  uint8_t *qa = malloc(8 * 3072);
  for (int i = 0; i < 8 * 3072; i++) A[i] = (float)(i % 17) * 0.1f - 0.8f;
  printf("weights %.1f MB (%d products), isa %s, %d reps\n", bytes / 1e6, nw, isa_name(isa_active()), reps);
  printf("int8 weights %.1f MB, bf16 (fp16) weights %.1f MB, int4 weights %.1f MB\n", qbytes / 1e6, hbytes / 1e6,
         q4bytes / 1e6);
  printf("threads rows | inplace ms best/med  GB/s | packed ms best/med  GB/s | speedup (med) | int8 ms best/med  GB/s"
         " | bf16 ms best/med  GB/s | fp16 ms best/med  GB/s | int4 ms best/med  GB/s\n");
  for (int ti = 0; ti < n_threads; ti++) {
    smelt_pool *pool = NULL;
    if (pool_create(threads[ti], &pool)) return 1;
    for (int ri = 0; ri < n_rows; ri++) {
      double *tin = malloc(sizeof(double) * (size_t)reps), *tpk = malloc(sizeof(double) * (size_t)reps);
      double *tq = malloc(sizeof(double) * (size_t)reps), *th = malloc(sizeof(double) * (size_t)reps);
      double *t4 = malloc(sizeof(double) * (size_t)reps), *tf = malloc(sizeof(double) * (size_t)reps);
      token_q8(pool, w, nw, rows[ri], A, C, qa);
      token_bf16(pool, w, nw, rows[ri], A, C, false);
      token_bf16(pool, w, nw, rows[ri], A, C, true);
      token_q4(pool, w, nw, rows[ri], A, C);
      token(pool, w, nw, rows[ri], A, C, GEMM_PATH_SMALL_M);
      token(pool, w, nw, rows[ri], A, C, GEMM_PATH_SMALL_M_PACKED);
      for (int r = 0; r < reps; r++) {
        tin[r] = token(pool, w, nw, rows[ri], A, C, GEMM_PATH_SMALL_M);
        tpk[r] = token(pool, w, nw, rows[ri], A, C, GEMM_PATH_SMALL_M_PACKED);
        tq[r] = token_q8(pool, w, nw, rows[ri], A, C, qa);
        th[r] = token_bf16(pool, w, nw, rows[ri], A, C, false);
        tf[r] = token_bf16(pool, w, nw, rows[ri], A, C, true);
        t4[r] = token_q4(pool, w, nw, rows[ri], A, C);
      }
      qsort(t4, (size_t)reps, sizeof(double), cmp_double);
      qsort(th, (size_t)reps, sizeof(double), cmp_double);
      qsort(tf, (size_t)reps, sizeof(double), cmp_double);
      qsort(tq, (size_t)reps, sizeof(double), cmp_double);
      qsort(tin, (size_t)reps, sizeof(double), cmp_double);
      qsort(tpk, (size_t)reps, sizeof(double), cmp_double);
      double mi = tin[reps / 2], mp = tpk[reps / 2];
      printf("%7d %4d | %8.2f %8.2f %6.1f | %8.2f %8.2f %6.1f | %.2fx | %8.2f %8.2f %6.1f | %8.2f %8.2f %6.1f"
             " | %8.2f %8.2f %6.1f | %8.2f %8.2f %6.1f\n",
             threads[ti], rows[ri], tin[0] * 1e3, mi * 1e3, bytes / mi / 1e9, tpk[0] * 1e3, mp * 1e3,
             bytes / mp / 1e9, mi / mp, tq[0] * 1e3, tq[reps / 2] * 1e3, qbytes / tq[reps / 2] / 1e9, th[0] * 1e3,
             th[reps / 2] * 1e3, hbytes / th[reps / 2] / 1e9, tf[0] * 1e3, tf[reps / 2] * 1e3,
             hbytes / tf[reps / 2] / 1e9, t4[0] * 1e3, t4[reps / 2] * 1e3,
             q4bytes / t4[reps / 2] / 1e9);
      free(t4);
      free(tq);
      free(th);
      free(tf);
      free(tin);
      free(tpk);
    }
    pool_free(pool);
  }
  for (int i = 0; i < nw; i++) {
    free(w[i].B);
    gemm_packed_free(w[i].pk);
    tensor_data_free(w[i].q8);
    tensor_data_free(w[i].h);
    tensor_data_free(w[i].f);
    tensor_data_free(w[i].q4);
  }
  free(w);
  free(A);
  free(C);
  free(qa);
  return 0;
}
