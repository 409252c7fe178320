/* Shape family: ops that compute or change a shape and copy bytes unchanged
 * (Shape Size Reshape Flatten Squeeze Unsqueeze Identity Dropout) and ops that
 * make a tensor from attributes or scalars (Constant ConstantOfShape Range
 * EyeLike).  The byte-copying ops keep the element order, so they take packed
 * sub-byte tensors as they are (su_check_copyable). */
#include <math.h>
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

/* Reshape-like ops: the output holds the input's bytes under a new shape. */
static smelt_status run_copy(op_ctx *c) {
  tensor *x = c->in[0], *y = c->out[0];
  if (x->nbytes != y->nbytes)
    return err_set(SMELT_ERR_INTERNAL, "output has %zu bytes, input %zu", y->nbytes, x->nbytes);
  if (x->nbytes) memcpy(y->data, x->data, x->nbytes);
  return SMELT_OK;
}

/* ---- Identity, Dropout ---- */

static smelt_status identity_infer(op_ctx *c) {
  tensor *x = c->in[0];
  if (x->kind != TENSOR_KIND_TENSOR) {
    /* Sequences and optionals are cloned whole in run; rank 0 keeps the
     * executor's shape check happy and no buffer is allocated for them. */
    op_set_out(c, 0, x->dtype, 0, NULL);
    c->out[0]->kind = x->kind;
    return SMELT_OK;
  }
  TRY(su_check_copyable(x, 0));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status identity_run(op_ctx *c) {
  if (c->in[0]->kind != TENSOR_KIND_TENSOR) {
    tensor_release(c->out[0]);
    return tensor_clone(c->out[0], c->in[0]);
  }
  return run_copy(c);
}

/* Inference-only Dropout: training with a nonzero ratio needs random masks,
 * which smelt does not produce.  Before opset 12 there is no training input;
 * like other runtimes, smelt treats those nodes (is_test or not) as inference. */
static smelt_status dropout_check_mode(op_ctx *c) {
  bool training = false;
  tensor *tm = op_in(c, 2), *ratio = op_in(c, 1);
  if (c->opset >= 12 && tm) {
    if (tm->dtype != SMELT_BOOL && tm->dtype != SMELT_UNDEFINED)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (training_mode) has type %s, expected bool",
                     dtype_name(tm->dtype));
    if (!tm->data) return SMELT_OK; /* decided at run time */
    if (tensor_numel(tm) != 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (training_mode) must hold one value");
    training = ((const uint8_t *)tm->data)[0] != 0;
  }
  if (!training) return SMELT_OK;
  double r = 0.5;
  if (ratio) {
    if (!ratio->data) return SMELT_OK;
    if (tensor_numel(ratio) != 1 || !dtype_is_float(ratio->dtype))
      return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (ratio) must be one floating-point value");
    r = tensor_get_f64(ratio, 0);
  }
  if (r != 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "Dropout in training mode with ratio %g is not supported "
                   "(smelt runs inference only)", r);
  return SMELT_OK;
}

static smelt_status dropout_infer(op_ctx *c) {
  TRY(su_check_movable(c->in[0], 0));
  TRY(dropout_check_mode(c));
  op_out_like(c, 0, 0);
  if (c->n_out > 1) {
    tensor *x = c->in[0];
    /* The mask was a copy of the input's type before opset 10. */
    op_set_out(c, 1, c->opset < 10 ? x->dtype : SMELT_BOOL, x->rank, x->dims);
  }
  return SMELT_OK;
}

static smelt_status dropout_run(op_ctx *c) {
  TRY(run_copy(c));
  if (c->n_out > 1) {
    tensor *m = c->out[1];
    int64_t n = tensor_numel(m);
    if (m->dtype == SMELT_BOOL) memset(m->data, 1, (size_t)n);
    else
      for (int64_t i = 0; i < n; i++) tensor_set_f64(m, i, 1.0);
  }
  return SMELT_OK;
}

/* ---- Shape, Size ---- */

static void shape_range(op_ctx *c, int rank, int64_t *b, int64_t *e) {
  int64_t s = op_attr_int(c, "start", 0), en = op_attr_int(c, "end", rank);
  if (c->opset < 15) s = 0, en = rank;
  if (s < 0) s += rank;
  if (en < 0) en += rank;
  *b = s < 0 ? 0 : s > rank ? rank : s;
  *e = en < 0 ? 0 : en > rank ? rank : en;
  if (*e < *b) *e = *b;
}

static smelt_status shape_infer(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t n = DIM_UNKNOWN;
  if (x->rank >= 0) {
    int64_t b, e;
    shape_range(c, x->rank, &b, &e);
    n = e - b;
  }
  op_set_out(c, 0, SMELT_I64, 1, &n);
  return SMELT_OK;
}

static smelt_status shape_run(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t b, e;
  shape_range(c, x->rank, &b, &e);
  int64_t *y = c->out[0]->data;
  for (int64_t i = b; i < e; i++) y[i - b] = x->dims[i];
  return SMELT_OK;
}

static smelt_status size_infer(op_ctx *c) {
  op_set_out(c, 0, SMELT_I64, 0, NULL);
  return SMELT_OK;
}

static smelt_status size_run(op_ctx *c) {
  *(int64_t *)c->out[0]->data = tensor_numel(c->in[0]);
  return SMELT_OK;
}

/* ---- Reshape ---- */

/* The -1 entry of a reshape target: input elements over the other output
 * dims, cancelling symbols that appear on both sides ([batch,12,64] to
 * [batch,-1] gives 768).  DIM_UNKNOWN when symbols do not cancel. */
static smelt_status reshape_minus_one(const tensor *x, const int64_t *out, int n, int neg,
                                      int64_t *res) {
  *res = DIM_UNKNOWN;
  if (x->rank < 0) return SMELT_OK;
  int64_t pin = 1, pout = 1, sin[SMELT_MAX_RANK];
  int nsin = 0;
  for (int i = 0; i < x->rank; i++) {
    if (dim_known(x->dims[i])) {
      if (x->dims[i] && pin > INT64_MAX / x->dims[i])
        return err_set(SMELT_ERR_INVALID_MODEL, "input element count overflows");
      pin *= x->dims[i];
    } else {
      sin[nsin++] = x->dims[i];
    }
  }
  for (int i = 0; i < n; i++) {
    if (i == neg) continue;
    if (dim_known(out[i])) {
      if (out[i] && pout > INT64_MAX / out[i])
        return err_set(SMELT_ERR_INVALID_MODEL, "target shape element count overflows");
      pout *= out[i];
      continue;
    }
    int k = 0;
    while (k < nsin && (out[i] == DIM_UNKNOWN || sin[k] != out[i])) k++;
    if (k == nsin) return SMELT_OK;
    sin[k] = sin[--nsin];
  }
  if (pin == 0 && nsin == 0 && pout != 0) {
    *res = 0;
    return SMELT_OK;
  }
  if (pout == 0) {
    if (nsin) return SMELT_OK;
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot infer the -1 dimension: the other "
                   "dimensions of the target shape multiply to 0");
  }
  if (nsin == 0) {
    if (pin % pout)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot reshape %lld elements: not a multiple "
                     "of the other target dimensions' product %lld", (long long)pin, (long long)pout);
    *res = pin / pout;
  } else if (nsin == 1 && pin == pout) {
    *res = sin[0];
  }
  return SMELT_OK;
}

