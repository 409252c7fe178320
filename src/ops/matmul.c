/* MatMul (numpy semantics) and Gemm.  f32 runs on gemm_f32; f16/bf16 through
 * f32 copies; f64 and the integer types on plain reference loops (integers
 * wrap like the element type). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/gemm_weights.h"
#include "ops/nn_util.h"
#include "util/err.h"

static const smelt_dtype mm_types[] = {SMELT_F32, SMELT_F16,  SMELT_BF16, SMELT_F64, SMELT_I32,
                                       SMELT_I64, SMELT_U32,  SMELT_U64,  SMELT_UNDEFINED};

static smelt_status check_mm_types(op_ctx *c, int n) {
  for (int i = 0; i < n; i++) {
    const tensor *t = op_in(c, i);
    if (!t || (c->static_infer && t->dtype == SMELT_UNDEFINED)) continue;
    TRY(op_check_dtype(c, i, mm_types));
    TRY(nn_check_same_dtype(c, i, i == 2 ? "C" : "B", 0, "A"));
  }
  return SMELT_OK;
}

/* ---- reference slices for the non-f32 types ---- */

/* One product C[M,N] = sum_k A[m,k] B[k,n] with element strides (rsa, csa)
 * for A and (rsb, csb) for B, so transposes need no copy. */
typedef struct mm_slice {
  int64_t M, N, K, rsa, csa, rsb, csb;
} mm_slice;

static void slice_f64(const mm_slice *s, const double *A, const double *B, double *C) {
  for (int64_t m = 0; m < s->M; m++)
    for (int64_t n = 0; n < s->N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < s->K; k++) acc += A[m * s->rsa + k * s->csa] * B[k * s->rsb + n * s->csb];
      C[m * s->N + n] = acc;
    }
}

/* Integer products wrap modulo 2^64 (unsigned arithmetic avoids UB); the
 * store truncates to the element width. */
static void slice_i64(const mm_slice *s, const int64_t *A, const int64_t *B, int64_t *C) {
  for (int64_t m = 0; m < s->M; m++)
    for (int64_t n = 0; n < s->N; n++) {
      uint64_t acc = 0;
      for (int64_t k = 0; k < s->K; k++)
        acc += (uint64_t)A[m * s->rsa + k * s->csa] * (uint64_t)B[k * s->rsb + n * s->csb];
      C[m * s->N + n] = (int64_t)acc;
    }
}

/* ---- MatMul ---- */

typedef struct mm_shape {
  int64_t M, N, K;
  int nb;                    /* batch rank of the output */
  int64_t batch[SMELT_MAX_RANK];
  int64_t sa[SMELT_MAX_RANK], sb[SMELT_MAX_RANK]; /* batch strides in matrices; 0 = broadcast */
  int64_t nbatch;
  int out_rank;
  int64_t out[SMELT_MAX_RANK];
} mm_shape;

static smelt_status mm_plan(const tensor *a, const tensor *b, mm_shape *s) {
  int ra = a->rank, rb = b->rank;
  if (ra < 1 || rb < 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "MatMul input %d is a scalar; inputs need rank >= 1",
                   ra < 1 ? 0 : 1);
  s->M = ra >= 2 ? a->dims[ra - 2] : 1;
  s->K = a->dims[ra - 1];
  int64_t kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0];
  s->N = rb >= 2 ? b->dims[rb - 1] : 1;
  if (dim_known(s->K) && dim_known(kb) && s->K != kb)
    return err_set(SMELT_ERR_INVALID_ARGUMENT,
                   "inner dims do not match: A's last dim is %lld, B's %s is %lld", (long long)s->K,
                   rb >= 2 ? "second-to-last dim" : "dim", (long long)kb);
  int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0;
  TRY(op_broadcast_shape(ba, a->dims, bb, b->dims, &s->nb, s->batch));
  int64_t stride_a = 1, stride_b = 1; /* in matrices */
  for (int i = s->nb - 1; i >= 0; i--) {
    int ia = i - (s->nb - ba), ib = i - (s->nb - bb);
    int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
    s->sa[i] = da == 1 ? 0 : stride_a;
    s->sb[i] = db == 1 ? 0 : stride_b;
    stride_a *= da > 0 ? da : 1;
    stride_b *= db > 0 ? db : 1;
  }
  s->nbatch = nn_prod(s->batch, 0, s->nb);
  s->out_rank = s->nb;
  memcpy(s->out, s->batch, sizeof(int64_t) * (size_t)s->nb);
  if (ra >= 2) s->out[s->out_rank++] = s->M;
  if (rb >= 2) s->out[s->out_rank++] = s->N;
  return SMELT_OK;
}

