/* bf16 compute GEMM: packing, the scalar tile kernel, selection and the
 * driver (see bf16dp.h).  The AVX-512 BF16 tile kernel is
 * x86/bf16dp_avx512.c.
 *
 * The driver: A is converted one block of rows at a time (at most
 * BF16DP_A_BLOCK_BYTES of pairs, all of M for the usual prefill shapes)
 * into one scratch block, in parallel over its tiles; then the block's
 * (panel, row group) items go to the pool, a thread taking consecutive row
 * groups of one panel (the panel stays in its cache).  Row groups are split
 * only as far as needed for about 4 items per thread. */
#include "kernels/bf16dp.h"

#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "util/env.h"
#include "util/err.h"

#define BF16DP_MAX_DIM ((int64_t)1 << 40)
#define BF16DP_A_BLOCK_BYTES ((int64_t)1 << 20)
#define BF16DP_THREAD_FLOPS 4e6 /* a thread per this much work (twice the fp32 GEMM's 2 MFLOP: twice the rate) */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
static int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

/* A pair: bf16(lo) in the low half, bf16(hi) in the high one. */
static inline uint32_t bf16_pair(float lo, float hi) { return f32_to_bf16(lo) | (uint32_t)f32_to_bf16(hi) << 16; }

size_t bf16dp_weights_bytes(int64_t K, int64_t N) {
  if (K <= 0 || N <= 0 || K > BF16DP_MAX_DIM / N) return 0;
  return sizeof(uint32_t) * (size_t)(ceil_div(K, 2) * round_up(N, BF16DP_NR));
}

void bf16dp_weights_view(int64_t K, int64_t N, const void *blob, bf16dp_weights *out) {
  out->K = K, out->N = N, out->Kp = ceil_div(K, 2), out->Np = round_up(N, BF16DP_NR);
  out->w = blob;
}

typedef struct pack_job {
  bool trans_b;
  int64_t K, N;
  const float *B;
  uint32_t *w;
} pack_job;

static inline float b_at(const pack_job *j, int64_t k, int64_t n) {
  if (k >= j->K || n >= j->N) return 0.f;
  return j->trans_b ? j->B[n * j->K + k] : j->B[k * j->N + n];
}

static void pack_panels(void *ctx, int64_t p0, int64_t p1) {
  const pack_job *j = ctx;
  int64_t kp = ceil_div(j->K, 2);
  for (int64_t p = p0; p < p1; p++) {
    uint32_t *d = j->w + p * kp * BF16DP_NR;
    for (int64_t q = 0; q < kp; q++, d += BF16DP_NR)
      for (int c = 0; c < BF16DP_NR; c++) {
        int64_t n = p * BF16DP_NR + c;
        d[c] = bf16_pair(b_at(j, 2 * q, n), b_at(j, 2 * q + 1, n));
      }
  }
}

void bf16dp_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob) {
  pack_job j = {trans_b, K, N, B, blob};
  pool_parallel_for(pool, round_up(N, BF16DP_NR) / BF16DP_NR, 1, pack_panels, &j);
}

void bf16dp_pack_a_tile(int rows, int64_t K, const float *A, int64_t lda, uint32_t *tile) {
  int64_t kp = ceil_div(K, 2), k2 = K / 2;
  for (int r = 0; r < BF16DP_MR; r++) {
    uint32_t *d = tile + r;
    if (r >= rows) {
      for (int64_t q = 0; q < kp; q++) d[q * BF16DP_MR] = 0;
      continue;
    }
    const float *a = A + r * lda;
    for (int64_t q = 0; q < k2; q++) d[q * BF16DP_MR] = bf16_pair(a[2 * q], a[2 * q + 1]);
    if (kp > k2) d[k2 * BF16DP_MR] = f32_to_bf16(a[K - 1]);
  }
}

void bf16dp_tile_scalar(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b, const bf16dp_epi *e,
                        float *C, int64_t ldc) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      float acc = 0.f;
      for (int64_t q = 0; q < kp; q++) {
        uint32_t x = a[q * BF16DP_MR + r], y = b[q * BF16DP_NR + c];
        acc += bf16_to_f32((uint16_t)(x >> 16)) * bf16_to_f32((uint16_t)(y >> 16)); /* exact products: no fma question */
        acc += bf16_to_f32((uint16_t)x) * bf16_to_f32((uint16_t)y);
      }
      float v = e->alpha * acc + (e->bias ? e->bias[c] : 0.f);
      float *o = C + r * ldc + c;
      *o = e->accumulate ? *o + v : v;
    }
}

bool bf16dp_hw(isa_level isa) {
#ifdef SMELT_X86
  return isa >= ISA_AVX512 && isa_has_avx512bf16();
#else
  (void)isa;
  return false;
#endif
}

bool bf16dp_wanted(isa_level isa) {
  const char *env = env_get("SMELT_BF16DP");
  if (env && !strcmp(env, "0")) return false;
  if (env && !strcmp(env, "1")) return true;
  return bf16dp_hw(isa);
}

bf16dp_tile_fn bf16dp_tile_for(isa_level isa) {
#ifdef SMELT_X86
  if (bf16dp_hw(isa)) return bf16dp_tile_avx512;
#endif
  (void)isa;
  return bf16dp_tile_scalar;
}

typedef struct run_job {
  const bf16dp_args *a;
  bf16dp_tile_fn tile;
  void (*pack_a)(int rows, int64_t K, const float *A, int64_t lda, uint32_t *tile);
  uint32_t *ap; /* the block's tiles */
  int64_t m0, rows; /* the block: A's rows [m0, m0 + rows) */
  int64_t tiles, groups;
} run_job;