static smelt_status reshape_resolve(op_ctx *c, const int64_t *shp, int n, bool allowzero) {
  tensor *x = c->in[0];
  int64_t out[SMELT_MAX_RANK];
  int neg = -1;
  bool has_zero = false;
  for (int i = 0; i < n; i++) {
    int64_t v = shp[i];
    out[i] = v;
    if (v == -1) {
      if (neg >= 0)
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "target shape has -1 at both %d and %d", neg, i);
      neg = i;
      out[i] = DIM_UNKNOWN;
    } else if (v < -1) {
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "target shape[%d] is %lld", i, (long long)v);
    } else if (v == 0) {
      has_zero = true;
      if (!allowzero) {
        if (x->rank >= 0 && i >= x->rank)
          return err_set(SMELT_ERR_INVALID_ARGUMENT, "target shape[%d] is 0 (copy the input "
                         "dimension) but the input has rank %d", i, x->rank);
        out[i] = x->rank >= 0 ? x->dims[i] : DIM_UNKNOWN;
      }
    }
  }
  if (allowzero && has_zero && neg >= 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "target shape has both 0 and -1 with allowzero=1");
  if (neg >= 0) TRY(reshape_minus_one(x, out, n, neg, &out[neg]));
  int64_t ni = x->rank >= 0 ? tensor_numel(x) : -1, no = shape_numel(n, out);
  if (ni >= 0 && no >= 0 && ni != no) {
    char a[160], b[160];
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot reshape %s (%lld elements) to %s",
                   shape_str(a, sizeof a, x->rank, x->dims, NULL), (long long)ni,
                   shape_str(b, sizeof b, n, shp, NULL));
  }
  op_set_out(c, 0, x->dtype, n, out);
  return SMELT_OK;
}