static smelt_status matmul_infer(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  TRY(check_mm_types(c, 2));
  if (a->rank < 0 || b->rank < 0) {
    nn_out_unknown(c, 0, a->dtype);
    return SMELT_OK;
  }
  mm_shape s;
  TRY(mm_plan(a, b, &s));
  op_set_out(c, 0, a->dtype, s.out_rank, s.out);
  return SMELT_OK;
}

static void mm_offsets(const mm_shape *s, int64_t bi, int64_t *oa, int64_t *ob) {
  int64_t a = 0, b = 0;
  for (int i = s->nb - 1; i >= 0; i--) {
    int64_t d = s->batch[i], idx = bi % d;
    bi /= d;
    a += idx * s->sa[i];
    b += idx * s->sb[i];
  }
  *oa = a * s->M * s->K;
  *ob = b * s->K * s->N;
}

typedef struct mm_job {
  const mm_shape *s;
  const float *A, *B;
  float *C;
  atomic_int st; /* a worker's GEMM refused its arguments: that status */
} mm_job;

static void mm_batches(void *vctx, int64_t b0, int64_t b1) {
  mm_job *j = vctx;
  const mm_shape *s = j->s;
  for (int64_t bi = b0; bi < b1; bi++) {
    int64_t oa, ob;
    mm_offsets(s, bi, &oa, &ob);
    smelt_status st = gemm_f32(NULL, false, false, s->M, s->N, s->K, 1.f, j->A + oa, s->K, j->B + ob, s->N, 0.f,
                               j->C + bi * s->M * s->N, s->N);
    if (st) { /* the message is this worker's: matmul_f32 reports the status */
      atomic_store(&j->st, (int)st);
      return;
    }
  }
}

/* pb: B packed ahead (one B for every batch), or NULL. */
static smelt_status matmul_f32(smelt_pool *pool, const mm_shape *s, const float *A, const float *B,
                               const gemm_packed *pb, float *C) {
  if (s->K == 0) {
    memset(C, 0, sizeof(float) * (size_t)(s->nbatch * s->M * s->N));
    return SMELT_OK;
  }
  bool b_shared = true; /* one B for every batch: stack A's batches into M */
  for (int i = 0; i < s->nb; i++) b_shared &= s->sb[i] == 0;
  if (b_shared) {
    gemm_params p = gemm_params_default();
    p.M = s->nbatch * s->M, p.N = s->N, p.K = s->K;
    p.A = A, p.lda = s->K, p.B = B, p.ldb = s->N, p.C = C, p.ldc = s->N;
    p.packed_b = pb;
    return gemm_f32_ex(pool, &p);
  }
  mm_job j = {.s = s, .A = A, .B = B, .C = C};
  int64_t flops = s->M * s->N * s->K;
  if (s->nbatch >= pool_threads(pool) && flops < ((int64_t)1 << 22)) {
    /* many small products (attention heads): one product per task */
    pool_parallel_for(pool, s->nbatch, 1 + ((int64_t)1 << 16) / (flops + 1), mm_batches, &j);
    int st = atomic_load(&j.st);
    return st ? err_set((smelt_status)st, "MatMul: the GEMM of a batch refused its arguments") : SMELT_OK;
  }
  for (int64_t bi = 0; bi < s->nbatch; bi++) {
    int64_t oa, ob;
    mm_offsets(s, bi, &oa, &ob);
    TRY(gemm_f32(pool, false, false, s->M, s->N, s->K, 1.f, A + oa, s->K, B + ob, s->N, 0.f,
                 C + bi * s->M * s->N, s->N));
  }
  return SMELT_OK;
}

