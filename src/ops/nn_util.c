/* Shared helpers of the neural-network op families (see nn_util.h). */
#include "ops/nn_util.h"

#include <stdlib.h>
#include <string.h>

#include "util/bufcache.h"
#include "util/err.h"
#include "util/quote.h"

/* ---- dtypes and checks ---- */

bool nn_is_float(smelt_dtype t) {
  return t == SMELT_F16 || t == SMELT_BF16 || t == SMELT_F32 || t == SMELT_F64;
}

smelt_status nn_check_float(op_ctx *c, int i, const char *name) {
  const tensor *t = op_in(c, i);
  if (!t || nn_is_float(t->dtype) || (c->static_infer && t->dtype == SMELT_UNDEFINED))
    return SMELT_OK;
  return err_set(SMELT_ERR_UNSUPPORTED, "input %d (%s) has type %s, expected a float type", i, name,
                 dtype_name(t->dtype));
}

smelt_status nn_check_same_dtype(op_ctx *c, int i, const char *ni, int j, const char *nj) {
  const tensor *a = op_in(c, i), *b = op_in(c, j);
  if (!a || !b || a->dtype == SMELT_UNDEFINED || b->dtype == SMELT_UNDEFINED ||
      a->dtype == b->dtype)
    return SMELT_OK;
  return err_set(SMELT_ERR_INVALID_MODEL, "input %d (%s) has type %s, but input %d (%s) has %s", i,
                 ni, dtype_name(a->dtype), j, nj, dtype_name(b->dtype));
}

smelt_status nn_check_rank(op_ctx *c, int i, const char *name, int rank) {
  const tensor *t = op_in(c, i);
  if (!t || t->rank < 0 || t->rank == rank) return SMELT_OK;
  return err_set(SMELT_ERR_INVALID_MODEL, "input %d (%s) has rank %d, expected %d", i, name,
                 t->rank, rank);
}

void nn_out_unknown(op_ctx *c, int i, smelt_dtype dt) {
  c->out[i]->dtype = dt;
  c->out[i]->rank = -1;
}

int64_t nn_prod(const int64_t *dims, int begin, int end) {
  return end > begin ? shape_numel(end - begin, dims + begin) : 1;
}

/* ---- working precision ---- */

#define NN_CONVERT_LOOP(SRC_T, DST_T, EXPR)                               \
  do {                                                                    \
    const SRC_T *s_ = (const SRC_T *)src + off;                           \
    DST_T *d_ = dst;                                                      \
    if (stride == 1)                                                      \
      for (int64_t i_ = 0; i_ < n; i_++) { SRC_T v = s_[i_]; d_[i_] = (DST_T)(EXPR); } \
    else                                                                  \
      for (int64_t i_ = 0; i_ < n; i_++) { SRC_T v = s_[i_ * stride]; d_[i_] = (DST_T)(EXPR); } \
  } while (0)

#define NN_STORE_LOOP(DST_T, SRC_T, EXPR)                                 \
  do {                                                                    \
    DST_T *d_ = (DST_T *)base + off;                                      \
    if (stride == 1)                                                      \
      for (int64_t i_ = 0; i_ < n; i_++) { SRC_T v = src[i_]; d_[i_] = (EXPR); } \
    else                                                                  \
      for (int64_t i_ = 0; i_ < n; i_++) { SRC_T v = src[i_]; d_[i_ * stride] = (EXPR); } \
  } while (0)

void nn_load_f64(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 double *dst) {
  const void *src = base;
  switch (dt) {
    case SMELT_F32: NN_CONVERT_LOOP(float, double, v); break;
    case SMELT_F64: NN_CONVERT_LOOP(double, double, v); break;
    case SMELT_F16: NN_CONVERT_LOOP(uint16_t, double, f16_to_f32(v)); break;
    case SMELT_BF16: NN_CONVERT_LOOP(uint16_t, double, bf16_to_f32(v)); break;
    default: memset(dst, 0, sizeof(double) * (size_t)n); break;
  }
}

void nn_store_f64(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const double *src) {
  switch (dt) {
    case SMELT_F32: NN_STORE_LOOP(float, double, (float)v); break;
    case SMELT_F64: NN_STORE_LOOP(double, double, v); break;
    case SMELT_F16: NN_STORE_LOOP(uint16_t, double, f32_to_f16((float)v)); break;
    case SMELT_BF16: NN_STORE_LOOP(uint16_t, double, f32_to_bf16((float)v)); break;
    default: break;
  }
}

