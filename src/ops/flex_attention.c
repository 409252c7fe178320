/* FlexAttention (ai.onnx.preview): scaled dot-product attention over rank-4
 * Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] with GQA (query head h
 * reads kv head h / (Hq / Hkv)) and two optional subgraphs: score_mod on the
 * scores and prob_mod on the probabilities, each [B, Hq, L, S] in the softmax
 * precision (f32, or f64 for f64 inputs, or the softmax_precision attribute). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/quant_util.h"
#include "util/err.h"

typedef struct fa_cfg {
  int64_t B, Hq, Hkv, L, S, E, Ev;
  double scale;
  smelt_dtype prec;
} fa_cfg;

static smelt_status fa_config(op_ctx *c, fa_cfg *g) {
  const tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
  for (int i = 0; i < 3; i++) {
    TRY(nn_check_float(c, i, "Q, K and V"));
    if (c->in[i]->rank != 4) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d must have rank 4", i);
  }
  g->B = q->dims[0], g->Hq = q->dims[1], g->L = q->dims[2], g->E = q->dims[3];
  g->Hkv = k->dims[1], g->S = k->dims[2], g->Ev = v->dims[3];
  if (k->dims[0] != g->B || v->dims[0] != g->B || k->dims[3] != g->E || v->dims[1] != g->Hkv ||
      v->dims[2] != g->S)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "Q, K and V shapes do not agree");
  if (g->Hkv < 1 || g->Hq % g->Hkv)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%lld query heads are not a multiple of %lld kv heads",
                   (long long)g->Hq, (long long)g->Hkv);
  g->scale = ir_attr_find(c->node, "scale") ? op_attr_float(c, "scale", 1.0f) : 1.0 / sqrt((double)g->E);
  int64_t p = op_attr_int(c, "softmax_precision", 0);
  g->prec = p ? (smelt_dtype)p : q->dtype == SMELT_F64 ? SMELT_F64 : SMELT_F32;
  if (g->prec != SMELT_F32 && g->prec != SMELT_F64 && g->prec != SMELT_F16 && g->prec != SMELT_BF16)
    return err_set(SMELT_ERR_UNSUPPORTED, "softmax_precision %lld is not supported", (long long)p);
  return SMELT_OK;
}

static smelt_status fa_infer(op_ctx *c) {
  const tensor *q = c->in[0], *v = c->in[2];
  if (q->rank != 4 || v->rank != 4) {
    nn_out_unknown(c, 0, q->dtype);
    return SMELT_OK;
  }
  op_set_out(c, 0, v->dtype, 4, (int64_t[]){q->dims[0], q->dims[1], q->dims[2], v->dims[3]});
  return SMELT_OK;
}

/* Runs modifier graph `name` (if present) on t, in place. */
static smelt_status fa_mod(op_ctx *c, const char *name, tensor *t) {
  const ir_attr *a = ir_attr_find(c->node, name);
  if (!a) return SMELT_OK;
  if (a->type != IR_ATTR_GRAPH || !a->g || a->g->n_inputs != 1 || a->g->n_outputs != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s must be a graph with one input and one output", name);
  if (!c->run_subgraph) return err_set(SMELT_ERR_INTERNAL, "no subgraph executor");
  tensor res = {0}, *arg = t;
  smelt_status s = c->run_subgraph(c->exec, a->g, 1, &arg, 1, &res);
  if (!s && (res.kind != TENSOR_KIND_TENSOR || res.dtype != t->dtype || tensor_numel(&res) != tensor_numel(t)))
    s = err_set(SMELT_ERR_INVALID_MODEL, "it must return a %s tensor of its input's shape", dtype_name(t->dtype));
  if (!s && t->nbytes) memcpy(t->data, res.data, t->nbytes);
  tensor_release(&res);
  return s ? err_prefix(s, "%s: ", name) : SMELT_OK;
}

/* scores[b, h, l, s] = (q * sqrt(scale)) . (k * sqrt(scale)), pre-scaled in Q's type. */
static void fa_scores(const fa_cfg *g, smelt_dtype qt, const double *Q, const double *K, tensor *sc) {
  double ss = sqrt((double)(float)g->scale), row[1];
  int64_t grp = g->Hq / g->Hkv;
  for (int64_t b = 0; b < g->B; b++)
    for (int64_t h = 0; h < g->Hq; h++)
      for (int64_t l = 0; l < g->L; l++) {
        const double *q = Q + ((b * g->Hq + h) * g->L + l) * g->E;
        for (int64_t s = 0; s < g->S; s++) {
          const double *k = K + ((b * g->Hkv + h / grp) * g->S + s) * g->E;
          double acc = 0;
          for (int64_t e = 0; e < g->E; e++) acc += q_round_to(qt, q[e] * ss) * q_round_to(qt, k[e] * ss);
          row[0] = acc;
          nn_store_f64(sc->dtype, sc->data, ((b * g->Hq + h) * g->L + l) * g->S + s, 1, 1, row);
        }
      }
}

/* Softmax over the last axis, in place (rows of S). */
static smelt_status fa_softmax(const fa_cfg *g, tensor *t) {
  double *row = NULL;
  TRY(nn_alloc((void **)&row, g->S + 1, sizeof(double), "scores row"));
  for (int64_t r = 0; r < g->B * g->Hq * g->L; r++) {
    nn_load_f64(t->dtype, t->data, r * g->S, 1, g->S, row);
    double mx = -INFINITY, sum = 0;
    for (int64_t s = 0; s < g->S; s++)
      if (row[s] > mx) mx = row[s];
    for (int64_t s = 0; s < g->S; s++) sum += row[s] = exp(row[s] - mx);
    for (int64_t s = 0; s < g->S; s++) row[s] /= sum;
    nn_store_f64(t->dtype, t->data, r * g->S, 1, g->S, row);
  }
  free(row);
  return SMELT_OK;
}

/* Y = probs @ V (in the softmax precision), rounded to V's type. */
static smelt_status fa_output(const fa_cfg *g, const tensor *pr, const double *V, tensor *y) {
  double *p = NULL, *o = NULL;
  int64_t grp = g->Hq / g->Hkv;
  smelt_status st = nn_alloc((void **)&p, g->S + 1, sizeof(double), "probs row");
  if (!st) st = nn_alloc((void **)&o, g->Ev + 1, sizeof(double), "output row");
  for (int64_t r = 0; !st && r < g->B * g->Hq * g->L; r++) {
    int64_t b = r / (g->Hq * g->L), h = r / g->L % g->Hq;
    nn_load_f64(pr->dtype, pr->data, r * g->S, 1, g->S, p);
    const double *v = V + (b * g->Hkv + h / grp) * g->S * g->Ev;
    for (int64_t e = 0; e < g->Ev; e++) {
      double acc = 0;
      for (int64_t s = 0; s < g->S; s++) acc += p[s] * q_round_to(g->prec, v[s * g->Ev + e]);
      o[e] = q_round_to(g->prec, acc);
    }
    nn_store_f64(y->dtype, y->data, r * g->Ev, 1, g->Ev, o);
  }
  free(p);
  free(o);
  return st;
}

static smelt_status fa_load(const tensor *t, double **out) {
  TRY(nn_alloc((void **)out, tensor_numel(t) + 1, sizeof(double), "attention operand"));
  nn_load_f64(t->dtype, t->data, 0, 1, tensor_numel(t), *out);
  return SMELT_OK;
}

static smelt_status fa_run(op_ctx *c) {
  fa_cfg g = {0};
  TRY(fa_config(c, &g));
  double *Q = NULL, *K = NULL, *V = NULL;
  tensor sc = {0};
  smelt_status s = fa_load(c->in[0], &Q);
  if (!s) s = fa_load(c->in[1], &K);
  if (!s) s = fa_load(c->in[2], &V);
  if (!s) s = tensor_alloc(&sc, g.prec, 4, (int64_t[]){g.B, g.Hq, g.L, g.S});
  if (!s) {
    fa_scores(&g, c->in[0]->dtype, Q, K, &sc);
    s = fa_mod(c, "score_mod", &sc);
  }
  if (!s) s = fa_softmax(&g, &sc);
  if (!s) s = fa_mod(c, "prob_mod", &sc);
  if (!s) s = fa_output(&g, &sc, V, c->out[0]);
  tensor_release(&sc);
  free(Q), free(K), free(V);
  return s;
}

const op_def op_family_flex_attention[] = {
    {"FlexAttention", "ai.onnx.preview", 3, 3, 1, 1, fa_infer, fa_run, false},
    {0}};