static smelt_status matmul_ref(const mm_shape *s, const tensor *a, const tensor *b, tensor *y) {
  bool fl = y->dtype == SMELT_F64;
  size_t es = fl ? sizeof(double) : sizeof(int64_t);
  void *A = NULL, *B = NULL, *C = NULL;
  int64_t na = tensor_numel(a), nb = tensor_numel(b), nc = tensor_numel(y);
  smelt_status st = nn_alloc(&A, na, es, "MatMul A");
  if (!st) st = nn_alloc(&B, nb, es, "MatMul B");
  if (!st) st = nn_alloc(&C, nc, es, "MatMul Y");
  if (!st) {
    if (fl) {
      nn_load_f64(a->dtype, a->data, 0, 1, na, A);
      nn_load_f64(b->dtype, b->data, 0, 1, nb, B);
    } else {
      nn_load_i64(a->dtype, a->data, 0, 1, na, A);
      nn_load_i64(b->dtype, b->data, 0, 1, nb, B);
    }
    mm_slice sl = {s->M, s->N, s->K, s->K, 1, s->N, 1};
    for (int64_t bi = 0; bi < s->nbatch; bi++) {
      int64_t oa, ob, oc = bi * s->M * s->N;
      mm_offsets(s, bi, &oa, &ob);
      if (fl) slice_f64(&sl, (double *)A + oa, (double *)B + ob, (double *)C + oc);
      else slice_i64(&sl, (int64_t *)A + oa, (int64_t *)B + ob, (int64_t *)C + oc);
    }
    if (fl) nn_store_f64(y->dtype, y->data, 0, 1, nc, C);
    else nn_store_i64(y->dtype, y->data, 0, 1, nc, C);
  }
  free(A);
  free(B);
  free(C);
  return st;
}

static smelt_status matmul_run(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  tensor *y = c->out[0];
  mm_shape s;
  TRY(mm_plan(a, b, &s));
  if (tensor_numel(y) == 0) return SMELT_OK;
  if (y->dtype == SMELT_F64 || dtype_is_int(y->dtype)) return matmul_ref(&s, a, b, y);
  float *A = NULL, *B = NULL, *C = NULL;
  smelt_status st = nn_f32_acquire(a, &A);
  if (!st) st = nn_f32_acquire(b, &B);
  if (!st) st = nn_f32_out(y, &C);
  if (!st) {
    st = matmul_f32(c->pool, &s, A, B, B == b->data ? gemm_weights_b_input(c, 1, false, s.K, s.N) : NULL, C);
    nn_f32_commit(y, C); /* frees C's scratch copy, if any, either way */
  }
  if (A) nn_f32_release(a, A);
  if (B) nn_f32_release(b, B);
  return st;
}

/* Packs a constant 2-D B once, when the plan is made. */
smelt_status matmul_op_prepare(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  if (!c->cache || a->rank < 0 || a->dtype != SMELT_F32 || b->rank != 2 || !op_input_is_constant(c, 1))
    return SMELT_OK;
  mm_shape s;
  TRY(mm_plan(a, b, &s));
  if (nn_prod(s.out, 0, s.out_rank) > 0 && s.K > 0) (void)gemm_weights_b_input(c, 1, false, s.K, s.N);
  return SMELT_OK;
}

/* ---- Gemm ---- */

typedef struct gemm_shape {
  int64_t M, N, K;
  bool ta, tb;
} gemm_shape;