static void convert_tiles(void *ctx, int64_t t0, int64_t t1) {
  const run_job *j = ctx;
  const bf16dp_args *a = j->a;
  int64_t kp = a->w->Kp;
  for (int64_t t = t0; t < t1; t++) {
    int64_t r0 = t * BF16DP_MR, left = j->rows - r0;
    j->pack_a(left < BF16DP_MR ? (int)left : BF16DP_MR, a->w->K, a->A + (j->m0 + r0) * a->lda, a->lda,
              j->ap + t * kp * BF16DP_MR);
  }
}

/* Items [i0, i1): item i is row group i % groups of panel i / groups. */
static void run_items(void *ctx, int64_t i0, int64_t i1) {
  const run_job *j = ctx;
  const bf16dp_args *a = j->a;
  const bf16dp_weights *w = a->w;
  for (int64_t i = i0; i < i1; i++) {
    if (pool_stopping()) return;
    int64_t p = i / j->groups, g = i % j->groups;
    int64_t n0 = p * BF16DP_NR, cols = w->N - n0 < BF16DP_NR ? w->N - n0 : BF16DP_NR;
    int64_t t0 = g * j->tiles / j->groups, t1 = (g + 1) * j->tiles / j->groups;
    bf16dp_epi e = {a->alpha, a->bias ? a->bias + n0 : NULL, a->accumulate};
    const uint32_t *panel = w->w + p * w->Kp * BF16DP_NR;
    /* the next panel (2 Kp lines) streams into L2 while this one's first
     * two tiles run, a line a pair row (AVX-512 BF16 kernel): a weight
     * past L2 is otherwise fetched from L3 or memory on demand (bert's
     * 768 x 3072 FFN weights at 1 thread: the tiles ran 10% slower over
     * 96 panels than over 24 that stay in L2) */
    const char *next = p + 1 < w->Np / BF16DP_NR ? (const char *)(panel + w->Kp * BF16DP_NR) : NULL;
    for (int64_t t = t0; t < t1; t++) {
      int64_t r0 = t * BF16DP_MR, left = j->rows - r0;
      int rows = left < BF16DP_MR ? (int)left : BF16DP_MR;
      const uint32_t *at = j->ap + t * w->Kp * BF16DP_MR;
      float *ct = a->C + (j->m0 + r0) * a->ldc + n0;
#ifdef SMELT_X86
      if (j->tile == bf16dp_tile_avx512 && next && t - t0 < 2) {
        bf16dp_tile_avx512_pf(rows, (int)cols, w->Kp, at, panel, &e, ct, a->ldc, next + (t - t0) * w->Kp * 64);
        continue;
      }
#endif
      j->tile(rows, (int)cols, w->Kp, at, panel, &e, ct, a->ldc);
    }
  }
}

smelt_status bf16dp_run(smelt_pool *pool, isa_level isa, const bf16dp_args *a) {
  const bf16dp_weights *w = a->w;
  if (a->M <= 0 || w->N <= 0) return SMELT_OK;
  if (!a->tile && bf16dp_amx_suits(isa, w)) return bf16dp_amx_run(pool, a);
  int64_t kp = w->Kp, panels = w->Np / BF16DP_NR;
  /* rows per block: whole tiles, at most BF16DP_A_BLOCK_BYTES of pairs (at least one tile) */
  int64_t block = BF16DP_A_BLOCK_BYTES / (int64_t)(sizeof(uint32_t) * BF16DP_MR) / kp * BF16DP_MR;
  if (block < BF16DP_MR) block = BF16DP_MR;
  /* as even as whole tiles allow: 512 rows in blocks of at most 504 -> 2 x 256, not 504 + 8 */
  int64_t n_blocks = ceil_div(a->M, block);
  block = round_up(ceil_div(a->M, n_blocks), BF16DP_MR);
  size_t bytes = sizeof(uint32_t) * (size_t)(block * kp);
  uint32_t *ap = tensor_data_alloc(bytes);
  if (!ap) return err_nomem("bf16 GEMM: A converted to bf16 pairs", bytes);
  double flops = 2.0 * (double)a->M * (double)w->N * (double)w->K;
  int threads = pool_threads(pool);
  if (threads > 1) {
    double want = flops / (BF16DP_THREAD_FLOPS * (double)pool_thread_cost(pool)) + 1;
    if (want < threads) threads = (int)want;
  }
  smelt_pool *tp = threads > 1 ? pool : NULL;
  run_job j = {.a = a, .tile = a->tile ? a->tile : bf16dp_tile_for(isa), .pack_a = bf16dp_pack_a_tile, .ap = ap};
#ifdef SMELT_X86
  if (j.tile == bf16dp_tile_avx512) j.pack_a = bf16dp_pack_a_tile_avx512; /* its kernel flushes denormals alike */
#endif
  for (int64_t m0 = 0; m0 < a->M; m0 += block) {
    j.m0 = m0;
    j.rows = a->M - m0 < block ? a->M - m0 : block;
    j.tiles = ceil_div(j.rows, BF16DP_MR);
    /* row groups: enough items for about 4 per thread */
    j.groups = ceil_div(4 * (int64_t)threads, panels);
    if (j.groups > j.tiles) j.groups = j.tiles;
    int64_t cgrain = ceil_div(j.tiles, 4 * (int64_t)threads), items = panels * j.groups;
    pool_parallel_for(tp, j.tiles, cgrain, convert_tiles, &j);
    pool_parallel_for(tp, items, ceil_div(items, 4 * (int64_t)threads), run_items, &j);
  }
  tensor_data_free(ap);
  return SMELT_OK;
}
