/* Normalizations over contiguous rows: LayerNormalization, RMSNormalization,
 * InstanceNormalization, GroupNormalization; and BatchNormalization
 * (inference form).  Rows are computed in double (two-pass variance) and
 * stored in the element type; rows run in parallel on the pool.
 * f32 LayerNormalization with a full-size scale (and bias) runs the
 * vectorized row kernel of kernels/vmath.h (statistics in double,
 * normalization in f32). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/vmath.h"
#include "ops/nn_util.h"
#include "util/err.h"

/* ---- the shared row normalizer ----
 * Row r (length n) of X: y = (x - mean) * inv * scale + bias, where inv =
 * 1/sqrt(var + eps) (rms: no mean, inv = 1/sqrt(mean(x^2) + eps)).  The
 * scale/bias element for position i of row r is [(r % R) * P + i / D], which
 * covers per-position (LN), per-row-channel (IN) and per-group-channel (GN). */
typedef struct rownorm {
  const tensor *x;
  tensor *y;
  int64_t rows, n;
  bool rms;
  double eps;
  const double *scale, *bias; /* bias may be NULL */
  int64_t R, P, D;
  tensor *mean_out, *inv_out; /* optional per-row statistics */
  atomic_bool failed;
} rownorm;

static void rownorm_row(const rownorm *j, int64_t r, double *buf) {
  int64_t n = j->n;
  nn_load_f64(j->x->dtype, j->x->data, r * n, 1, n, buf);
  double mean = 0, var = 0;
  if (!j->rms) {
    for (int64_t i = 0; i < n; i++) mean += buf[i];
    mean = n ? mean / (double)n : 0;
  }
  for (int64_t i = 0; i < n; i++) {
    double d = buf[i] - mean;
    var += d * d;
  }
  var = n ? var / (double)n : 0;
  double inv = 1.0 / sqrt(var + j->eps);
  const double *sc = j->scale + (r % j->R) * j->P, *bi = j->bias ? j->bias + (r % j->R) * j->P : NULL;
  if (j->D == 1) {
    for (int64_t i = 0; i < n; i++) buf[i] = (buf[i] - mean) * inv * sc[i] + (bi ? bi[i] : 0.0);
  } else {
    for (int64_t i0 = 0, c = 0; i0 < n; i0 += j->D, c++) {
      double a = inv * sc[c], b = (bi ? bi[c] : 0.0) - mean * a;
      int64_t e = i0 + j->D < n ? i0 + j->D : n;
      for (int64_t i = i0; i < e; i++) buf[i] = buf[i] * a + b;
    }
  }
  nn_store_f64(j->y->dtype, j->y->data, r * n, 1, n, buf);
  if (j->mean_out) nn_store_f64(j->mean_out->dtype, j->mean_out->data, r, 1, 1, &mean);
  if (j->inv_out) nn_store_f64(j->inv_out->dtype, j->inv_out->data, r, 1, 1, &inv);
}

static void rownorm_rows(void *vctx, int64_t r0, int64_t r1) {
  rownorm *j = vctx;
  double *buf = NULL;
  if (nn_alloc((void **)&buf, j->n, sizeof(double), "normalization row")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t r = r0; r < r1; r++) rownorm_row(j, r, buf);
  free(buf);
}

static smelt_status rownorm_run(smelt_pool *pool, rownorm *j) {
  if (j->rows == 0) return SMELT_OK;
  pool_parallel_for(pool, j->rows, 1 + 32768 / (j->n + 1), rownorm_rows, j);
  if (atomic_load(&j->failed)) return err_nomem("normalization row", (size_t)j->n * 8);
  return SMELT_OK;
}

/* Runs j with the scale and bias its caller just loaded (st: how loading
 * went), then frees them. */
static smelt_status rownorm_run_with(smelt_pool *pool, rownorm *j, double *scale, double *bias,
                                     smelt_status st) {
  if (!st) {
    j->scale = scale;
    j->bias = bias;
    st = rownorm_run(pool, j);
  }
  free(scale);
  free(bias);
  return st;
}

/* Loads a float tensor (scale, bias, statistics) into a new double array. */
static smelt_status load_doubles(const tensor *t, double **out) {
  int64_t n = tensor_numel(t);
  TRY(nn_alloc((void **)out, n, sizeof(double), "normalization parameters"));
  nn_load_f64(t->dtype, t->data, 0, 1, n, *out);
  return SMELT_OK;
}

/* Scale or bias of shape `t` unidirectionally broadcast to dims[0..r) (the
 * normalized block), expanded into a new array of nn_prod(dims) doubles. */