static smelt_status gemm_plan(op_ctx *c, gemm_shape *g) {
  const tensor *a = c->in[0], *b = c->in[1], *cc = op_in(c, 2);
  TRY(nn_check_rank(c, 0, "A", 2));
  TRY(nn_check_rank(c, 1, "B", 2));
  g->ta = op_attr_int(c, "transA", 0) != 0;
  g->tb = op_attr_int(c, "transB", 0) != 0;
  g->M = a->rank == 2 ? a->dims[g->ta ? 1 : 0] : DIM_UNKNOWN;
  g->K = a->rank == 2 ? a->dims[g->ta ? 0 : 1] : DIM_UNKNOWN;
  int64_t kb = b->rank == 2 ? b->dims[g->tb ? 1 : 0] : DIM_UNKNOWN;
  g->N = b->rank == 2 ? b->dims[g->tb ? 0 : 1] : DIM_UNKNOWN;
  if (dim_known(g->K) && dim_known(kb) && g->K != kb)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "inner dims do not match: op(A) is %lldx%lld, op(B) is %lldx%lld",
                   (long long)g->M, (long long)g->K, (long long)kb, (long long)g->N);
  if (cc && cc->rank > 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (C) has rank %d, expected at most 2", cc->rank);
  if (cc && cc->rank >= 1) {
    const int64_t want[2] = {g->M, g->N};
    for (int i = 0; i < cc->rank; i++) {
      int64_t d = cc->dims[i], w = want[2 - cc->rank + i];
      if (dim_known(d) && dim_known(w) && d != 1 && d != w)
        return err_set(SMELT_ERR_INVALID_ARGUMENT,
                       "input 2 (C) dim %d is %lld, which does not broadcast to %lld", i,
                       (long long)d, (long long)w);
    }
  }
  return SMELT_OK;
}

static smelt_status gemm_infer(op_ctx *c) {
  TRY(check_mm_types(c, 3));
  gemm_shape g;
  TRY(gemm_plan(c, &g));
  op_set_out(c, 0, c->in[0]->dtype, 2, (int64_t[]){g.M, g.N});
  return SMELT_OK;
}

/* Element (m, n) of C broadcast to M x N. */
static int64_t gemm_c_index(const tensor *cc, int64_t m, int64_t n) {
  if (cc->rank == 0) return 0;
  if (cc->rank == 1) return cc->dims[0] == 1 ? 0 : n;
  return (cc->dims[0] == 1 ? 0 : m) * cc->dims[1] + (cc->dims[1] == 1 ? 0 : n);
}

static smelt_status gemm_run_f32(op_ctx *c, const gemm_shape *g, float alpha, float beta) {
  const tensor *a = c->in[0], *b = c->in[1], *cc = op_in(c, 2);
  tensor *y = c->out[0];
  float *A = NULL, *B = NULL, *C = NULL, *Y = NULL;
  smelt_status st = nn_f32_acquire(a, &A);
  if (!st) st = nn_f32_acquire(b, &B);
  if (!st && cc) st = nn_f32_acquire(cc, &C);
  if (!st) st = nn_f32_out(y, &Y);
  if (!st) {
    if (C && beta != 0.f) {
      for (int64_t m = 0; m < g->M; m++)
        for (int64_t n = 0; n < g->N; n++) Y[m * g->N + n] = C[gemm_c_index(cc, m, n)];
    } else {
      beta = 0.f;
    }
    if (g->K == 0) {
      for (int64_t i = 0; i < g->M * g->N; i++) Y[i] = beta == 0.f ? 0.f : beta * Y[i];
    } else {
      gemm_params p = gemm_params_default();
      p.trans_a = g->ta, p.trans_b = g->tb, p.M = g->M, p.N = g->N, p.K = g->K, p.alpha = alpha;
      p.A = A, p.lda = a->dims[1], p.B = B, p.ldb = b->dims[1], p.beta = beta, p.C = Y, p.ldc = g->N;
      p.packed_b = B == b->data ? gemm_weights_b_input(c, 1, g->tb, g->K, g->N) : NULL;
      st = gemm_f32_ex(c->pool, &p);
    }
    nn_f32_commit(y, Y);
  }
  if (A) nn_f32_release(a, A);
  if (B) nn_f32_release(b, B);
  if (C) nn_f32_release(cc, C);
  return st;
}

