/* Normalizations along an axis or a set of axes rather than contiguous rows:
 * LpNormalization (one axis), MeanVarianceNormalization (axes) and LRN
 * (a window across channels).  Computed in double, stored in the element
 * type. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status same_shape_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "X"));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

/* ---- LpNormalization ---- */

static smelt_status lpnorm_infer(op_ctx *c) {
  int64_t p = op_attr_int(c, "p", 2);
  if (p != 1 && p != 2) return err_set(SMELT_ERR_INVALID_MODEL, "p %lld must be 1 or 2", (long long)p);
  if (c->in[0]->rank >= 0) {
    int axis;
    TRY(op_axis(op_attr_int(c, "axis", -1), c->in[0]->rank, "axis", &axis));
  }
  return same_shape_infer(c);
}

typedef struct lpnorm_job {
  const tensor *x;
  tensor *y;
  int64_t n, inner;
  int p;
  atomic_bool failed;
} lpnorm_job;

static void lpnorm_rows(void *vctx, int64_t r0, int64_t r1) {
  lpnorm_job *j = vctx;
  double *buf = NULL;
  if (nn_alloc((void **)&buf, j->n, sizeof(double), "LpNormalization row")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    int64_t off = (r / j->inner) * j->n * j->inner + r % j->inner;
    nn_load_f64(j->x->dtype, j->x->data, off, j->inner, j->n, buf);
    double norm = 0;
    for (int64_t i = 0; i < j->n; i++) norm += j->p == 1 ? fabs(buf[i]) : buf[i] * buf[i];
    if (j->p == 2) norm = sqrt(norm);
    for (int64_t i = 0; i < j->n; i++) buf[i] = norm == 0 ? 0.0 : buf[i] / norm; /* 0/0 -> 0 */
    nn_store_f64(j->y->dtype, j->y->data, off, j->inner, j->n, buf);
  }
  free(buf);
}

static smelt_status lpnorm_run(op_ctx *c) {
  const tensor *x = c->in[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), x->rank, "axis", &axis));
  lpnorm_job j = {.x = x, .y = c->out[0], .p = (int)op_attr_int(c, "p", 2)};
  int64_t outer;
  nn_split_axis(x, axis, false, &outer, &j.n, &j.inner);
  if (tensor_numel(x) == 0) return SMELT_OK;
  pool_parallel_for(c->pool, outer * j.inner, 1 + 16384 / (j.n + 1), lpnorm_rows, &j);
  if (atomic_load(&j.failed)) return err_nomem("LpNormalization row", (size_t)j.n * 8);
  return SMELT_OK;
}

/* ---- MeanVarianceNormalization ----
 * y = (x - mean) / (sqrt(var) + 1e-9) over the `axes` (default N, H, W). */

static smelt_status mvn_axes(op_ctx *c, int rank, bool *mask) {
  int n;
  const int64_t *axes = ir_attr_ints(c->node, "axes", &n);
  static const int64_t dflt[] = {0, 2, 3};
  if (!axes) {
    axes = dflt;
    n = 3;
  }
  for (int i = 0; i < rank; i++) mask[i] = false;
  for (int i = 0; i < n; i++) {
    int a;
    TRY(op_axis(axes[i], rank, "axes value", &a));
    mask[a] = true;
  }
  return SMELT_OK;
}

static smelt_status mvn_infer(op_ctx *c) {
  bool mask[SMELT_MAX_RANK];
  if (c->in[0]->rank >= 0) TRY(mvn_axes(c, c->in[0]->rank, mask));
  return same_shape_infer(c);
}

/* Group (kept-coordinates) index of every element, in order. */
static void mvn_groups(const tensor *x, const bool *mask, int64_t *grp) {
  int64_t n = tensor_numel(x), coord[SMELT_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t g = 0;
    for (int d = 0; d < x->rank; d++)
      if (!mask[d]) g = g * x->dims[d] + coord[d];
    grp[i] = g;
    for (int d = x->rank - 1; d >= 0 && ++coord[d] == x->dims[d]; d--) coord[d] = 0;
  }
}