void nn_load_f32(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 float *dst) {
  const void *src = base;
  switch (dt) {
    case SMELT_F32: NN_CONVERT_LOOP(float, float, v); break;
    case SMELT_F64: NN_CONVERT_LOOP(double, float, v); break;
    case SMELT_F16: NN_CONVERT_LOOP(uint16_t, float, f16_to_f32(v)); break;
    case SMELT_BF16: NN_CONVERT_LOOP(uint16_t, float, bf16_to_f32(v)); break;
    default: memset(dst, 0, sizeof(float) * (size_t)n); break;
  }
}

void nn_store_f32(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const float *src) {
  switch (dt) {
    case SMELT_F32: NN_STORE_LOOP(float, float, v); break;
    case SMELT_F64: NN_STORE_LOOP(double, float, (double)v); break;
    case SMELT_F16: NN_STORE_LOOP(uint16_t, float, f32_to_f16(v)); break;
    case SMELT_BF16: NN_STORE_LOOP(uint16_t, float, f32_to_bf16(v)); break;
    default: break;
  }
}

void nn_load_i64(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 int64_t *dst) {
  const void *src = base;
  switch (dt) {
    case SMELT_I8: NN_CONVERT_LOOP(int8_t, int64_t, v); break;
    case SMELT_U8: NN_CONVERT_LOOP(uint8_t, int64_t, v); break;
    case SMELT_BOOL: NN_CONVERT_LOOP(uint8_t, int64_t, v != 0); break;
    case SMELT_I16: NN_CONVERT_LOOP(int16_t, int64_t, v); break;
    case SMELT_U16: NN_CONVERT_LOOP(uint16_t, int64_t, v); break;
    case SMELT_I32: NN_CONVERT_LOOP(int32_t, int64_t, v); break;
    case SMELT_U32: NN_CONVERT_LOOP(uint32_t, int64_t, v); break;
    case SMELT_I64: NN_CONVERT_LOOP(int64_t, int64_t, v); break;
    case SMELT_U64: NN_CONVERT_LOOP(uint64_t, int64_t, v); break;
    default: memset(dst, 0, sizeof(int64_t) * (size_t)n); break;
  }
}

void nn_store_i64(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const int64_t *src) {
  switch (dt) {
    case SMELT_I8: NN_STORE_LOOP(int8_t, int64_t, (int8_t)(uint8_t)v); break;
    case SMELT_U8: NN_STORE_LOOP(uint8_t, int64_t, (uint8_t)v); break;
    case SMELT_BOOL: NN_STORE_LOOP(uint8_t, int64_t, v != 0); break;
    case SMELT_I16: NN_STORE_LOOP(int16_t, int64_t, (int16_t)(uint16_t)v); break;
    case SMELT_U16: NN_STORE_LOOP(uint16_t, int64_t, (uint16_t)v); break;
    case SMELT_I32: NN_STORE_LOOP(int32_t, int64_t, (int32_t)(uint32_t)v); break;
    case SMELT_U32: NN_STORE_LOOP(uint32_t, int64_t, (uint32_t)v); break;
    case SMELT_I64: NN_STORE_LOOP(int64_t, int64_t, v); break;
    case SMELT_U64: NN_STORE_LOOP(uint64_t, int64_t, (uint64_t)v); break;
    default: break;
  }
}

double nn_round_to(smelt_dtype dt, double v) {
  switch (dt) {
    case SMELT_F32: return (float)v;
    case SMELT_F16: return f16_to_f32(f32_to_f16((float)v));
    case SMELT_BF16: return bf16_to_f32(f32_to_bf16((float)v));
    default: return v;
  }
}

smelt_status nn_alloc(void **p, int64_t count, size_t size, const char *what) {
  *p = NULL;
  if (count < 0 || (size && (uint64_t)count > (SIZE_MAX >> 4) / size))
    return err_set(SMELT_ERR_NOMEM, "%s: %lld elements is too large", what, (long long)count);
  size_t nb = (size_t)count * size;
  if (!bufcache_admit(nb)) return err_nomem(what, nb); /* over the session's memory budget */
  *p = malloc(nb ? nb : 1);
  if (!*p) return err_nomem(what, nb);
  return SMELT_OK;
}

smelt_status nn_f32_acquire(const tensor *t, float **p) {
  if (t->dtype == SMELT_F32) {
    *p = t->data;
    return SMELT_OK;
  }
  int64_t n = tensor_numel(t);
  TRY(nn_alloc((void **)p, n, sizeof(float), "f32 working copy"));
  nn_load_f32(t->dtype, t->data, 0, 1, n, *p);
  return SMELT_OK;
}

