/* Attention (opset 23/24; the opset-25 sliding window attributes too).
 *
 * Q [B, Hq, Sq, D] (or 3-D [B, Sq, Hq*D] with q_num_heads), K/V likewise with
 * Hkv heads; past_key/past_value [B, Hkv, Spast, D] are prepended to give
 * present_key/present_value.  Per (batch, head):
 *   S = scale * Q K^T  (gemm_f32),  S = softcap * tanh(S / softcap) if softcap,
 *   S += bias  (attn_mask: bool True = attend, or additive float, its last dim
 *               padded with -inf up to the total kv length; causal: key j
 *               visible to query i iff j <= i + offset, offset = Spast, or
 *               nonpad_kv_seqlen[b] - Sq with an external cache; keys at or
 *               past nonpad_kv_seqlen[b] are masked),
 *   P = softmax(S) with rows whose bias is all -inf set to 0,
 *   Y = P V  (gemm_f32).
 * GQA: query head h reads kv head h / (Hq / Hkv).  qk_matmul_output follows
 * the ONNX reference: modes 0 and 1 give S after softcap, 2 adds the bias, 3
 * the probabilities.  f16/bf16 compute via f32; f64 is not supported yet. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct attn_geom {
  bool is3d;
  int64_t B, Hq, Hkv, Sq, Skv, Spast, Stot, D, Dv;
  float scale, softcap;
  bool causal;
  int mode;
  int64_t left_win, right_win;
} attn_geom;

static const smelt_dtype attn_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_UNDEFINED};

static int64_t div_known(int64_t a, int64_t b) { return dim_known(a) && b > 0 ? a / b : DIM_UNKNOWN; }
static int64_t add_known(int64_t a, int64_t b) {
  return dim_known(a) && dim_known(b) ? a + b : DIM_UNKNOWN;
}

/* Q, K, past_key share T1; V and past_value share T2 (any of f16/bf16/f32);
 * the mask is bool or any numeric type (an additive bias). */
