/* GEMM driver: argument checks, ISA choice, the small-M path and the packed,
 * cache-blocked path (GotoBLAS/BLIS structure).
 *
 * Packed path, for one N chunk (columns [j0, j1)) and one K super-block:
 *   - B is packed into kc x NR micro-panels for every K block pc and every
 *     NR-wide column group jp; the thread that first needs a panel packs it
 *     (an atomic state per panel), so packing is shared and needs no barrier.
 *   - Work items are (ic, jt): an MC-row block of C times a range of column
 *     panels.  Each thread claims items from an atomic counter; for every K
 *     block it packs its A block (mc x kc, MR-row micro-panels) into its own
 *     buffer and runs the micro-kernel over the item's panels.
 *   - The first K block applies beta, the last one the epilogue.
 * The chunk width keeps the packed B of one chunk within a cache-sized
 * budget; one pool_parallel_for per chunk. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
  int mr, nr;
  gemm_ukernel_fn ukr;
  gemm_smallm_fn smallm;
  int64_t kc, mc;      /* K block (B micro-panel in L1), M block (A block in L2) */
  int64_t bbuf_floats; /* packed-B budget per chunk (L3-sized) */
} gemm_arch;

static bool gemm_arch_for(isa_level isa, gemm_arch *a) {
#ifdef SMELT_X86
  if (isa == ISA_AVX512) {
    *a = (gemm_arch){14, 32, f32_gemm_14x32_avx512, f32_gemm_smallm_avx512, 256, 14 * 12,
                     (int64_t)2 << 20};
    return true;
  }
  if (isa == ISA_AVX2) {
    *a = (gemm_arch){6, 16, f32_gemm_6x16_avx2, f32_gemm_smallm_avx2, 256, 6 * 24,
                     (int64_t)2 << 20};
    return true;
  }
#endif
  (void)isa;
  (void)a;
  return false;
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
  int64_t units = (p->N + x.step - 1) / x.step;
  int64_t flops_per_unit = 2 * p->M * p->K * x.step;
  int64_t grain = (int64_t)(1 << 18) / (flops_per_unit > 0 ? flops_per_unit : 1) + 1;
  pool_parallel_for(pool, units, grain, smallm_range, &x);
}

/* ---- packing ---- */

/* mc rows of op(A) from row i0, K range [p0, p0+kc), into MR-row micro-panels:
 * panel r holds kc groups of MR floats, rows past mc zero. */
static void pack_a(const gemm_params *p, int mr_, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                   float *restrict dst) {
  const int64_t MR = mr_;
  for (int64_t ir = 0; ir < mc; ir += MR, dst += MR * kc) {
    int64_t rows = mc - ir < MR ? mc - ir : MR;
    if (!p->trans_a) {
      for (int64_t i = 0; i < rows; i++) {
        const float *src = p->A + (i0 + ir + i) * p->lda + p0;
        for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = src[k];
      }
      for (int64_t i = rows; i < MR; i++)
        for (int64_t k = 0; k < kc; k++) dst[k * MR + i] = 0.f;
    } else {
      for (int64_t k = 0; k < kc; k++) {
        const float *src = p->A + (p0 + k) * p->lda + i0 + ir;
        for (int64_t i = 0; i < rows; i++) dst[k * MR + i] = src[i];
        for (int64_t i = rows; i < MR; i++) dst[k * MR + i] = 0.f;
      }
    }
  }
}

/* cols (<= NR) columns of op(B) from column j0, K range [p0, p0+kc): kc groups
 * of NR floats, columns past cols zero. */
static void pack_b(const gemm_params *p, int nr_, int64_t j0, int64_t cols, int64_t p0,
                   int64_t kc, float *restrict dst) {
  const int64_t NR = nr_;
  if (!p->trans_b) {
    for (int64_t k = 0; k < kc; k++) {
      const float *src = p->B + (p0 + k) * p->ldb + j0;
      memcpy(dst + k * NR, src, sizeof(float) * (size_t)cols);
      if (cols < NR) memset(dst + k * NR + cols, 0, sizeof(float) * (size_t)(NR - cols));
    }
  } else {
    for (int64_t j = 0; j < cols; j++) {
      const float *src = p->B + (j0 + j) * p->ldb + p0;
      for (int64_t k = 0; k < kc; k++) dst[k * NR + j] = src[k];
    }
    for (int64_t j = cols; j < NR; j++)
      for (int64_t k = 0; k < kc; k++) dst[k * NR + j] = 0.f;
  }
}

/* ---- packed path ---- */

enum { PANEL_EMPTY = 0, PANEL_PACKING = 1, PANEL_READY = 2 };

