/* Numeric ops of the ai.onnx.ml domain: Binarizer, ArrayFeatureExtractor and
 * TreeEnsemble (ai.onnx.ml opset 5).  The string-keyed ones (LabelEncoder
 * over strings, StringNormalizer, ...) need string tensors, which smelt does
 * not have. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/shape_util.h"
#include "util/err.h"

#define ML "ai.onnx.ml"

/* ---- Binarizer ---- */

static smelt_status bin_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "X"));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status bin_run(op_ctx *c) {
  const tensor *x = c->in[0];
  double thr = op_attr_float(c, "threshold", 0.0f), v;
  for (int64_t i = 0; i < tensor_numel(x); i++) {
    nn_load_f64(x->dtype, x->data, i, 1, 1, &v);
    v = v > thr ? 1.0 : 0.0;
    nn_store_f64(x->dtype, c->out[0]->data, i, 1, 1, &v);
  }
  return SMELT_OK;
}

/* ---- ArrayFeatureExtractor ---- */

static smelt_status afe_infer(op_ctx *c) {
  const tensor *x = c->in[0], *idx = c->in[1];
  TRY(su_check_movable(x, 0));
  if (idx->dtype != SMELT_I64 && idx->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (Y) must be int64");
  if (x->rank < 0 || idx->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 (X) must have rank >= 1");
  int64_t d[SMELT_MAX_RANK], n = shape_numel(idx->rank, idx->dims);
  int r = x->rank;
  if (r == 1) {
    d[0] = 1;
    d[1] = n;
    r = 2;
  } else {
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)r);
    d[r - 1] = n;
  }
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status afe_run(op_ctx *c) {
  const tensor *x = c->in[0], *idx = c->in[1];
  int64_t F = x->dims[x->rank - 1], rows = shape_numel(x->rank - 1, x->dims), n = tensor_numel(idx);
  size_t es = dtype_size(x->dtype);
  for (int64_t k = 0; k < n; k++) {
    int64_t j = ((const int64_t *)idx->data)[k];
    if (j < 0 || j >= F)
      return err_set(SMELT_ERR_RUNTIME, "index %lld is outside 0..%lld", (long long)j, (long long)F - 1);
    for (int64_t r = 0; r < rows; r++)
      memcpy((char *)c->out[0]->data + (size_t)(r * n + k) * es, (const char *)x->data + (size_t)(r * F + j) * es, es);
  }
  return SMELT_OK;
}

/* ---- TreeEnsemble ---- */

enum { TE_LEQ, TE_LT, TE_GTE, TE_GT, TE_EQ, TE_NEQ, TE_MEMBER };
enum { AGG_AVERAGE, AGG_SUM, AGG_MIN, AGG_MAX };
enum { PT_NONE, PT_SOFTMAX, PT_LOGISTIC, PT_SOFTMAX_ZERO, PT_PROBIT };

typedef struct te_model {
  int n_nodes, n_leaves, n_trees;
  const int64_t *feat, *tru, *fal, *tleaf, *fleaf, *roots, *ltarget, *missing_true;
  double *splits, *lweights;
  uint8_t *modes;
  int64_t *set_start, *set_len; /* per node: its members in `members` */
  double *members;
  int64_t n_targets;
  int agg, post;
} te_model;

static void te_free(te_model *m) {
  free(m->splits), free(m->lweights), free(m->modes), free(m->set_start), free(m->set_len);
  free(m->members);
}

/* An INTS attribute that must have n entries (n < 0: any, set *n). */
static smelt_status te_ints(op_ctx *c, const char *name, int *n, bool required, const int64_t **out) {
  int cnt;
  *out = ir_attr_ints(c->node, name, &cnt);
  if (!*out && !required) return SMELT_OK;
  if (!*out) return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s is required", name);
  if (*n >= 0 && cnt != *n)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %d values, expected %d", name, cnt, *n);
  *n = cnt;
  return SMELT_OK;
}

/* A TENSOR attribute of n numbers as doubles (malloc'd). */
static smelt_status te_tensor(op_ctx *c, const char *name, int n, double **out) {
  const ir_attr *a = ir_attr_find(c->node, name);
  *out = NULL;
  if (!a || a->type != IR_ATTR_TENSOR || !a->t)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s (a tensor) is required", name);
  const tensor *t = a->t;
  if (n >= 0 && tensor_numel(t) != n)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %lld values, expected %d", name,
                   (long long)tensor_numel(t), n);
  if (!dtype_is_float(t->dtype) && !dtype_is_int(t->dtype))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s must be numeric", name);
  TRY(nn_alloc((void **)out, tensor_numel(t) + 1, sizeof(double), name));
  for (int64_t i = 0; i < tensor_numel(t); i++) (*out)[i] = tensor_get_f64(t, i);
  return SMELT_OK;
}