static smelt_status attn_check_types(op_ctx *c) {
  TRY(op_check_dtype(c, 0, attn_types));
  TRY(op_check_dtype(c, 2, attn_types));
  TRY(nn_check_same_dtype(c, 1, "K", 0, "Q"));
  TRY(nn_check_same_dtype(c, 4, "past_key", 0, "Q"));
  TRY(nn_check_same_dtype(c, 5, "past_value", 2, "V"));
  const tensor *m = op_in(c, 3), *nk = op_in(c, 6);
  if (m && m->dtype != SMELT_BOOL && m->dtype != SMELT_UNDEFINED && !nn_is_float(m->dtype) &&
      !dtype_is_int(m->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "input 3 (attn_mask) has type %s", dtype_name(m->dtype));
  if (nk && nk->dtype != SMELT_I64 && nk->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 6 (nonpad_kv_seqlen) has type %s, expected int64",
                   dtype_name(nk->dtype));
  if ((op_in(c, 4) != NULL) != (op_in(c, 5) != NULL))
    return err_set(SMELT_ERR_INVALID_MODEL, "past_key and past_value must be given together");
  if (nk && op_in(c, 4))
    return err_set(SMELT_ERR_INVALID_MODEL, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
  return SMELT_OK;
}

/* Dims must agree where both are known. */
static smelt_status same_dim(int64_t a, int64_t b, const char *what) {
  if (dim_known(a) && dim_known(b) && a != b)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s: %lld vs %lld", what, (long long)a, (long long)b);
  return SMELT_OK;
}

static smelt_status attn_plan(op_ctx *c, attn_geom *g) {
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2], *pk = op_in(c, 4), *pv = op_in(c, 5);
  TRY(attn_check_types(c));
  if (q->rank != 3 && q->rank != 4)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (Q) has rank %d, expected 3 or 4", q->rank);
  TRY(nn_check_rank(c, 1, "K", q->rank));
  TRY(nn_check_rank(c, 2, "V", q->rank));
  TRY(nn_check_rank(c, 4, "past_key", 4));
  TRY(nn_check_rank(c, 5, "past_value", 4));
  memset(g, 0, sizeof *g);
  g->is3d = q->rank == 3;
  g->B = q->dims[0];
  TRY(same_dim(k->dims[0], g->B, "K's batch does not match Q's"));
  TRY(same_dim(v->dims[0], g->B, "V's batch does not match Q's"));
  if (pk) TRY(same_dim(pk->dims[0], g->B, "past_key's batch does not match Q's"));
  if (pv) TRY(same_dim(pv->dims[0], g->B, "past_value's batch does not match Q's"));
  if (g->is3d) {
    g->Hq = op_attr_int(c, "q_num_heads", 0);
    g->Hkv = op_attr_int(c, "kv_num_heads", 0);
    if (g->Hq < 1 || g->Hkv < 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "3-D inputs need q_num_heads and kv_num_heads >= 1");
    g->Sq = q->dims[1];
    g->Skv = k->dims[1];
    g->D = div_known(q->dims[2], g->Hq);
    g->Dv = div_known(v->dims[2], g->Hkv);
    if ((dim_known(q->dims[2]) && q->dims[2] % g->Hq) || (dim_known(v->dims[2]) && v->dims[2] % g->Hkv))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "hidden sizes are not divisible by the head counts");
    TRY(same_dim(div_known(k->dims[2], g->Hkv), g->D, "K's head size does not match Q's"));
    TRY(same_dim(v->dims[1], g->Skv, "V's sequence length does not match K's"));
  } else {
    g->Hq = q->dims[1];
    g->Hkv = k->dims[1];
    g->Sq = q->dims[2];
    g->Skv = k->dims[2];
    g->D = q->dims[3];
    g->Dv = v->dims[3];
    TRY(same_dim(k->dims[3], g->D, "K's head size does not match Q's"));
    TRY(same_dim(v->dims[1], g->Hkv, "V's head count does not match K's"));
    TRY(same_dim(v->dims[2], g->Skv, "V's sequence length does not match K's"));
  }
  if (dim_known(g->Hq) && dim_known(g->Hkv) && (g->Hkv == 0 || g->Hq % g->Hkv))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%lld query heads are not a multiple of %lld kv heads",
                   (long long)g->Hq, (long long)g->Hkv);
  g->Spast = 0;
  if (pk) {
    g->Spast = pk->dims[2];
    TRY(same_dim(pk->dims[1], g->Hkv, "past_key's head count does not match K's"));
    TRY(same_dim(pk->dims[3], g->D, "past_key's head size does not match K's"));
    TRY(same_dim(pv->dims[1], g->Hkv, "past_value's head count does not match K's"));
    TRY(same_dim(pv->dims[2], g->Spast, "past_value's length does not match past_key's"));
    TRY(same_dim(pv->dims[3], g->Dv, "past_value's head size does not match V's"));
  }
  g->Stot = add_known(g->Spast, g->Skv);
  float dflt = dim_known(g->D) && g->D > 0 ? 1.f / sqrtf((float)g->D) : 1.f;
  g->scale = op_attr_float(c, "scale", dflt);
  g->softcap = op_attr_float(c, "softcap", 0.f);
  g->causal = op_attr_int(c, "is_causal", 0) != 0;
  g->mode = (int)op_attr_int(c, "qk_matmul_output_mode", 0);
  if (g->mode < 0 || g->mode > 3)
    return err_set(SMELT_ERR_INVALID_MODEL, "qk_matmul_output_mode %d must be 0..3", g->mode);
  g->left_win = op_attr_int(c, "left_window_size", -1);
  g->right_win = op_attr_int(c, "right_window_size", -1);
  return SMELT_OK;
}

static smelt_status attn_infer(op_ctx *c) {
  attn_geom g;
  TRY(attn_plan(c, &g));
  smelt_dtype dt = c->in[0]->dtype;
  if (g.is3d)
    op_set_out(c, 0, dt, 3, (int64_t[]){g.B, g.Sq, dim_known(g.Dv) && dim_known(g.Hq) ? g.Hq * g.Dv : DIM_UNKNOWN});
  else
    op_set_out(c, 0, dt, 4, (int64_t[]){g.B, g.Hq, g.Sq, g.Dv});
  if (c->n_out > 1) op_set_out(c, 1, dt, 4, (int64_t[]){g.B, g.Hkv, g.Stot, g.D});
  if (c->n_out > 2) op_set_out(c, 2, c->in[2]->dtype, 4, (int64_t[]){g.B, g.Hkv, g.Stot, g.Dv});
  if (c->n_out > 3) op_set_out(c, 3, dt, 4, (int64_t[]){g.B, g.Hq, g.Sq, g.Stot});
  return SMELT_OK;
}