typedef struct packed_ctx {
  const gemm_params *p;
  const gemm_arch *ar;
  int64_t kc, mc;             /* block sizes for this call */
  int64_t q0, qk;             /* K super-block [q0, q0+qk) */
  bool first_q, last_q;       /* it applies beta / the epilogue */
  int64_t n_pc;               /* K blocks in the super-block */
  int64_t j0, j1;             /* N chunk */
  int64_t n_jr;               /* NR panels in the chunk */
  int64_t n_ic, n_jt, jt_len; /* items: n_ic x n_jt, jt_len panels each */
  float *bbuf;                /* n_pc * n_jr panels of kc*NR floats */
  atomic_uchar *bstate;       /* per panel: PANEL_* */
  float *abuf;                /* per slot: mc_max*kc floats */
  int64_t abuf_len;
  atomic_int_fast64_t next;   /* next unclaimed item */
} packed_ctx;

static void spin_pause(void) {
#ifdef SMELT_X86
  _mm_pause();
#endif
}

/* The packed panel (pc, jp), packing it if no thread has. */
static const float *b_panel(packed_ctx *x, int64_t pc, int64_t jp) {
  int64_t idx = pc * x->n_jr + jp;
  float *dst = x->bbuf + idx * x->kc * x->ar->nr;
  atomic_uchar *st = &x->bstate[idx];
  unsigned char s = atomic_load_explicit(st, memory_order_acquire);
  if (s == PANEL_READY) return dst;
  unsigned char expect = PANEL_EMPTY;
  if (s == PANEL_EMPTY && atomic_compare_exchange_strong(st, &expect, PANEL_PACKING)) {
    int64_t j = x->j0 + jp * x->ar->nr, p0 = x->q0 + pc * x->kc;
    int64_t cols = x->j1 - j < x->ar->nr ? x->j1 - j : x->ar->nr;
    int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
    pack_b(x->p, x->ar->nr, j, cols, p0, kc, dst);
    atomic_store_explicit(st, PANEL_READY, memory_order_release);
    return dst;
  }
  /* Another thread is packing it: a few microseconds at most. */
  while (atomic_load_explicit(st, memory_order_acquire) != PANEL_READY) spin_pause();
  return dst;
}

static void packed_item(packed_ctx *x, float *abuf, int64_t item, int64_t *packed_ic) {
  const gemm_params *p = x->p;
  const gemm_arch *ar = x->ar;
  const gemm_epilogue *ep = &p->epilogue;
  int64_t ic = item / x->n_jt, jt = item % x->n_jt;
  int64_t i0 = ic * x->mc, mc = p->M - i0 < x->mc ? p->M - i0 : x->mc;
  int64_t jp0 = jt * x->jt_len, jp1 = jp0 + x->jt_len < x->n_jr ? jp0 + x->jt_len : x->n_jr;
  for (int64_t pc = 0; pc < x->n_pc; pc++) {
    int64_t p0 = x->q0 + pc * x->kc;
    int64_t kc = x->q0 + x->qk - p0 < x->kc ? x->q0 + x->qk - p0 : x->kc;
    /* With one K block the A block survives to the next item of the same ic. */
    if (x->n_pc > 1 || *packed_ic != ic) pack_a(p, ar->mr, i0, mc, p0, kc, abuf);
    *packed_ic = x->n_pc > 1 ? -1 : ic;
    bool last = x->last_q && pc == x->n_pc - 1;
    gemm_store st = {p->alpha, (x->first_q && pc == 0) ? p->beta : 1.f, GEMM_BIAS_NONE, NULL,
                     GEMM_ACT_NONE, ep->clip_lo, ep->clip_hi};
    if (last) {
      st.bias_kind = ep->bias_kind;
      st.act = ep->act;
    }
    for (int64_t jp = jp0; jp < jp1; jp++) {
      const float *bp = b_panel(x, pc, jp);
      int64_t j = x->j0 + jp * ar->nr;
      int nr = (int)(x->j1 - j < ar->nr ? x->j1 - j : ar->nr);
      for (int64_t ir = 0; ir < mc; ir += ar->mr) {
        int mr = (int)(mc - ir < ar->mr ? mc - ir : ar->mr);
        if (st.bias_kind == GEMM_BIAS_COL) st.bias = ep->bias + j;
        else if (st.bias_kind == GEMM_BIAS_ROW) st.bias = ep->bias + i0 + ir;
        ar->ukr(kc, abuf + ir * kc, bp, p->C + (i0 + ir) * p->ldc + j, p->ldc, mr, nr, &st);
      }
    }
  }
}

