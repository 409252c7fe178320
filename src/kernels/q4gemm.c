/* int4 weight GEMM: quantization, packing, the scalar kernel and the driver
 * (see q4gemm.h).  The AVX2 kernel is x86/q4_gemm_avx2.c.
 *
 * Few rows: the panels are split among the threads as contiguous runs (each
 * thread streams its own part of the weight, one panel front to back at a
 * time); each panel runs every row while it is in cache.  Many rows: chunks
 * of Q4_CHUNK columns, each dequantized into an fp32 panel of the thread's
 * and multiplied by the fp32 GEMM on that thread. */
#include "kernels/q4gemm.h"

#include <math.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86, gemm_f32_isa */
#include "util/err.h"

#define Q4_MAX_DIM ((int64_t)1 << 40)
#define Q4_MIN_PARALLEL_BYTES (128 << 10) /* weight bytes below which one thread runs it */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* x rounded to the nearest integer, ties to even, for |x| < 2^22 (adding and
 * taking off 1.5 * 2^23 leaves no fraction bits): nearbyintf without a libm
 * call on baseline x86-64 (no SSE4.1 roundss). */
static inline float round_even(float x) { return (x + 0x1.8p23f) - 0x1.8p23f; }

size_t q4gemm_weights_bytes(int64_t K, int64_t N, bool asym) {
  if (K <= 0 || N <= 0 || K > Q4_MAX_DIM / N) return 0;
  int64_t Kg = round_up(K, Q4_GROUP) / Q4_GROUP, Np = round_up(N, Q4_NR);
  return (size_t)(Np / Q4_NR * Kg * q4gemm_group_bytes(asym));
}

void q4gemm_weights_view(int64_t K, int64_t N, bool asym, const void *blob, q4gemm_weights *out) {
  out->K = K, out->N = N, out->Kg = round_up(K, Q4_GROUP) / Q4_GROUP, out->Np = round_up(N, Q4_NR);
  out->asym = asym;
  out->w = blob;
}

static uint8_t *group_at(const q4gemm_weights *w, void *blob, int64_t n, int64_t g) {
  return (uint8_t *)blob + (n / Q4_NR * w->Kg + g) * q4gemm_group_bytes(w->asym);
}

void q4gemm_clear(const q4gemm_weights *w, void *blob) {
  memset(blob, 0, q4gemm_weights_bytes(w->K, w->N, w->asym));
  if (w->asym) return;
  /* symmetric: code 8 is 0 */
  int64_t groups = w->Np / Q4_NR * w->Kg;
  for (int64_t i = 0; i < groups; i++) memset((uint8_t *)blob + i * q4gemm_group_bytes(false), 0x88, 8 * 32);
}

void q4gemm_set(const q4gemm_weights *w, void *blob, int64_t n, int64_t g, const uint8_t q[Q4_GROUP], float s,
                float m) {
  uint8_t *d = group_at(w, blob, n, g);
  int j = (int)(n % Q4_NR), h = j / 8, jj = j % 8;
  for (int c = 0; c < 4; c++)
    for (int t = 0; t < 4; t++)
      d[(2 * c + h) * 32 + 4 * jj + t] = (uint8_t)((q[8 * c + t] & 15) | (q[8 * c + 4 + t] & 15) << 4);
  float *sc = (float *)(d + 8 * 32);
  sc[j] = s;
  if (w->asym) sc[Q4_NR + j] = m;
}

float q4gemm_weight_at(const q4gemm_weights *w, int64_t k, int64_t n) {
  const uint8_t *d = group_at(w, (void *)w->w, n, k / Q4_GROUP);
  int j = (int)(n % Q4_NR), h = j / 8, jj = j % 8, o = (int)(k % Q4_GROUP), c = o / 8, t = o % 4;
  uint8_t b = d[(2 * c + h) * 32 + 4 * jj + t];
  int q = o % 8 < 4 ? b & 15 : b >> 4;
  const float *sc = (const float *)(d + 8 * 32);
  return w->asym ? sc[j] * (float)q + sc[Q4_NR + j] : sc[j] * (float)(q - 8);
}

typedef struct qb_job {
  bool trans_b;
  const float *B;
  q4gemm_weights w;
  void *blob;
} qb_job;

/* One group of one panel: 32 k x 16 columns in x (zero past K and N),
 * quantized into d (q4gemm_group_bytes(false) bytes).  Simple loops over the
 * 16 columns: the compiler vectorizes them. */
