/* Type conversion: Cast, CastLike (the target type of a second input) and
 * BitCast (reinterpret the bytes).  Conversion rules are in convert.h. */
#include <string.h>

#include "ops/broadcast.h"
#include "ops/convert.h"
#include "util/err.h"
#include "util/quote.h"

#define CAST_TILE 256 /* a multiple of every packing factor: tiles start on bytes */

typedef struct cast_params {
  smelt_dtype from, to;
  cvt_opts o; /* saturate and round_mode */
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

/* Elements [at, at + len) of the flat input into the same of the output. */
static void cast_tile(const cast_params *p, const void *in, void *out, int64_t at, int64_t len) {
  if (cvt_is_intlike(p->from)) {
    int64_t v[CAST_TILE];
    cvt_load_i64_at(p->from, in, at, 1, len, v);
    cvt_store_i64_at(p->to, v, p->from == SMELT_U64, len, out, at, &p->o);
  } else {
    double v[CAST_TILE];
    cvt_load_f64_at(p->from, in, at, 1, len, v);
    cvt_store_f64_at(p->to, v, len, out, at, &p->o);
  }
}

/* A row of the (always same-shaped) input: st[0] is 1. */
static void cast_row(const void *params, int64_t n, void *out, const void *const *in,
                     const int64_t *st) {
  const cast_params *p = params;
  (void)st;
  if (cast_fast(p, n, out, in[0])) return;
  for (int64_t at = 0; at < n; at += CAST_TILE) {
    int64_t len = n - at < CAST_TILE ? n - at : CAST_TILE;
    cast_tile(p, in[0], out, at, len);
  }
}

static smelt_status check_cast_type(op_ctx *c, smelt_dtype t, bool target) {
  if (cvt_supported(t)) return SMELT_OK;
  if (target)
    return err_set(SMELT_ERR_UNSUPPORTED, "target type %s is not supported", dtype_name(t));
  return err_set(SMELT_ERR_UNSUPPORTED, "input 0 has type %s, which %s does not support",
                 dtype_name(t), c->node->op_type);
}

/* Cast-24's round_mode (float8e8m0 targets only; "up" when absent). */
static smelt_status round_mode_attr(op_ctx *c, cvt_round *r) {
  const ir_attr *a = ir_attr_find(c->node, "round_mode");
  *r = CVT_ROUND_UP;
  if (!a) return SMELT_OK;
  if (a->type != IR_ATTR_STRING)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute 'round_mode' must be a string");
  if (!strcmp(a->s, "up")) return SMELT_OK;
  if (!strcmp(a->s, "down")) *r = CVT_ROUND_DOWN;
  else if (!strcmp(a->s, "nearest")) *r = CVT_ROUND_NEAREST;
  else
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "attribute 'round_mode' is %s, expected 'up', 'down' or 'nearest'", q(a->s));
  return SMELT_OK;
}

static smelt_status cast_infer_to(op_ctx *c, smelt_dtype to) {
  const tensor *x = c->in[0];
  cvt_round r;
  TRY(round_mode_attr(c, &r));
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
  cast_params p = {x->dtype, y->dtype, {op_attr_int(c, "saturate", 1) != 0, CVT_ROUND_UP}};
  TRY(round_mode_attr(c, &p.o.e8m0_round));
  if (dtype_is_subbyte(x->dtype) || dtype_is_subbyte(y->dtype)) {
    /* Packed elements have no byte address for ew_apply's row pointers: walk
     * the flat tensors in byte-aligned tiles (in one thread: writes to one
     * byte must not race). */
    int64_t n = tensor_numel(x);
    for (int64_t at = 0; at < n; at += CAST_TILE)
      cast_tile(&p, x->data, y->data, at, n - at < CAST_TILE ? n - at : CAST_TILE);
    return SMELT_OK;
  }
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
  /* Widths in bits: packed types of one width share their packing, so the
   * bytes carry over unchanged for them too. */
  int a = dtype_bits(x->dtype), b = dtype_bits(to);
  if (!(c->static_infer && x->dtype == SMELT_UNDEFINED)) {
    if (!a || !b)
      return err_set(SMELT_ERR_UNSUPPORTED, "BitCast from %s to %s is not supported",
                     dtype_name(x->dtype), dtype_name(to));
    if (a != b) {
      if (a % 8 || b % 8)
        return err_set(SMELT_ERR_INVALID_MODEL,
                       "BitCast needs types of one width: input 0 is %s (%d bits), target %s "
                       "(%d bits)",
                       dtype_name(x->dtype), a, dtype_name(to), b);
      return err_set(SMELT_ERR_INVALID_MODEL,
                     "BitCast needs types of one width: input 0 is %s (%d bytes), target %s "
                     "(%d bytes)",
                     dtype_name(x->dtype), a / 8, dtype_name(to), b / 8);
    }
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
