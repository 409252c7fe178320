/* GEMM driver: argument checks, ISA choice and three algorithms:
 *   small-M (M <= 16): no packing, B streamed, threads split N;
 *   direct (operands in L2, K <= 256): micro-kernel tiles straight from A
 *     and B, threads split N;
 *   packed, cache-blocked (GotoBLAS/BLIS structure), everything else.
 *
 * Packed path, for one N chunk (columns [j0, j1)) and one K super-block:
 *   - B is packed into kc x NR micro-panels for every K block pc and every
 *     NR-wide column group jp; the thread that first needs a panel packs it
 *     and its neighbours (an atomic state per group of panels), so packing
 *     is shared and needs no barrier.
 *   - Work items are (ic, jt): an MC-row block of C times a range of column
 *     panels.  Each thread claims items from an atomic counter; for every K
 *     block the micro-kernel runs over the item's panels, reading A where
 *     it lies (A not transposed: gemm_arch.ukr_ia, row i of a tile at
 *     A + i*lda, where gemm_packed_run sets in_a).  A transposed is packed: each
 *     thread packs its A block (mc x kc, MR-row micro-panels) into its own
 *     buffer for every K block.  On several
 *     threads, when A's panels for the K super-block fit GEMM_SHARED_A_BYTES
 *     and A blocks would be packed again (several K blocks and items
 *     sharing row blocks, or several N chunks),
 *     A is instead packed once into a buffer the threads share (kept across
 *     the N chunks; a block in slices of GEMM_A_SLICE micro-panels, each by
 *     whoever claims it first, so the threads that need a block at the same
 *     time pack it together rather than wait for one of them), and
 *     items are cut finer (GEMM_ITEMS_PER_THREAD).
 *   - The first K block applies beta, the last one the epilogue.
 * The chunk width keeps the packed B of one chunk within a cache-sized
 * budget; one pool_parallel_for per chunk, or per up to 32 chunks when B
 * was packed ahead (chunk_job). */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h"
#include "util/err.h"

#ifdef SMELT_X86
#include <immintrin.h>
#endif

gemm_params gemm_params_default(void) {
  gemm_params p;
  memset(&p, 0, sizeof p);
  p.alpha = 1.f;
  return p;
}

/* ---- argument checks ---- */

static smelt_status check_matrix(const char *name, const void *ptr, int64_t rows, int64_t cols,
                                 int64_t ld, bool needed) {
  if (ld < cols)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: ld%s %lld is less than its row length %lld",
                   name, (long long)ld, (long long)cols);
  if (needed && rows > 0 && cols > 0 && !ptr)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: %s is NULL for a %lld x %lld matrix", name,
                   (long long)rows, (long long)cols);
  return SMELT_OK;
}

static smelt_status gemm_check(const gemm_params *p) {
  if (!p) return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: params is NULL");
  if (p->M < 0 || p->N < 0 || p->K < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: negative size M=%lld N=%lld K=%lld",
                   (long long)p->M, (long long)p->N, (long long)p->K);
  bool out = p->M > 0 && p->N > 0;
  bool reads_ab = out && p->K > 0 && p->alpha != 0.f;
  TRY(check_matrix("a", p->A, p->trans_a ? p->K : p->M, p->trans_a ? p->M : p->K, p->lda,
                   reads_ab));
  TRY(check_matrix("b", p->B, p->trans_b ? p->N : p->K, p->trans_b ? p->K : p->N, p->ldb,
                   reads_ab));
  TRY(check_matrix("c", p->C, p->M, p->N, p->ldc, out));
  const gemm_epilogue *e = &p->epilogue;
  if (e->bias_kind != GEMM_BIAS_NONE && e->bias_kind != GEMM_BIAS_COL &&
      e->bias_kind != GEMM_BIAS_ROW)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: unknown bias kind %d", (int)e->bias_kind);
  if (e->bias_kind != GEMM_BIAS_NONE && out && !e->bias)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: epilogue bias is NULL");
  if (e->act != GEMM_ACT_NONE && e->act != GEMM_ACT_RELU && e->act != GEMM_ACT_CLIP)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: unknown activation %d", (int)e->act);
  if (e->act == GEMM_ACT_CLIP && !(e->clip_lo <= e->clip_hi))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm: clip range [%g, %g] is empty",
                   (double)e->clip_lo, (double)e->clip_hi);
  return SMELT_OK;
}

/* alpha == 0 or K == 0: C = act(beta*C + bias), A and B unread. */
static void gemm_scale(const gemm_params *p) {
  const gemm_epilogue *e = &p->epilogue;
  for (int64_t m = 0; m < p->M; m++) {
    float *c = p->C + m * p->ldc;
    for (int64_t n = 0; n < p->N; n++) {
      float x = p->beta == 0.f ? 0.f : p->beta * c[n];
      if (e->bias_kind == GEMM_BIAS_COL) x += e->bias[n];
      else if (e->bias_kind == GEMM_BIAS_ROW) x += e->bias[m];
      c[n] = gemm_act_apply(x, e->act, e->clip_lo, e->clip_hi);
    }
  }
}

/* ---- per-ISA configuration ---- */

typedef struct gemm_arch {
  isa_level isa;
  int mr, nr; /* packed micro-kernel tile */
  gemm_ukernel_fn ukr;
  gemm_pack_a_fn pack_a;
  gemm_pack_b_fn pack_b;
  gemm_smallm_fn smallm;
  gemm_smallm_packed_fn smallm_packed; /* NULL: the small-M path reads B in place even when packed ahead */
  gemm_smallm_store_fn smallm_store;
  gemm_direct_fn direct;
  int dmr, dnr; /* direct kernel tile */
  gemm_blocking blk;
  gemm_ukernel_ia_fn ukr_ia; /* the packed tile with A read in place */
  bool ukr_pf;               /* ukr / ukr_ia fetch gemm_store.pf themselves */
} gemm_arch;

