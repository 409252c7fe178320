#include "ops/quant_util.h"

#include "util/err.h"

bool q_int_range(smelt_dtype t, int64_t *lo, int64_t *hi) {
  switch (t) {
    case SMELT_U8: *lo = 0, *hi = UINT8_MAX; return true;
    case SMELT_I8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case SMELT_U16: *lo = 0, *hi = UINT16_MAX; return true;
    case SMELT_I16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case SMELT_I32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    /* packed (ir/subbyte.h): the convert.h stores take them by element index */
    case SMELT_U4: *lo = 0, *hi = 15; return true;
    case SMELT_I4: *lo = -8, *hi = 7; return true;
    case SMELT_U2: *lo = 0, *hi = 3; return true;
    case SMELT_I2: *lo = -2, *hi = 1; return true;
    default: return false;
  }
}

static smelt_status blocked_layout(const tensor *x, const tensor *p, const char *what, int axis,
                                   q_layout *l) {
  if (p->rank != x->rank)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s has rank %d; blocked quantization needs rank %d",
                   what, p->rank, x->rank);
  l->Db = (l->D + l->block - 1) / l->block;
  for (int k = 0; k < x->rank; k++) {
    int64_t want = k == axis ? l->Db : x->dims[k];
    if (p->dims[k] != want)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s has size %lld on axis %d, expected %lld (block "
                     "size %lld)", what, (long long)p->dims[k], k, (long long)want, (long long)l->block);
  }
  l->mode = Q_BLOCKED;
  return SMELT_OK;
}

smelt_status q_layout_make(op_ctx *c, const tensor *x, const tensor *p, const char *what,
                           q_layout *l) {
  l->mode = Q_PER_TENSOR;
  l->outer = 1, l->D = 1, l->block = 0, l->Db = 1;
  l->inner = tensor_numel(x);
  if (p->kind != TENSOR_KIND_TENSOR) return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be a tensor", what);
  if (tensor_numel(p) == 1) return SMELT_OK;
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 1), x->rank, "attribute axis", &axis));
  l->outer = shape_numel(axis, x->dims);
  l->D = x->dims[axis];
  l->inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  l->block = op_attr_int(c, "block_size", 0);
  if (l->block < 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute block_size is %lld, expected >= 0",
                   (long long)l->block);
  if (l->block) return blocked_layout(x, p, what, axis, l);
  if (p->rank != 1 || p->dims[0] != l->D)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be a scalar or a 1-D tensor of %lld values "
                   "(axis %d)", what, (long long)l->D, axis);
  l->mode = Q_PER_AXIS;
  return SMELT_OK;
}
