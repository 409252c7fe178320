/* QuantizeLinear, DequantizeLinear (per-tensor, per-axis and blocked) and
 * DynamicQuantizeLinear.
 *
 * Integer results are exact: x / scale is computed in the precision ONNX
 * names (the `precision` attribute, else the scale's type), rounded half to
 * even and saturated to the target range.  float8 targets round to nearest
 * even and follow `saturate`; float4e2m1 rounds the same way and always
 * saturates.  Packed types (int4 uint4 int2 uint2 float4e2m1) are read and
 * written by element index (the *_at forms of convert.h).  Dequantization multiplies the exact integer
 * difference x - zero_point by the scale in f32 (f64 for f64 scales). */
#include <stdlib.h>

#include "kernels/dynq.h"
#include "ops/convert.h"
#include "ops/nn_util.h"
#include "ops/quant_util.h"
#include "util/err.h"

/* The float quantized types: float8 kinds and float4e2m1 (zero point 0). */
static bool is_float8(smelt_dtype t) {
  return t == SMELT_F8E4M3FN || t == SMELT_F8E4M3FNUZ || t == SMELT_F8E5M2 ||
         t == SMELT_F8E5M2FNUZ || t == SMELT_F4E2M1;
}

static smelt_status check_scale(const tensor *s, const char *what) {
  if (s->kind != TENSOR_KIND_TENSOR || !nn_is_float(s->dtype))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be a float tensor, it is %s", what,
                   dtype_name(s->dtype));
  return SMELT_OK;
}

/* ---- QuantizeLinear ---- */

static smelt_status quant_out_type(op_ctx *c, smelt_dtype *t) {
  const tensor *zp = op_in(c, 2);
  int64_t od = op_attr_int(c, "output_dtype", 0), lo, hi;
  if (zp && od && od != zp->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute output_dtype %lld does not match the zero "
                   "point's type %s", (long long)od, dtype_name(zp->dtype));
  if (od < 0 || od >= SMELT_DTYPE_COUNT)
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute output_dtype %lld is not supported", (long long)od);
  *t = zp ? zp->dtype : od ? (smelt_dtype)od : SMELT_U8;
  if (is_float8(*t) || (*t != SMELT_I32 && q_int_range(*t, &lo, &hi))) return SMELT_OK;
  return err_set(SMELT_ERR_UNSUPPORTED, "quantizing to %s is not supported", dtype_name(*t));
}

static smelt_status quant_infer(op_ctx *c) {
  smelt_dtype t = SMELT_U8;
  TRY(quant_out_type(c, &t));
  op_set_out(c, 0, t, c->in[0]->rank, c->in[0]->dims);
  return SMELT_OK;
}

/* The precision of x / scale: the precision attribute, else the scale's type. */
static smelt_status quant_precision(op_ctx *c, smelt_dtype *p) {
  int64_t pr = op_attr_int(c, "precision", 0);
  *p = pr ? (smelt_dtype)pr : c->in[1]->dtype;
  if (!nn_is_float(*p))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute precision %lld is not a float type", (long long)pr);
  return SMELT_OK;
}

typedef struct quant_job {
  q_layout l;
  smelt_dtype prec, out;
  bool saturate;
  int64_t lo, hi;
  const double *scale, *zp; /* zp NULL: 0 */
} quant_job;

/* One row of `inner` elements at (o, d): x values in, quantized out. */
static void quant_row(const quant_job *j, int64_t o, int64_t d, double *v, int64_t *iv) {
  for (int64_t i = 0; i < j->l.inner; i++) {
    int64_t k = q_index(&j->l, o, d, i);
    double q = nn_round_to(j->prec, nn_round_to(j->prec, v[i]) / nn_round_to(j->prec, j->scale[k]));
    if (is_float8(j->out)) v[i] = q;
    else iv[i] = q_round_clamp(nearbyint(q) + (j->zp ? j->zp[k] : 0), j->lo, j->hi); /* round, then shift */
  }
}

static smelt_status quant_params(const tensor *p, double **out) {
  int64_t n = tensor_numel(p);
  TRY(nn_alloc((void **)out, n ? n : 1, sizeof(double), "quantization parameters"));
  cvt_load_f64(p->dtype, p->data, 1, n, *out);
  return SMELT_OK;
}

static smelt_status quant_check_f8_zp(const double *zp, int64_t n) {
  for (int64_t i = 0; zp && i < n; i++)
    if (zp[i] != 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "a float8 zero point must be 0, element %lld is %g",
                     (long long)i, zp[i]);
  return SMELT_OK;
}