/* An item's C (mc rows x its panels) above this, in rows that do not
 * start on 64-byte boundaries, has its panels finished one at a time over
 * all the K blocks (packed_item_panels), where A allows.  Measured on the
 * 2-core Zen 4 VM (1 MiB L2), 1 thread, B packed ahead: GPT-2's vocabulary
 * projection 128 x 768 x 50257 (ldc 50257, C 1.4 MiB per N chunk) 67 -> 76
 * GFLOP/s; 128 x 768 x 2304 written with ldc 2305 55 -> 62, x 3072 with
 * ldc 3073 57 -> 61, the same as with aligned rows in either order; with
 * aligned rows, or a C of 405 KiB (x 768), the order made no difference. */
#define GEMM_C_ITEM_BYTES ((double)(512 << 10))

/* Block sizes (tuned on Zen 5: 48 KiB L1d, 1 MiB L2, 32 MiB L3):
 *   kc 256: a 32-wide B micro-panel is 32 KiB, in L1 across the row tiles;
 *   mc: the A block mc x kc (~200 KiB) in L2;
 *   8 Mi of packed B per N chunk, a share of L3;
 *   16 K blocks per pass before packed B is rebuilt;
 *   a thread per 2 MFLOP of compute-bound work (see gemm_threads). */
static bool gemm_arch_for(isa_level isa, const gemm_blocking *over, gemm_arch *a) {
  memset(a, 0, sizeof *a);
#ifdef SMELT_X86
  if (isa == ISA_AVX512) {
    *a = (gemm_arch){ISA_AVX512, 8, 32, f32_gemm_8x32_avx512, f32_pack_a_8_avx512, f32_pack_b_32_avx512,
                     f32_gemm_smallm_avx512, f32_gemm_smallm_packed_avx512, f32_gemm_smallm_store_avx512,
                     f32_gemm_direct_8x32_avx512, 8, 32,
                     {256, 8 * 24, (int64_t)2 << 20, 16, 2000000, 0}, f32_gemm_8x32_ia_avx512, true};
  } else if (isa == ISA_AVX2) {
    *a = (gemm_arch){ISA_AVX2, 6, 16, f32_gemm_6x16_avx2, f32_pack_a_6_avx2, f32_pack_b_16_avx2, f32_gemm_smallm_avx2,
                     f32_gemm_smallm_packed_avx2, f32_gemm_smallm_store_avx2, f32_gemm_direct_6x16_avx2, 6, 16, {256, 6 * 24, (int64_t)2 << 20, 16, 2000000, 0}, f32_gemm_6x16_ia_avx2, false};
  }
#endif
  if (!a->ukr) return false;
  if (over && over->kc > 0) a->blk.kc = over->kc;
  if (over && over->mc > 0) a->blk.mc = over->mc;
  if (over && over->bbuf_floats > 0) a->blk.bbuf_floats = over->bbuf_floats;
  if (over && over->k_super > 0) a->blk.k_super = over->k_super;
  if (over && over->thread_flops > 0) a->blk.thread_flops = over->thread_flops;
  if (over && over->panels_outer) a->blk.panels_outer = over->panels_outer;
  return true;
}

/* ---- shared helpers ---- */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* Block sizes spread evenly: ceil(n/max) blocks of equal size (multiple of
 * `unit`), so no K block is a sliver. */
static int64_t even_block(int64_t n, int64_t max, int64_t unit) {
  return round_up(ceil_div(n, ceil_div(n, max)), unit);
}

/* K per pass, K block and N chunk: the packed B of one chunk (all the K
 * blocks of a pass) stays within bbuf_floats. */
static void layout_of(const gemm_arch *ar, int64_t K, int64_t N, gemm_layout *l) {
  const gemm_blocking *blk = &ar->blk;
  *l = (gemm_layout){.isa = ar->isa, .mr = ar->mr, .nr = ar->nr, .pack_a = ar->pack_a, .pack_b = ar->pack_b};
  if (K <= 0) return;
  l->qk_max = even_block(K, blk->k_super * blk->kc, 1);
  l->kc = even_block(l->qk_max, blk->kc, 8);
  if (l->kc > l->qk_max) l->kc = l->qk_max;
  if (N <= 0) return;
  int64_t n_pc_max = ceil_div(l->qk_max, l->kc), NR = ar->nr;
  int64_t chunk_max = blk->bbuf_floats / (n_pc_max * l->kc);
  chunk_max = chunk_max < NR ? NR : chunk_max / NR * NR;
  l->chunk = even_block(N, chunk_max, NR);
}

bool gemm_layout_for(isa_level isa, const gemm_blocking *blk, int64_t K, int64_t N, gemm_layout *out) {
  gemm_arch ar;
  if (!gemm_arch_for(isa_clamp(isa), blk, &ar)) return false;
  layout_of(&ar, K, N, out);
  return true;
}

/* Threads worth waking: one more per thread_flops of compute (2 MFLOP, about
 * 10-20 us on one core) or per GEMM_THREAD_BYTES of B streamed (memory-bound
 * small-M products: each core brings its own load bandwidth), capped by the
 * pool.  The rule is per thread, so it holds on 2 cores and on 64: a thread
 * is woken only for work that is several times the cost of handing it over
 * (~1-2 us while the pool's workers spin between regions; the caller runs
 * chunks itself and never waits for a worker that has not started); both
 * sizes grow by pool_thread_cost on a machine with more runnable threads
 * than cores. */