/* ---- run ---- */

typedef struct attn_job {
  const attn_geom *g;
  const float *Q, *K, *V; /* K, V: present, [B, Hkv, Stot, D|Dv] */
  const float *mask;      /* as float, in its own shape; NULL if none */
  int mrank;
  int64_t mdims[4];       /* the mask's dims right-aligned to [B, Hq, Sq, Lm] */
  const int64_t *nonpad;
  float *Y, *QK;          /* QK may be NULL */
  bool inline_gemm;
  atomic_bool failed;
  atomic_int gemm_st; /* a worker's GEMM refused its arguments: that status */
} attn_job;

/* Additive bias of row (b, h, i) into bias[0..Stot). */
static void attn_bias_row(const attn_job *j, int64_t b, int64_t h, int64_t i, float *bias) {
  const attn_geom *g = j->g;
  int64_t off_causal = g->Spast;
  if (j->nonpad && !g->Spast) off_causal = j->nonpad[b] - g->Sq;
  const float *mrow = NULL;
  int64_t lm = 0;
  if (j->mask) {
    const int64_t *md = j->mdims; /* [B', H', S', Lm] with broadcast 1s */
    int64_t bi = md[0] == 1 ? 0 : b, hi = md[1] == 1 ? 0 : h, ii = md[2] == 1 ? 0 : i;
    lm = md[3];
    mrow = j->mask + ((bi * md[1] + hi) * md[2] + ii) * lm;
  }
  for (int64_t t = 0; t < g->Stot; t++) {
    float v = 0.f;
    if (mrow) v = t < lm ? mrow[t] : -INFINITY;
    if (g->causal && t > i + off_causal) v += -INFINITY;
    if (g->left_win >= 0 || g->right_win >= 0) {
      int64_t woff = j->nonpad && !g->Spast ? j->nonpad[b] - g->Sq : g->Spast;
      int64_t diff = i + woff - t;
      if ((g->left_win >= 0 && diff > g->left_win) || (g->right_win >= 0 && -diff > g->right_win))
        v += -INFINITY;
    }
    if (j->nonpad && t >= j->nonpad[b]) v += -INFINITY;
    bias[t] = v;
  }
}

/* Softcap, bias, qk output and the guarded softmax of one row, in place. */
static void attn_row(const attn_job *j, int64_t b, int64_t h, int64_t i, float *s, float *bias) {
  const attn_geom *g = j->g;
  int64_t n = g->Stot;
  float *qk = j->QK ? j->QK + ((b * g->Hq + h) * g->Sq + i) * n : NULL;
  if (g->softcap > 0)
    for (int64_t t = 0; t < n; t++) s[t] = g->softcap * tanhf(s[t] / g->softcap);
  if (qk && g->mode <= 1) memcpy(qk, s, sizeof(float) * (size_t)n);
  attn_bias_row(j, b, h, i, bias);
  float bmax = -INFINITY, mx = -INFINITY;
  for (int64_t t = 0; t < n; t++) {
    s[t] += bias[t];
    bmax = bias[t] > bmax ? bias[t] : bmax;
    mx = s[t] > mx ? s[t] : mx;
  }
  if (qk && g->mode == 2) memcpy(qk, s, sizeof(float) * (size_t)n);
  if (bmax == -INFINITY) { /* no attendable key */
    memset(s, 0, sizeof(float) * (size_t)n);
  } else {
    double safe = mx == -INFINITY ? 0.0 : mx, sum = 0;
    for (int64_t t = 0; t < n; t++) sum += exp((double)s[t] - safe);
    if (sum == 0) sum = 1;
    for (int64_t t = 0; t < n; t++) s[t] = (float)(exp((double)s[t] - safe) / sum);
  }
  if (qk && g->mode == 3) memcpy(qk, s, sizeof(float) * (size_t)n);
}

