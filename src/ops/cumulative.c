/* Running sums and products along an axis: CumSum, CumProd (exclusive and
 * reverse).  Integers wrap on overflow; float16/bfloat16 round after every
 * step, as a sequential loop in that type would. */
#include <string.h>

#include "ops/nn_util.h"
#include "ops/shape_util.h"
#include "util/err.h"

static const smelt_dtype cum_types[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32,
                                        SMELT_I64, SMELT_U32, SMELT_U64, SMELT_I8, SMELT_U8,
                                        SMELT_I16, SMELT_U16, SMELT_UNDEFINED};

typedef struct cum_shape {
  int64_t outer, n, inner;
  bool exclusive, reverse, prod;
} cum_shape;

static smelt_status cum_axis(op_ctx *c, int rank, int *axis) {
  tensor *a = c->in[1];
  TRY(su_check_index_type(a, "input 1 (axis)"));
  if (a->rank > 1 || (a->rank == 1 && a->dims[0] != 1))
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (axis) must be a scalar");
  if (!a->data) {
    *axis = -1;
    return SMELT_OK;
  }
  return op_axis(su_index_at(a, 0), rank, "input 1 (axis)", axis);
}

static smelt_status cum_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, cum_types));
  if (x->rank == 0) return err_set(SMELT_ERR_INVALID_MODEL, "input 0 is a scalar");
  if (x->rank > 0) {
    int axis;
    TRY(cum_axis(c, x->rank, &axis));
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

/* Native types: T is stored, A accumulates (unsigned for integers so overflow
 * wraps). */
#define CUM_KERNEL(NAME, T, A)                                                     \
  static void NAME(const void *xv, void *yv, const cum_shape *s) {                 \
    const T *x = xv;                                                               \
    T *y = yv;                                                                     \
    for (int64_t o = 0; o < s->outer; o++)                                         \
      for (int64_t j = 0; j < s->inner; j++) {                                     \
        A acc = s->prod ? (A)1 : (A)0;                                             \
        for (int64_t t = 0; t < s->n; t++) {                                       \
          int64_t i = s->reverse ? s->n - 1 - t : t;                               \
          int64_t p = (o * s->n + i) * s->inner + j;                               \
          A v = (A)x[p];                                                           \
          if (s->exclusive) y[p] = (T)acc;                                         \
          acc = s->prod ? (A)(acc * v) : (A)(acc + v);                             \
          if (!s->exclusive) y[p] = (T)acc;                                        \
        }                                                                          \
      }                                                                            \
  }

CUM_KERNEL(cum_f32, float, float)
CUM_KERNEL(cum_f64, double, double)
CUM_KERNEL(cum_i8, int8_t, uint32_t)
CUM_KERNEL(cum_u8, uint8_t, uint32_t)
CUM_KERNEL(cum_i16, int16_t, uint32_t)
CUM_KERNEL(cum_u16, uint16_t, uint32_t)
CUM_KERNEL(cum_i32, int32_t, uint32_t)
CUM_KERNEL(cum_u32, uint32_t, uint32_t)
CUM_KERNEL(cum_i64, int64_t, uint64_t)
CUM_KERNEL(cum_u64, uint64_t, uint64_t)

/* float16/bfloat16 through tensor_get/set, rounding the running value to the
 * type after each step. */
static void cum_half(const tensor *x, tensor *y, const cum_shape *s) {
  float (*to)(uint16_t) = x->dtype == SMELT_F16 ? f16_to_f32 : bf16_to_f32;
  uint16_t (*from)(float) = x->dtype == SMELT_F16 ? f32_to_f16 : f32_to_bf16;
  const uint16_t *xv = x->data;
  uint16_t *yv = y->data;
  for (int64_t o = 0; o < s->outer; o++)
    for (int64_t j = 0; j < s->inner; j++) {
      uint16_t acc = from(s->prod ? 1.0f : 0.0f);
      for (int64_t t = 0; t < s->n; t++) {
        int64_t i = s->reverse ? s->n - 1 - t : t;
        int64_t p = (o * s->n + i) * s->inner + j;
        if (s->exclusive) yv[p] = acc;
        acc = from(s->prod ? to(acc) * to(xv[p]) : to(acc) + to(xv[p]));
        if (!s->exclusive) yv[p] = acc;
      }
    }
}

static smelt_status cum_run_common(op_ctx *c, bool prod) {
  tensor *x = c->in[0], *y = c->out[0];
  int axis;
  TRY(cum_axis(c, x->rank, &axis));
  cum_shape s = {.exclusive = op_attr_int(c, "exclusive", 0) != 0,
                 .reverse = op_attr_int(c, "reverse", 0) != 0, .prod = prod};
  nn_split_axis(x, axis, false, &s.outer, &s.n, &s.inner);
  switch (x->dtype) {
    case SMELT_F32: cum_f32(x->data, y->data, &s); break;
    case SMELT_F64: cum_f64(x->data, y->data, &s); break;
    case SMELT_I8: cum_i8(x->data, y->data, &s); break;
    case SMELT_U8: cum_u8(x->data, y->data, &s); break;
    case SMELT_I16: cum_i16(x->data, y->data, &s); break;
    case SMELT_U16: cum_u16(x->data, y->data, &s); break;
    case SMELT_I32: cum_i32(x->data, y->data, &s); break;
    case SMELT_U32: cum_u32(x->data, y->data, &s); break;
    case SMELT_I64: cum_i64(x->data, y->data, &s); break;
    case SMELT_U64: cum_u64(x->data, y->data, &s); break;
    case SMELT_F16:
    case SMELT_BF16: cum_half(x, y, &s); break;
    default:
      return err_set(SMELT_ERR_UNSUPPORTED, "type %s is not supported", dtype_name(x->dtype));
  }
  return SMELT_OK;
}

static smelt_status cumsum_run(op_ctx *c) { return cum_run_common(c, false); }
static smelt_status cumprod_run(op_ctx *c) { return cum_run_common(c, true); }

const op_def op_family_cumulative[] = {
    {"CumSum", "", 2, 2, 1, 1, cum_infer, cumsum_run, false},
    {"CumProd", "", 2, 2, 1, 1, cum_infer, cumprod_run, false},
    {0}};