/* Set members of the MEMBER nodes, in node order, separated by NaN. */
static smelt_status te_members(op_ctx *c, te_model *m) {
  TRY(nn_alloc((void **)&m->set_start, m->n_nodes + 1, sizeof(int64_t), "sets"));
  TRY(nn_alloc((void **)&m->set_len, m->n_nodes + 1, sizeof(int64_t), "sets"));
  bool any = false;
  for (int i = 0; i < m->n_nodes; i++) any |= m->modes[i] == TE_MEMBER;
  if (!any) return SMELT_OK;
  TRY(te_tensor(c, "membership_values", -1, &m->members));
  int64_t n = tensor_numel(ir_attr_find(c->node, "membership_values")->t), pos = 0;
  for (int i = 0; i < m->n_nodes; i++) {
    if (m->modes[i] != TE_MEMBER) continue;
    if (pos > n) return err_set(SMELT_ERR_INVALID_MODEL, "membership_values has too few sets");
    m->set_start[i] = pos;
    while (pos < n && !isnan(m->members[pos])) pos++;
    m->set_len[i] = pos - m->set_start[i];
    pos++; /* the NaN */
  }
  return SMELT_OK;
}

static smelt_status te_check_refs(const te_model *m) {
  for (int i = 0; i < m->n_nodes; i++) {
    int64_t lim_t = m->tleaf[i] ? m->n_leaves : m->n_nodes, lim_f = m->fleaf[i] ? m->n_leaves : m->n_nodes;
    if (m->tru[i] < 0 || m->tru[i] >= lim_t || m->fal[i] < 0 || m->fal[i] >= lim_f || m->modes[i] > TE_MEMBER ||
        m->feat[i] < 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "tree node %d has an invalid branch, mode or feature", i);
  }
  for (int i = 0; i < m->n_leaves; i++)
    if (m->ltarget[i] < 0 || m->ltarget[i] >= m->n_targets)
      return err_set(SMELT_ERR_INVALID_MODEL, "leaf %d targets %lld, outside 0..%lld", i,
                     (long long)m->ltarget[i], (long long)m->n_targets - 1);
  for (int i = 0; i < m->n_trees; i++)
    if (m->roots[i] < 0 || m->roots[i] >= m->n_nodes)
      return err_set(SMELT_ERR_INVALID_MODEL, "tree root %lld is not a node", (long long)m->roots[i]);
  return SMELT_OK;
}

static smelt_status te_load(op_ctx *c, te_model *m) {
  memset(m, 0, sizeof *m);
  int n = -1, nl = -1, nt = -1, nm;
  TRY(te_ints(c, "nodes_featureids", &n, true, &m->feat));
  TRY(te_ints(c, "nodes_truenodeids", &n, true, &m->tru));
  TRY(te_ints(c, "nodes_falsenodeids", &n, true, &m->fal));
  TRY(te_ints(c, "nodes_trueleafs", &n, true, &m->tleaf));
  TRY(te_ints(c, "nodes_falseleafs", &n, true, &m->fleaf));
  TRY(te_ints(c, "nodes_missing_value_tracks_true", &n, false, &m->missing_true));
  TRY(te_ints(c, "leaf_targetids", &nl, true, &m->ltarget));
  TRY(te_ints(c, "tree_roots", &nt, true, &m->roots));
  m->n_nodes = n, m->n_leaves = nl, m->n_trees = nt;
  m->n_targets = op_attr_int(c, "n_targets", -1);
  m->agg = (int)op_attr_int(c, "aggregate_function", AGG_SUM);
  m->post = (int)op_attr_int(c, "post_transform", PT_NONE);
  if (m->n_targets < 1 || m->agg < AGG_AVERAGE || m->agg > AGG_MAX || m->post < PT_NONE || m->post > PT_PROBIT)
    return err_set(SMELT_ERR_INVALID_MODEL, "n_targets, aggregate_function or post_transform is invalid");
  TRY(te_tensor(c, "nodes_splits", n, &m->splits));
  TRY(te_tensor(c, "leaf_weights", nl, &m->lweights));
  double *modes;
  TRY(te_tensor(c, "nodes_modes", n, &modes));
  nm = n;
  smelt_status s = nn_alloc((void **)&m->modes, nm + 1, 1, "modes");
  for (int i = 0; !s && i < nm; i++) m->modes[i] = modes[i] >= 0 && modes[i] <= TE_MEMBER ? (uint8_t)modes[i] : 255;
  free(modes);
  if (!s) s = te_members(c, m);
  if (!s) s = te_check_refs(m);
  return s;
}

static bool te_branch(const te_model *m, int i, double x) {
  if (isnan(x) && m->missing_true && m->missing_true[i]) return true;
  double v = m->splits[i];
  switch (m->modes[i]) {
    case TE_LEQ: return x <= v;
    case TE_LT: return x < v;
    case TE_GTE: return x >= v;
    case TE_GT: return x > v;
    case TE_EQ: return x == v;
    case TE_NEQ: return x != v;
    default:
      for (int64_t k = 0; k < m->set_len[i]; k++)
        if (m->members[m->set_start[i] + k] == x) return true;
      return false;
  }
}