static smelt_status expand_param(const tensor *t, int r, const int64_t *dims, const char *name,
                                 int idx, double **out) {
  if (t->rank > r)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d (%s) has rank %d, more than the %d normalized dims",
                   idx, name, t->rank, r);
  for (int i = 0; i < t->rank; i++) {
    int64_t d = t->dims[i], want = dims[r - t->rank + i];
    if (d != 1 && d != want)
      return err_set(SMELT_ERR_INVALID_ARGUMENT,
                     "input %d (%s) dim %d is %lld, which does not broadcast to %lld", idx, name, i,
                     (long long)d, (long long)want);
  }
  int64_t n = nn_prod(dims, 0, r);
  double *src = NULL;
  TRY(load_doubles(t, &src));
  smelt_status st = nn_alloc((void **)out, n, sizeof(double), "normalization parameters");
  for (int64_t i = 0; !st && i < n; i++) {
    int64_t rem = i, off = 0, mul = 1;
    for (int d = r - 1; d >= r - t->rank; d--) {
      int64_t td = t->dims[d - (r - t->rank)], c = rem % dims[d];
      rem /= dims[d];
      off += (td == 1 ? 0 : c) * mul;
      mul *= td;
    }
    (*out)[i] = src[off];
  }
  free(src);
  return st;
}

static smelt_dtype stash_dtype(op_ctx *c) {
  int64_t s = op_attr_int(c, "stash_type", 1);
  return nn_is_float((smelt_dtype)s) ? (smelt_dtype)s : SMELT_F32;
}

/* ---- LayerNormalization / RMSNormalization ---- */

static smelt_status ln_infer_kind(op_ctx *c, bool rms) {
  const tensor *x = c->in[0];
  TRY(nn_check_float(c, 0, "X"));
  TRY(nn_check_float(c, 1, "Scale"));
  if (!rms) TRY(nn_check_float(c, 2, "B"));
  if (x->rank < 0) {
    for (int i = 0; i < c->n_out; i++) nn_out_unknown(c, i, i ? stash_dtype(c) : x->dtype);
    return SMELT_OK;
  }
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), x->rank, "axis", &axis));
  op_out_like(c, 0, 0);
  int64_t dims[SMELT_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = i < axis ? x->dims[i] : 1;
  for (int i = 1; i < c->n_out; i++) op_set_out(c, i, stash_dtype(c), x->rank, dims);
  return SMELT_OK;
}

/* ---- f32 LayerNormalization fast path ---- */

typedef struct ln_f32_job {
  const vmath_kernels *vm;
  const float *x, *scale, *bias;
  float *y, *mean, *inv;
  int64_t n;
  float eps;
} ln_f32_job;

static void ln_f32_rows(void *vctx, int64_t r0, int64_t r1) {
  const ln_f32_job *j = vctx;
  for (int64_t r = r0; r < r1; r++)
    j->vm->layernorm_row(j->x + r * j->n, j->y + r * j->n, j->n, j->scale, j->bias, j->eps,
                         j->mean ? j->mean + r : NULL, j->inv ? j->inv + r : NULL);
}

/* A float tensor that holds exactly the normalized block dims[axis:] (no broadcast). */
static bool ln_full_param(const tensor *t, const tensor *x, int axis) {
  if (!t || t->dtype != SMELT_F32 || t->rank > x->rank - axis) return false;
  for (int i = 0; i < x->rank - axis; i++) {
    int64_t want = x->dims[axis + i];
    int k = i - (x->rank - axis - t->rank); /* t's dim aligned with it, or < 0 */
    if ((k < 0 && want != 1) || (k >= 0 && t->dims[k] != want)) return false;
  }
  return true;
}

static bool ln_f32_fast(op_ctx *c, int axis, int64_t rows, int64_t n, smelt_status *st) {
  const tensor *x = c->in[0], *scale = c->in[1], *bias = op_in(c, 2);
  const vmath_kernels *vm = vmath_for_ops();
  if (!vm || x->dtype != SMELT_F32 || n <= 0 || !ln_full_param(scale, x, axis) ||
      (bias && !ln_full_param(bias, x, axis)))
    return false;
  for (int i = 1; i < c->n_out; i++)
    if (c->out[i]->dtype != SMELT_F32) return false;
  ln_f32_job j = {.vm = vm, .x = x->data, .scale = scale->data,
                  .bias = bias ? bias->data : NULL, .y = c->out[0]->data,
                  .mean = c->n_out > 1 ? c->out[1]->data : NULL,
                  .inv = c->n_out > 2 ? c->out[2]->data : NULL, .n = n,
                  .eps = op_attr_float(c, "epsilon", 1e-5f)};
  pool_parallel_for(c->pool, rows, 1 + 16384 / n, ln_f32_rows, &j);
  *st = SMELT_OK;
  return true;
}

