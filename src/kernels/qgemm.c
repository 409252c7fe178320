/* int8 dynamically quantized GEMM: quantization, packing, the driver and
 * the scalar kernels (see qgemm.h).  The AVX2 kernels are
 * x86/q8_gemm_avx2.c, the AVX512_VNNI ones x86/q8_gemm_vnni.c.
 *
 * The driver splits C into blocks of rows x 64 columns; a block runs its
 * column tiles (2 or 4 panels, by kernel) outer and its row tiles inner, with as many rows as
 * keep the block's quantized A within about 64 KB.  Blocks are numbered
 * row block fastest, so the blocks a thread takes in a row share their
 * weight panels: each weight byte comes from memory about once (A, M x K
 * bytes, is the small side: an LM head's weights are 38 MB). */
#include "kernels/qgemm.h"

#include <math.h>
#include <string.h>

#include "kernels/gemm_kernels.h" /* SMELT_X86 */

#define QGEMM_NB 64                       /* columns per block (a multiple of QGEMM_TILE_N) */
#define QGEMM_A_BLOCK_BYTES (64 << 10)    /* quantized A per block */
#define QGEMM_MIN_PARALLEL_MACS (2 << 20) /* below this, one thread */
#define GROUP_BYTES (QGEMM_NR * QGEMM_KG) /* one group of a panel: 8 columns x 4 k */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

size_t qgemm_weights_bytes(int64_t K, int64_t N) {
  if (K <= 0 || N <= 0 || K > QGEMM_MAX_K || N > ((int64_t)1 << 40) / QGEMM_MAX_K) return 0;
  int64_t Kp = qgemm_row_len(K), Np = round_up(N, QGEMM_NR);
  return (sizeof(float) + sizeof(int32_t)) * (size_t)Np + (size_t)(Kp * Np);
}

void qgemm_weights_view(int64_t K, int64_t N, const void *blob, qgemm_weights *out) {
  out->K = K, out->N = N, out->Kp = qgemm_row_len(K), out->Np = round_up(N, QGEMM_NR);
  out->scale = blob;
  out->colsum = (const int32_t *)(out->scale + out->Np);
  out->w = (const int8_t *)(out->colsum + out->Np);
}

float qgemm_scale_of(float amax, float *inv) {
  if (!(amax <= 3.4e38f)) { /* NaN or infinite */
    *inv = 0.f;
    return NAN;
  }
  *inv = amax > 0.f ? 127.f / amax : 0.f;
  return amax / 127.f;
}

float qgemm_range(float lo, float hi, int levels, int32_t *zero, float *inv) {
  *zero = 0;
  *inv = 0.f;
  if (isnan(lo) || isnan(hi)) return NAN;
  lo = lo < 0.f ? lo : 0.f;
  hi = hi > 0.f ? hi : 0.f;
  float span = hi - lo;
  if (!(span <= 3.4e38f)) return NAN; /* NaN, an infinity, or a span past float */
  if (span == 0.f) return 0.f;
  float L = (float)levels, s = span / L;
  *inv = L / span;
  float z = nearbyintf(-lo * *inv);
  *zero = (int32_t)(z > L ? L : z);
  return s;
}

typedef struct qb_job {
  bool trans_b;
  int64_t K, N;
  const float *B;
  qgemm_weights w;
} qb_job;

/* op(B)[k][n] */
static float b_at(const qb_job *j, int64_t k, int64_t n) {
  return j->trans_b ? j->B[n * j->K + k] : j->B[k * j->N + n];
}

static int8_t quant_w(float x, float inv) {
  float q = nearbyintf(x * inv);
  return (int8_t)(q > 127.f ? 127.f : q < -127.f ? -127.f : q);
}