static smelt_status reshape_infer(op_ctx *c) {
  TRY(su_check_copyable(c->in[0], 0));
  int64_t shp[SMELT_MAX_RANK];
  int n;
  bool allowzero = c->opset >= 14 && op_attr_int(c, "allowzero", 0) != 0;
  if (c->opset < 5) {
    const int64_t *a = ir_attr_ints(c->node, "shape", &n);
    if (n > SMELT_MAX_RANK)
      return err_set(SMELT_ERR_UNSUPPORTED, "attribute shape has %d entries, at most %d", n,
                     SMELT_MAX_RANK);
    if (n) memcpy(shp, a, sizeof *shp * (size_t)n);
    return reshape_resolve(c, shp, n, false);
  }
  tensor *s = op_in(c, 1);
  if (!s) return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (shape) is required");
  TRY(su_check_i64(s, "input 1 (shape)"));
  if (s->rank != 1 && s->rank >= 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (shape) has rank %d, expected 1", s->rank);
  if (!op_value_known(c, 1)) {
    if (s->rank == 1 && dim_known(s->dims[0]) && s->dims[0] <= SMELT_MAX_RANK) {
      int64_t d[SMELT_MAX_RANK];
      for (int i = 0; i < s->dims[0]; i++) d[i] = DIM_UNKNOWN;
      op_set_out(c, 0, c->in[0]->dtype, (int)s->dims[0], d);
    } else {
      su_out_unknown(c, 0, c->in[0]->dtype);
    }
    return SMELT_OK;
  }
  TRY(su_read_ints(s, "input 1 (shape)", SMELT_MAX_RANK, shp, &n));
  return reshape_resolve(c, shp, n, allowzero);
}

/* ---- Flatten ---- */

static smelt_status flatten_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_copyable(x, 0));
  int64_t axis = op_attr_int(c, "axis", 1), d[2] = {DIM_UNKNOWN, DIM_UNKNOWN};
  if (x->rank >= 0) {
    if (axis < -x->rank || axis > x->rank)
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute axis %lld is out of range for rank %d",
                     (long long)axis, x->rank);
    if (axis < 0) axis += x->rank;
    d[0] = su_dims_product(x->dims, 0, (int)axis);
    d[1] = su_dims_product(x->dims, (int)axis, x->rank);
  }
  op_set_out(c, 0, x->dtype, 2, d);
  return SMELT_OK;
}

/* ---- Squeeze, Unsqueeze ---- */