static smelt_status ln_run_kind(op_ctx *c, bool rms) {
  const tensor *x = c->in[0], *scale = c->in[1], *bias = rms ? NULL : op_in(c, 2);
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), x->rank, "axis", &axis));
  rownorm j = {.x = x, .y = c->out[0], .rms = rms, .eps = op_attr_float(c, "epsilon", 1e-5f),
               .R = 1, .P = 0, .D = 1};
  nn_split_axis(x, axis, true, &j.rows, &j.n, &(int64_t){0});
  smelt_status fast;
  if (!rms && ln_f32_fast(c, axis, j.rows, j.n, &fast)) return fast;
  if (!rms && c->n_out > 1) j.mean_out = c->out[1];
  if (c->n_out > (rms ? 1 : 2)) j.inv_out = c->out[rms ? 1 : 2];
  double *sc = NULL, *bi = NULL;
  int r = x->rank - axis;
  smelt_status st = expand_param(scale, r, x->dims + axis, "Scale", 1, &sc);
  if (!st && bias) st = expand_param(bias, r, x->dims + axis, "B", 2, &bi);
  return rownorm_run_with(c->pool, &j, sc, bi, st);
}

static smelt_status ln_infer(op_ctx *c) { return ln_infer_kind(c, false); }
static smelt_status ln_run(op_ctx *c) { return ln_run_kind(c, false); }
static smelt_status rms_infer(op_ctx *c) { return ln_infer_kind(c, true); }
static smelt_status rms_run(op_ctx *c) { return ln_run_kind(c, true); }

/* ---- InstanceNormalization / GroupNormalization ---- */

/* Checks that input i is a vector of `want` values (unknown passes). */
static smelt_status check_vector(op_ctx *c, int i, const char *name, int64_t want) {
  const tensor *t = op_in(c, i);
  if (!t || t->rank < 0) return SMELT_OK;
  if (t->rank != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input %d (%s) has rank %d, expected 1", i, name, t->rank);
  if (dim_known(t->dims[0]) && dim_known(want) && t->dims[0] != want)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d (%s) has %lld values, expected %lld", i,
                   name, (long long)t->dims[0], (long long)want);
  return SMELT_OK;
}

