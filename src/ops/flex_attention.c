/* FlexAttention (ai.onnx.preview, version 1): attention with user subgraphs.
 *   S = scale * Q K^T      [B, Hq, L, S]   (query head h reads kv head h / (Hq/Hkv))
 *   S = score_mod(S)       if given (a subgraph run by the executor)
 *   P = softmax(S) over the last axis
 *   P = prob_mod(P)        if given
 *   Y = P V
 * The working precision is double for f64 inputs (or softmax_precision =
 * double), float otherwise; float products run on gemm_f32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct flex_geom {
  int64_t B, Hq, Hkv, L, S, E, Ev;
  double scale;
  smelt_dtype wp; /* working precision: SMELT_F32 or SMELT_F64 */
} flex_geom;

static smelt_status flex_plan(op_ctx *c, flex_geom *g) {
  static const char *const names[] = {"Q", "K", "V"};
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
  for (int i = 0; i < 3; i++) {
    TRY(nn_check_float(c, i, names[i]));
    TRY(nn_check_rank(c, i, names[i], 4));
  }
  TRY(nn_check_same_dtype(c, 1, "K", 0, "Q"));
  TRY(nn_check_same_dtype(c, 2, "V", 0, "Q"));
  g->B = q->dims[0], g->Hq = q->dims[1], g->L = q->dims[2], g->E = q->dims[3];
  g->Hkv = k->dims[1], g->S = k->dims[2], g->Ev = v->dims[3];
  const int64_t pairs[][2] = {{k->dims[0], g->B}, {v->dims[0], g->B}, {v->dims[1], g->Hkv},
                              {v->dims[2], g->S},  {k->dims[3], g->E}};
  for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++)
    if (dim_known(pairs[i][0]) && dim_known(pairs[i][1]) && pairs[i][0] != pairs[i][1])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "Q, K and V shapes do not agree (%lld vs %lld)",
                     (long long)pairs[i][0], (long long)pairs[i][1]);
  if (dim_known(g->Hq) && dim_known(g->Hkv) && (g->Hkv == 0 || g->Hq % g->Hkv))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%lld query heads are not a multiple of %lld kv heads",
                   (long long)g->Hq, (long long)g->Hkv);
  const ir_attr *sa = ir_attr_find(c->node, "scale");
  g->scale = sa ? (double)sa->f : dim_known(g->E) && g->E > 0 ? 1.0 / sqrt((double)g->E) : 1.0;
  int64_t sp = op_attr_int(c, "softmax_precision", 0);
  g->wp = q->dtype == SMELT_F64 || sp == SMELT_F64 ? SMELT_F64 : SMELT_F32;
  return SMELT_OK;
}

static smelt_status flex_infer(op_ctx *c) {
  flex_geom g;
  TRY(flex_plan(c, &g));
  op_set_out(c, 0, c->in[2]->dtype, 4, (int64_t[]){g.B, g.Hq, g.L, g.Ev});
  return SMELT_OK;
}

/* C[M,N] = alpha * A[M,K] op(B) with op(B) = B^T [N,K] when tb, in the
 * working precision. */
static smelt_status flex_product(smelt_pool *pool, smelt_dtype wp, bool tb, int64_t M, int64_t N, int64_t K,
                                 double alpha, const void *A, const void *B, void *C) {
  if (K == 0) {
    memset(C, 0, (size_t)(M * N) * dtype_size(wp));
    return SMELT_OK;
  }
  if (wp == SMELT_F32) return gemm_f32(pool, false, tb, M, N, K, (float)alpha, A, K, B, tb ? K : N, 0.f, C, N);
  const double *a = A, *b = B;
  double *cc = C;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0;
      for (int64_t k = 0; k < K; k++) acc += a[m * K + k] * (tb ? b[n * K + k] : b[k * N + n]);
      cc[m * N + n] = alpha * acc;
    }
  return SMELT_OK;
}

/* Runs a modifier subgraph on t (in place): same shape, any float type back. */
static smelt_status flex_mod(op_ctx *c, const char *name, tensor *t) {
  const ir_attr *a = ir_attr_find(c->node, name);
  if (!a || a->type != IR_ATTR_GRAPH) return SMELT_OK;
  if (!c->run_subgraph)
    return err_set(SMELT_ERR_UNSUPPORTED, "%s needs the executor to run its subgraph", name);
  tensor out = {0};
  tensor *ins[] = {t};
  smelt_status st = c->run_subgraph(c->exec, a->g, 1, ins, 1, &out);
  if (!st && (out.rank != t->rank || tensor_numel(&out) != tensor_numel(t) || !nn_is_float(out.dtype)))
    st = err_set(SMELT_ERR_INVALID_MODEL, "%s must return a float tensor of the scores' shape", name);
  for (int d = 0; !st && d < t->rank; d++)
    if (out.dims[d] != t->dims[d])
      st = err_set(SMELT_ERR_INVALID_MODEL, "%s changed dim %d from %lld to %lld", name, d,
                   (long long)t->dims[d], (long long)out.dims[d]);
  if (!st) {
    int64_t n = tensor_numel(t);
    double v;
    for (int64_t i = 0; i < n; i++) { /* element-wise: the types may differ */
      nn_load_f64(out.dtype, out.data, i, 1, 1, &v);
      nn_store_f64(t->dtype, t->data, i, 1, 1, &v);
    }
  }
  tensor_release(&out);
  return st;
}