static void quantize_panels(void *ctx, int64_t p0, int64_t p1) {
  qb_job *j = ctx;
  float *scale = (float *)j->w.scale;
  int32_t *colsum = (int32_t *)j->w.colsum;
  int64_t groups = j->w.Kp / QGEMM_KG;
  for (int64_t p = p0; p < p1; p++) {
    float inv[QGEMM_NR];
    for (int c = 0; c < QGEMM_NR; c++) {
      int64_t n = p * QGEMM_NR + c;
      float amax = 0.f;
      for (int64_t k = 0; n < j->N && k < j->K; k++) {
        float v = fabsf(b_at(j, k, n));
        amax = v > amax || isnan(v) ? v : amax;
      }
      scale[n] = n < j->N ? qgemm_scale_of(amax, &inv[c]) : 0.f;
      if (n >= j->N) inv[c] = 0.f;
      colsum[n] = 0;
    }
    int8_t *d = (int8_t *)j->w.w + p * groups * GROUP_BYTES;
    for (int64_t g = 0; g < groups; g++)
      for (int c = 0; c < QGEMM_NR; c++)
        for (int h = 0; h < QGEMM_KG; h++) {
          int64_t k = QGEMM_KG * g + h, n = p * QGEMM_NR + c;
          int8_t v = k < j->K && n < j->N ? quant_w(b_at(j, k, n), inv[c]) : 0;
          *d++ = v;
          colsum[p * QGEMM_NR + c] += v;
        }
  }
}

void qgemm_quantize_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  qb_job j = {.trans_b = trans_b, .K = K, .N = N, .B = B};
  qgemm_weights_view(K, N, blob, &j.w);
  pool_parallel_for(pool, j.w.Np / QGEMM_NR, 1, quantize_panels, &j);
}

void qgemm_quantize_row_scalar(int64_t K, const float *a, int levels, uint8_t *q, float *scale, int32_t *zero) {
  float lo = 0.f, hi = 0.f, inv;
  bool bad = false;
  for (int64_t k = 0; k < K; k++) {
    lo = a[k] < lo ? a[k] : lo;
    hi = a[k] > hi ? a[k] : hi;
    bad |= isnan(a[k]);
  }
  *scale = qgemm_range(bad ? NAN : lo, hi, levels, zero, &inv);
  if (inv == 0.f) { /* all zero, or not finite (scale NaN) */
    memset(q, 0, (size_t)K);
    return;
  }
  float L = (float)levels;
  for (int64_t k = 0; k < K; k++) {
    float v = nearbyintf(a[k] * inv) + (float)*zero;
    q[k] = (uint8_t)(v > L ? L : v < 0.f ? 0.f : v);
  }
}

typedef struct qa_job {
  void (*row)(int64_t K, const float *a, int levels, uint8_t *q, float *scale, int32_t *zero);
  int levels;
  int64_t K, lda, lq;
  const float *A;
  uint8_t *qa;
  float *sa;
  int32_t *za;
} qa_job;

static void quantize_rows(void *ctx, int64_t m0, int64_t m1) {
  qa_job *j = ctx;
  for (int64_t m = m0; m < m1; m++) {
    uint8_t *q = j->qa + m * j->lq;
    j->row(j->K, j->A + m * j->lda, j->levels, q, &j->sa[m], &j->za[m]);
    memset(q + j->K, 0, (size_t)(j->lq - j->K));
  }
}

/* the VNNI kernels (pick_kernel) sum u8 x s8 in int32: no pair saturates */
int qgemm_a_levels(isa_level isa, int64_t K) { return isa_avx512vnni_at(isa) && K <= QGEMM_MAX_K8 ? 255 : 127; }

void qgemm_quantize_a(smelt_pool *pool, isa_level isa, int64_t M, int64_t K, const float *A, int64_t lda,
                      uint8_t *qa, float *sa, int32_t *za) {
  qa_job j = {.row = qgemm_quantize_row_scalar, .levels = qgemm_a_levels(isa, K), .K = K, .lda = lda,
              .lq = qgemm_row_len(K), .A = A, .qa = qa, .sa = sa, .za = za};
#ifdef SMELT_X86
  if (isa >= ISA_AVX2) j.row = qgemm_quantize_row_avx2;
#else
  (void)isa;
#endif
  int64_t grain = (1 << 15) / (K > 0 ? K : 1) + 1;
  pool_parallel_for(M * K >= (1 << 16) ? pool : NULL, M, grain, quantize_rows, &j);
}

