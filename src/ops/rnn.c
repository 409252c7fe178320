/* RNN, GRU and LSTM: forward, reverse and bidirectional, layouts 0 and 1,
 * sequence_lens, initial states, LSTM peepholes and input_forget, GRU
 * linear_before_reset, activation lists with alpha/beta, and clip.
 *
 * Per direction, the input projection of all steps is one gemm_f32
 * (X[S*B, I] x W^T) with the biases folded in; each step then runs one
 * recurrent gemm (H[B, H] x R^T) and the gate math.  Batch entries shorter
 * than the sequence (sequence_lens) stop early: their Y rows stay zero and
 * Y_h/Y_c hold the state after their last step; in reverse they start at
 * their own last step.  Computed in f32 (f16/f64 through f32 copies). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "ops/rnn_act.h"
#include "util/err.h"
#include "util/quote.h"

typedef enum rnn_kind { K_RNN, K_GRU, K_LSTM } rnn_kind;

typedef struct rnn_cfg {
  rnn_kind kind;
  int G, n_dir, per_dir;         /* gates; directions; activations per direction */
  bool reverse, layout, lbr, input_forget;
  int64_t S, B, I, H;
  float clip;                    /* INFINITY: none */
  rnn_act acts[6];
} rnn_cfg;

/* f32 working copies of the inputs (absent ones NULL), in layout 0. */
typedef struct rnn_in {
  float *X, *W, *R, *Bias, *h0, *c0, *P;
  int32_t *lens;                 /* NULL: every entry runs S steps */
} rnn_in;

/* Outputs in layout 0: Y [S, D, B, H], Yh and Yc [D, B, H]. */
typedef struct rnn_out {
  float *Y, *Yh, *Yc;
} rnn_out;

static const rnn_act_kind default_acts[3][3] = {
    {RNN_TANH}, {RNN_SIGMOID, RNN_TANH}, {RNN_SIGMOID, RNN_TANH, RNN_TANH}};

static smelt_status rnn_config(op_ctx *c, rnn_kind kind, rnn_cfg *g) {
  memset(g, 0, sizeof *g);
  g->kind = kind;
  g->G = kind == K_RNN ? 1 : kind == K_GRU ? 3 : 4;
  g->per_dir = kind == K_RNN ? 1 : kind == K_GRU ? 2 : 3;
  const char *dir = ir_attr_string(c->node, "direction", "forward");
  if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) g->n_dir = 1;
  else if (!strcmp(dir, "bidirectional")) g->n_dir = 2;
  else return err_set(SMELT_ERR_INVALID_MODEL, "attribute direction %s is unknown", q_path(dir));
  g->reverse = !strcmp(dir, "reverse");
  g->layout = op_attr_int(c, "layout", 0) != 0;
  g->lbr = op_attr_int(c, "linear_before_reset", 0) != 0;
  g->input_forget = op_attr_int(c, "input_forget", 0) != 0;
  g->clip = ir_attr_find(c->node, "clip") ? op_attr_float(c, "clip", 0) : INFINITY;
  if (!(g->clip >= 0)) return err_set(SMELT_ERR_INVALID_MODEL, "attribute clip must be >= 0");
  return rnn_acts_parse(c, g->n_dir, g->per_dir, default_acts[kind], g->acts);
}