static void flex_softmax(tensor *s, int64_t rows, int64_t n, double *buf) {
  for (int64_t r = 0; r < rows; r++) {
    nn_load_f64(s->dtype, s->data, r * n, 1, n, buf);
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) mx = buf[i] > mx ? buf[i] : mx;
    for (int64_t i = 0; i < n; i++) sum += (buf[i] = exp(buf[i] - mx));
    for (int64_t i = 0; i < n; i++) buf[i] /= sum;
    nn_store_f64(s->dtype, s->data, r * n, 1, n, buf);
  }
}

/* A working-precision copy of input i, times mul rounded to the input's
 * type (Q and K are pre-scaled by sqrt(scale) in their own type). */
static smelt_status flex_load(op_ctx *c, int i, smelt_dtype wp, double mul, void **out) {
  const tensor *t = c->in[i];
  int64_t n = tensor_numel(t);
  TRY(nn_alloc(out, n, dtype_size(wp), "FlexAttention input"));
  if (wp == SMELT_F32) nn_load_f32(t->dtype, t->data, 0, 1, n, *out);
  else nn_load_f64(t->dtype, t->data, 0, 1, n, *out);
  if (mul == 1.0) return SMELT_OK;
  for (int64_t k = 0; k < n; k++) {
    if (wp == SMELT_F32) ((float *)*out)[k] = (float)nn_round_to(t->dtype, ((float *)*out)[k] * mul);
    else ((double *)*out)[k] = nn_round_to(t->dtype, ((double *)*out)[k] * mul);
  }
  return SMELT_OK;
}

static smelt_status flex_run(op_ctx *c) {
  flex_geom g;
  TRY(flex_plan(c, &g));
  size_t es = dtype_size(g.wp);
  int64_t heads = g.B * g.Hq, grp = g.Hq / g.Hkv;
  void *Q = NULL, *K = NULL, *V = NULL, *Y = NULL;
  double *buf = NULL;
  tensor sc = {0};
  /* sqrt(scale) rounded to the input type (exact for f64) */
  double ss = nn_round_to(c->in[0]->dtype, sqrt(g.scale));
  smelt_status st = flex_load(c, 0, g.wp, ss, &Q);
  if (!st) st = flex_load(c, 1, g.wp, ss, &K);
  if (!st) st = flex_load(c, 2, g.wp, 1.0, &V);
  if (!st) st = nn_alloc(&Y, heads * g.L * g.Ev, es, "FlexAttention output");
  if (!st) st = nn_alloc((void **)&buf, g.S, sizeof(double), "FlexAttention row");
  if (!st) st = tensor_alloc(&sc, g.wp, 4, (int64_t[]){g.B, g.Hq, g.L, g.S});
  for (int64_t bh = 0; !st && bh < heads; bh++) {
    int64_t kv = (bh / g.Hq) * g.Hkv + (bh % g.Hq) / grp;
    st = flex_product(c->pool, g.wp, true, g.L, g.S, g.E, 1.0, (char *)Q + bh * g.L * g.E * es,
                      (char *)K + kv * g.S * g.E * es, (char *)sc.data + bh * g.L * g.S * es);
  }
  smelt_dtype in_t = c->in[0]->dtype;
  if (!st && (in_t == SMELT_F16 || in_t == SMELT_BF16)) { /* Q K^T is a product in the input type */
    float *sv = sc.data;
    for (int64_t i = 0; i < tensor_numel(&sc); i++) sv[i] = (float)nn_round_to(in_t, sv[i]);
  }
  if (!st) st = flex_mod(c, "score_mod", &sc);
  if (!st) flex_softmax(&sc, heads * g.L, g.S, buf);
  if (!st) st = flex_mod(c, "prob_mod", &sc);
  for (int64_t bh = 0; !st && bh < heads; bh++) {
    int64_t kv = (bh / g.Hq) * g.Hkv + (bh % g.Hq) / grp;
    st = flex_product(c->pool, g.wp, false, g.L, g.Ev, g.S, 1.0, (char *)sc.data + bh * g.L * g.S * es,
                      (char *)V + kv * g.S * g.Ev * es, (char *)Y + bh * g.L * g.Ev * es);
  }
  if (!st) {
    tensor *y = c->out[0];
    int64_t n = tensor_numel(y);
    if (g.wp == SMELT_F32) nn_store_f32(y->dtype, y->data, 0, 1, n, Y);
    else nn_store_f64(y->dtype, y->data, 0, 1, n, Y);
  }
  free(Q);
  free(K);
  free(V);
  free(Y);
  free(buf);
  tensor_release(&sc);
  return st;
}

const op_def op_family_flex_attention[] = {
    {"FlexAttention", "ai.onnx.preview", 3, 3, 1, 1, flex_infer, flex_run, false},
    {0}};