/* Axes from the attribute (before opset 13) or input 1.  *known false when the
 * input's value is not known yet; *present false when no axes are given. */
static smelt_status read_axes(op_ctx *c, int64_t *axes, int *n, bool *present, bool *known) {
  *known = true;
  *present = true;
  if (c->opset < 13) {
    const int64_t *a = ir_attr_ints(c->node, "axes", n);
    *present = a != NULL;
    if (*n > SMELT_MAX_RANK)
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute axes has %d entries", *n);
    if (*n) memcpy(axes, a, sizeof *axes * (size_t)*n);
    return SMELT_OK;
  }
  tensor *t = op_in(c, 1);
  *n = 0;
  if (!t) {
    *present = false;
    return SMELT_OK;
  }
  TRY(su_check_i64(t, "input 1 (axes)"));
  if (!t->data) {
    *known = false;
    *n = t->rank == 1 && dim_known(t->dims[0]) && t->dims[0] <= SMELT_MAX_RANK ? (int)t->dims[0]
                                                                               : -1;
    return SMELT_OK;
  }
  return su_read_ints(t, "input 1 (axes)", SMELT_MAX_RANK, axes, n);
}

static smelt_status squeeze_all_ones(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t d[SMELT_MAX_RANK];
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    if (!dim_known(x->dims[i])) {
      su_out_unknown(c, 0, x->dtype); /* might be 1 or not */
      return SMELT_OK;
    }
    if (x->dims[i] != 1) d[r++] = x->dims[i];
  }
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status squeeze_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_copyable(x, 0));
  int64_t axes[SMELT_MAX_RANK], d[SMELT_MAX_RANK];
  int n;
  bool present, known;
  TRY(read_axes(c, axes, &n, &present, &known));
  if (x->rank < 0 || (known && !present && x->rank < 0)) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  /* An empty axes tensor squeezes every size-1 axis, as onnxruntime does. */
  if (!present || (known && n == 0)) return squeeze_all_ones(c);
  if (!known) {
    if (n < 0 || n > x->rank) {
      su_out_unknown(c, 0, x->dtype);
      return SMELT_OK;
    }
    for (int i = 0; i < x->rank - n; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, x->rank - n, d);
    return SMELT_OK;
  }
  TRY(su_norm_axes(axes, n, x->rank, "axes"));
  bool drop[SMELT_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) {
    int64_t v = x->dims[axes[i]];
    if (dim_known(v) && v != 1)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot squeeze axis %lld of size %lld",
                     (long long)axes[i], (long long)v);
    drop[axes[i]] = true;
  }
  int r = 0;
  for (int i = 0; i < x->rank; i++)
    if (!drop[i]) d[r++] = x->dims[i];
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status unsqueeze_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_copyable(x, 0));
  int64_t axes[SMELT_MAX_RANK], d[SMELT_MAX_RANK];
  int n;
  bool present, known;
  TRY(read_axes(c, axes, &n, &present, &known));
  if (!present) return err_set(SMELT_ERR_INVALID_MODEL, "axes are required");
  if (x->rank < 0 || n < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int r = x->rank + n;
  if (r > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, SMELT_MAX_RANK);
  if (!known) {
    for (int i = 0; i < r; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, r, d);
    return SMELT_OK;
  }
  TRY(su_norm_axes(axes, n, r, "axes"));
  bool ins[SMELT_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) ins[axes[i]] = true;
  for (int i = 0, k = 0; i < r; i++) d[i] = ins[i] ? 1 : x->dims[k++];
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

/* ---- Constant ---- */

/* The one value attribute of a Constant node, as a tensor view or an error. */
static smelt_status constant_value(op_ctx *c, tensor *v) {
  const ir_attr *found = NULL;
  for (int i = 0; i < c->node->n_attrs; i++) {
    const ir_attr *a = &c->node->attrs[i];
    if (strncmp(a->name, "value", 5) && strcmp(a->name, "sparse_value")) continue;
    if (found)
      return err_set(SMELT_ERR_INVALID_MODEL, "has both attributes %s and %s", q(found->name),
                     q(a->name));
    found = a;
  }
  if (!found) return err_set(SMELT_ERR_INVALID_MODEL, "has no value attribute");
  const char *nm = found->name;
  if (!strcmp(nm, "value") && found->type == IR_ATTR_TENSOR && found->t) {
    *v = *found->t;
    if (dtype_bits(v->dtype) == 0) /* packed types are copied as bytes */
      return err_set(SMELT_ERR_UNSUPPORTED, "constant of type %s is not supported",
                     dtype_name(v->dtype));
    v->owns_data = false;
  } else if (!strcmp(nm, "value_float") && found->type == IR_ATTR_FLOAT) {
    tensor_view(v, SMELT_F32, 0, NULL, (void *)&found->f);
  } else if (!strcmp(nm, "value_int") && found->type == IR_ATTR_INT) {
    tensor_view(v, SMELT_I64, 0, NULL, (void *)&found->i);
  } else if (!strcmp(nm, "value_floats") && found->type == IR_ATTR_FLOATS) {
    int64_t n = found->n;
    tensor_view(v, SMELT_F32, 1, &n, found->floats);
  } else if (!strcmp(nm, "value_ints") && found->type == IR_ATTR_INTS) {
    int64_t n = found->n;
    tensor_view(v, SMELT_I64, 1, &n, found->ints);
  } else if (!strcmp(nm, "sparse_value") || !strcmp(nm, "value_string") ||
             !strcmp(nm, "value_strings")) {
    return err_set(SMELT_ERR_UNSUPPORTED, "Constant with attribute %s is not supported", nm);
  } else {
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has the wrong kind (%d)", nm,
                   (int)found->type);
  }
  return SMELT_OK;
}