static smelt_status quant_setup(op_ctx *c, quant_job *j) {
  const tensor *x = c->in[0], *s = c->in[1], *zp = op_in(c, 2);
  TRY(check_scale(s, "input 1 (y_scale)"));
  if (!nn_is_float(x->dtype)) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 0 (x) must be float");
  TRY(quant_out_type(c, &j->out));
  TRY(quant_precision(c, &j->prec));
  TRY(q_layout_make(c, x, s, "input 1 (y_scale)", &j->l));
  if (zp) {
    q_layout lz;
    TRY(q_layout_make(c, x, zp, "input 2 (y_zero_point)", &lz));
    if (lz.mode != j->l.mode)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "y_zero_point and y_scale have different shapes");
  }
  j->saturate = op_attr_int(c, "saturate", 1) != 0;
  if (!is_float8(j->out)) q_int_range(j->out, &j->lo, &j->hi);
  return SMELT_OK;
}

/* One f32 scale and an 8-bit zero point (or none) for all of a float32 x
 * (the per-tensor form quantizers write): *s and *z, else false. */
static bool per_tensor_q8(op_ctx *c, const tensor *s, const tensor *zp, smelt_dtype q, float *sv, float *zv) {
  if (!c->cache || s->dtype != SMELT_F32 || tensor_numel(s) != 1 || (q != SMELT_U8 && q != SMELT_I8) ||
      (zp && (zp->dtype != q || tensor_numel(zp) != 1)))
    return false;
  *sv = *(const float *)s->data;
  *zv = !zp ? 0.f : q == SMELT_I8 ? (float)*(const int8_t *)zp->data : (float)*(const uint8_t *)zp->data;
  return true;
}

static smelt_status quant_run(op_ctx *c) {
  quant_job j = {0};
  TRY(quant_setup(c, &j));
  float sv, zv;
  /* the vector loop (kernels/dynq.h; not on device cpu-ref, which has no
   * cache): the same bytes as the rows below */
  if (c->in[0]->dtype == SMELT_F32 && j.prec == SMELT_F32 && per_tensor_q8(c, c->in[1], op_in(c, 2), j.out, &sv, &zv)) {
    dynq_apply(isa_active(), tensor_numel(c->in[0]), c->in[0]->data, sv, zv, j.out == SMELT_I8, c->out[0]->data);
    return SMELT_OK;
  }
  const tensor *x = c->in[0], *zp = op_in(c, 2);
  double *scale = NULL, *zpv = NULL, *v = NULL;
  int64_t *iv = NULL;
  smelt_status st = quant_params(c->in[1], &scale);
  if (!st && zp) st = quant_params(zp, &zpv);
  if (!st && zp && is_float8(j.out)) st = quant_check_f8_zp(zpv, tensor_numel(zp));
  if (!st) st = nn_alloc((void **)&v, j.l.inner ? j.l.inner : 1, sizeof(double), "row");
  if (!st) st = nn_alloc((void **)&iv, j.l.inner ? j.l.inner : 1, sizeof(int64_t), "row");
  j.scale = scale;
  j.zp = is_float8(j.out) ? NULL : zpv;
  cvt_opts co = {j.saturate, CVT_ROUND_UP};
  for (int64_t o = 0; !st && o < j.l.outer; o++)
    for (int64_t d = 0; d < j.l.D; d++) {
      int64_t row = (o * j.l.D + d) * j.l.inner;
      cvt_load_f64_at(x->dtype, x->data, row, 1, j.l.inner, v);
      quant_row(&j, o, d, v, iv);
      if (is_float8(j.out)) cvt_store_f64_at(j.out, v, j.l.inner, c->out[0]->data, row, &co);
      else cvt_store_i64_at(j.out, iv, false, j.l.inner, c->out[0]->data, row, &co);
    }
  free(scale);
  free(zpv);
  free(v);
  free(iv);
  return st;
}

/* ---- DequantizeLinear ---- */

static smelt_status dequant_out_type(op_ctx *c, smelt_dtype *t) {
  int64_t od = op_attr_int(c, "output_dtype", 0);
  *t = od ? (smelt_dtype)od : c->in[1]->dtype;
  if (!nn_is_float(*t))
    return err_set(SMELT_ERR_INVALID_MODEL, "output type %lld is not a float type", (long long)*t);
  return SMELT_OK;
}

static smelt_status dequant_infer(op_ctx *c) {
  smelt_dtype t = SMELT_F32;
  TRY(dequant_out_type(c, &t));
  op_set_out(c, 0, t, c->in[0]->rank, c->in[0]->dims);
  return SMELT_OK;
}

