/* GEMM operands packed once (gemm.h: gemm_pack_b_prepare / gemm_pack_a_prepare):
 * constant weights laid out as the packed path's panels (layouts in
 * gemm_kernels.h, struct gemm_packed), so a call that is given one skips
 * packing that operand.  The layout comes from the same gemm_layout the
 * driver blocks with, so the two cannot drift apart. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h"
#include "util/err.h"

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ---- sizes ---- */

/* B: every super-block holds n_pc K blocks of ceil(N/NR) panels of kc*NR. */
static int64_t b_floats(const gemm_layout *l, int64_t K, int64_t N) {
  int64_t n = 0, panels = ceil_div(N, l->nr);
  for (int64_t q0 = 0; q0 < K; q0 += l->qk_max) {
    int64_t qk = K - q0 < l->qk_max ? K - q0 : l->qk_max;
    n += ceil_div(qk, l->kc) * panels * l->kc * l->nr;
  }
  return n;
}

/* A: every K block holds M rounded up to MR rows of its length. */
static int64_t a_floats(const gemm_layout *l, int64_t M, int64_t K) { return ceil_div(M, l->mr) * l->mr * K; }

int64_t gemm_pack_b_floats(isa_level isa, int64_t K, int64_t N) {
  gemm_layout l;
  if (K <= 0 || N <= 0 || !gemm_layout_for(isa, NULL, K, N, &l)) return 0;
  return b_floats(&l, K, N);
}

int64_t gemm_pack_a_floats(isa_level isa, int64_t M, int64_t K) {
  gemm_layout l;
  if (M <= 0 || K <= 0 || !gemm_layout_for(isa, NULL, K, 0, &l)) return 0;
  return a_floats(&l, M, K);
}

/* ---- the object ---- */

static smelt_status packed_new(char which, bool trans, const gemm_layout *l, int64_t K, int64_t mn, int64_t n,
                               gemm_packed **out) {
  *out = NULL;
  gemm_packed *pk = calloc(1, sizeof *pk);
  if (!pk) return err_nomem("packed GEMM operand", sizeof *pk);
  *pk = (gemm_packed){.which = which, .trans = trans, .isa = l->isa, .K = K, .mn = mn, .kc = l->kc,
                      .qk_max = l->qk_max, .chunk = which == 'b' ? l->chunk : 0, .n = n};
  *out = pk;
  return SMELT_OK;
}

void gemm_packed_free(gemm_packed *pk) {
  if (!pk) return;
  if (pk->owned) tensor_data_free(pk->owned);
  free(pk);
}

void gemm_packed_free_v(void *pk) { gemm_packed_free(pk); }

const float *gemm_packed_data(const gemm_packed *pk, int64_t *n) {
  *n = pk ? pk->n : 0;
  return pk ? pk->data : NULL;
}

static smelt_status check_shape(const char *what, int64_t rows, int64_t K, const void *src, int64_t ld,
                                int64_t row_len) {
  if (rows <= 0 || K <= 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %s: empty or negative shape %lld x %lld", what,
                   (long long)rows, (long long)K);
  if (!src) return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %s: the matrix is NULL", what);
  if (ld < row_len)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %s: ld %lld is less than its row length %lld", what,
                   (long long)ld, (long long)row_len);
  return SMELT_OK;
}

/* ---- packing ---- */

typedef struct pack_job {
  const gemm_layout *l;
  gemm_params p; /* the source operand as a call would give it */
  float *dst;
  int64_t K, mn;
} pack_job;

/* B: one unit per K block (of the whole K), all N chunks of it. */
static void pack_b_blocks(void *ctx, int64_t u0, int64_t u1) {
  const pack_job *j = ctx;
  const gemm_layout *l = j->l;
  int64_t NR = l->nr, n_pc_max = ceil_div(l->qk_max, l->kc), panels = ceil_div(j->mn, NR);
  for (int64_t u = u0; u < u1; u++) {
    int64_t q = u / n_pc_max, pc = u % n_pc_max, q0 = q * l->qk_max;
    int64_t qk = j->K - q0 < l->qk_max ? j->K - q0 : l->qk_max;
    int64_t n_pc = ceil_div(qk, l->kc), p0 = q0 + pc * l->kc;
    if (pc >= n_pc) continue;
    int64_t kc = q0 + qk - p0 < l->kc ? q0 + qk - p0 : l->kc;
    /* super-blocks before q are full: n_pc_max blocks each */
    float *base = j->dst + q * n_pc_max * panels * l->kc * NR;
    for (int64_t j0 = 0; j0 < j->mn; j0 += l->chunk) {
      int64_t cols = j->mn - j0 < l->chunk ? j->mn - j0 : l->chunk, n_jr = ceil_div(cols, NR);
      float *chunk = base + n_pc * (j0 / NR) * l->kc * NR; /* chunks before are chunk/NR panels wide */
      l->pack_b(&j->p, j0, cols, p0, kc, chunk + pc * n_jr * l->kc * NR, l->kc * NR);
    }
  }
}