#define GEMM_THREAD_BYTES ((double)(128 << 10))
static int gemm_threads(smelt_pool *pool, const gemm_arch *ar, double flops, double b_bytes) {
  int threads = pool_threads(pool);
  if (threads <= 1) return 1;
  double cost = (double)pool_thread_cost(pool); /* > 1 while workers lack cores */
  double by_flops = flops / ((double)ar->blk.thread_flops * cost), by_bytes = b_bytes / (GEMM_THREAD_BYTES * cost);
  double want = (by_flops > by_bytes ? by_flops : by_bytes) + 1;
  return want < threads ? (int)want : threads;
}

static double b_bytes_of(const gemm_params *p) {
  return 4.0 * (double)p->K * (double)p->N;
}

/* ---- small-M path ---- */

typedef struct smallm_ctx {
  const gemm_params *p;
  gemm_smallm_fn fn;
  int64_t step; /* columns per unit of work */
} smallm_ctx;

static void smallm_range(void *vctx, int64_t u0, int64_t u1) {
  const smallm_ctx *x = vctx;
  int64_t n1 = u1 * x->step;
  x->fn(x->p, u0 * x->step, n1 < x->p->N ? n1 : x->p->N);
}

static void gemm_small_m(smelt_pool *pool, const gemm_params *p, const gemm_arch *a) {
  smallm_ctx x = {p, a->smallm, 64};
  int64_t units = ceil_div(p->N, x.step);
  /* Memory-bound (B streamed once): B's bytes count, not only the FLOPs. */
  int threads = gemm_threads(pool, a, 2.0 * (double)p->M * (double)p->N * (double)p->K, b_bytes_of(p));
  if (threads <= 1 || units < 2) {
    smallm_range(&x, 0, units);
    return;
  }
  pool_parallel_for(pool, units, ceil_div(units, 4 * (int64_t)threads), smallm_range, &x);
}

/* With B packed ahead, few rows read the packed panels instead
 * (gemm_smallm_packed.c): the same numbers, contiguous in the order the
 * kernel reads them.  False when there is no matching packed B or no kernel. */
static bool small_m_packed(smelt_pool *pool, const gemm_params *p, const gemm_arch *a) {
  if (!a->smallm_packed || !p->packed_b || p->M >= GEMM_PREPACKED_MIN_M) return false;
  gemm_layout l;
  layout_of(a, p->K, p->N, &l);
  const float *pre = gemm_packed_b_for(p->packed_b, &l, p);
  if (!pre) return false;
  int threads = gemm_threads(pool, a, 2.0 * (double)p->M * (double)p->N * (double)p->K, b_bytes_of(p));
  gemm_smallm_packed(pool, p, &l, pre, a->smallm_packed, a->smallm_store, threads);
  return true;
}

/* ---- direct path: small problems, nothing packed ---- */

/* Operands that fit in L2 (half of it when A is transposed: its rows are
 * then read across pages) and a K short enough that a strip of B (K x dnr)
 * stays in L1 across the row tiles; B transposed would need packing.
 * Measured on Zen 5: as fast as packing up to 256^3, faster below. */
static bool direct_fits(const gemm_params *p) {
  if (p->trans_b) return false;
  int64_t limit = p->trans_a ? 48 * 1024 : 128 * 1024;
  if (p->K <= 256 && (p->M + p->N) * p->K <= limit) return true;
  /* Few rows (transformer prefill, small batches): each strip of B serves
   * every row tile while it is still in L1/L2, so B is read once, and
   * packing it would cost about as much as the product.  But a strip is a
   * strided walk over B: once B is wide, and cold (a model streams its
   * weights from memory each run), the packer's row-contiguous reads win.
   * Measured on Zen 5 with B cold, 2 threads: direct 1.1-1.4x the packed
   * path at N <= 1024 and B <= 4 MB (32x1024x256: 222 vs 157, 48x768x768:
   * 261 vs 240, 17x768x768: 146 vs 125 GFLOP/s), even at 32x2048x512, and
   * 0.85x at 32x256x4096. */
  return !p->trans_a && p->M <= 48 && p->N <= 1024 && p->K * p->N <= ((int64_t)1 << 20);
}

typedef struct direct_ctx {
  const gemm_params *p;
  const gemm_arch *ar;
} direct_ctx;

static void direct_strips(void *vctx, int64_t s0, int64_t s1) {
  const direct_ctx *x = vctx;
  const gemm_params *p = x->p;
  const gemm_epilogue *ep = &p->epilogue;
  const int64_t rsa = p->trans_a ? 1 : p->lda, csa = p->trans_a ? p->lda : 1;
  gemm_store st = {p->alpha, p->beta, ep->bias_kind, NULL, ep->act, ep->clip_lo, ep->clip_hi, NULL, 0};
  for (int64_t s = s0; s < s1; s++) {
    int64_t j = s * x->ar->dnr;
    int nr = (int)(p->N - j < x->ar->dnr ? p->N - j : x->ar->dnr);
    for (int64_t i = 0; i < p->M; i += x->ar->dmr) {
      int mr = (int)(p->M - i < x->ar->dmr ? p->M - i : x->ar->dmr);
      if (ep->bias_kind == GEMM_BIAS_COL) st.bias = ep->bias + j;
      else if (ep->bias_kind == GEMM_BIAS_ROW) st.bias = ep->bias + i;
      x->ar->direct(p->K, p->A + i * rsa, rsa, csa, p->B + j, p->ldb, p->C + i * p->ldc + j,
                    p->ldc, mr, nr, &st);
    }
  }
}

static void gemm_direct(smelt_pool *pool, const gemm_params *p, const gemm_arch *ar) {
  direct_ctx x = {p, ar};
  int64_t strips = ceil_div(p->N, ar->dnr);
  /* Each thread streams its own strips of B (few rows: B is most of the traffic). */
  int threads = gemm_threads(pool, ar, 2.0 * (double)p->M * (double)p->N * (double)p->K, b_bytes_of(p));
  if (threads <= 1 || strips < 2) {
    direct_strips(&x, 0, strips);
    return;
  }
  pool_parallel_for(pool, strips, ceil_div(strips, 4 * (int64_t)threads), direct_strips, &x);
}

