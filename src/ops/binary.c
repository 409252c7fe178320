/* Arithmetic with numpy broadcasting: Add Sub Mul Div Mod Pow, and the
 * variadic Max Min Sum Mean.
 *
 * Integer semantics (what numpy, the ONNX reference, computes): overflow
 * wraps; Div truncates toward zero; Mod follows the divisor's sign (Python) or,
 * with fmod=1, the dividend's (C).  Division or Mod by zero yields 0 instead of
 * trapping, as numpy does.  Float Max/Min propagate NaN. */
#include <math.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/convert.h"
#include "util/err.h"

/* ---- kernels ---- */

static inline float pymod_f32(float x, float y) {
  float r = fmodf(x, y);
  if (r != 0) return (r < 0) != (y < 0) ? r + y : r;
  return copysignf(0.0f, y);
}
static inline double pymod_f64(double x, double y) {
  double r = fmod(x, y);
  if (r != 0) return (r < 0) != (y < 0) ? r + y : r;
  return copysign(0.0, y);
}
/* x^2 is the common case (variance, norms); it is exact as x*x. */
/* x^3 in double: x*x is exact there, so one rounding to double and one to
 * float (powf is a libm call per element) */
static inline float pow_f32(float x, float y) {
  return y == 2.0f ? x * x : y == 3.0f ? (float)((double)x * x * x) : powf(x, y);
}
static inline double pow_f64(double x, double y) { return y == 2.0 ? x * x : pow(x, y); }

/* Integer power, wrapping.  Negative exponents give the truncated 1/x^-e. */
static inline int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)b;
  for (; e; e >>= 1) {
    if (e & 1) r *= base;
    base *= base;
  }
  return (int64_t)r;
}