static smelt_status constant_infer(op_ctx *c) {
  tensor v;
  TRY(constant_value(c, &v));
  op_set_out(c, 0, v.dtype, v.rank, v.dims);
  return SMELT_OK;
}

static smelt_status constant_run(op_ctx *c) {
  tensor v;
  TRY(constant_value(c, &v));
  if (v.nbytes != c->out[0]->nbytes || (v.nbytes && !v.data))
    return err_set(SMELT_ERR_INVALID_MODEL, "constant value holds %zu bytes, its shape needs %zu",
                   v.nbytes, c->out[0]->nbytes);
  if (v.nbytes) memcpy(c->out[0]->data, v.data, v.nbytes);
  return SMELT_OK;
}

/* ---- ConstantOfShape ---- */

static smelt_status cos_value(op_ctx *c, const tensor **v) {
  const ir_attr *a = ir_attr_find(c->node, "value");
  *v = NULL;
  if (!a) return SMELT_OK;
  if (a->type != IR_ATTR_TENSOR || !a->t)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute value must be a tensor");
  if (tensor_numel(a->t) != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute value must hold one element");
  if (dtype_size(a->t->dtype) == 0 || a->t->nbytes != dtype_size(a->t->dtype) || !a->t->data)
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute value of type %s is not supported",
                   dtype_name(a->t->dtype));
  *v = a->t;
  return SMELT_OK;
}