void nn_f32_release(const tensor *t, float *p) {
  if (t->dtype != SMELT_F32) free(p);
}

smelt_status nn_f32_out(tensor *t, float **p) {
  if (t->dtype == SMELT_F32) {
    *p = t->data;
    return SMELT_OK;
  }
  return nn_alloc((void **)p, tensor_numel(t), sizeof(float), "f32 output scratch");
}

void nn_f32_commit(tensor *t, float *p) {
  if (t->dtype == SMELT_F32) return;
  nn_store_f32(t->dtype, t->data, 0, 1, tensor_numel(t), p);
  free(p);
}

/* ---- windows ---- */

static smelt_status ints_attr(op_ctx *c, const char *name, int want, int64_t dflt, int64_t min,
                              int64_t *out) {
  int n;
  const int64_t *v = ir_attr_ints(c->node, name, &n);
  if (!v) {
    for (int i = 0; i < want; i++) out[i] = dflt;
    return SMELT_OK;
  }
  if (n != want)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %d values, expected %d", name, n,
                   want);
  for (int i = 0; i < n; i++) {
    if (v[i] < min || v[i] > INT32_MAX) /* keeps (k-1)*d and in+pads far from overflow */
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s[%d] = %lld is out of range", name, i,
                     (long long)v[i]);
    out[i] = v[i];
  }
  return SMELT_OK;
}

static smelt_status parse_auto_pad(op_ctx *c, nn_auto_pad *ap) {
  const char *s = ir_attr_string(c->node, "auto_pad", "NOTSET");
  if (!strcmp(s, "NOTSET") || !*s) *ap = NN_NOTSET;
  else if (!strcmp(s, "SAME_UPPER")) *ap = NN_SAME_UPPER;
  else if (!strcmp(s, "SAME_LOWER")) *ap = NN_SAME_LOWER;
  else if (!strcmp(s, "VALID")) *ap = NN_VALID;
  else return err_set(SMELT_ERR_INVALID_MODEL, "auto_pad %s is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", q(s));
  return SMELT_OK;
}

smelt_status nn_window_attrs(op_ctx *c, int nsp, const int64_t *kernel, nn_window *w) {
  memset(w, 0, sizeof *w);
  if (nsp < 1 || nsp > NN_MAX_SPATIAL)
    return err_set(SMELT_ERR_INVALID_MODEL, "%d spatial dims, expected 1..%d", nsp, NN_MAX_SPATIAL);
  w->nsp = nsp;
  int nk;
  const int64_t *ks = ir_attr_ints(c->node, "kernel_shape", &nk);
  if (!ks && !kernel) return err_set(SMELT_ERR_INVALID_MODEL, "attribute kernel_shape is required");
  if (ks) {
    TRY(ints_attr(c, "kernel_shape", nsp, 1, 1, w->kernel));
    for (int i = 0; kernel && i < nsp; i++)
      if (dim_known(kernel[i]) && kernel[i] != w->kernel[i])
        return err_set(SMELT_ERR_INVALID_MODEL,
                       "kernel_shape[%d] = %lld does not match the weight's spatial dim %lld", i,
                       (long long)w->kernel[i], (long long)kernel[i]);
  } else {
    memcpy(w->kernel, kernel, sizeof(int64_t) * (size_t)nsp);
  }
  TRY(ints_attr(c, "strides", nsp, 1, 1, w->stride));
  TRY(ints_attr(c, "dilations", nsp, 1, 1, w->dil));
  int64_t pads[2 * NN_MAX_SPATIAL];
  TRY(ints_attr(c, "pads", 2 * nsp, 0, 0, pads));
  for (int i = 0; i < nsp; i++) {
    w->pad_lo[i] = pads[i];
    w->pad_hi[i] = pads[nsp + i];
  }
  return parse_auto_pad(c, &w->auto_pad);
}