/* ---- packed path ---- */


enum { PANEL_EMPTY = 0, PANEL_PACKING = 1, PANEL_READY = 2 };

typedef struct packed_ctx {
  const gemm_params *p;
  const gemm_arch *ar;
  int64_t kc, mc;             /* K block; the largest row block */
  int64_t q0, qk;             /* K super-block [q0, q0+qk) */
  bool first_q, last_q;       /* it applies beta / the epilogue */
  int64_t n_pc;               /* K blocks in the super-block */
  int64_t j0, j1;             /* N chunk */
  int64_t n_jr;               /* NR panels in the chunk */
  int64_t n_groups;           /* ...in groups of GEMM_B_GROUP */
  int64_t n_ic, n_jt, jt_len; /* items: n_ic x n_jt, jt_len panels each */
  float *bbuf;                /* n_pc * n_jr panels of kc*NR floats */
  const float *pre_b;         /* B packed ahead (whole), or NULL */
  int64_t pre_b_off;          /* ...where this chunk's panels start */
  const float *pre_a;         /* A packed ahead (whole), or NULL */
  bool in_a;                  /* A read where it lies (ukr_ia), never packed */
  int64_t m_pad;              /* M rounded up to MR (pre_a's rows) */
  float *sh_a;                /* A of the K pass packed once, shared by the threads (pre_a's layout), or NULL */
  atomic_uchar *astate;       /* ...per row block, K block and slice: PANEL_* */
  int64_t n_aslices;          /* slices of GEMM_A_SLICE micro-panels per row block */
  atomic_uchar *bstate;       /* per K block and panel group: PANEL_* */
  float *abuf;                /* per slot: mc_max*kc floats (a_whole: per K block of the pass) */
  int64_t abuf_len;
  bool a_whole_ok;            /* A of every K block of the pass fits the slot's buffer and L2... */
  bool a_whole;               /* ...and is kept (this chunk): panels outer, K blocks inner */
  int64_t a_pc_len;           /* ...per-slot floats per K block */
} packed_ctx;

static void spin_pause(void) {
#ifdef SMELT_X86
  _mm_pause();
#endif
}

/* Micro-panels per slice of a shared A block: each slice is packed by one
 * thread, the slices of a block by all the threads that need it. */
#define GEMM_A_SLICE 2

/* The largest A of one row block kept for all the K blocks of a pass
 * (packed_item_panels): within L2 beside a B panel and C's strip. */
#define GEMM_A_WHOLE_BYTES ((double)(512 << 10))

/* The largest A shared by the threads of one product (gemm_packed_run). */
#define GEMM_SHARED_A_BYTES ((double)(4 << 20))

/* Panels are packed GEMM_B_GROUP at a time (one claim, one pass over the
 * rows of B), so the packer reads runs of GEMM_B_GROUP*NR floats per row. */
#define GEMM_B_GROUP 4

static float *panel_at(const packed_ctx *x, int64_t pc, int64_t jp) {
  return x->bbuf + (pc * x->n_jr + jp) * x->kc * x->ar->nr;
}

/* A block of packed data (a group of B panels, a slice of the shared A) is
 * claimed by the first thread that needs it (EMPTY -> PACKING), which packs
 * it and marks it READY. */
static bool claim(atomic_uchar *st) {
  unsigned char expect = PANEL_EMPTY;
  return atomic_load_explicit(st, memory_order_acquire) == PANEL_EMPTY &&
         atomic_compare_exchange_strong(st, &expect, PANEL_PACKING);
}

/* Another thread is packing it: microseconds, unless the packer lost its
 * core to another process -- then give ours up too. */
static void wait_ready(atomic_uchar *st) {
  for (int spins = 0; atomic_load_explicit(st, memory_order_acquire) != PANEL_READY; spins++) {
    if (spins < 2000) spin_pause();
    else sched_yield();
  }
}

/* The packed panel (pc, jp), packing its group if no thread has. */
static const float *b_panel(packed_ctx *x, int64_t pc, int64_t jp) {
  if (x->pre_b) return x->pre_b + x->pre_b_off + (pc * x->n_jr + jp) * x->kc * x->ar->nr;
  int64_t g = jp / GEMM_B_GROUP;
  atomic_uchar *st = &x->bstate[pc * x->n_groups + g];
  if (atomic_load_explicit(st, memory_order_acquire) == PANEL_READY) return panel_at(x, pc, jp);
  if (claim(st)) {
    int64_t j = x->j0 + g * GEMM_B_GROUP * x->ar->nr, p0 = x->q0 + pc * x->kc;
    int64_t j_end = j + GEMM_B_GROUP * x->ar->nr < x->j1 ? j + GEMM_B_GROUP * x->ar->nr : x->j1;
    int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
    x->ar->pack_b(x->p, j, j_end - j, p0, kc, panel_at(x, pc, g * GEMM_B_GROUP),
                  x->kc * x->ar->nr);
    atomic_store_explicit(st, PANEL_READY, memory_order_release);
    return panel_at(x, pc, jp);
  }
  wait_ready(st);
  return panel_at(x, pc, jp);
}

/* Row blocks: n_ic of them, starts spread evenly on MR boundaries so the
 * threads get equal shares (sizes differ by at most MR). */
static int64_t row_block_start(const packed_ctx *x, int64_t ic) {
  int64_t units = ceil_div(x->p->M, x->ar->mr);
  int64_t start = ic * units / x->n_ic * x->ar->mr;
  return start < x->p->M ? start : x->p->M;
}