/* Checks shapes against X and W; fills S, B, I, H (statically dims may be unknown). */
static smelt_status rnn_shapes(op_ctx *c, rnn_cfg *g) {
  const tensor *x = c->in[0], *w = c->in[1], *r = c->in[2];
  TRY(nn_check_float(c, 0, "X"));
  for (int i = 1; i < c->n_in && i < 8; i++)
    if (i != 4) TRY(nn_check_same_dtype(c, i, "weights and states", 0, "X"));
  TRY(nn_check_rank(c, 0, "X", 3));
  TRY(nn_check_rank(c, 1, "W", 3));
  TRY(nn_check_rank(c, 2, "R", 3));
  g->S = x->rank == 3 ? x->dims[g->layout ? 1 : 0] : DIM_UNKNOWN;
  g->B = x->rank == 3 ? x->dims[g->layout ? 0 : 1] : DIM_UNKNOWN;
  g->I = x->rank == 3 ? x->dims[2] : DIM_UNKNOWN;
  int64_t hs = op_attr_int(c, "hidden_size", -1);
  g->H = r->rank == 3 && dim_known(r->dims[2]) ? r->dims[2] : hs;
  if (hs >= 0 && dim_known(g->H) && hs != g->H)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute hidden_size %lld, but R has %lld", (long long)hs,
                   (long long)g->H);
  if (w->rank == 3 && dim_known(w->dims[0]) && w->dims[0] != g->n_dir)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "W has %lld directions, the direction attribute %d",
                   (long long)w->dims[0], g->n_dir);
  if (w->rank == 3 && dim_known(g->H) && dim_known(w->dims[1]) && w->dims[1] != g->G * g->H)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "W has %lld rows, expected %d gates x %lld",
                   (long long)w->dims[1], g->G, (long long)g->H);
  return SMELT_OK;
}

static smelt_status rnn_infer_kind(op_ctx *c, rnn_kind kind) {
  rnn_cfg g = {0};
  TRY(rnn_config(c, kind, &g));
  TRY(rnn_shapes(c, &g));
  smelt_dtype dt = c->in[0]->dtype;
  int64_t D = g.n_dir;
  int64_t y[4] = {g.S, D, g.B, g.H}, yl[4] = {g.B, g.S, D, g.H};
  int64_t h[3] = {D, g.B, g.H}, hl[3] = {g.B, D, g.H};
  op_set_out(c, 0, dt, 4, g.layout ? yl : y);
  for (int o = 1; o < c->n_out; o++) op_set_out(c, o, dt, 3, g.layout ? hl : h);
  return SMELT_OK;
}

static smelt_status rnn_infer(op_ctx *c) { return rnn_infer_kind(c, K_RNN); }
static smelt_status gru_infer(op_ctx *c) { return rnn_infer_kind(c, K_GRU); }
static smelt_status lstm_infer(op_ctx *c) { return rnn_infer_kind(c, K_LSTM); }

/* ---- inputs ---- */

/* An f32 copy of optional input i, checked to hold `want` elements; dims
 * [a, b, H] swapped to [b, a, H] when swap (layout 1 states). */
static smelt_status load_input(op_ctx *c, int i, const char *name, int64_t want, bool swap,
                               float **out) {
  const tensor *t = op_in(c, i);
  *out = NULL;
  if (!t) return SMELT_OK;
  if (tensor_numel(t) != want)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d (%s) has %lld elements, expected %lld", i,
                   name, (long long)tensor_numel(t), (long long)want);
  TRY(nn_alloc((void **)out, want > 0 ? want : 1, sizeof(float), name));
  if (!swap || t->rank != 3) {
    nn_load_f32(t->dtype, t->data, 0, 1, want, *out);
    return SMELT_OK;
  }
  int64_t a = t->dims[0], b = t->dims[1], h = t->dims[2];
  for (int64_t p = 0; p < a; p++)
    for (int64_t q = 0; q < b; q++)
      nn_load_f32(t->dtype, t->data, (p * b + q) * h, 1, h, *out + (q * a + p) * h);
  return SMELT_OK;
}

static smelt_status load_lens(op_ctx *c, const rnn_cfg *g, int32_t **lens) {
  const tensor *t = op_in(c, 4);
  *lens = NULL;
  if (!t) return SMELT_OK;
  if (t->dtype != SMELT_I32 || tensor_numel(t) != g->B)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 4 (sequence_lens) must be %lld int32 values",
                   (long long)g->B);
  for (int64_t b = 0; b < g->B; b++) {
    int32_t l = ((const int32_t *)t->data)[b];
    if (l < 0 || l > g->S)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "sequence_lens[%lld] is %d, outside 0..%lld",
                     (long long)b, (int)l, (long long)g->S);
  }
  *lens = t->data;
  return SMELT_OK;
}

static void rnn_in_free(rnn_in *in) {
  free(in->X), free(in->W), free(in->R), free(in->Bias), free(in->h0), free(in->c0), free(in->P);
}