/* The leaf a sample reaches from root; -1 if the walk does not end. */
static int64_t te_walk(const te_model *m, int64_t root, const double *x, int64_t F) {
  int64_t i = root;
  if (m->tleaf[i] && m->fleaf[i] && m->tru[i] == m->fal[i]) return m->tru[i]; /* a one-leaf tree */
  for (int steps = 0; steps <= m->n_nodes; steps++) {
    if (m->feat[i] >= F) return -2;
    bool t = te_branch(m, (int)i, x[m->feat[i]]);
    int64_t next = t ? m->tru[i] : m->fal[i];
    if (t ? m->tleaf[i] : m->fleaf[i]) return next;
    i = next;
  }
  return -1;
}

/* sqrt(2) * erfinv(2p - 1): Winitzki's closed form refined by Newton steps on erf. */
static double te_probit(double p) {
  const double a = 0.147, pi = 3.14159265358979323846;
  double y = 2 * p - 1;
  if (y <= -1) return -INFINITY;
  if (y >= 1) return INFINITY;
  double w = log((1 - y) * (1 + y)), t = 2 / (pi * a) + w / 2;
  double x = copysign(sqrt(sqrt(t * t - w / a) - t), y);
  for (int k = 0; k < 3; k++) x -= (erf(x) - y) / (2 / sqrt(pi) * exp(-x * x));
  return sqrt(2.0) * x;
}

static void te_post(int post, double *v, int64_t n) {
  if (post == PT_LOGISTIC)
    for (int64_t i = 0; i < n; i++) v[i] = 1 / (1 + exp(-v[i]));
  else if (post == PT_PROBIT)
    for (int64_t i = 0; i < n; i++) v[i] = te_probit(v[i]);
  else if (post == PT_SOFTMAX || post == PT_SOFTMAX_ZERO) {
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++)
      if (v[i] > mx) mx = v[i];
    for (int64_t i = 0; i < n; i++) {
      double e = post == PT_SOFTMAX_ZERO && v[i] == 0 ? 0 : exp(v[i] - mx);
      sum += e;
      v[i] = e;
    }
    for (int64_t i = 0; i < n; i++) v[i] = sum > 0 ? v[i] / sum : 0;
  }
}

static smelt_status te_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "X"));
  const tensor *x = c->in[0];
  int64_t nt = op_attr_int(c, "n_targets", -1);
  if (nt < 1) return err_set(SMELT_ERR_INVALID_MODEL, "attribute n_targets must be >= 1");
  if (x->rank >= 0 && x->rank != 2) return err_set(SMELT_ERR_INVALID_ARGUMENT, "X must be [N, F]");
  op_set_out(c, 0, x->dtype, 2, (int64_t[]){x->rank == 2 ? x->dims[0] : DIM_UNKNOWN, nt});
  return SMELT_OK;
}

static smelt_status te_sample(const te_model *m, const double *x, int64_t F, double *out) {
  double init = m->agg == AGG_MIN ? DBL_MAX : m->agg == AGG_MAX ? -DBL_MAX : 0;
  for (int64_t t = 0; t < m->n_targets; t++) out[t] = init;
  for (int k = 0; k < m->n_trees; k++) {
    int64_t leaf = te_walk(m, m->roots[k], x, F);
    if (leaf == -2) return err_set(SMELT_ERR_INVALID_ARGUMENT, "a tree reads a feature beyond the %lld of X", (long long)F);
    if (leaf < 0) return err_set(SMELT_ERR_INVALID_MODEL, "tree %d has a cycle", k);
    double w = m->lweights[leaf], *o = &out[m->ltarget[leaf]];
    switch (m->agg) {
      case AGG_SUM: *o += w; break;
      case AGG_AVERAGE: *o += w / m->n_trees; break;
      case AGG_MIN: if (w < *o) *o = w; break;
      default: if (w > *o) *o = w; break;
    }
  }
  te_post(m->post, out, m->n_targets);
  return SMELT_OK;
}

static smelt_status te_run(op_ctx *c) {
  te_model m;
  smelt_status s = te_load(c, &m);
  const tensor *x = c->in[0];
  int64_t N = x->dims[0], F = x->dims[1];
  double *row = NULL, *out = NULL;
  if (!s) s = nn_alloc((void **)&row, F + 1, sizeof(double), "sample");
  if (!s) s = nn_alloc((void **)&out, m.n_targets, sizeof(double), "targets");
  for (int64_t i = 0; !s && i < N; i++) {
    nn_load_f64(x->dtype, x->data, i * F, 1, F, row);
    s = te_sample(&m, row, F, out);
    if (!s) nn_store_f64(c->out[0]->dtype, c->out[0]->data, i * m.n_targets, 1, m.n_targets, out);
  }
  free(row);
  free(out);
  te_free(&m);
  return s;
}

const op_def op_family_ml[] = {
    {"Binarizer", ML, 1, 1, 1, 1, bin_infer, bin_run, false},
    {"ArrayFeatureExtractor", ML, 2, 2, 1, 1, afe_infer, afe_run, false},
    {"TreeEnsemble", ML, 1, 1, 1, 1, te_infer, te_run, false},
    {0}};