smelt_status gemm_op_prepare(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  if (!c->cache || a->dtype != SMELT_F32 || a->rank != 2 || b->rank != 2 || !op_input_is_constant(c, 1))
    return SMELT_OK;
  gemm_shape g;
  TRY(gemm_plan(c, &g));
  if (g.M > 0 && g.N > 0 && g.K > 0) (void)gemm_weights_b_input(c, 1, g.tb, g.K, g.N);
  return SMELT_OK;
}

/* f64 and integer Gemm: exact products, then alpha/beta (applied in double
 * for integers unless both are 1). */
static smelt_status gemm_run_ref(op_ctx *c, const gemm_shape *g, float alpha, float beta) {
  const tensor *a = c->in[0], *b = c->in[1], *cc = op_in(c, 2);
  tensor *y = c->out[0];
  bool fl = y->dtype == SMELT_F64;
  size_t es = fl ? sizeof(double) : sizeof(int64_t);
  int64_t na = tensor_numel(a), nb = tensor_numel(b), ny = tensor_numel(y);
  int64_t nc = cc ? tensor_numel(cc) : 0;
  void *A = NULL, *B = NULL, *C = NULL, *Y = NULL;
  smelt_status st = nn_alloc(&A, na, es, "Gemm A");
  if (!st) st = nn_alloc(&B, nb, es, "Gemm B");
  if (!st) st = nn_alloc(&C, nc, es, "Gemm C");
  if (!st) st = nn_alloc(&Y, ny, es, "Gemm Y");
  if (!st) {
    if (fl) {
      nn_load_f64(a->dtype, a->data, 0, 1, na, A);
      nn_load_f64(b->dtype, b->data, 0, 1, nb, B);
      if (cc) nn_load_f64(cc->dtype, cc->data, 0, 1, nc, C);
    } else {
      nn_load_i64(a->dtype, a->data, 0, 1, na, A);
      nn_load_i64(b->dtype, b->data, 0, 1, nb, B);
      if (cc) nn_load_i64(cc->dtype, cc->data, 0, 1, nc, C);
    }
    int64_t lda = a->dims[1], ldb = b->dims[1];
    mm_slice sl = {g->M, g->N, g->K, g->ta ? 1 : lda, g->ta ? lda : 1, g->tb ? 1 : ldb, g->tb ? ldb : 1};
    if (fl) slice_f64(&sl, A, B, Y);
    else slice_i64(&sl, A, B, Y);
    for (int64_t m = 0; m < g->M; m++)
      for (int64_t n = 0; n < g->N; n++) {
        int64_t i = m * g->N + n, ci = cc ? gemm_c_index(cc, m, n) : 0;
        if (fl) {
          double *yd = Y;
          yd[i] = alpha * yd[i] + (cc ? beta * ((double *)C)[ci] : 0.0);
        } else {
          int64_t *yi = Y, cv = cc ? ((int64_t *)C)[ci] : 0;
          if (alpha == 1.f && beta == 1.f) yi[i] = (int64_t)((uint64_t)yi[i] + (uint64_t)cv);
          else yi[i] = (int64_t)(alpha * (double)yi[i] + beta * (double)cv);
        }
      }
    if (fl) nn_store_f64(y->dtype, y->data, 0, 1, ny, Y);
    else nn_store_i64(y->dtype, y->data, 0, 1, ny, Y);
  }
  free(A);
  free(B);
  free(C);
  free(Y);
  return st;
}

static smelt_status gemm_run(op_ctx *c) {
  gemm_shape g;
  TRY(gemm_plan(c, &g));
  float alpha = op_attr_float(c, "alpha", 1.f), beta = op_attr_float(c, "beta", 1.f);
  if (g.M == 0 || g.N == 0) return SMELT_OK;
  smelt_dtype dt = c->out[0]->dtype;
  if (dt == SMELT_F64 || dtype_is_int(dt)) return gemm_run_ref(c, &g, alpha, beta);
  return gemm_run_f32(c, &g, alpha, beta);
}

const op_def op_family_matmul[] = {
    {"MatMul", "", 2, 2, 1, 1, matmul_infer, matmul_run, false},
    {"Gemm", "", 2, 3, 1, 1, gemm_infer, gemm_run, false},
    {0}};