/* A: one unit per K block: M rows of it. */
static void pack_a_blocks(void *ctx, int64_t u0, int64_t u1) {
  const pack_job *j = ctx;
  const gemm_layout *l = j->l;
  int64_t n_pc_max = ceil_div(l->qk_max, l->kc), m_pad = ceil_div(j->mn, l->mr) * l->mr;
  for (int64_t u = u0; u < u1; u++) {
    int64_t q = u / n_pc_max, pc = u % n_pc_max, q0 = q * l->qk_max;
    int64_t qk = j->K - q0 < l->qk_max ? j->K - q0 : l->qk_max;
    int64_t p0 = q0 + pc * l->kc;
    if (pc >= ceil_div(qk, l->kc)) continue;
    int64_t kc = q0 + qk - p0 < l->kc ? q0 + qk - p0 : l->kc;
    l->pack_a(&j->p, 0, j->mn, p0, kc, j->dst + m_pad * p0);
  }
}

/* Packs into dst (n_dst floats, borrowed) or, dst NULL, into new memory
 * the object owns. */
static smelt_status prepare(smelt_pool *pool, char which, isa_level isa, const gemm_blocking *blk, bool trans,
                            int64_t K, int64_t mn, const gemm_params *src, float *dst, int64_t n_dst,
                            gemm_packed **out) {
  *out = NULL;
  gemm_layout l;
  if (!gemm_layout_for(isa, blk, K, which == 'b' ? mn : 0, &l)) return SMELT_OK; /* no packed path */
  int64_t n = which == 'b' ? b_floats(&l, K, mn) : a_floats(&l, mn, K);
  if (dst && (n_dst != n || (uintptr_t)dst % 64))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %c: a buffer of %lld floats%s given, the layout "
                   "needs %lld, 64-byte aligned", which, (long long)n_dst, (uintptr_t)dst % 64 ? " (misaligned)" : "",
                   (long long)n);
  float *data = dst ? dst : tensor_data_alloc(sizeof(float) * (size_t)n);
  if (!data) return err_nomem("packed GEMM operand", sizeof(float) * (size_t)n);
  pack_job j = {.l = &l, .p = *src, .dst = data, .K = K, .mn = mn};
  int64_t units = ceil_div(K, l.qk_max) * ceil_div(l.qk_max, l.kc);
  pool_parallel_for(pool, units, 1, which == 'b' ? pack_b_blocks : pack_a_blocks, &j);
  smelt_status st = packed_new(which, trans, &l, K, mn, n, out);
  if (st) {
    if (!dst) tensor_data_free(data);
    return st;
  }
  (*out)->data = data;
  (*out)->owned = dst ? NULL : data;
  return SMELT_OK;
}

/* op(B) / op(A) as a call would give them, packed into dst (NULL: new memory). */
static smelt_status pack_b(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_b, int64_t K,
                           int64_t N, const float *B, int64_t ldb, float *dst, int64_t n, gemm_packed **out) {
  *out = NULL;
  TRY(check_shape("B", N, K, B, ldb, trans_b ? K : N));
  gemm_params p = gemm_params_default();
  p.trans_b = trans_b;
  p.K = K;
  p.N = N;
  p.B = B;
  p.ldb = ldb;
  return prepare(pool, 'b', isa, blk, trans_b, K, N, &p, dst, n, out);
}

static smelt_status pack_a(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_a, int64_t M,
                           int64_t K, const float *A, int64_t lda, float *dst, int64_t n, gemm_packed **out) {
  *out = NULL;
  TRY(check_shape("A", M, K, A, lda, trans_a ? M : K));
  gemm_params p = gemm_params_default();
  p.trans_a = trans_a;
  p.M = M;
  p.K = K;
  p.A = A;
  p.lda = lda;
  return prepare(pool, 'a', isa, blk, trans_a, K, M, &p, dst, n, out);
}