/* The shared packed A block (ic, pc) -- rows [i0, i0+mc), K from p0.  It is
 * packed in slices of GEMM_A_SLICE micro-panels, each claimed like a group
 * of B panels, so the threads that need the block at the same time (every
 * thread, at the start of each K block: they take items of the same row
 * block) pack it together instead of all but one waiting for one packer --
 * on many threads that wait would be most of the product's time. */
static const float *a_block(packed_ctx *x, int64_t ic, int64_t pc, int64_t i0, int64_t mc, int64_t p0,
                            int64_t kc) {
  float *dst = x->sh_a + x->m_pad * (p0 - x->q0) + i0 * kc;
  int64_t rows = GEMM_A_SLICE * x->ar->mr, n = ceil_div(mc, rows);
  atomic_uchar *st = &x->astate[(ic * x->n_pc + pc) * x->n_aslices];
  for (int64_t s = 0; s < n; s++)
    if (claim(&st[s])) {
      int64_t r0 = s * rows, nr = mc - r0 < rows ? mc - r0 : rows;
      x->ar->pack_a(x->p, i0 + r0, nr, p0, kc, dst + r0 * kc); /* MR-row panels: rows r0.. start at r0*kc */
      atomic_store_explicit(&st[s], PANEL_READY, memory_order_release);
    }
  for (int64_t s = 0; s < n; s++) wait_ready(&st[s]);
  return dst;
}

/* The row tiles of one item over B panel jp of K block pc.  (Software
 * prefetch of the next packed panel, or of the next group's unpacked source,
 * a slice per tile, measured no faster or slower here.) */
/* B packed ahead (a model's weight) is cold at every run: it streams from
 * L3 or memory, and the first row tile over a panel waits for it at a
 * rate the hardware prefetchers do not reach (a 32-float row of B every 8
 * cycles).  So while a panel's row tiles run, the panel that runs next is
 * fetched into L2, a share of its lines before each tile.  Measured on a
 * 2-core Emerald Rapids VM, 48 different 128x768x768 weights in turn (113
 * MB, cold): 1 thread 127 -> 137 GFLOP/s (hot: 160), 2 threads 232 -> 245;
 * 24 of 128x3072x768: 249 -> 265; bert_base, gpt2_small, vit_b16 at 2
 * threads 5-7% faster (prefetching into L1 instead: the same).
 * Issued as a burst before each tile, the prefetches stalled on the fill
 * buffers: perf put 7% of bert_base's cycles on the instruction after a
 * prefetcht1 in this loop.  The AVX-512 tile (gemm_arch.ukr_pf) now issues
 * them itself, one per K step (gemm_store.pf): 2 threads, 12 cold weights
 * in turn, 128x3072x768 268-291 -> 316 GFLOP/s, 128x768x768 307 -> 331-345;
 * bert_base, gpt2_small 4-5% faster.  Every other line only (the spatial
 * prefetcher pairs lines) was slower: 285 -> 260. */
static const float *next_pre_panel(const packed_ctx *x, int64_t pc, int64_t jp) {
  return x->pre_b ? x->pre_b + x->pre_b_off + (pc * x->n_jr + jp) * x->kc * x->ar->nr : NULL;
}

static void run_panel(packed_ctx *x, gemm_store *st, const float *abuf, int64_t pc, int64_t jp,
                      int64_t i0, int64_t mc, int64_t kc, const float *next) {
  const gemm_params *p = x->p;
  const gemm_arch *ar = x->ar;
  const float *bp = b_panel(x, pc, jp);
  int64_t j = x->j0 + jp * ar->nr;
  int nr = (int)(x->j1 - j < ar->nr ? x->j1 - j : ar->nr);
  const gemm_epilogue *ep = &p->epilogue;
  int64_t lines = x->kc * ar->nr / 16, tiles = ceil_div(mc, ar->mr), per = ceil_div(lines, tiles), line = 0;
  for (int64_t ir = 0; ir < mc; ir += ar->mr) {
    int mr = (int)(mc - ir < ar->mr ? mc - ir : ar->mr);
    int64_t e = line + per < lines ? line + per : lines;
    if (ar->ukr_pf) { /* the kernel spreads them over its K steps */
      st->pf = next ? next + line * 16 : NULL;
      st->pf_lines = next ? (e - line < kc ? e - line : kc) : 0;
      line += st->pf_lines;
    }
#ifdef SMELT_X86
    for (; next && line < e; line++) _mm_prefetch((const char *)(next + line * 16), _MM_HINT_T1);
#endif
    if (st->bias_kind == GEMM_BIAS_COL) st->bias = ep->bias + j;
    else if (st->bias_kind == GEMM_BIAS_ROW) st->bias = ep->bias + i0 + ir;
    float *c = p->C + (i0 + ir) * p->ldc + j;
    if (x->in_a) ar->ukr_ia(kc, abuf + ir * p->lda, p->lda, bp, c, p->ldc, mr, nr, st);
    else ar->ukr(kc, abuf + ir * kc, bp, c, p->ldc, mr, nr, st);
  }
}

/* The store of K block pc: beta on the first K block of the product, the
 * epilogue on the last. */
static gemm_store store_for(const packed_ctx *x, int64_t pc) {
  const gemm_params *p = x->p;
  const gemm_epilogue *ep = &p->epilogue;
  gemm_store st = {p->alpha, (x->first_q && pc == 0) ? p->beta : 1.f, GEMM_BIAS_NONE, NULL,
                   GEMM_ACT_NONE, ep->clip_lo, ep->clip_hi, NULL, 0};
  if (x->last_q && pc == x->n_pc - 1) {
    st.bias_kind = ep->bias_kind;
    st.act = ep->act;
  }
  return st;
}