smelt_status nn_window_out(nn_window *w, const int64_t *in, bool ceil_mode) {
  for (int i = 0; i < w->nsp; i++) {
    w->in[i] = in[i];
    int64_t k = w->kernel[i], s = w->stride[i];
    if (!dim_known(in[i]) || !dim_known(k)) {
      w->out[i] = DIM_UNKNOWN;
      continue;
    }
    int64_t dk = (k - 1) * w->dil[i] + 1; /* the dilated kernel's extent */
    int64_t o;
    switch (w->auto_pad) {
      case NN_SAME_UPPER:
      case NN_SAME_LOWER: {
        o = (in[i] + s - 1) / s;
        int64_t total = (o - 1) * s + dk - in[i];
        if (total < 0) total = 0;
        int64_t small = total / 2;
        w->pad_lo[i] = w->auto_pad == NN_SAME_UPPER ? small : total - small;
        w->pad_hi[i] = total - w->pad_lo[i];
        break;
      }
      case NN_VALID:
        w->pad_lo[i] = w->pad_hi[i] = 0;
        /* fallthrough */
      default: {
        int64_t span = in[i] + w->pad_lo[i] + w->pad_hi[i] - dk;
        if (span < 0)
          return err_set(SMELT_ERR_INVALID_ARGUMENT,
                         "spatial dim %d: input %lld with pads %lld+%lld is smaller than the "
                         "dilated kernel %lld",
                         i, (long long)in[i], (long long)w->pad_lo[i], (long long)w->pad_hi[i],
                         (long long)dk);
        o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        if (ceil_mode && (o - 1) * s >= in[i] + w->pad_lo[i]) o--;
      }
    }
    w->out[i] = o;
  }
  return SMELT_OK;
}

int64_t nn_window_out_size(const nn_window *w) { return nn_prod(w->out, 0, w->nsp); }
int64_t nn_window_kernel_size(const nn_window *w) { return nn_prod(w->kernel, 0, w->nsp); }

/* ---- reductions ---- */

static smelt_status axes_to_mask(const int64_t *axes, int n, int rank, bool *mask) {
  for (int i = 0; i < rank; i++) mask[i] = false;
  for (int i = 0; i < n; i++) {
    int a;
    TRY(op_axis(axes[i], rank, "axes value", &a));
    if (mask[a]) return err_set(SMELT_ERR_INVALID_MODEL, "axis %d appears twice in axes", a);
    mask[a] = true;
  }
  return SMELT_OK;
}

smelt_status nn_reduce_axes(op_ctx *c, int rank, bool axes_from_input, bool *mask, bool *known) {
  *known = true;
  int n = 0;
  int64_t axes[SMELT_MAX_RANK];
  if (axes_from_input) {
    tensor *t = op_in(c, 1);
    if (t) {
      if (t->dtype != SMELT_I64 && t->dtype != SMELT_UNDEFINED)
        return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (axes) has type %s, expected int64",
                       dtype_name(t->dtype));
      if (t->rank > 1)
        return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (axes) has rank %d, expected 1", t->rank);
      if (!t->data) {
        *known = false;
        return SMELT_OK;
      }
      int64_t cnt = tensor_numel(t);
      if (cnt > rank)
        return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (axes) has %lld values for rank %d",
                       (long long)cnt, rank);
      n = (int)cnt;
      memcpy(axes, t->data, sizeof(int64_t) * (size_t)n);
    }
  } else {
    const int64_t *a = ir_attr_ints(c->node, "axes", &n);
    if (n > rank)
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute axes has %d values for rank %d", n, rank);
    if (n) memcpy(axes, a, sizeof(int64_t) * (size_t)n);
  }
  if (n == 0) {
    bool noop = op_attr_int(c, "noop_with_empty_axes", 0) != 0;
    for (int i = 0; i < rank; i++) mask[i] = !noop;
    return SMELT_OK;
  }
  return axes_to_mask(axes, n, rank, mask);
}

void nn_split_axis(const tensor *t, int axis, bool to_end, int64_t *outer, int64_t *n,
                   int64_t *inner) {
  *outer = nn_prod(t->dims, 0, axis);
  if (to_end) {
    *n = nn_prod(t->dims, axis, t->rank);
    *inner = 1;
  } else {
    *n = t->dims[axis];
    *inner = nn_prod(t->dims, axis + 1, t->rank);
  }
}

smelt_status nn_check_conv_operands(op_ctx *c, const smelt_dtype *types, int64_t *group) {
  const tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, types));
  TRY(nn_check_same_dtype(c, 1, "W", 0, "X"));
  TRY(nn_check_same_dtype(c, 2, "B", 0, "X"));
  if (x->rank >= 0 && x->rank < 3)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 3", x->rank);
  if (x->rank >= 0) TRY(nn_check_rank(c, 1, "W", x->rank));
  TRY(nn_check_rank(c, 2, "B", 1));
  *group = op_attr_int(c, "group", 1);
  if (*group < 1) return err_set(SMELT_ERR_INVALID_MODEL, "group %lld must be >= 1", (long long)*group);
  return SMELT_OK;
}