static void packed_slots(void *vctx, int64_t s0, int64_t s1) {
  packed_ctx *x = vctx;
  for (int64_t s = s0; s < s1; s++) {
    float *abuf = x->abuf + s * x->abuf_len;
    int64_t packed_ic = -1;
    for (;;) {
      int64_t item = atomic_fetch_add(&x->next, 1);
      if (item >= x->n_ic * x->n_jt) break;
      packed_item(x, abuf, item, &packed_ic);
    }
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* Block sizes spread evenly: ceil(n/max) blocks of equal size (multiple of
 * `unit`), so no K or M block is a sliver. */
static int64_t even_block(int64_t n, int64_t max, int64_t unit) {
  return round_up(ceil_div(n, ceil_div(n, max)), unit);
}

/* Returns false (nothing written) if scratch memory cannot be allocated. */
static bool gemm_packed(smelt_pool *pool, const gemm_params *p, const gemm_arch *ar) {
  const int64_t MR = ar->mr, NR = ar->nr;
  packed_ctx x;
  memset(&x, 0, sizeof x);
  x.p = p;
  x.ar = ar;
  int64_t qmax = 16 * ar->kc; /* K super-block: bounds packed B when K is huge */
  int64_t qk_max = even_block(p->K, qmax, 1);
  x.kc = even_block(qk_max, ar->kc, 8);
  if (x.kc > qk_max) x.kc = qk_max;
  x.mc = even_block(p->M, ar->mc, MR);
  int64_t n_pc_max = ceil_div(qk_max, x.kc);
  int64_t chunk_max = ar->bbuf_floats / (n_pc_max * x.kc);
  chunk_max = chunk_max < NR ? NR : chunk_max / NR * NR;
  int64_t chunk = even_block(p->N, chunk_max, NR);
  int64_t n_jr_max = chunk / NR;

  double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K;
  int threads = pool_threads(pool);
  int64_t want = (int64_t)(flops / 4e6) + 1; /* a thread needs a few microseconds of work */
  if (want < threads) threads = (int)want;

  size_t panels = (size_t)(n_pc_max * n_jr_max);
  size_t bbuf_bytes = panels * (size_t)(x.kc * NR) * sizeof(float);
  x.abuf_len = round_up(x.mc * x.kc, 16);
  size_t abuf_bytes = (size_t)threads * (size_t)x.abuf_len * sizeof(float);
  size_t state_bytes = (size_t)round_up((int64_t)panels, 64);
  char *mem = aligned_alloc(64, bbuf_bytes + abuf_bytes + state_bytes);
  if (!mem) return false;
  x.bbuf = (float *)mem;
  x.abuf = (float *)(mem + bbuf_bytes);
  x.bstate = (atomic_uchar *)(mem + bbuf_bytes + abuf_bytes);

  x.n_ic = ceil_div(p->M, x.mc);
  for (x.q0 = 0; x.q0 < p->K; x.q0 += x.qk) {
    x.qk = p->K - x.q0 < qk_max ? p->K - x.q0 : qk_max;
    x.first_q = x.q0 == 0;
    x.last_q = x.q0 + x.qk == p->K;
    x.n_pc = ceil_div(x.qk, x.kc);
    for (x.j0 = 0; x.j0 < p->N; x.j0 = x.j1) {
      x.j1 = p->N - x.j0 < chunk ? p->N : x.j0 + chunk;
      x.n_jr = ceil_div(x.j1 - x.j0, NR);
      /* Enough items that a slow thread (a shared machine) can be helped. */
      int64_t jt = threads > 1 ? ceil_div(2 * threads, x.n_ic) : 1;
      x.jt_len = ceil_div(x.n_jr, jt);
      x.n_jt = ceil_div(x.n_jr, x.jt_len);
      for (int64_t i = 0; i < x.n_pc * x.n_jr; i++) atomic_init(&x.bstate[i], PANEL_EMPTY);
      atomic_init(&x.next, 0);
      if (threads > 1) pool_parallel_for(pool, threads, 1, packed_slots, &x);
      else packed_slots(&x, 0, 1);
    }
  }
  free(mem);
  return true;
}

/* ---- entry points ---- */

smelt_status gemm_f32_isa(smelt_pool *pool, const gemm_params *p, isa_level isa) {
  TRY(gemm_check(p));
  if (p->M == 0 || p->N == 0) return SMELT_OK;
  if (p->K == 0 || p->alpha == 0.f) {
    gemm_scale(p);
    return SMELT_OK;
  }
  gemm_arch ar;
  if (!gemm_arch_for(isa_clamp(isa), &ar)) {
    gemm_f32_scalar(pool, p);
    return SMELT_OK;
  }
  /* The small-M kernels read A in place; with both operands transposed A's
   * rows are strided, so that case takes the packed path. */
  if (p->M <= GEMM_SMALL_M && !(p->trans_a && p->trans_b)) {
    gemm_small_m(pool, p, &ar);
    return SMELT_OK;
  }
  if (!gemm_packed(pool, p, &ar)) gemm_f32_scalar(pool, p); /* no scratch memory */
  return SMELT_OK;
}

smelt_status gemm_f32_ex(smelt_pool *pool, const gemm_params *p) {
  return gemm_f32_isa(pool, p, isa_active());
}

void gemm_f32(smelt_pool *pool, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
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
  /* void by contract: a bad argument leaves C untouched, with the reason in
   * smelt_last_error(). */
  (void)gemm_f32_ex(pool, &p);
}