static smelt_status rnn_load(op_ctx *c, const rnn_cfg *g, rnn_in *in) {
  memset(in, 0, sizeof *in);
  int64_t D = g->n_dir, GH = g->G * g->H;
  smelt_status s = load_input(c, 0, "X", g->S * g->B * g->I, g->layout, &in->X);
  if (!s) s = load_input(c, 1, "W", D * GH * g->I, false, &in->W);
  if (!s) s = load_input(c, 2, "R", D * GH * g->H, false, &in->R);
  if (!s) s = load_input(c, 3, "B", D * 2 * GH, false, &in->Bias);
  if (!s) s = load_lens(c, g, &in->lens);
  if (!s) s = load_input(c, 5, "initial_h", D * g->B * g->H, g->layout, &in->h0);
  if (!s && g->kind == K_LSTM) s = load_input(c, 6, "initial_c", D * g->B * g->H, g->layout, &in->c0);
  if (!s && g->kind == K_LSTM) s = load_input(c, 7, "P", D * 3 * g->H, false, &in->P);
  if (s) rnn_in_free(in);
  return s;
}

/* ---- one direction ---- */

typedef struct rnn_dir {
  const rnn_cfg *g;
  const rnn_act *f, *gg, *h;     /* this direction's activations */
  const float *R, *Wb, *Rb, *P;  /* Wb/Rb/P may be NULL */
  float *XW, *HR, *Hs, *Cs, *rh, *rhR;
} rnn_dir;

static inline float clipv(const rnn_cfg *g, float v) {
  return v > g->clip ? g->clip : v < -g->clip ? -g->clip : v;
}

static void cell_rnn(const rnn_dir *d, const float *xw, const float *hr, float *H) {
  for (int64_t j = 0; j < d->g->H; j++) H[j] = rnn_act_apply(d->f, clipv(d->g, xw[j] + hr[j]));
}

static void cell_lstm(const rnn_dir *d, const float *xw, const float *hr, float *H, float *C) {
  int64_t n = d->g->H;
  const float *pi = d->P, *po = d->P ? d->P + n : NULL, *pf = d->P ? d->P + 2 * n : NULL;
  for (int64_t j = 0; j < n; j++) {
    float c_prev = C[j];
    float i = rnn_act_apply(d->f, clipv(d->g, xw[j] + hr[j] + (pi ? pi[j] * c_prev : 0)));
    float f = d->g->input_forget ? 1 - i
                                 : rnn_act_apply(d->f, clipv(d->g, xw[2 * n + j] + hr[2 * n + j] +
                                                                       (pf ? pf[j] * c_prev : 0)));
    float cc = rnn_act_apply(d->gg, clipv(d->g, xw[3 * n + j] + hr[3 * n + j]));
    float c_new = f * c_prev + i * cc;
    float o = rnn_act_apply(d->f, clipv(d->g, xw[n + j] + hr[n + j] + (po ? po[j] * c_new : 0)));
    C[j] = c_new;
    H[j] = o * rnn_act_apply(d->h, c_new);
  }
}

/* GRU: rhR holds (r * H) x Rh^T for linear_before_reset 0. */
static void cell_gru(const rnn_dir *d, const float *xw, const float *hr, const float *rhR, float *H) {
  int64_t n = d->g->H;
  const float *rbh = d->Rb ? d->Rb + 2 * n : NULL;
  for (int64_t j = 0; j < n; j++) {
    float z = rnn_act_apply(d->f, clipv(d->g, xw[j] + hr[j]));
    float r = rnn_act_apply(d->f, clipv(d->g, xw[n + j] + hr[n + j]));
    float rb = rbh ? rbh[j] : 0;
    float pre = d->g->lbr ? xw[2 * n + j] + r * (hr[2 * n + j] + rb) : xw[2 * n + j] + rhR[j] + rb;
    float hh = rnn_act_apply(d->gg, clipv(d->g, pre));
    H[j] = (1 - z) * hh + z * H[j];
  }
}