static smelt_status mvn_run(op_ctx *c) {
  const tensor *x = c->in[0];
  bool mask[SMELT_MAX_RANK];
  TRY(mvn_axes(c, x->rank, mask));
  int64_t n = tensor_numel(x), ngroups = 1, count = 1;
  for (int d = 0; d < x->rank; d++) {
    if (mask[d]) count *= x->dims[d];
    else ngroups *= x->dims[d];
  }
  if (n == 0) return SMELT_OK;
  double *v = NULL, *mean = NULL, *var = NULL;
  int64_t *grp = NULL;
  smelt_status st = nn_alloc((void **)&v, n, sizeof(double), "MeanVarianceNormalization");
  if (!st) st = nn_alloc((void **)&grp, n, sizeof(int64_t), "MeanVarianceNormalization");
  if (!st) st = nn_alloc((void **)&mean, ngroups, sizeof(double), "MeanVarianceNormalization");
  if (!st) st = nn_alloc((void **)&var, ngroups, sizeof(double), "MeanVarianceNormalization");
  if (!st) {
    nn_load_f64(x->dtype, x->data, 0, 1, n, v);
    mvn_groups(x, mask, grp);
    memset(mean, 0, sizeof(double) * (size_t)ngroups);
    memset(var, 0, sizeof(double) * (size_t)ngroups);
    for (int64_t i = 0; i < n; i++) mean[grp[i]] += v[i];
    for (int64_t g = 0; g < ngroups; g++) mean[g] /= (double)count;
    for (int64_t i = 0; i < n; i++) var[grp[i]] += (v[i] - mean[grp[i]]) * (v[i] - mean[grp[i]]);
    for (int64_t g = 0; g < ngroups; g++) var[g] = sqrt(var[g] / (double)count) + 1e-9;
    for (int64_t i = 0; i < n; i++) v[i] = (v[i] - mean[grp[i]]) / var[grp[i]];
    nn_store_f64(c->out[0]->dtype, c->out[0]->data, 0, 1, n, v);
  }
  free(v);
  free(grp);
  free(mean);
  free(var);
  return st;
}

/* ---- LRN ----
 * y = x / (bias + alpha / size * sum of x^2 over the channels
 *          [c - floor((size-1)/2), c + ceil((size-1)/2)]) ^ beta */

static smelt_status lrn_infer(op_ctx *c) {
  if (op_attr_int(c, "size", 0) < 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute size is required and must be >= 1");
  if (c->in[0]->rank >= 0 && c->in[0]->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 2",
                   c->in[0]->rank);
  return same_shape_infer(c);
}

typedef struct lrn_job {
  const tensor *x;
  tensor *y;
  int64_t C, S, size;
  double alpha, beta, bias;
  atomic_bool failed;
} lrn_job;

static void lrn_planes(void *vctx, int64_t q0, int64_t q1) {
  lrn_job *j = vctx;
  double *buf = NULL, *acc = NULL, *own = NULL;
  if (nn_alloc((void **)&buf, j->S, sizeof(double), "LRN") ||
      nn_alloc((void **)&acc, j->S, sizeof(double), "LRN") ||
      nn_alloc((void **)&own, j->S, sizeof(double), "LRN")) {
    atomic_store(&j->failed, true);
    free(buf);
    free(acc);
    return;
  }
  int64_t lo = (j->size - 1) / 2, hi = j->size - 1 - lo;
  for (int64_t q = q0; q < q1; q++) {
    int64_t n = q / j->C, ch = q % j->C;
    int64_t c0 = ch - lo < 0 ? 0 : ch - lo, c1 = ch + hi >= j->C ? j->C - 1 : ch + hi;
    memset(acc, 0, sizeof(double) * (size_t)j->S);
    for (int64_t cc = c0; cc <= c1; cc++) {
      nn_load_f64(j->x->dtype, j->x->data, (n * j->C + cc) * j->S, 1, j->S, buf);
      for (int64_t i = 0; i < j->S; i++) acc[i] += buf[i] * buf[i];
      if (cc == ch) memcpy(own, buf, sizeof(double) * (size_t)j->S);
    }
    double k = j->alpha / (double)j->size;
    for (int64_t i = 0; i < j->S; i++) own[i] /= pow(j->bias + k * acc[i], j->beta);
    nn_store_f64(j->y->dtype, j->y->data, q * j->S, 1, j->S, own);
  }
  free(buf);
  free(acc);
  free(own);
}

static smelt_status lrn_run(op_ctx *c) {
  const tensor *x = c->in[0];
  lrn_job j = {.x = x, .y = c->out[0], .C = x->dims[1], .S = nn_prod(x->dims, 2, x->rank),
               .size = op_attr_int(c, "size", 1), .alpha = op_attr_float(c, "alpha", 1e-4f),
               .beta = op_attr_float(c, "beta", 0.75f), .bias = op_attr_float(c, "bias", 1.f)};
  if (tensor_numel(x) == 0) return SMELT_OK;
  pool_parallel_for(c->pool, x->dims[0] * j.C, 1 + 8192 / (j.S * j.size + 1), lrn_planes, &j);
  if (atomic_load(&j.failed)) return err_nomem("LRN", (size_t)j.S * 24);
  return SMELT_OK;
}

const op_def op_family_norm_axis[] = {
    {"LpNormalization", "", 1, 1, 1, 1, lpnorm_infer, lpnorm_run, false},
    {"MeanVarianceNormalization", "", 1, 1, 1, 1, mvn_infer, mvn_run, false},
    {"LRN", "", 1, 1, 1, 1, lrn_infer, lrn_run, false},
    {0}};
