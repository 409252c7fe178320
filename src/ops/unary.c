/* Unary math: Abs Neg Sign Reciprocal Floor Ceil Round Sqrt Exp Log Erf Tanh,
 * the trigonometric and hyperbolic functions, IsNaN and IsInf.  Float kernels
 * evaluate in their own precision (f16/bf16 in f32); integer Abs/Neg wrap.
 * f32 Exp, Erf and Tanh over contiguous rows use the vectorized kernels of
 * kernels/vmath.h (a few ulps, stated there); other strides use libm. */
#include <tgmath.h>

#include "kernels/vmath.h"
#include "ops/broadcast.h"
#include "util/err.h"

/* ---- kernels ---- */

#define FLOAT_UNARY(sfx, T)                                       \
  EW_ROW1(Abs_##sfx, T, T, fabs(x))                              \
  EW_ROW1(Neg_##sfx, T, T, -x)                                   \
  EW_ROW1(Sign_##sfx, T, T, x > 0 ? (T)1 : x < 0 ? (T)-1 : x)    \
  EW_ROW1(Reciprocal_##sfx, T, T, (T)1 / x)                      \
  EW_ROW1(Floor_##sfx, T, T, floor(x))                           \
  EW_ROW1(Ceil_##sfx, T, T, ceil(x))                             \
  EW_ROW1(Round_##sfx, T, T, nearbyint(x)) /* ties to even */    \
  EW_ROW1(Sqrt_##sfx, T, T, sqrt(x))                             \
  EW_ROW1(Log_##sfx, T, T, log(x))                               \
  EW_ROW1(Sin_##sfx, T, T, sin(x))                               \
  EW_ROW1(Cos_##sfx, T, T, cos(x))                               \
  EW_ROW1(Tan_##sfx, T, T, tan(x))                               \
  EW_ROW1(Asin_##sfx, T, T, asin(x))                             \
  EW_ROW1(Acos_##sfx, T, T, acos(x))                             \
  EW_ROW1(Atan_##sfx, T, T, atan(x))                             \
  EW_ROW1(Sinh_##sfx, T, T, sinh(x))                             \
  EW_ROW1(Cosh_##sfx, T, T, cosh(x))                             \
  EW_ROW1(Asinh_##sfx, T, T, asinh(x))                           \
  EW_ROW1(Acosh_##sfx, T, T, acosh(x))                           \
  EW_ROW1(Atanh_##sfx, T, T, atanh(x))                           \
  EW_ROW1(IsNaN_##sfx, T, uint8_t, isnan(x) != 0)                \
  EW_ROW1P(IsInf_##sfx, isinf_params, T, uint8_t, isinf(x) && (x > 0 ? p->pos : p->neg))

typedef struct isinf_params {
  bool pos, neg;
} isinf_params;

FLOAT_UNARY(f32, float)
FLOAT_UNARY(f64, double)
EW_ROW1(Exp_f64, double, double, exp(x))
EW_ROW1(Erf_f64, double, double, erf(x))
EW_ROW1(Tanh_f64, double, double, tanh(x))

/* f32 rows: params is the vmath table (kernels/vmath.h) for contiguous rows. */
EW_ROW1_VMATH(Exp_f32, VMATH_EXP, params, expf(x))
EW_ROW1_VMATH(Erf_f32, VMATH_ERF, params, erff(x))
EW_ROW1_VMATH(Tanh_f32, VMATH_TANH, params, tanhf(x))

#define SINT_UNARY(sfx, T, U)                                     \
  EW_ROW1(Abs_##sfx, T, T, x < 0 ? (T)(0u - (U)x) : x)           \
  EW_ROW1(Neg_##sfx, T, T, (T)(0u - (U)x))                       \
  EW_ROW1(Sign_##sfx, T, T, (T)((x > 0) - (x < 0)))
EW_FOR_SINTS(SINT_UNARY)

#define UINT_UNARY(sfx, T, U)                                     \
  EW_ROW1(Abs_##sfx, T, T, x)                                    \
  EW_ROW1(Sign_##sfx, T, T, (T)(x > 0))
EW_FOR_UINTS(UINT_UNARY)

#define F(OP) {EW_TABLE_FLOATS(OP)}
static const ew_table abs_tab = {EW_TABLE_FLOATS(Abs), EW_TABLE_INTS(Abs)},
                      neg_tab = {EW_TABLE_FLOATS(Neg), EW_TABLE_SINTS(Neg)},
                      sign_tab = {EW_TABLE_FLOATS(Sign), EW_TABLE_INTS(Sign)},
                      reciprocal_tab = F(Reciprocal), floor_tab = F(Floor), ceil_tab = F(Ceil),
                      round_tab = F(Round), sqrt_tab = F(Sqrt), exp_tab = F(Exp), log_tab = F(Log),
                      erf_tab = F(Erf), tanh_tab = F(Tanh), sin_tab = F(Sin), cos_tab = F(Cos),
                      tan_tab = F(Tan), asin_tab = F(Asin), acos_tab = F(Acos), atan_tab = F(Atan),
                      sinh_tab = F(Sinh), cosh_tab = F(Cosh), asinh_tab = F(Asinh),
                      acosh_tab = F(Acosh), atanh_tab = F(Atanh), isnan_tab = F(IsNaN),
                      isinf_tab = F(IsInf);
#undef F

/* ---- infer/run ---- */

static smelt_status unary_infer(op_ctx *c, const ew_row_fn *tab, bool to_bool) {
  TRY(ew_check_table(c, 0, tab));
  const tensor *x = c->in[0];
  op_set_out(c, 0, to_bool ? SMELT_BOOL : x->dtype, x->rank, x->dims);
  return SMELT_OK;
}

static smelt_status unary_run(op_ctx *c, const ew_row_fn *tab, const void *params) {
  const tensor *ops[1] = {c->in[0]};
  return ew_apply_f32(c, c->out[0], 1, ops, tab[ops[0]->dtype], params);
}

#define UNARY_OP(NAME, TO_BOOL)                                                                  \
  static smelt_status infer_##NAME(op_ctx *c) { return unary_infer(c, NAME##_tab, TO_BOOL); } \
  static smelt_status run_##NAME(op_ctx *c) { return unary_run(c, NAME##_tab, NULL); }
UNARY_OP(abs, false)
UNARY_OP(neg, false)
UNARY_OP(sign, false)
UNARY_OP(reciprocal, false)
UNARY_OP(floor, false)
UNARY_OP(ceil, false)
UNARY_OP(round, false)
UNARY_OP(sqrt, false)
UNARY_OP(log, false)

/* Exp, Erf, Tanh: the f32 rows get the vmath table of the active ISA */
#define VMATH_OP(NAME)                                                                    \
  static smelt_status infer_##NAME(op_ctx *c) { return unary_infer(c, NAME##_tab, false); } \
  static smelt_status run_##NAME(op_ctx *c) { return unary_run(c, NAME##_tab, vmath_for_ops()); }
VMATH_OP(exp)
VMATH_OP(erf)
VMATH_OP(tanh)
UNARY_OP(sin, false)
UNARY_OP(cos, false)
UNARY_OP(tan, false)
UNARY_OP(asin, false)
UNARY_OP(acos, false)
UNARY_OP(atan, false)
UNARY_OP(sinh, false)
UNARY_OP(cosh, false)
UNARY_OP(asinh, false)
UNARY_OP(acosh, false)
UNARY_OP(atanh, false)
UNARY_OP(isnan, true)

static smelt_status infer_isinf(op_ctx *c) { return unary_infer(c, isinf_tab, true); }
static smelt_status run_isinf(op_ctx *c) {
  isinf_params p = {op_attr_int(c, "detect_positive", 1) != 0,
                    op_attr_int(c, "detect_negative", 1) != 0};
  return unary_run(c, isinf_tab, &p);
}

#define ROW(NAME, FN) {NAME, "", 1, 1, 1, 1, infer_##FN, run_##FN, false}
const op_def op_family_unary[] = {
    ROW("Abs", abs),     ROW("Neg", neg),     ROW("Sign", sign),   ROW("Reciprocal", reciprocal),
    ROW("Floor", floor), ROW("Ceil", ceil),   ROW("Round", round), ROW("Sqrt", sqrt),
    ROW("Exp", exp),     ROW("Log", log),     ROW("Erf", erf),     ROW("Tanh", tanh),
    ROW("Sin", sin),     ROW("Cos", cos),     ROW("Tan", tan),     ROW("Asin", asin),
    ROW("Acos", acos),   ROW("Atan", atan),   ROW("Sinh", sinh),   ROW("Cosh", cosh),
    ROW("Asinh", asinh), ROW("Acosh", acosh), ROW("Atanh", atanh), ROW("IsNaN", isnan),
    ROW("IsInf", isinf), {0}};
#undef ROW