static smelt_status cos_infer(op_ctx *c) {
  const tensor *v;
  TRY(cos_value(c, &v));
  smelt_dtype dt = v ? v->dtype : SMELT_F32;
  tensor *s = c->in[0];
  TRY(su_check_i64(s, "input 0 (shape)"));
  if (s->rank > 1) return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (shape) must be 1-D");
  int64_t d[SMELT_MAX_RANK];
  int n;
  if (!op_value_known(c, 0)) {
    if (s->rank == 1 && dim_known(s->dims[0]) && s->dims[0] <= SMELT_MAX_RANK) {
      for (int i = 0; i < s->dims[0]; i++) d[i] = DIM_UNKNOWN;
      op_set_out(c, 0, dt, (int)s->dims[0], d);
    } else {
      su_out_unknown(c, 0, dt);
    }
    return SMELT_OK;
  }
  TRY(su_read_ints(s, "input 0 (shape)", SMELT_MAX_RANK, d, &n));
  for (int i = 0; i < n; i++)
    if (d[i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "shape[%d] is %lld", i, (long long)d[i]);
  if (shape_numel(n, d) < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "shape's element count overflows");
  op_set_out(c, 0, dt, n, d);
  return SMELT_OK;
}

static smelt_status cos_run(op_ctx *c) {
  const tensor *v;
  TRY(cos_value(c, &v));
  tensor *y = c->out[0];
  if (!v) { /* no value: float 0 */
    memset(y->data, 0, y->nbytes);
    return SMELT_OK;
  }
  size_t es = dtype_size(v->dtype);
  char *p = y->data;
  for (size_t off = 0; off < y->nbytes; off += es) memcpy(p + off, v->data, es);
  return SMELT_OK;
}

/* ---- Range ---- */

/* Outputs beyond this many elements are treated as a malformed model rather
 * than attempted. */
#define RANGE_MAX_ELEMS ((int64_t)1 << 31)

static const smelt_dtype range_types[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I8,
                                          SMELT_I16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_U16,
                                          SMELT_U32, SMELT_U64, SMELT_UNDEFINED};

/* Exact integer count of ceil((limit - start) / delta), clamped at 0. */
static smelt_status range_count_int(int64_t st, int64_t li, int64_t de, int64_t *n) {
  if (de == 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "Range delta is 0");
  if ((de > 0 && li <= st) || (de < 0 && li >= st)) {
    *n = 0;
    return SMELT_OK;
  }
  uint64_t diff = de > 0 ? (uint64_t)li - (uint64_t)st : (uint64_t)st - (uint64_t)li;
  uint64_t ad = de > 0 ? (uint64_t)de : (uint64_t)0 - (uint64_t)de;
  uint64_t q = diff / ad + (diff % ad != 0);
  if (q > (uint64_t)RANGE_MAX_ELEMS)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "Range would produce %llu elements",
                   (unsigned long long)q);
  *n = (int64_t)q;
  return SMELT_OK;
}

static smelt_status range_count(const tensor *s, const tensor *l, const tensor *d, int64_t *n) {
  if (!dtype_is_float(s->dtype))
    return range_count_int(tensor_get_i64(s, 0), tensor_get_i64(l, 0), tensor_get_i64(d, 0), n);
  double st = tensor_get_f64(s, 0), li = tensor_get_f64(l, 0), de = tensor_get_f64(d, 0);
  /* The difference is taken in the tensor's own precision, as the spec does. */
  double diff = s->dtype == SMELT_F64 ? li - st : (double)((float)li - (float)st);
  double q = ceil(diff / de);
  if (isnan(q) || de == 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "Range(%g, %g, %g) has no finite length", st, li, de);
  if (q > (double)RANGE_MAX_ELEMS)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "Range would produce %g elements", q);
  *n = q > 0 ? (int64_t)q : 0;
  return SMELT_OK;
}

static smelt_status range_infer(op_ctx *c) {
  for (int i = 0; i < 3; i++) {
    tensor *t = c->in[i];
    TRY(op_check_dtype(c, i, range_types));
    if (t->dtype != c->in[0]->dtype)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d has type %s, input 0 %s", i,
                     dtype_name(t->dtype), dtype_name(c->in[0]->dtype));
    if (t->rank > 0 && !(t->rank == 1 && t->dims[0] == 1))
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d must be a scalar", i);
  }
  int64_t n = DIM_UNKNOWN;
  if (op_value_known(c, 0) && op_value_known(c, 1) && op_value_known(c, 2))
    TRY(range_count(c->in[0], c->in[1], c->in[2], &n));
  op_set_out(c, 0, c->in[0]->dtype, 1, &n);
  return SMELT_OK;
}

