/* Type conversion: Cast, CastLike (the target type of a second input) and
 * BitCast (reinterpret the bytes).  Conversion rules are in convert.h. */
#include <string.h>

#include "ops/broadcast.h"
#include "ops/convert.h"
#include "util/err.h"

#define CAST_TILE 256

typedef struct cast_params {
  smelt_dtype from, to;
  bool saturate;
} cast_params;

/* Conversions common enough in models to skip the 64-bit detour. */
static bool cast_fast(const cast_params *p, int64_t n, void *out, const void *in) {
  if (p->from == SMELT_F32 && p->to == SMELT_F16) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = f32_to_f16(((const float *)in)[i]);
  } else if (p->from == SMELT_F32 && p->to == SMELT_BF16) {
    for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = f32_to_bf16(((const float *)in)[i]);
  } else if (p->from == SMELT_F16 && p->to == SMELT_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)out)[i] = f16_to_f32(((const uint16_t *)in)[i]);
  } else if (p->from == SMELT_BF16 && p->to == SMELT_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)out)[i] = bf16_to_f32(((const uint16_t *)in)[i]);
  } else if (p->from == SMELT_I64 && p->to == SMELT_F32) {
    for (int64_t i = 0; i < n; i++) ((float *)out)[i] = (float)((const int64_t *)in)[i];
  } else {
    return false;
  }
  return true;
}

/* A row of the (always same-shaped) input: st[0] is 1. */
static void cast_row(const void *params, int64_t n, void *out, const void *const *in,
                     const int64_t *st) {
  const cast_params *p = params;
  (void)st;
  if (cast_fast(p, n, out, in[0])) return;
  size_t es_in = dtype_size(p->from), es_out = dtype_size(p->to);
  bool ints = cvt_is_intlike(p->from);
  for (int64_t at = 0; at < n; at += CAST_TILE) {
    int64_t len = n - at < CAST_TILE ? n - at : CAST_TILE;
    const char *src = (const char *)in[0] + (size_t)at * es_in;
    char *dst = (char *)out + (size_t)at * es_out;
    if (ints) {
      int64_t v[CAST_TILE];
      cvt_load_i64(p->from, src, 1, len, v);
      cvt_store_i64(p->to, v, p->from == SMELT_U64, len, dst, p->saturate);
    } else {
      double v[CAST_TILE];
      cvt_load_f64(p->from, src, 1, len, v);
      cvt_store_f64(p->to, v, len, dst, p->saturate);
    }
  }
}

static smelt_status check_cast_type(op_ctx *c, smelt_dtype t, bool target) {
  if (cvt_supported(t)) return SMELT_OK;
  if (target)
    return err_set(SMELT_ERR_UNSUPPORTED, "target type %s is not supported", dtype_name(t));
  return err_set(SMELT_ERR_UNSUPPORTED, "input 0 has type %s, which %s does not support",
                 dtype_name(t), c->node->op_type);
}

static smelt_status cast_infer_to(op_ctx *c, smelt_dtype to) {
  const tensor *x = c->in[0];
  if (!(c->static_infer && x->dtype == SMELT_UNDEFINED))
    TRY(check_cast_type(c, x->dtype, false));
  TRY(check_cast_type(c, to, true));
  op_set_out(c, 0, to, x->rank, x->dims);
  return SMELT_OK;
}

static smelt_status cast_run(op_ctx *c) {
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  if (x->dtype == y->dtype) {
    if (y->nbytes) memcpy(y->data, x->data, y->nbytes);
    return SMELT_OK;
  }
  cast_params p = {x->dtype, y->dtype, op_attr_int(c, "saturate", 1) != 0};
  const tensor *ops[1] = {x};
  return ew_apply(c, y, 1, ops, cast_row, &p);
}

static smelt_status target_attr(op_ctx *c, smelt_dtype *to) {
  const ir_attr *a = ir_attr_find(c->node, "to");
  if (!a || a->type != IR_ATTR_INT)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute 'to' is missing");
  if (a->i <= 0 || a->i >= SMELT_DTYPE_COUNT)
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute 'to' is %lld, not a type smelt knows",
                   (long long)a->i);
  *to = (smelt_dtype)a->i;
  return SMELT_OK;
}

static smelt_status infer_cast(op_ctx *c) {
  smelt_dtype to = SMELT_UNDEFINED;
  TRY(target_attr(c, &to));
  return cast_infer_to(c, to);
}

static smelt_status infer_castlike(op_ctx *c) {
  smelt_dtype to = c->in[1]->dtype;
  if (c->static_infer && to == SMELT_UNDEFINED) {
    op_set_out(c, 0, to, c->in[0]->rank, c->in[0]->dims);
    return SMELT_OK;
  }
  return cast_infer_to(c, to);
}

/* ---- BitCast: same element width, bytes unchanged ---- */

static smelt_status infer_bitcast(op_ctx *c) {
  smelt_dtype to = SMELT_UNDEFINED;
  TRY(target_attr(c, &to));
  const tensor *x = c->in[0];
  size_t a = dtype_size(x->dtype), b = dtype_size(to);
  if (!(c->static_infer && x->dtype == SMELT_UNDEFINED)) {
    if (!a || !b || x->dtype == SMELT_STRING || to == SMELT_STRING)
      return err_set(SMELT_ERR_UNSUPPORTED, "BitCast from %s to %s is not supported",
                     dtype_name(x->dtype), dtype_name(to));
    if (a != b)
      return err_set(SMELT_ERR_INVALID_MODEL,
                     "BitCast needs types of one width: input 0 is %s (%zu bytes), target %s "
                     "(%zu bytes)",
                     dtype_name(x->dtype), a, dtype_name(to), b);
  }
  op_set_out(c, 0, to, x->rank, x->dims);
  return SMELT_OK;
}

static smelt_status run_bitcast(op_ctx *c) {
  tensor *y = c->out[0];
  if (y->nbytes) memcpy(y->data, c->in[0]->data, y->nbytes);
  return SMELT_OK;
}

const op_def op_family_cast[] = {
    {"Cast", "", 1, 1, 1, 1, infer_cast, cast_run, false},
    {"CastLike", "", 2, 2, 1, 1, infer_castlike, cast_run, false},
    {"BitCast", "", 1, 1, 1, 1, infer_bitcast, run_bitcast, false},
    {0}};