void qgemm_tile_scalar(int rows, int panels, const uint8_t *qa, int64_t lq, const int8_t *b, int64_t pstride,
                       int64_t groups, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  for (int r = 0; r < rows; r++)
    for (int pi = 0; pi < panels; pi++) {
      const int8_t *bp = b + pi * pstride;
      for (int c = 0; c < QGEMM_NR; c++) {
        int32_t s = 0;
        for (int64_t g = 0; g < groups; g++)
          for (int h = 0; h < QGEMM_KG; h++)
            s += (int32_t)qa[r * lq + QGEMM_KG * g + h] * bp[g * GROUP_BYTES + QGEMM_KG * c + h];
        acc[r][pi * QGEMM_NR + c] = s;
      }
    }
}

/* A tile kernel and its shape (up to mr rows x np panels per call), and
 * the epilogue that stores its sums. */
typedef struct qgemm_kernel {
  qgemm_tile_fn tile;
  int mr, np;
  qgemm_store_fn store;
  qgemm_tile_pf_fn tile_pf; /* the tile with the next tile's prefetch, or NULL */
} qgemm_kernel;

typedef struct run_job {
  const qgemm_args *a;
  qgemm_kernel k;
  int64_t mb, n_rb;
} run_job;

void qgemm_store_scalar(const qgemm_args *a, int64_t m0, int rows, int64_t n0, int cols,
                        int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  const qgemm_weights *w = a->w;
  const float *sb = w->scale + n0, *bias = a->bias ? a->bias + n0 : NULL;
  const int32_t *cs = w->colsum + n0;
  for (int r = 0; r < rows; r++) { /* one loop: the compiler vectorizes it */
    float *c = a->C + (m0 + r) * a->ldc + n0;
    float s = a->alpha * a->sa[m0 + r];
    int32_t z = a->za[m0 + r];
    for (int j = 0; j < cols; j++) {
      float v = s * sb[j] * (float)(acc[r][j] - z * cs[j]) + (bias ? bias[j] : 0.f);
      c[j] = a->accumulate ? c[j] + v : v;
    }
  }
}