smelt_status gemm_pack_b_prepare_blk(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_b,
                                     int64_t K, int64_t N, const float *B, int64_t ldb, gemm_packed **out) {
  return pack_b(pool, isa, blk, trans_b, K, N, B, ldb, NULL, 0, out);
}

smelt_status gemm_pack_a_prepare_blk(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_a,
                                     int64_t M, int64_t K, const float *A, int64_t lda, gemm_packed **out) {
  return pack_a(pool, isa, blk, trans_a, M, K, A, lda, NULL, 0, out);
}

smelt_status gemm_pack_b_prepare(smelt_pool *pool, isa_level isa, bool trans_b, int64_t K, int64_t N,
                                 const float *B, int64_t ldb, gemm_packed **out) {
  return gemm_pack_b_prepare_blk(pool, isa, NULL, trans_b, K, N, B, ldb, out);
}

smelt_status gemm_pack_a_prepare(smelt_pool *pool, isa_level isa, bool trans_a, int64_t M, int64_t K,
                                 const float *A, int64_t lda, gemm_packed **out) {
  return gemm_pack_a_prepare_blk(pool, isa, NULL, trans_a, M, K, A, lda, out);
}

smelt_status gemm_pack_b_into(smelt_pool *pool, isa_level isa, bool trans_b, int64_t K, int64_t N, const float *B,
                              int64_t ldb, float *dst, int64_t n, gemm_packed **out) {
  *out = NULL;
  if (!dst) return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack B: no buffer to pack into");
  return pack_b(pool, isa, NULL, trans_b, K, N, B, ldb, dst, n, out);
}

smelt_status gemm_pack_a_into(smelt_pool *pool, isa_level isa, bool trans_a, int64_t M, int64_t K, const float *A,
                              int64_t lda, float *dst, int64_t n, gemm_packed **out) {
  *out = NULL;
  if (!dst) return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack A: no buffer to pack into");
  return pack_a(pool, isa, NULL, trans_a, M, K, A, lda, dst, n, out);
}

static smelt_status wrap(char which, isa_level isa, bool trans, int64_t K, int64_t mn, const float *data,
                         int64_t n, gemm_packed **out) {
  *out = NULL;
  gemm_layout l;
  if (K <= 0 || mn <= 0 || !data || !gemm_layout_for(isa, NULL, K, which == 'b' ? mn : 0, &l))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %c: nothing to wrap for %lld x %lld on %s", which,
                   (long long)mn, (long long)K, isa_name(isa));
  if ((uintptr_t)data % 64) /* the micro-kernels load B panels aligned */
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %c: the floats are not 64-byte aligned", which);
  int64_t want = which == 'b' ? b_floats(&l, K, mn) : a_floats(&l, mn, K);
  if (n != want)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "gemm prepack %c: %lld floats given, the layout needs %lld", which,
                   (long long)n, (long long)want);
  TRY(packed_new(which, trans, &l, K, mn, n, out));
  (*out)->data = data;
  return SMELT_OK;
}

smelt_status gemm_pack_b_wrap(isa_level isa, bool trans_b, int64_t K, int64_t N, const float *data, int64_t n,
                              gemm_packed **out) {
  return wrap('b', isa, trans_b, K, N, data, n, out);
}

smelt_status gemm_pack_a_wrap(isa_level isa, bool trans_a, int64_t M, int64_t K, const float *data, int64_t n,
                              gemm_packed **out) {
  return wrap('a', isa, trans_a, K, M, data, n, out);
}

/* ---- matching a call ---- */

static bool same_layout(const gemm_packed *pk, const gemm_layout *l) {
  return pk->isa == l->isa && pk->kc == l->kc && pk->qk_max == l->qk_max;
}

const float *gemm_packed_b_for(const gemm_packed *pk, const gemm_layout *l, const gemm_params *p) {
  if (!pk || pk->which != 'b' || !same_layout(pk, l) || pk->chunk != l->chunk) return NULL;
  return pk->trans == p->trans_b && pk->K == p->K && pk->mn == p->N ? pk->data : NULL;
}

const float *gemm_packed_a_for(const gemm_packed *pk, const gemm_layout *l, const gemm_params *p) {
  if (!pk || pk->which != 'a' || !same_layout(pk, l)) return NULL;
  return pk->trans == p->trans_a && pk->K == p->K && pk->mn == p->M ? pk->data : NULL;
}