/* An item whose A is kept for every K block of the pass (x->a_whole): each
 * column panel of C is finished over all the K blocks before the next one,
 * so the item's C is read and written while in L1, instead of once per K
 * block from wherever mc rows x the item's panels fall -- L3 or memory for
 * a wide product such as a vocabulary projection (128 x 50257: 1.4 MiB per
 * N chunk).  A comes from L2 as before (mc x qk within GEMM_A_WHOLE_BYTES). */
/* Where the A block (rows from i0, the K block at p0 of kc) lies when the
 * item does not pack it: A itself (in_a), A packed ahead, or the shared
 * copy (ready once a_block returned); NULL when the slot's buffer holds it. */
static const float *a_ready(const packed_ctx *x, int64_t i0, int64_t p0, int64_t kc) {
  if (x->in_a) return x->p->A + i0 * x->p->lda + p0;
  if (x->pre_a) return x->pre_a + x->m_pad * p0 + i0 * kc;
  if (x->sh_a) return x->sh_a + x->m_pad * (p0 - x->q0) + i0 * kc;
  return NULL;
}

static void packed_item_panels(packed_ctx *x, float *abuf, int64_t ic, int64_t i0, int64_t mc, int64_t jp0,
                               int64_t jp1, int64_t *packed_ic) {
  for (int64_t pc = 0; pc < x->n_pc; pc++) { /* A ready for every K block */
    int64_t p0 = x->q0 + pc * x->kc;
    int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
    if (x->sh_a) (void)a_block(x, ic, pc, i0, mc, p0, kc);
    else if (!a_ready(x, i0, p0, kc) && *packed_ic != ic) x->ar->pack_a(x->p, i0, mc, p0, kc, abuf + pc * x->a_pc_len);
  }
  *packed_ic = ic;
  for (int64_t jp = jp0; jp < jp1; jp++)
    for (int64_t pc = 0; pc < x->n_pc; pc++) {
      int64_t p0 = x->q0 + pc * x->kc;
      int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
      const float *a = a_ready(x, i0, p0, kc);
      if (!a) a = abuf + pc * x->a_pc_len;
      gemm_store st = store_for(x, pc);
      const float *next = pc + 1 < x->n_pc ? next_pre_panel(x, pc + 1, jp)
                          : jp + 1 < jp1  ? next_pre_panel(x, 0, jp + 1)
                                          : NULL;
      run_panel(x, &st, a, pc, jp, i0, mc, kc, next);
    }
}

static void packed_item(packed_ctx *x, float *abuf, int64_t item, int64_t *packed_ic) {
  const gemm_params *p = x->p;
  int64_t ic = item / x->n_jt, jt = item % x->n_jt;
  int64_t i0 = row_block_start(x, ic), mc = row_block_start(x, ic + 1) - i0;
  int64_t jp0 = jt * x->jt_len, jp1 = jp0 + x->jt_len < x->n_jr ? jp0 + x->jt_len : x->n_jr;
  if (x->a_whole) {
    packed_item_panels(x, abuf, ic, i0, mc, jp0, jp1, packed_ic);
    return;
  }
  for (int64_t pc = 0; pc < x->n_pc; pc++) {
    int64_t p0 = x->q0 + pc * x->kc;
    int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
    /* With one K block the A block survives to the next item of the same ic. */
    const float *a = x->sh_a ? a_block(x, ic, pc, i0, mc, p0, kc) : a_ready(x, i0, p0, kc);
    if (!a) {
      if (x->n_pc > 1 || *packed_ic != ic) x->ar->pack_a(p, i0, mc, p0, kc, abuf);
      a = abuf;
    }
    *packed_ic = x->n_pc > 1 ? -1 : ic;
    gemm_store st = store_for(x, pc);
    for (int64_t jp = jp0; jp < jp1; jp++) {
      const float *next = jp + 1 < jp1         ? next_pre_panel(x, pc, jp + 1)
                          : pc + 1 < x->n_pc ? next_pre_panel(x, pc + 1, jp0)
                                             : NULL;
      run_panel(x, &st, a, pc, jp, i0, mc, kc, next);
    }
  }
}

/* One pool job: the items of one or more N chunks as one list, claimed in
 * order.  With B packed on the way a job holds one chunk (its panels fill
 * the chunk's buffer).  With B packed ahead (a model's weight) the chunks
 * of a K pass share no scratch, so up to GEMM_CHUNKS_PER_JOB of them run as
 * one job and no thread waits at a chunk's end for the others; each chunk
 * ended in a join before: on a
 * vocabulary projection (gpt2_small's 128 x 50257 x 768, 19 chunks of 8
 * items on 2 threads) the threads finished each chunk 0.1-0.25 ms apart,
 * 3.7 ms of the product's 37.9 idle. */
#define GEMM_CHUNKS_PER_JOB 32
typedef struct chunk_job {
  packed_ctx *cx;                          /* one per chunk, each with plan_items' split */
  int64_t n, start[GEMM_CHUNKS_PER_JOB + 1]; /* chunk c's items: [start[c], start[c+1]) */
  atomic_int_fast64_t next;                /* next unclaimed item of the list */
} chunk_job;

static void chunk_slots(void *vctx, int64_t s0, int64_t s1) {
  chunk_job *j = vctx;
  const packed_ctx *x0 = &j->cx[0];
  for (int64_t s = s0; s < s1; s++) {
    float *abuf = x0->abuf ? x0->abuf + s * x0->abuf_len : NULL; /* NULL: A packed ahead or shared */
    int64_t packed_ic = -1, c = 0;
    for (;;) {
      if (pool_stopping()) break; /* a slot is a whole pass: stop between its items */
      int64_t item = atomic_fetch_add(&j->next, 1);
      if (item >= j->start[j->n]) break;
      while (item >= j->start[c + 1]) c++, packed_ic = -1; /* a slot's items come in order */
      packed_item(&j->cx[c], abuf, item - j->start[c], &packed_ic);
    }
  }
}