static void quantize_group(float x[Q4_GROUP][Q4_NR], uint8_t *d) {
  float amax[Q4_NR] = {0}, mx[Q4_NR] = {0}, inv[Q4_NR], *sc = (float *)(d + 8 * 32);
  bool bad[Q4_NR] = {0};
  for (int i = 0; i < Q4_GROUP; i++)
    for (int j = 0; j < Q4_NR; j++) {
      float v = fabsf(x[i][j]);
      bad[j] |= !(v <= 3.4e38f);
      mx[j] = v > amax[j] ? x[i][j] : mx[j];
      amax[j] = v > amax[j] ? v : amax[j];
    }
  for (int j = 0; j < Q4_NR; j++) {
    sc[j] = bad[j] ? NAN : mx[j] / -8.f;
    inv[j] = sc[j] != 0.f && !bad[j] ? 1.f / sc[j] : 0.f;
  }
  uint8_t q[Q4_GROUP][Q4_NR];
  for (int i = 0; i < Q4_GROUP; i++)
    for (int j = 0; j < Q4_NR; j++) {
      float v = round_even(x[i][j] * inv[j]) + 8.f; /* |x inv| <= 8 */
      q[i][j] = (uint8_t)(v > 15.f ? 15.f : v < 0.f ? 0.f : v);
    }
  for (int c = 0; c < 4; c++)
    for (int h = 0; h < 2; h++)
      for (int jj = 0; jj < 8; jj++)
        for (int t = 0; t < 4; t++)
          d[(2 * c + h) * 32 + 4 * jj + t] = (uint8_t)(q[8 * c + t][8 * h + jj] | q[8 * c + 4 + t][8 * h + jj] << 4);
}

static void quantize_panels(void *ctx, int64_t p0, int64_t p1) {
  const qb_job *j = ctx;
  const q4gemm_weights *w = &j->w;
  int64_t gb = q4gemm_group_bytes(false);
  for (int64_t p = p0; p < p1; p++) {
    int64_t n0 = p * Q4_NR, cols = w->N - n0 < Q4_NR ? w->N - n0 : Q4_NR;
    for (int64_t g = 0; g < w->Kg; g++) {
      float x[Q4_GROUP][Q4_NR];
      memset(x, 0, sizeof x);
      int64_t k0 = g * Q4_GROUP, rows = w->K - k0 < Q4_GROUP ? w->K - k0 : Q4_GROUP;
      if (j->trans_b)
        for (int64_t c = 0; c < cols; c++)
          for (int64_t i = 0; i < rows; i++) x[i][c] = j->B[(n0 + c) * w->K + k0 + i];
      else
        for (int64_t i = 0; i < rows; i++) memcpy(x[i], j->B + (k0 + i) * w->N + n0, sizeof(float) * (size_t)cols);
      quantize_group(x, (uint8_t *)j->blob + (p * w->Kg + g) * gb);
    }
  }
}

void q4gemm_quantize_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  qb_job j = {.trans_b = trans_b, .B = B, .blob = blob};
  q4gemm_weights_view(K, N, false, blob, &j.w);
  pool_parallel_for(pool, j.w.Np / Q4_NR, 1, quantize_panels, &j);
}

/* ---- activations ---- */

size_t q4gemm_rows_bytes(int64_t M, int64_t K) {
  int64_t Kg = round_up(K, Q4_GROUP) / Q4_GROUP;
  return (size_t)(M * Kg) * (Q4_GROUP + 3 * 4);
}

q4gemm_row q4gemm_row_at(const void *buf, int64_t M, int64_t K, int64_t m) {
  int64_t Kg = round_up(K, Q4_GROUP) / Q4_GROUP;
  const uint8_t *b = buf;
  const float *da = (const float *)(b + M * Kg * Q4_GROUP);
  const int32_t *sum = (const int32_t *)(da + M * Kg);
  const float *dsum = (const float *)(sum + M * Kg);
  q4gemm_row r = {(const int8_t *)b + m * Kg * Q4_GROUP, da + m * Kg, sum + m * Kg, dsum + m * Kg};
  return r;
}