static smelt_status range_run(op_ctx *c) {
  tensor *y = c->out[0], *s = c->in[0], *d = c->in[2];
  int64_t n = y->dims[0];
  if (dtype_is_float(y->dtype)) {
    double st = tensor_get_f64(s, 0), de = tensor_get_f64(d, 0);
    for (int64_t i = 0; i < n; i++) tensor_set_f64(y, i, st + (double)i * de);
    return SMELT_OK;
  }
  /* Unsigned arithmetic: the sequence stays inside [start, limit) so the
   * wrapped result is the exact value. */
  uint64_t st = (uint64_t)tensor_get_i64(s, 0), de = (uint64_t)tensor_get_i64(d, 0);
  size_t es = dtype_size(y->dtype);
  char *p = y->data;
  for (int64_t i = 0; i < n; i++) {
    uint64_t v = st + (uint64_t)i * de;
    /* Little-endian: the low es bytes are the value in the narrower type. */
    memcpy(p + (size_t)i * es, &v, es);
  }
  return SMELT_OK;
}

/* ---- EyeLike ---- */

static const smelt_dtype eye_types[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I8,
                                        SMELT_I16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_U16,
                                        SMELT_U32, SMELT_U64, SMELT_BOOL, SMELT_UNDEFINED};

static smelt_status eyelike_infer(op_ctx *c) {
  tensor *x = c->in[0];
  smelt_dtype dt = (smelt_dtype)op_attr_int(c, "dtype", x->dtype);
  const smelt_dtype *a = eye_types;
  while (*a && *a != dt) a++;
  if (!*a && dt != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_UNSUPPORTED, "output type %s is not supported", dtype_name(dt));
  if (x->rank >= 0 && x->rank != 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 has rank %d, expected 2", x->rank);
  int64_t d[2] = {DIM_UNKNOWN, DIM_UNKNOWN};
  if (x->rank == 2) d[0] = x->dims[0], d[1] = x->dims[1];
  op_set_out(c, 0, dt, 2, d);
  return SMELT_OK;
}

static smelt_status eyelike_run(op_ctx *c) {
  tensor *y = c->out[0];
  int64_t k = op_attr_int(c, "k", 0), r = y->dims[0], cols = y->dims[1];
  memset(y->data, 0, y->nbytes);
  for (int64_t i = 0; i < r; i++) {
    if (k > cols || i > cols - 1 - k) break;
    if (i + k >= 0) tensor_set_f64(y, i * cols + i + k, 1.0);
  }
  return SMELT_OK;
}

const op_def op_family_shape[] = {
    {"Identity", "", 1, 1, 1, 1, identity_infer, identity_run, false},
    {"Dropout", "", 1, 3, 1, 2, dropout_infer, dropout_run, false},
    {"Shape", "", 1, 1, 1, 1, shape_infer, shape_run, false},
    {"Size", "", 1, 1, 1, 1, size_infer, size_run, false},
    {"Reshape", "", 1, 2, 1, 1, reshape_infer, run_copy, false},
    {"Flatten", "", 1, 1, 1, 1, flatten_infer, run_copy, false},
    {"Squeeze", "", 1, 2, 1, 1, squeeze_infer, run_copy, false},
    {"Unsqueeze", "", 1, 2, 1, 1, unsqueeze_infer, run_copy, false},
    {"Constant", "", 0, 0, 1, 1, constant_infer, constant_run, false},
    {"ConstantOfShape", "", 1, 1, 1, 1, cos_infer, cos_run, false},
    {"Range", "", 3, 3, 1, 1, range_infer, range_run, false},
    {"EyeLike", "", 1, 1, 1, 1, eyelike_infer, eyelike_run, false},
    {0}};

bool op_is_view(const op_def *op) { return op && (op->run == run_copy || op->run == identity_run); }