/* Splits one N chunk into items: row blocks x column ranges, at least two
 * per thread when the rows alone do not divide evenly among the threads.
 * With A shared (packed once per K pass, whoever needs a block first) or
 * read in place an item costs no packing of its own, so there are at least GEMM_ITEMS_PER_THREAD
 * per thread: a thread that starts late or loses its core for a while
 * (another process) then holds up a smaller share of the product. */
#define GEMM_ITEMS_PER_THREAD 4
static void plan_items(packed_ctx *x, int threads) {
  int64_t jt = 1;
  if (threads > 1 && (x->sh_a || x->in_a)) jt = ceil_div(GEMM_ITEMS_PER_THREAD * threads, x->n_ic);
  else if (threads > 1 && x->n_ic % threads != 0) jt = ceil_div(2 * threads, x->n_ic);
  x->jt_len = ceil_div(x->n_jr, jt);
  x->n_jt = ceil_div(x->n_jr, x->jt_len);
  int order = x->ar->blk.panels_outer;
  bool rows_off = (x->p->ldc * (int64_t)sizeof(float)) % 64 || (uintptr_t)x->p->C % 64;
  bool wide = (double)x->mc * (double)(x->jt_len * x->ar->nr) * sizeof(float) > GEMM_C_ITEM_BYTES;
  x->a_whole = x->a_whole_ok && x->n_pc > 1 && (order > 0 || (order == 0 && wide && rows_off));
}

/* Returns false (nothing written) if scratch memory cannot be allocated. */
static bool gemm_packed_run(smelt_pool *pool, const gemm_params *p, const gemm_arch *ar) {
  const int64_t MR = ar->mr, NR = ar->nr;
  const gemm_blocking *blk = &ar->blk;
  packed_ctx x;
  memset(&x, 0, sizeof x);
  x.p = p;
  x.ar = ar;
  int threads = gemm_threads(pool, ar, 2.0 * (double)p->M * (double)p->N * (double)p->K, 0);

  gemm_layout l;
  layout_of(ar, p->K, p->N, &l);
  int64_t qk_max = l.qk_max, chunk = l.chunk; /* K per pass; N per chunk */
  x.kc = l.kc;
  x.pre_b = gemm_packed_b_for(p->packed_b, &l, p);
  x.pre_a = gemm_packed_a_for(p->packed_a, &l, p);
  /* A not transposed is read in place: the kernel's eight row streams from
   * L2 ran within 1-4% of packed A, while packing cost a pass over A per K
   * block and N chunk (or the threads' waits on a shared packed copy):
   * 2 threads, cold weights, 128 x 3072 x 768 went 245 -> 284 GFLOP/s. */
  x.in_a = !x.pre_a && !p->trans_a && ar->ukr_ia;
  x.m_pad = round_up(p->M, MR);
  int64_t n_pc_max = ceil_div(qk_max, x.kc);
  x.n_ic = ceil_div(p->M, blk->mc);
  if (threads > 1 && x.n_ic >= threads) x.n_ic = round_up(x.n_ic, threads);
  if (x.n_ic > ceil_div(p->M, MR)) x.n_ic = ceil_div(p->M, MR);
  x.mc = round_up(ceil_div(p->M, x.n_ic) + MR - 1, MR); /* the largest row block */
  int64_t n_jr_max = chunk / NR;

  size_t panels = x.pre_b ? 0 : (size_t)(n_pc_max * n_jr_max);
  size_t bbuf_bytes = panels * (size_t)(x.kc * NR) * sizeof(float);
  size_t groups = x.pre_b ? 0 : (size_t)(n_pc_max * ceil_div(n_jr_max, GEMM_B_GROUP));
  /* Several threads: A packed once per K pass into one buffer they share,
   * instead of each thread packing the A block of every item it takes, when
   * that buffer is small (transformer rows: 128 x 3072 is 1.5 MiB) and the
   * threads would pack blocks again: several K blocks with several items
   * per row block (a thread's next item needs the same A blocks again), or
   * several N chunks.  Otherwise each thread packs its blocks once, at the
   * same time as the others, which sharing would only serialize (vit_tiny's
   * 130 x 192 x 192, vit_b16's 197 rows in two blocks, one per thread). */
  bool items_share_rows = threads > 1 && x.n_ic % threads != 0; /* plan_items' column split */
  bool share_a = !x.pre_a && !x.in_a && threads > 1 && ((n_pc_max > 1 && items_share_rows) || chunk < p->N) &&
                 (double)x.m_pad * (double)qk_max * sizeof(float) <= GEMM_SHARED_A_BYTES;
  /* Several K blocks and the A of a row block for all of them small enough
   * for L2: panels outer, K blocks inner (packed_item_panels) where
   * plan_items finds C wide and its rows off 64-byte boundaries. */
  x.a_whole_ok = n_pc_max > 1 && ar->blk.panels_outer >= 0 &&
                 (double)x.mc * (double)qk_max * sizeof(float) <= GEMM_A_WHOLE_BYTES;
  x.a_pc_len = round_up(x.mc * x.kc, 16);
  x.abuf_len = x.pre_a || x.in_a || share_a ? 0 : x.a_whole_ok ? n_pc_max * x.a_pc_len : x.a_pc_len;
  size_t abuf_bytes = share_a ? (size_t)round_up(x.m_pad * qk_max, 16) * sizeof(float)
                              : (size_t)threads * (size_t)x.abuf_len * sizeof(float);
  x.n_aslices = ceil_div(x.mc, GEMM_A_SLICE * MR);
  size_t astates = share_a ? (size_t)(x.n_ic * n_pc_max * x.n_aslices) : 0;
  size_t state_bytes = (size_t)round_up((int64_t)(groups + astates), 64);
  char *mem = bbuf_bytes + abuf_bytes + state_bytes ? tensor_data_alloc(bbuf_bytes + abuf_bytes + state_bytes)
                                                    : NULL;
  if (!mem && bbuf_bytes + abuf_bytes + state_bytes) return false;
  if (mem) {
    x.bbuf = (float *)mem;
    x.abuf = x.abuf_len ? (float *)(mem + bbuf_bytes) : NULL;
    x.sh_a = share_a ? (float *)(mem + bbuf_bytes) : NULL;
    x.bstate = (atomic_uchar *)(mem + bbuf_bytes + abuf_bytes);
    x.astate = x.bstate + groups;
  }

  for (x.q0 = 0; x.q0 < p->K; x.q0 += x.qk) {
    x.qk = p->K - x.q0 < qk_max ? p->K - x.q0 : qk_max;
    x.first_q = x.q0 == 0;
    x.last_q = x.q0 + x.qk == p->K;
    x.n_pc = ceil_div(x.qk, x.kc);
    if (x.sh_a) /* A changes with the K pass only: packed once for all the N chunks */
      for (int64_t i = 0; i < x.n_ic * x.n_pc * x.n_aslices; i++) atomic_init(&x.astate[i], PANEL_EMPTY);
    int64_t per_job = x.pre_b ? GEMM_CHUNKS_PER_JOB : 1;
    for (x.j0 = 0; x.j0 < p->N;) {
      packed_ctx cx[GEMM_CHUNKS_PER_JOB];
      chunk_job cj = {.cx = cx};
      for (; x.j0 < p->N && cj.n < per_job; x.j0 = x.j1, cj.n++) {
        x.j1 = p->N - x.j0 < chunk ? p->N : x.j0 + chunk;
        x.n_jr = ceil_div(x.j1 - x.j0, NR);
        x.n_groups = ceil_div(x.n_jr, GEMM_B_GROUP);
        plan_items(&x, threads);
        if (!x.pre_b)
          for (int64_t i = 0; i < x.n_pc * x.n_groups; i++) atomic_init(&x.bstate[i], PANEL_EMPTY);
        cx[cj.n] = x;
        cj.start[cj.n + 1] = cj.start[cj.n] + x.n_ic * x.n_jt;
        x.pre_b_off += x.n_pc * x.n_jr * x.kc * NR;
      }
      atomic_init(&cj.next, 0);
      if (threads > 1) pool_parallel_for(pool, threads, 1, chunk_slots, &cj);
      else chunk_slots(&cj, 0, 1);
    }
  }
  if (mem) tensor_data_free(mem);
  return true;
}