void q4gemm_quantize_a(int64_t M, int64_t K, const float *A, int64_t lda, void *buf) {
  int64_t Kg = round_up(K, Q4_GROUP) / Q4_GROUP;
  for (int64_t m = 0; m < M; m++) {
    q4gemm_row r = q4gemm_row_at(buf, M, K, m);
    const float *a = A + m * lda;
    for (int64_t g = 0; g < Kg; g++) {
      int64_t k0 = g * Q4_GROUP, n = K - k0 < Q4_GROUP ? K - k0 : Q4_GROUP;
      float amax = 0.f;
      bool bad = false;
      for (int64_t i = 0; i < n; i++) { /* simple loops: the compiler vectorizes them */
        float v = fabsf(a[k0 + i]);
        amax = v > amax ? v : amax;
        bad |= !(v <= 3.4e38f);
      }
      float inv = amax > 0.f && !bad ? 127.f / amax : 0.f;
      int8_t *q = (int8_t *)r.q + k0;
      int32_t s = 0;
      for (int64_t i = 0; i < Q4_GROUP; i++) {
        float v = i < n ? round_even(a[k0 + i] * inv) : 0.f; /* |a inv| <= 127 */
        q[i] = (int8_t)(v > 127.f ? 127.f : v < -127.f ? -127.f : v);
        s += q[i];
      }
      float da = bad ? NAN : amax / 127.f;
      ((float *)r.da)[g] = da;
      ((int32_t *)r.sum)[g] = s;
      ((float *)r.dsum)[g] = da * (float)s;
    }
  }
}

/* ---- the scalar kernel ---- */

void q4gemm_panel_scalar(const q4gemm_weights *w, const q4gemm_row *row, const uint8_t *panel, float acc[Q4_NR]) {
  int64_t gb = q4gemm_group_bytes(w->asym);
  for (int j = 0; j < Q4_NR; j++) acc[j] = 0.f;
  for (int64_t g = 0; g < w->Kg; g++) {
    const uint8_t *d = panel + g * gb;
    const float *sc = (const float *)(d + 8 * 32);
    const int8_t *q = row->q + g * Q4_GROUP;
    for (int j = 0; j < Q4_NR; j++) {
      int h = j / 8, jj = j % 8;
      int32_t dot = 0;
      for (int c = 0; c < 4; c++)
        for (int t = 0; t < 4; t++) {
          uint8_t b = d[(2 * c + h) * 32 + 4 * jj + t];
          dot += (int32_t)(b & 15) * q[8 * c + t] + (int32_t)(b >> 4) * q[8 * c + 4 + t];
        }
      if (w->asym) acc[j] += (float)dot * (sc[j] * row->da[g]) + sc[Q4_NR + j] * row->dsum[g];
      else acc[j] += (float)(dot - 8 * row->sum[g]) * (sc[j] * row->da[g]);
    }
  }
}

/* ---- the driver ---- */

typedef struct run_job {
  const q4gemm_args *a;
  q4gemm_panel_fn panel;
  const void *qa; /* quantized rows (few rows) */
} run_job;

static void store(const q4gemm_args *a, int64_t m, int64_t n0, int64_t cols, const float *v) {
  float *c = a->C + m * a->ldc + n0;
  for (int64_t j = 0; j < cols; j++) {
    float x = a->alpha * v[j] + (a->bias ? a->bias[n0 + j] : 0.f);
    c[j] = a->accumulate ? c[j] + x : x;
  }
}

static void run_panels(void *ctx, int64_t p0, int64_t p1) {
  const run_job *j = ctx;
  const q4gemm_args *a = j->a;
  const q4gemm_weights *w = a->w;
  int64_t panel_bytes = w->Kg * q4gemm_group_bytes(w->asym);
  float acc[Q4_NR];
  for (int64_t p = p0; p < p1; p++) {
    if (pool_stopping()) return;
    int64_t n0 = p * Q4_NR, cols = w->N - n0 < Q4_NR ? w->N - n0 : Q4_NR;
    for (int64_t m = 0; m < a->M; m++) {
      q4gemm_row r = q4gemm_row_at(j->qa, a->M, w->K, m);
      j->panel(w, &r, w->w + p * panel_bytes, acc);
      store(a, m, n0, cols, acc);
    }
  }
}

typedef struct deq_job {
  const q4gemm_args *a;
  isa_level isa;
  int64_t chunks, parts;
  float *buf; /* parts x K x Q4_CHUNK floats, or NULL */
} deq_job;

/* Columns [0, cols) of panel p (cols <= 16) as fp32, K rows at stride ld. */
static void dequant_panel(const q4gemm_weights *w, int64_t p, int cols, float *dst, int64_t ld) {
  int64_t gb = q4gemm_group_bytes(w->asym);
  for (int64_t g = 0; g < w->Kg; g++) {
    const uint8_t *d = w->w + (p * w->Kg + g) * gb;
    const float *sc = (const float *)(d + 8 * 32);
    for (int o = 0; o < Q4_GROUP && g * Q4_GROUP + o < w->K; o++) {
      int c = o / 8, t = o % 4, shift = o % 8 < 4 ? 0 : 4;
      float *row = dst + (g * Q4_GROUP + o) * ld;
      for (int j = 0; j < cols; j++) {
        int q = d[(2 * c + j / 8) * 32 + 4 * (j % 8) + t] >> shift & 15;
        row[j] = w->asym ? sc[j] * (float)q + sc[Q4_NR + j] : sc[j] * (float)(q - 8);
      }
    }
  }
}