static smelt_status channel_norm_infer(op_ctx *c, bool group) {
  const tensor *x = c->in[0];
  for (int i = 0; i < 3; i++) TRY(nn_check_float(c, i, i == 0 ? "X" : i == 1 ? "scale" : "B"));
  if (x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 2", x->rank);
  int64_t C = x->dims[1], want = C;
  if (group) {
    int64_t G = op_attr_int(c, "num_groups", 0);
    if (G < 1) return err_set(SMELT_ERR_INVALID_MODEL, "num_groups %lld must be >= 1", (long long)G);
    if (dim_known(C) && C % G)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "%lld channels are not divisible by num_groups %lld",
                     (long long)C, (long long)G);
    if (c->opset < 21) want = G; /* opset 18: one scale/bias per group */
  }
  TRY(check_vector(c, 1, "scale", want));
  TRY(check_vector(c, 2, "B", want));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status channel_norm_run(op_ctx *c, bool group) {
  const tensor *x = c->in[0];
  TRY(channel_norm_infer(c, group)); /* re-checks the parameter sizes on concrete shapes */
  int64_t N = x->dims[0], C = x->dims[1], S = nn_prod(x->dims, 2, x->rank);
  int64_t G = group ? op_attr_int(c, "num_groups", 1) : C, Cg = C / G;
  rownorm j = {.x = x, .y = c->out[0], .eps = op_attr_float(c, "epsilon", 1e-5f),
               .rows = N * G, .n = Cg * S, .R = G};
  if (!group || c->opset < 21) {
    j.P = 1; /* one parameter per row */
    j.D = j.n > 0 ? j.n : 1;
  } else {
    j.P = Cg; /* one per channel inside the group's row */
    j.D = S > 0 ? S : 1;
  }
  double *sc = NULL, *bi = NULL;
  smelt_status st = load_doubles(c->in[1], &sc);
  if (!st) st = load_doubles(c->in[2], &bi);
  return rownorm_run_with(c->pool, &j, sc, bi, st);
}

static smelt_status in_infer(op_ctx *c) { return channel_norm_infer(c, false); }
static smelt_status in_run(op_ctx *c) { return channel_norm_run(c, false); }
static smelt_status gn_infer(op_ctx *c) { return channel_norm_infer(c, true); }
static smelt_status gn_run(op_ctx *c) { return channel_norm_run(c, true); }

/* ---- BatchNormalization (inference) ---- */

static const char *const bn_names[] = {"X", "scale", "B", "input_mean", "input_var"};

static smelt_status bn_infer(op_ctx *c) {
  const tensor *x = c->in[0];
  if (op_attr_int(c, "training_mode", 0) != 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "training mode is not supported");
  if (op_attr_int(c, "spatial", 1) == 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "spatial=0 (per-element statistics) is not supported");
  for (int i = 0; i < 5; i++) TRY(nn_check_float(c, i, bn_names[i]));
  if (x->rank >= 0 && x->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 2", x->rank);
  int64_t C = x->rank >= 2 ? x->dims[1] : DIM_UNKNOWN;
  for (int i = 1; i < 5; i++) TRY(check_vector(c, i, bn_names[i], C));
  op_out_like(c, 0, 0);
  /* older opsets may list the running statistics as outputs: in inference
   * they are the inputs unchanged */
  for (int i = 1; i < c->n_out; i++) op_out_like(c, i, i < 3 ? i + 2 : i);
  return SMELT_OK;
}

typedef struct bn_job {
  const tensor *x;
  tensor *y;
  int64_t C, S;
  const double *a, *b; /* y = x * a[c] + b[c] */
  atomic_bool failed;
} bn_job;

static void bn_planes(void *vctx, int64_t q0, int64_t q1) {
  bn_job *j = vctx;
  if (j->x->dtype == SMELT_F32) {
    for (int64_t q = q0; q < q1; q++) {
      const float *x = (const float *)j->x->data + q * j->S;
      float *y = (float *)j->y->data + q * j->S;
      float a = (float)j->a[q % j->C], b = (float)j->b[q % j->C];
      for (int64_t i = 0; i < j->S; i++) y[i] = x[i] * a + b;
    }
    return;
  }
  double *buf = NULL;
  if (nn_alloc((void **)&buf, j->S, sizeof(double), "BatchNormalization plane")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t q = q0; q < q1; q++) {
    double a = j->a[q % j->C], b = j->b[q % j->C];
    nn_load_f64(j->x->dtype, j->x->data, q * j->S, 1, j->S, buf);
    for (int64_t i = 0; i < j->S; i++) buf[i] = buf[i] * a + b;
    nn_store_f64(j->y->dtype, j->y->data, q * j->S, 1, j->S, buf);
  }
  free(buf);
}

static smelt_status bn_run(op_ctx *c) {
  TRY(bn_infer(c));
  const tensor *x = c->in[0];
  int64_t C = x->dims[1];
  double eps = op_attr_float(c, "epsilon", 1e-5f);
  double *p[4] = {0}, *a = NULL, *b = NULL;
  smelt_status st = SMELT_OK;
  for (int i = 0; i < 4 && !st; i++) st = load_doubles(c->in[i + 1], &p[i]);
  if (!st) st = nn_alloc((void **)&a, C, sizeof(double), "BatchNormalization");
  if (!st) st = nn_alloc((void **)&b, C, sizeof(double), "BatchNormalization");
  if (!st) {
    for (int64_t ch = 0; ch < C; ch++) {
      a[ch] = p[0][ch] / sqrt(p[3][ch] + eps);
      b[ch] = p[1][ch] - p[2][ch] * a[ch];
    }
    bn_job j = {.x = x, .y = c->out[0], .C = C, .S = nn_prod(x->dims, 2, x->rank), .a = a, .b = b};
    if (tensor_numel(x) > 0)
      pool_parallel_for(c->pool, x->dims[0] * C, 1 + 65536 / (j.S + 1), bn_planes, &j);
    if (atomic_load(&j.failed)) st = err_nomem("BatchNormalization plane", (size_t)j.S * 8);
    for (int i = 1; !st && i < c->n_out; i++) {
      const tensor *src = c->in[i < 3 ? i + 2 : i];
      memcpy(c->out[i]->data, src->data, c->out[i]->nbytes);
    }
  }
  for (int i = 0; i < 4; i++) free(p[i]);
  free(a);
  free(b);
  return st;
}

const op_def op_family_norm[] = {
    {"BatchNormalization", "", 5, 5, 1, 5, bn_infer, bn_run, false},
    {"LayerNormalization", "", 2, 3, 1, 3, ln_infer, ln_run, false},
    {"RMSNormalization", "", 2, 2, 1, 1, rms_infer, rms_run, false},
    {"InstanceNormalization", "", 3, 3, 1, 1, in_infer, in_run, false},
    {"GroupNormalization", "", 3, 3, 1, 1, gn_infer, gn_run, false},
    {0}};