/* ---- entry points ---- */

/* With B packed ahead the packed path no longer pays for packing B, which
 * is what the small-M and direct paths avoid; it takes over from them from
 * GEMM_PREPACKED_MIN_M rows (gemm_kernels.h, with the measurements). */
static bool prepacked_wins(const gemm_params *p, const gemm_arch *ar) {
  if (!p->packed_b || p->M < GEMM_PREPACKED_MIN_M) return false;
  gemm_layout l;
  layout_of(ar, p->K, p->N, &l);
  return gemm_packed_b_for(p->packed_b, &l, p) != NULL;
}

smelt_status gemm_f32_run(smelt_pool *pool, const gemm_params *p, isa_level isa, gemm_path path,
                          const gemm_blocking *blk) {
  TRY(gemm_check(p));
  if (p->M == 0 || p->N == 0) return SMELT_OK;
  if (p->K == 0 || p->alpha == 0.f) {
    gemm_scale(p);
    return SMELT_OK;
  }
  gemm_arch ar;
  if (!gemm_arch_for(isa_clamp(isa), blk, &ar)) {
    gemm_f32_scalar(pool, p);
    return SMELT_OK;
  }
  bool small_ok = p->M <= GEMM_SMALL_M &&
                  (!p->trans_b || (!p->trans_a && p->M <= GEMM_SMALL_M_NT));
  if (path == GEMM_PATH_AUTO && prepacked_wins(p, &ar)) path = GEMM_PATH_PACKED;
  if ((path == GEMM_PATH_AUTO || path == GEMM_PATH_SMALL_M_PACKED) && small_m_packed(pool, p, &ar)) return SMELT_OK;
  if (path == GEMM_PATH_SMALL_M_PACKED) path = GEMM_PATH_SMALL_M;
  if (path == GEMM_PATH_SMALL_M || (path == GEMM_PATH_AUTO && small_ok)) {
    if (small_ok) {
      gemm_small_m(pool, p, &ar);
      return SMELT_OK;
    }
  }
  if (path == GEMM_PATH_DIRECT || (path == GEMM_PATH_AUTO && direct_fits(p))) {
    if (!p->trans_b) {
      gemm_direct(pool, p, &ar);
      return SMELT_OK;
    }
  }
  if (!gemm_packed_run(pool, p, &ar)) gemm_f32_scalar(pool, p); /* no scratch memory */
  return SMELT_OK;
}

smelt_status gemm_f32_isa(smelt_pool *pool, const gemm_params *p, isa_level isa) {
  return gemm_f32_run(pool, p, isa, GEMM_PATH_AUTO, NULL);
}

smelt_status gemm_f32_ex(smelt_pool *pool, const gemm_params *p) {
  return gemm_f32_isa(pool, p, isa_active());
}

smelt_status gemm_f32(smelt_pool *pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                      float *C, int64_t ldc) {
  gemm_params p = gemm_params_default();
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.M = M;
  p.N = N;
  p.K = K;
  p.alpha = alpha;
  p.A = A;
  p.lda = lda;
  p.B = B;
  p.ldb = ldb;
  p.beta = beta;
  p.C = C;
  p.ldc = ldc;
  return gemm_f32_ex(pool, &p);
}