#define FLOAT_ROWS(sfx, T, MOD, POW)                                    \
  EW_ROW2(Add_##sfx, T, T, T, x + y)                                   \
  EW_ROW2(Sub_##sfx, T, T, T, x - y)                                   \
  EW_ROW2(Mul_##sfx, T, T, T, x * y)                                   \
  EW_ROW2(Div_##sfx, T, T, T, x / y)                                   \
  EW_ROW2(Fmod_##sfx, T, T, T, MOD(x, y))                              \
  EW_ROW2(Pymod_##sfx, T, T, T, pymod_##sfx(x, y))                     \
  EW_ROW2(Pow_##sfx, T, T, T, POW(x, y))                               \
  EW_ROW2(Max_##sfx, T, T, T, (x > y || x != x) ? x : y)               \
  EW_ROW2(Min_##sfx, T, T, T, (x < y || x != x) ? x : y)
FLOAT_ROWS(f32, float, fmodf, pow_f32)
FLOAT_ROWS(f64, double, fmod, pow_f64)

#define INT_ROWS(sfx, T, U)                                             \
  EW_ROW2(Add_##sfx, T, T, T, (T)((U)x + (U)y))                        \
  EW_ROW2(Sub_##sfx, T, T, T, (T)((U)x - (U)y))                        \
  EW_ROW2(Mul_##sfx, T, T, T, (T)((U)x * (U)y))                        \
  EW_ROW2(Pow_##sfx, T, T, T, (T)ipow((int64_t)x, (int64_t)y))         \
  EW_ROW2(Max_##sfx, T, T, T, x > y ? x : y)                           \
  EW_ROW2(Min_##sfx, T, T, T, x < y ? x : y)
EW_FOR_INTS(INT_ROWS)

/* Signed division: y == -1 is separate because MIN / -1 overflows (a trap
 * on x86); it wraps to MIN like the other overflows. */
#define SINT_DIV_ROWS(sfx, T, U)                                                      \
  static inline T pymod_##sfx(T x, T y) {                                            \
    if (y == 0 || y == -1) return 0;                                                 \
    T r = (T)(x % y);                                                                \
    return (T)(r != 0 && (r < 0) != (y < 0) ? r + y : r);                           \
  }                                                                                  \
  EW_ROW2(Div_##sfx, T, T, T, y == 0 ? (T)0 : y == -1 ? (T)(0u - (U)x) : (T)(x / y)) \
  EW_ROW2(Fmod_##sfx, T, T, T, y == 0 || y == -1 ? (T)0 : (T)(x % y))               \
  EW_ROW2(Pymod_##sfx, T, T, T, pymod_##sfx(x, y))
EW_FOR_SINTS(SINT_DIV_ROWS)

#define UINT_DIV_ROWS(sfx, T, U)                              \
  EW_ROW2(Div_##sfx, T, T, T, y == 0 ? (T)0 : (T)(x / y))    \
  EW_ROW2(Fmod_##sfx, T, T, T, y == 0 ? (T)0 : (T)(x % y))   \
  EW_ROW2(Pymod_##sfx, T, T, T, y == 0 ? (T)0 : (T)(x % y))
EW_FOR_UINTS(UINT_DIV_ROWS)

#define NUMERIC_TABLE(OP) {EW_TABLE_FLOATS(OP), EW_TABLE_INTS(OP)}
static const ew_table add_tab = NUMERIC_TABLE(Add), sub_tab = NUMERIC_TABLE(Sub),
                      mul_tab = NUMERIC_TABLE(Mul), div_tab = NUMERIC_TABLE(Div),
                      fmod_tab = NUMERIC_TABLE(Fmod), pymod_tab = NUMERIC_TABLE(Pymod),
                      max_tab = NUMERIC_TABLE(Max), min_tab = NUMERIC_TABLE(Min),
                      sum_tab = {EW_TABLE_FLOATS(Add)};

/* ---- shared infer/run ---- */

static smelt_status check_legacy(op_ctx *c) {
  if (c->opset < 7 && ir_attr_find(c->node, "axis"))
    return err_set(SMELT_ERR_UNSUPPORTED,
                   "legacy broadcasting with an axis attribute (opset %d) is not supported",
                   c->opset);
  return SMELT_OK;
}

/* Inputs all of one type with a kernel in tab; output their broadcast shape. */
static smelt_status same_type_infer(op_ctx *c, const ew_row_fn *tab) {
  for (int k = 0; k < c->n_in; k++)
    if (!op_in(c, k)) return err_set(SMELT_ERR_INVALID_MODEL, "input %d is missing", k);
  TRY(check_legacy(c));
  return ew_table_infer(c, tab, SMELT_UNDEFINED);
}

/* out = in0 op in1 op in2 ..., folding left in place in out. */
static smelt_status fold_run(op_ctx *c, const ew_row_fn *tab) {
  tensor *out = c->out[0];
  ew_row_fn fn = tab[out->dtype];
  if (c->n_in == 1) {
    if (out->nbytes) memcpy(out->data, c->in[0]->data, out->nbytes);
    return SMELT_OK;
  }
  const tensor *ops[2] = {c->in[0], c->in[1]};
  TRY(ew_apply_f32(c, out, 2, ops, fn, NULL));
  for (int k = 2; k < c->n_in; k++) {
    ops[0] = out;
    ops[1] = c->in[k];
    TRY(ew_apply_f32(c, out, 2, ops, fn, NULL));
  }
  return SMELT_OK;
}

#define SAME_TYPE_OP(NAME, TAB)                                              \
  static smelt_status infer_##NAME(op_ctx *c) { return same_type_infer(c, TAB); } \
  static smelt_status run_##NAME(op_ctx *c) { return fold_run(c, TAB); }
SAME_TYPE_OP(add, add_tab)
SAME_TYPE_OP(sub, sub_tab)
SAME_TYPE_OP(mul, mul_tab)
SAME_TYPE_OP(div, div_tab)
SAME_TYPE_OP(max, max_tab)
SAME_TYPE_OP(min, min_tab)
SAME_TYPE_OP(sum, sum_tab)

/* ---- Mod ---- */

static const ew_row_fn *mod_tab(op_ctx *c) {
  return op_attr_int(c, "fmod", 0) ? fmod_tab : pymod_tab;
}
static smelt_status infer_mod(op_ctx *c) { return same_type_infer(c, mod_tab(c)); }
static smelt_status run_mod(op_ctx *c) { return fold_run(c, mod_tab(c)); }

/* ---- Mean ---- */

typedef struct mean_params {
  float nf;
  double nd;
} mean_params;
EW_ROW1P(Divn_f32, mean_params, float, float, x / p->nf)
EW_ROW1P(Divn_f64, mean_params, double, double, x / p->nd)

static smelt_status run_mean(op_ctx *c) {
  TRY(fold_run(c, sum_tab));
  if (c->n_in == 1) return SMELT_OK;
  tensor *out = c->out[0];
  const tensor *ops[1] = {out};
  mean_params p = {(float)c->n_in, (double)c->n_in};
  return ew_apply_f32(c, out, 1, ops, out->dtype == SMELT_F64 ? Divn_f64 : Divn_f32, &p);
}

/* ---- Pow: base and exponent may differ in type; output has the base's ---- */

static const smelt_dtype pow_base_types[] = {EW_NUMERIC, SMELT_UNDEFINED};
static const smelt_dtype pow_exp_types[] = {EW_NUMERIC, SMELT_UNDEFINED};

/* Base and exponent of one type, other than the f32 family. */
static const ew_table pow_same_tab = {[SMELT_F64] = Pow_f64, EW_TABLE_INTS(Pow)};

typedef struct pow_types {
  smelt_dtype a, b, o;
} pow_types;

#define POW_TILE 256

/* Any other type pair, as numpy does it: integer power when both are
 * integers, else a double power cast to the base type. */
static void Pow_mixed(const void *params, int64_t n, void *out, const void *const *in,
                      const int64_t *st) {
  const pow_types *t = params;
  size_t ea = dtype_size(t->a), eb = dtype_size(t->b), eo = dtype_size(t->o);
  bool ints = cvt_is_intlike(t->a) && cvt_is_intlike(t->b);
  for (int64_t at = 0; at < n; at += POW_TILE) {
    int64_t len = n - at < POW_TILE ? n - at : POW_TILE;
    const char *pa = (const char *)in[0] + (size_t)(at * st[0]) * ea;
    const char *pb = (const char *)in[1] + (size_t)(at * st[1]) * eb;
    char *po = (char *)out + (size_t)at * eo;
    if (ints) {
      int64_t x[POW_TILE], y[POW_TILE];
      cvt_load_i64(t->a, pa, st[0], len, x);
      cvt_load_i64(t->b, pb, st[1], len, y);
      for (int64_t i = 0; i < len; i++) x[i] = ipow(x[i], y[i]);
      cvt_store_i64(t->o, x, false, len, po, false);
    } else {
      double x[POW_TILE], y[POW_TILE];
      cvt_load_f64(t->a, pa, st[0], len, x);
      cvt_load_f64(t->b, pb, st[1], len, y);
      for (int64_t i = 0; i < len; i++) x[i] = pow_f64(x[i], y[i]);
      cvt_store_f64(t->o, x, len, po, false);
    }
  }
}

static smelt_status infer_pow(op_ctx *c) {
  TRY(check_legacy(c));
  TRY(ew_check_dtype(c, 0, pow_base_types));
  TRY(ew_check_dtype(c, 1, pow_exp_types));
  int r;
  int64_t d[SMELT_MAX_RANK];
  TRY(ew_broadcast_inputs(c, 0, 2, &r, d));
  op_set_out(c, 0, c->in[0]->dtype, r, d);
  return SMELT_OK;
}

static bool f32ish(smelt_dtype t) { return t == SMELT_F32 || ew_is_half(t); }

static smelt_status run_pow(op_ctx *c) {
  const tensor *ops[2] = {c->in[0], c->in[1]};
  smelt_dtype a = ops[0]->dtype, b = ops[1]->dtype;
  if (f32ish(a) && f32ish(b)) return ew_apply_f32(c, c->out[0], 2, ops, Pow_f32, NULL);
  if (a == b && pow_same_tab[a]) return ew_apply(c, c->out[0], 2, ops, pow_same_tab[a], NULL);
  pow_types t = {a, b, c->out[0]->dtype};
  return ew_apply(c, c->out[0], 2, ops, Pow_mixed, &t);
}

const op_def op_family_binary[] = {
    {"Add", "", 2, 2, 1, 1, infer_add, run_add, false},
    {"Sub", "", 2, 2, 1, 1, infer_sub, run_sub, false},
    {"Mul", "", 2, 2, 1, 1, infer_mul, run_mul, false},
    {"Div", "", 2, 2, 1, 1, infer_div, run_div, false},
    {"Mod", "", 2, 2, 1, 1, infer_mod, run_mod, false},
    {"Pow", "", 2, 2, 1, 1, infer_pow, run_pow, false},
    {"Max", "", 1, -1, 1, 1, infer_max, run_max, false},
    {"Min", "", 1, -1, 1, 1, infer_min, run_min, false},
    {"Sum", "", 1, -1, 1, 1, infer_sum, run_sum, false},
    {"Mean", "", 1, -1, 1, 1, infer_sum, run_mean, false},
    {0}};