/* GRU, linear_before_reset 0: r * H for the active rows, then its product with Rh. */
static smelt_status gru_reset_product(op_ctx *c, const rnn_dir *d, const float *xw_step, int64_t s,
                                      const int32_t *lens, bool rev) {
  const rnn_cfg *g = d->g;
  int64_t n = g->H, GH = 3 * n;
  for (int64_t b = 0; b < g->B; b++) {
    int64_t L = lens ? lens[b] : g->S;
    if (s >= L) continue;
    int64_t t = rev ? L - 1 - s : s;
    const float *xw = xw_step + (t * g->B + b) * GH, *hr = d->HR + b * GH;
    for (int64_t j = 0; j < n; j++) {
      float r = rnn_act_apply(d->f, clipv(g, xw[n + j] + hr[n + j]));
      d->rh[b * n + j] = r * d->Hs[b * n + j];
    }
  }
  return gemm_f32(c->pool, false, true, g->B, n, n, 1.0f, d->rh, n, d->R + 2 * n * n, n, 0.0f, d->rhR, n);
}

/* Input projection of all steps with the foldable biases added. */
static smelt_status project_inputs(op_ctx *c, const rnn_dir *d, const float *X, const float *W) {
  const rnn_cfg *g = d->g;
  int64_t GH = g->G * g->H, rows = g->S * g->B;
  TRY(gemm_f32(c->pool, false, true, rows, GH, g->I, 1.0f, X, g->I, W, g->I, 0.0f, d->XW, GH));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < GH; j++) {
      /* GRU's Rb of the h gate is not foldable: it sits inside r * (...) */
      bool rb_ok = g->kind != K_GRU || j < 2 * g->H;
      d->XW[r * GH + j] += (d->Wb ? d->Wb[j] : 0) + (d->Rb && rb_ok ? d->Rb[j] : 0);
    }
  return SMELT_OK;
}

static smelt_status run_steps(op_ctx *c, const rnn_dir *d, const int32_t *lens, bool rev, int dir,
                              rnn_out *out) {
  const rnn_cfg *g = d->g;
  int64_t n = g->H, GH = g->G * n, D = g->n_dir;
  for (int64_t s = 0; s < g->S; s++) {
    TRY(gemm_f32(c->pool, false, true, g->B, GH, n, 1.0f, d->Hs, n, d->R, n, 0.0f, d->HR, GH));
    if (g->kind == K_GRU && !g->lbr) TRY(gru_reset_product(c, d, d->XW, s, lens, rev));
    for (int64_t b = 0; b < g->B; b++) {
      int64_t L = lens ? lens[b] : g->S;
      if (s >= L) continue;
      int64_t t = rev ? L - 1 - s : s;
      const float *xw = d->XW + (t * g->B + b) * GH, *hr = d->HR + b * GH;
      float *H = d->Hs + b * n;
      if (g->kind == K_RNN) cell_rnn(d, xw, hr, H);
      else if (g->kind == K_GRU) cell_gru(d, xw, hr, d->rhR ? d->rhR + b * n : NULL, H);
      else cell_lstm(d, xw, hr, H, d->Cs + b * n);
      memcpy(out->Y + ((t * D + dir) * g->B + b) * n, H, sizeof(float) * (size_t)n);
    }
  }
  memcpy(out->Yh + dir * g->B * n, d->Hs, sizeof(float) * (size_t)(g->B * n));
  memcpy(out->Yc + dir * g->B * n, d->Cs, sizeof(float) * (size_t)(g->B * n));
  return SMELT_OK;
}