/* One (batch, head): scores, rows, then P V. */
static smelt_status attn_head(attn_job *j, int64_t bh, float *s, float *bias, smelt_pool *pool) {
  const attn_geom *g = j->g;
  int64_t b = bh / g->Hq, h = bh % g->Hq, hk = h / (g->Hq / g->Hkv);
  const float *q, *k = j->K + (b * g->Hkv + hk) * g->Stot * g->D;
  const float *v = j->V + (b * g->Hkv + hk) * g->Stot * g->Dv;
  int64_t ldq, ldy;
  float *y;
  if (g->is3d) {
    q = j->Q + b * g->Sq * g->Hq * g->D + h * g->D;
    ldq = g->Hq * g->D;
    y = j->Y + b * g->Sq * g->Hq * g->Dv + h * g->Dv;
    ldy = g->Hq * g->Dv;
  } else {
    q = j->Q + bh * g->Sq * g->D;
    ldq = g->D;
    y = j->Y + bh * g->Sq * g->Dv;
    ldy = g->Dv;
  }
  if (g->D > 0)
    TRY(gemm_f32(pool, false, true, g->Sq, g->Stot, g->D, g->scale, q, ldq, k, g->D, 0.f, s, g->Stot));
  else
    memset(s, 0, sizeof(float) * (size_t)(g->Sq * g->Stot));
  for (int64_t i = 0; i < g->Sq; i++) attn_row(j, b, h, i, s + i * g->Stot, bias);
  if (g->Stot > 0) {
    TRY(gemm_f32(pool, false, false, g->Sq, g->Dv, g->Stot, 1.f, s, g->Stot, v, g->Dv, 0.f, y, ldy));
  } else {
    for (int64_t i = 0; i < g->Sq; i++) memset(y + i * ldy, 0, sizeof(float) * (size_t)g->Dv);
  }
  return SMELT_OK;
}

static void attn_heads(void *vctx, int64_t h0, int64_t h1) {
  attn_job *j = vctx;
  float *s = NULL, *bias = NULL;
  if (nn_alloc((void **)&s, j->g->Sq * j->g->Stot, sizeof(float), "attention scores") ||
      nn_alloc((void **)&bias, j->g->Stot, sizeof(float), "attention bias")) {
    atomic_store(&j->failed, true);
    free(s);
    return;
  }
  for (int64_t bh = h0; bh < h1; bh++) {
    smelt_status st = attn_head(j, bh, s, bias, NULL);
    if (st) { /* the message is this worker's: the caller reports the status */
      atomic_store(&j->gemm_st, (int)st);
      break;
    }
  }
  free(s);
  free(bias);
}

/* present = concat(past, cur) along the sequence; cur is 4-D, or 3-D
 * [B, S, H*d] (transposed into heads). */
static void build_present(const attn_geom *g, const float *past, const float *cur, int64_t d,
                          float *out) {
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t h = 0; h < g->Hkv; h++) {
      float *o = out + (b * g->Hkv + h) * g->Stot * d;
      if (past) memcpy(o, past + (b * g->Hkv + h) * g->Spast * d, sizeof(float) * (size_t)(g->Spast * d));
      o += g->Spast * d;
      for (int64_t t = 0; t < g->Skv; t++) {
        const float *src = g->is3d ? cur + (b * g->Skv + t) * g->Hkv * d + h * d
                                   : cur + ((b * g->Hkv + h) * g->Skv + t) * d;
        memcpy(o + t * d, src, sizeof(float) * (size_t)d);
      }
    }
}

/* The mask as float (bool: True -> 0, False -> -inf), dims right-aligned to 4. */
static smelt_status attn_mask_f32(const tensor *m, const attn_geom *g, attn_job *j, float **buf) {
  if (m->rank < 1 || m->rank > 4)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (attn_mask) has rank %d, expected 1..4", m->rank);
  const int64_t want[4] = {g->B, g->Hq, g->Sq, g->Stot};
  for (int d = 0; d < 4; d++) j->mdims[d] = d < 4 - m->rank ? 1 : m->dims[d - (4 - m->rank)];
  for (int d = 0; d < 3; d++)
    if (j->mdims[d] != 1 && j->mdims[d] != want[d])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (attn_mask) dim %d is %lld, which does not broadcast to %lld",
                     d - (4 - m->rank), (long long)j->mdims[d], (long long)want[d]);
  if (j->mdims[3] > g->Stot)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (attn_mask) covers %lld keys, more than the %lld there are",
                   (long long)j->mdims[3], (long long)g->Stot);
  int64_t n = tensor_numel(m);
  TRY(nn_alloc((void **)buf, n, sizeof(float), "attention mask"));
  if (m->dtype == SMELT_BOOL) {
    const uint8_t *src = m->data;
    for (int64_t i = 0; i < n; i++) (*buf)[i] = src[i] ? 0.f : -INFINITY;
  } else if (nn_is_float(m->dtype)) {
    nn_load_f32(m->dtype, m->data, 0, 1, n, *buf);
  } else {
    for (int64_t i = 0; i < n; i++) (*buf)[i] = (float)tensor_get_f64(m, i);
  }
  j->mask = *buf;
  return SMELT_OK;
}