static smelt_status dequant_check(op_ctx *c) {
  const tensor *x = c->in[0], *zp = op_in(c, 2);
  TRY(check_scale(c->in[1], "input 1 (x_scale)"));
  int64_t lo, hi;
  if (x->kind != TENSOR_KIND_TENSOR || (!q_int_range(x->dtype, &lo, &hi) && !is_float8(x->dtype)))
    return err_set(SMELT_ERR_UNSUPPORTED, "dequantizing %s is not supported", dtype_name(x->dtype));
  if (zp && zp->dtype != x->dtype)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (x_zero_point) is %s, x is %s",
                   dtype_name(zp->dtype), dtype_name(x->dtype));
  return SMELT_OK;
}

static smelt_status dequant_run(op_ctx *c) {
  TRY(dequant_check(c));
  const tensor *x = c->in[0], *zp = op_in(c, 2);
  q_layout l;
  TRY(q_layout_make(c, x, c->in[1], "input 1 (x_scale)", &l));
  if (zp) {
    q_layout lz;
    TRY(q_layout_make(c, x, zp, "input 2 (x_zero_point)", &lz));
    if (lz.mode != l.mode)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "x_zero_point and x_scale have different shapes");
  }
  float sv, zv;
  if (c->out[0]->dtype == SMELT_F32 && per_tensor_q8(c, c->in[1], zp, x->dtype, &sv, &zv)) { /* as quant_run */
    dynq_dequant(isa_active(), tensor_numel(x), x->data, x->dtype == SMELT_I8, zv, sv, c->out[0]->data);
    return SMELT_OK;
  }
  /* f32 arithmetic unless the scale is f64 */
  smelt_dtype work = c->in[1]->dtype == SMELT_F64 ? SMELT_F64 : SMELT_F32;
  double *scale = NULL, *zpv = NULL, *v = NULL;
  smelt_status st = quant_params(c->in[1], &scale);
  if (!st && zp) st = quant_params(zp, &zpv);
  if (!st && zp && is_float8(x->dtype)) st = quant_check_f8_zp(zpv, tensor_numel(zp));
  if (!st) st = nn_alloc((void **)&v, l.inner ? l.inner : 1, sizeof(double), "row");
  cvt_opts co = {false, CVT_ROUND_UP};
  for (int64_t o = 0; !st && o < l.outer; o++)
    for (int64_t d = 0; d < l.D; d++) {
      int64_t row = (o * l.D + d) * l.inner;
      cvt_load_f64_at(x->dtype, x->data, row, 1, l.inner, v);
      for (int64_t i = 0; i < l.inner; i++) {
        int64_t k = q_index(&l, o, d, i);
        v[i] = nn_round_to(work, (v[i] - (zpv ? zpv[k] : 0)) * scale[k]);
      }
      cvt_store_f64_at(c->out[0]->dtype, v, l.inner, c->out[0]->data, row, &co);
    }
  free(scale);
  free(zpv);
  free(v);
  return st;
}

/* ---- DynamicQuantizeLinear ---- */

static smelt_status dyn_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "x"));
  op_set_out(c, 0, SMELT_U8, c->in[0]->rank, c->in[0]->dims);
  op_set_out(c, 1, SMELT_F32, 0, NULL);
  op_set_out(c, 2, SMELT_U8, 0, NULL);
  return SMELT_OK;
}

/* Follows the ONNX reference in f32: the range always includes 0. */
static smelt_status dyn_run(op_ctx *c) {
  const tensor *x = c->in[0];
  int64_t n = tensor_numel(x);
  float *xv;
  TRY(nn_f32_acquire(x, &xv));
  float mx = 0, mn = 0;
  uint8_t *y = c->out[0]->data;
  /* the vector loops (kernels/dynq.h) when the op has a cache (not on
   * device cpu-ref): the same bytes */
  if (c->cache) dynq_range(isa_active(), n, xv, &mn, &mx);
  else
    for (int64_t i = 0; i < n; i++) {
      if (xv[i] > mx) mx = xv[i];
      if (xv[i] < mn) mn = xv[i];
    }
  float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
  float zp_f = 0.0f - mn / scale;
  double zp = (double)q_round_clamp(zp_f, 0, 255);
  if (c->cache) dynq_apply(isa_active(), n, xv, scale, (float)zp, false, y);
  else
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)q_round_clamp(nearbyintf(xv[i] / scale) + zp, 0, 255);
  nn_f32_release(x, xv);
  double sd = scale;
  cvt_store_f64(SMELT_F32, &sd, 1, c->out[1]->data, false);
  ((uint8_t *)c->out[2]->data)[0] = (uint8_t)zp;
  return SMELT_OK;
}

const op_def op_family_quantize[] = {
    {"QuantizeLinear", "", 2, 3, 1, 1, quant_infer, quant_run, false},
    {"DequantizeLinear", "", 2, 3, 1, 1, dequant_infer, dequant_run, false},
    {"DynamicQuantizeLinear", "", 1, 1, 3, 3, dyn_infer, dyn_run, false},
    {0}};