static smelt_status run_direction(op_ctx *c, const rnn_cfg *g, const rnn_in *in, int dir,
                                  rnn_out *out) {
  int64_t n = g->H, GH = g->G * n, BH = g->B * n;
  rnn_dir d = {.g = g, .f = &g->acts[dir * g->per_dir]};
  d.gg = g->per_dir > 1 ? d.f + 1 : d.f;
  d.h = g->per_dir > 2 ? d.f + 2 : d.f;
  d.R = in->R + dir * GH * n;
  d.Wb = in->Bias ? in->Bias + dir * 2 * GH : NULL;
  d.Rb = in->Bias ? in->Bias + dir * 2 * GH + GH : NULL;
  d.P = in->P ? in->P + dir * 3 * n : NULL;
  smelt_status s = nn_alloc((void **)&d.XW, g->S * g->B * GH + 1, sizeof(float), "input projection");
  if (!s) s = nn_alloc((void **)&d.HR, BH * g->G + 1, sizeof(float), "recurrent projection");
  if (!s) s = nn_alloc((void **)&d.Hs, BH + 1, sizeof(float), "hidden state");
  if (!s) s = nn_alloc((void **)&d.Cs, BH + 1, sizeof(float), "cell state");
  if (!s && g->kind == K_GRU && !g->lbr) s = nn_alloc((void **)&d.rh, BH + 1, sizeof(float), "r*H");
  if (!s && g->kind == K_GRU && !g->lbr) s = nn_alloc((void **)&d.rhR, BH + 1, sizeof(float), "r*H*R");
  if (!s) {
    for (int64_t i = 0; i < BH; i++) {
      d.Hs[i] = in->h0 ? in->h0[dir * BH + i] : 0;
      d.Cs[i] = in->c0 ? in->c0[dir * BH + i] : 0;
    }
    s = project_inputs(c, &d, in->X, in->W + dir * GH * g->I);
    if (!s) s = run_steps(c, &d, in->lens, g->reverse || dir == 1, dir, out);
  }
  free(d.XW), free(d.HR), free(d.Hs), free(d.Cs), free(d.rh), free(d.rhR);
  return s;
}

/* ---- outputs ---- */

/* Output o from buf in layout 0: Y [S, D, B, H] becomes [B, S, D, H] and the
 * states [D, B, H] become [B, D, H] in layout 1. */
static void store_out(op_ctx *c, const rnn_cfg *g, int o, const float *buf) {
  if (o >= c->n_out) return;
  tensor *t = c->out[o];
  int64_t n = g->H, D = g->n_dir;
  if (!g->layout) {
    nn_store_f32(t->dtype, t->data, 0, 1, tensor_numel(t), buf);
    return;
  }
  int64_t outer = o == 0 ? g->S * D : D; /* rows of H values per batch entry, in layout 0 order */
  for (int64_t r = 0; r < outer; r++)
    for (int64_t b = 0; b < g->B; b++) {
      nn_store_f32(t->dtype, t->data, (b * outer + r) * n, 1, n, buf + (r * g->B + b) * n);
    }
}

static smelt_status rnn_run_kind(op_ctx *c, rnn_kind kind) {
  rnn_cfg g = {0};
  TRY(rnn_config(c, kind, &g));
  TRY(rnn_shapes(c, &g));
  if (g.I < 0 || g.H < 0 || g.S < 0 || g.B < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "shapes are not concrete");
  rnn_in in;
  TRY(rnn_load(c, &g, &in));
  int64_t D = g.n_dir, BH = g.B * g.H;
  rnn_out out = {0};
  smelt_status s = nn_alloc((void **)&out.Y, g.S * D * BH + 1, sizeof(float), "Y");
  if (!s) s = nn_alloc((void **)&out.Yh, D * BH + 1, sizeof(float), "Y_h");
  if (!s) s = nn_alloc((void **)&out.Yc, D * BH + 1, sizeof(float), "Y_c");
  if (!s) memset(out.Y, 0, sizeof(float) * (size_t)(g.S * D * BH));
  for (int dir = 0; !s && dir < D; dir++) s = run_direction(c, &g, &in, dir, &out);
  if (!s) {
    store_out(c, &g, 0, out.Y);
    store_out(c, &g, 1, out.Yh);
    if (kind == K_LSTM) store_out(c, &g, 2, out.Yc);
  }
  rnn_in_free(&in);
  free(out.Y), free(out.Yh), free(out.Yc);
  return s;
}

static smelt_status rnn_run(op_ctx *c) { return rnn_run_kind(c, K_RNN); }
static smelt_status gru_run(op_ctx *c) { return rnn_run_kind(c, K_GRU); }
static smelt_status lstm_run(op_ctx *c) { return rnn_run_kind(c, K_LSTM); }

const op_def op_family_rnn[] = {
    {"RNN", "", 3, 6, 0, 2, rnn_infer, rnn_run, false},
    {"GRU", "", 3, 6, 0, 2, gru_infer, gru_run, false},
    {"LSTM", "", 3, 8, 0, 3, lstm_infer, lstm_run, false},
    {0}};