static smelt_status attn_compute(op_ctx *c, const attn_geom *g, attn_job *j) {
  int64_t heads = g->B * g->Hq;
  if (heads == 0 || g->Sq == 0) return SMELT_OK;
  if (pool_threads(c->pool) > 1 && heads >= pool_threads(c->pool)) {
    pool_parallel_for(c->pool, heads, 1, attn_heads, j);
    if (atomic_load(&j->failed)) return err_nomem("attention scores", (size_t)(g->Sq * g->Stot) * 4);
    int gst = atomic_load(&j->gemm_st);
    if (gst) return err_set((smelt_status)gst, "attention: the GEMM of a head refused its arguments");
    return SMELT_OK;
  }
  float *s = NULL, *bias = NULL;
  smelt_status st = nn_alloc((void **)&s, g->Sq * g->Stot, sizeof(float), "attention scores");
  if (!st) st = nn_alloc((void **)&bias, g->Stot, sizeof(float), "attention bias");
  for (int64_t bh = 0; !st && bh < heads; bh++) st = attn_head(j, bh, s, bias, c->pool);
  free(s);
  free(bias);
  return st;
}

static smelt_status attn_run(op_ctx *c) {
  attn_geom g;
  TRY(attn_plan(c, &g));
  const tensor *nk = op_in(c, 6), *m = op_in(c, 3);
  if (nk && (nk->rank != 1 || nk->dims[0] != g.B))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 6 (nonpad_kv_seqlen) must hold %lld values",
                   (long long)g.B);
  attn_job j = {.g = &g, .nonpad = nk ? nk->data : NULL};
  for (int64_t b = 0; nk && b < g.B; b++)
    if (j.nonpad[b] < 0 || j.nonpad[b] > g.Stot)
      return err_set(SMELT_ERR_RUNTIME, "nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld]",
                     (long long)b, (long long)j.nonpad[b], (long long)g.Stot);
  const tensor *in[6] = {c->in[0], c->in[1], c->in[2], NULL, op_in(c, 4), op_in(c, 5)};
  float *f[6] = {0}, *pres[2] = {0}, *Y = NULL, *QK = NULL, *mask = NULL;
  smelt_status st = SMELT_OK;
  for (int i = 0; i < 6 && !st; i++)
    if (in[i]) st = nn_f32_acquire(in[i], &f[i]);
  /* present key/value: straight into the outputs when they exist */
  for (int p = 0; p < 2 && !st; p++) {
    int64_t d = p ? g.Dv : g.D;
    if (c->n_out > 1 + p) st = nn_f32_out(c->out[1 + p], &pres[p]);
    else st = nn_alloc((void **)&pres[p], g.B * g.Hkv * g.Stot * d, sizeof(float), "present kv");
    if (!st) build_present(&g, f[4 + p], f[1 + p], d, pres[p]);
  }
  if (!st) st = nn_f32_out(c->out[0], &Y);
  if (!st && c->n_out > 3) st = nn_f32_out(c->out[3], &QK);
  if (!st && m) st = attn_mask_f32(m, &g, &j, &mask);
  if (!st) {
    j.Q = f[0];
    j.K = pres[0];
    j.V = pres[1];
    j.Y = Y;
    j.QK = QK;
    st = attn_compute(c, &g, &j);
  }
  if (Y) nn_f32_commit(c->out[0], Y);
  if (QK) nn_f32_commit(c->out[3], QK);
  for (int p = 0; p < 2; p++) {
    if (!pres[p]) continue;
    if (c->n_out > 1 + p) nn_f32_commit(c->out[1 + p], pres[p]);
    else free(pres[p]);
  }
  for (int i = 0; i < 6; i++)
    if (f[i]) nn_f32_release(in[i], f[i]);
  free(mask);
  return st;
}

const op_def op_family_attention[] = {
    {"Attention", "", 3, 7, 1, 4, attn_infer, attn_run, false},
    {0}};