/* Chunks [c0, c1) of Q4_CHUNK columns, dequantized one after another into B
 * (K x Q4_CHUNK floats; NULL: a slow loop without a copy). */
static void run_chunk_range(const deq_job *j, int64_t c0, int64_t c1, float *B) {
  const q4gemm_args *a = j->a;
  const q4gemm_weights *w = a->w;
  for (int64_t c = c0; c < c1; c++) {
    if (pool_stopping()) return;
    int64_t n0 = c * Q4_CHUNK, cols = w->N - n0 < Q4_CHUNK ? w->N - n0 : Q4_CHUNK;
    if (!B) {
      for (int64_t m = 0; m < a->M; m++)
        for (int64_t n = n0; n < n0 + cols; n++) {
          float s = 0.f;
          for (int64_t k = 0; k < w->K; k++) s += a->A[m * a->lda + k] * q4gemm_weight_at(w, k, n);
          store(a, m, n, 1, &s);
        }
      continue;
    }
    for (int64_t p = n0 / Q4_NR; p * Q4_NR < n0 + cols; p++) {
      int64_t pc = n0 + cols - p * Q4_NR < Q4_NR ? n0 + cols - p * Q4_NR : Q4_NR;
      dequant_panel(w, p, (int)pc, B + (p * Q4_NR - n0), cols);
    }
    gemm_params p = gemm_params_default();
    p.M = a->M, p.N = cols, p.K = w->K, p.alpha = a->alpha, p.beta = a->accumulate ? 1.f : 0.f;
    p.A = a->A, p.lda = a->lda, p.B = B, p.ldb = cols, p.C = a->C + n0, p.ldc = a->ldc;
    if (a->bias) p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = a->bias + n0;
    (void)gemm_f32_isa(NULL, &p, j->isa); /* fails only on bad arguments: these are checked */
  }
}

/* Part t of j->parts: an even share of the chunks, with buffer t. */
static void run_parts(void *ctx, int64_t t0, int64_t t1) {
  const deq_job *j = ctx;
  for (int64_t t = t0; t < t1; t++)
    run_chunk_range(j, t * j->chunks / j->parts, (t + 1) * j->chunks / j->parts,
                    j->buf ? j->buf + t * j->a->w->K * Q4_CHUNK : NULL);
}

smelt_status q4gemm_run(smelt_pool *pool, isa_level isa, const q4gemm_args *a) {
  const q4gemm_weights *w = a->w;
  if (a->M <= 0 || w->N <= 0) return SMELT_OK;
  bool big = (double)q4gemm_weights_bytes(w->K, w->N, w->asym) >= Q4_MIN_PARALLEL_BYTES;
  int threads = big ? pool_threads(pool) : 1;
  if (a->M > Q4_SMALL_M && !a->small_only) {
    deq_job d = {a, isa, (w->N + Q4_CHUNK - 1) / Q4_CHUNK, pool_threads(pool), NULL};
    if (d.parts > d.chunks) d.parts = d.chunks;
    d.buf = tensor_data_alloc(sizeof(float) * (size_t)(d.parts * w->K * Q4_CHUNK));
    if (!d.buf) err_clear(); /* over the memory budget: the slow loop, no copy */
    pool_parallel_for(d.parts > 1 ? pool : NULL, d.parts, 1, run_parts, &d);
    tensor_data_free(d.buf);
    return SMELT_OK;
  }
  size_t bytes = q4gemm_rows_bytes(a->M, w->K);
  void *qa = tensor_data_alloc(bytes);
  if (!qa) return err_nomem("int4 GEMM: quantized activations", bytes);
  q4gemm_quantize_a(a->M, w->K, a->A, a->lda, qa);
  run_job j = {.a = a, .panel = q4gemm_panel_scalar, .qa = qa};
#ifdef SMELT_X86
  if (isa >= ISA_AVX2) j.panel = q4gemm_panel_avx2;
#endif
  int64_t panels = w->Np / Q4_NR;
  /* a few runs of panels per thread, each a contiguous stretch of the weight */
  int64_t grain = (panels + 4 * threads - 1) / (4 * threads);
  pool_parallel_for(threads > 1 ? pool : NULL, panels, grain, run_panels, &j);
  tensor_data_free(qa);
  return SMELT_OK;
}