static void run_blocks(void *ctx, int64_t t0, int64_t t1) {
  run_job *j = ctx;
  const qgemm_args *a = j->a;
  const qgemm_weights *w = a->w;
  int64_t lq = w->Kp, groups = w->Kp / QGEMM_KG, panel = groups * GROUP_BYTES;
  int32_t acc[QGEMM_MR][QGEMM_TILE_N];
  const int64_t step = j->k.np * QGEMM_NR; /* columns per tile */
  for (int64_t t = t0; t < t1; t++) {
    int64_t m_lo = t % j->n_rb * j->mb, n_lo = t / j->n_rb * QGEMM_NB;
    int64_t m_hi = m_lo + j->mb < a->M ? m_lo + j->mb : a->M;
    int64_t n_hi = n_lo + QGEMM_NB < w->N ? n_lo + QGEMM_NB : w->N;
    for (int64_t n = n_lo; n < n_hi; n += step) {
      int cols = (int)(n_hi - n < step ? n_hi - n : step);
      int panels = (cols + QGEMM_NR - 1) / QGEMM_NR;
      const int8_t *p0 = w->w + n / QGEMM_NR * panel;
      /* The first row block reads each tile's weights from memory: its row
       * tiles fetch the next tile's (the next panels in memory) into L2, a
       * share each, one line per group step (qgemm_tile_vnni_pf).  2-core
       * Emerald Rapids, 64 different 128 x 768 x 3072 weights in turn:
       * 1 thread 495-507 -> 532-540 GOP/s, 2 threads 942-975 -> 1029-1080;
       * 128 x 3072 x 768 1 thread 535-538 -> 558-564; a 128 x 768 x 50257
       * LM head 2 threads the same (723-743), 1 thread 4% slower. */
      int64_t lines = 0, per = 0, line = 0;
      if (j->k.tile_pf && m_lo == 0 && n + step < w->Np) {
        int64_t next_cols = w->Np - n - step < step ? w->Np - n - step : step;
        int64_t tiles = (m_hi - m_lo + j->k.mr - 1) / j->k.mr;
        lines = next_cols / QGEMM_NR * panel / 64;
        per = (lines + tiles - 1) / tiles;
        if (per > groups) per = groups;
      }
      for (int64_t m = m_lo; m < m_hi; m += j->k.mr) {
        int rows = (int)(m_hi - m < j->k.mr ? m_hi - m : j->k.mr);
        if (lines) {
          int64_t cnt = lines - line < per ? lines - line : per;
          j->k.tile_pf(rows, panels, a->qa + m * lq, lq, p0, panel, groups, acc, p0 + step / QGEMM_NR * panel + line * 64, cnt);
          line += cnt;
        } else {
          j->k.tile(rows, panels, a->qa + m * lq, lq, p0, panel, groups, acc);
        }
        /* the lines of C the next step's tile of these rows stores into,
         * fetched for writing now: C rows are ldc apart, each store of a
         * tile lands on its own page, and a wide C (a language model's
         * logits, 128 x 50257) is far past the caches, so without this
         * every store waits for its line to be read in.  At a block's last
         * step that is the next block's first, which the same thread
         * mostly runs soon after (home ranges are contiguous); stopping at
         * the block's end was 4% slower.  2-core Emerald Rapids, 128 x 768
         * x 50257, 2 threads, three runs each way: 11.2-13.5 -> 8.5-9.2 ms */
        if (n + step < w->N)
          for (int r = 0; r < rows; r++) {
            const float *c = a->C + (m + r) * a->ldc + n + step;
            __builtin_prefetch(c, 1, 3);
            __builtin_prefetch(c + 16, 1, 3);
            __builtin_prefetch(c + step - 1, 1, 3);
          }
        j->k.store(a, m, rows, n, cols, acc);
      }
    }
  }
}

/* The kernel for isa and M: few rows (a decode step) read one panel per
 * call, so the weights stream from memory once, front to back. */
static qgemm_kernel pick_kernel(isa_level isa, int64_t M) {
  bool gemv = M <= QGEMM_GEMV_M;
  qgemm_kernel k = {qgemm_tile_scalar, 6, gemv ? 1 : 2, qgemm_store_scalar, NULL};
#ifdef SMELT_X86
  if (isa_avx512vnni_at(isa))
    k = gemv ? (qgemm_kernel){qgemm_gemv_vnni, QGEMM_GEMV_M, 1, qgemm_store_avx512, NULL}
             : (qgemm_kernel){qgemm_tile_vnni, 8, 4, qgemm_store_avx512, qgemm_tile_vnni_pf};
  else if (isa >= ISA_AVX2)
    k = gemv ? (qgemm_kernel){qgemm_gemv_avx2, QGEMM_GEMV_M, 1, qgemm_store_scalar, NULL}
             : (qgemm_kernel){qgemm_tile_avx2, 6, 2, qgemm_store_scalar, NULL};
#else
  (void)isa;
#endif
  return k;
}

void qgemm_run(smelt_pool *pool, isa_level isa, const qgemm_args *a) {
  const qgemm_weights *w = a->w;
  if (a->M <= 0 || w->N <= 0) return;
  run_job j = {.a = a, .k = pick_kernel(isa, a->M)};
  int mr = j.k.mr;
  j.mb = QGEMM_A_BLOCK_BYTES / w->Kp / mr * mr;
  if (j.mb < mr) j.mb = mr;
  if (j.mb > 8 * mr) j.mb = 8 * mr;
  j.n_rb = (a->M + j.mb - 1) / j.mb;
  int64_t tasks = j.n_rb * ((w->N + QGEMM_NB - 1) / QGEMM_NB);
  bool big = (double)a->M * (double)w->N * (double)w->K >= QGEMM_MIN_PARALLEL_MACS;
  pool_parallel_for(big ? pool : NULL, tasks, 1, run_blocks, &j);
}
