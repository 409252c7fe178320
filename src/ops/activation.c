/* Activations: Relu Sigmoid Elu Celu Selu LeakyRelu HardSigmoid HardSwish
 * Softplus Softsign Mish Gelu Swish ThresholdedRelu Shrink, and the ones with
 * extra operands: PRelu (broadcast slope) and Clip (bounds as attributes
 * before opset 11, optional scalar inputs since).  Float kernels evaluate in
 * their own precision (f16/bf16 in f32), in numerically stable forms.
 * f32 Sigmoid and Gelu (both forms) over contiguous rows use the vectorized
 * kernels of kernels/vmath.h (a few ulps, stated there). */
#include <float.h>
#include <string.h>
#include <tgmath.h>

#include "kernels/vmath.h"
#include "ops/broadcast.h"
#include "util/err.h"
#include "util/quote.h"

/* Attribute values of one node (double so f64 kernels see them unrounded). */
typedef struct act_params {
  double alpha, beta, gamma;
  const vmath_kernels *vm; /* f32 Sigmoid/Gelu rows: the vectorized kernels */
} act_params;

/* ---- kernels ---- */

#define ACT_HELPERS(sfx, T)                                                            \
  static inline T sigmoid_##sfx(T x) {                                                \
    if (x >= 0) return (T)1 / ((T)1 + exp(-x));                                      \
    T e = exp(x); /* no overflow for large negative x */                              \
    return e / ((T)1 + e);                                                            \
  }                                                                                   \
  static inline T softplus_##sfx(T x) { /* log(1 + e^x) without overflow */           \
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));                                \
  }                                                                                   \
  static inline T gelu_tanh_##sfx(T x) {                                              \
    const T k = (T)0.7978845608028654; /* sqrt(2/pi) */                               \
    return (T)0.5 * x * ((T)1 + tanh(k * (x + (T)0.044715 * x * x * x)));            \
  }                                                                                   \
  static inline T hardsig_##sfx(T v) { return v < 0 ? (T)0 : v > 1 ? (T)1 : v; }

ACT_HELPERS(f32, float)
ACT_HELPERS(f64, double)

#define ACT_ROWS(sfx, T)                                                                     \
  EW_ROW1(Relu_##sfx, T, T, x < 0 ? (T)0 : x)                                               \
  EW_ROW1(Softplus_##sfx, T, T, softplus_##sfx(x))                                          \
  EW_ROW1(Softsign_##sfx, T, T, x / ((T)1 + fabs(x)))                                       \
  EW_ROW1(Mish_##sfx, T, T, x * tanh(softplus_##sfx(x)))                                    \
  EW_ROW1P(Elu_##sfx, act_params, T, T, x < 0 ? (T)p->alpha * expm1(x) : x)                 \
  EW_ROW1P(Celu_##sfx, act_params, T, T,                                                    \
           x > 0 ? x : (T)p->alpha * expm1(x / (T)p->alpha))                                \
  EW_ROW1P(Selu_##sfx, act_params, T, T,                                                    \
           (T)p->gamma * (x > 0 ? x : (T)p->alpha * expm1(x)))                              \
  EW_ROW1P(LeakyRelu_##sfx, act_params, T, T, x < 0 ? (T)p->alpha * x : x)                  \
  EW_ROW1P(HardSigmoid_##sfx, act_params, T, T, hardsig_##sfx((T)p->alpha * x + (T)p->beta)) \
  EW_ROW1P(HardSwish_##sfx, act_params, T, T,                                               \
           x * hardsig_##sfx((T)p->alpha * x + (T)p->beta))                                 \
  EW_ROW1P(Swish_##sfx, act_params, T, T, x * sigmoid_##sfx((T)p->alpha * x))               \
  EW_ROW1P(ThresholdedRelu_##sfx, act_params, T, T, x > (T)p->alpha ? x : (T)0)             \
  EW_ROW1P(Shrink_##sfx, act_params, T, T,                                                  \
           x < -(T)p->alpha ? x + (T)p->beta : x > (T)p->alpha ? x - (T)p->beta : (T)0)      \
  EW_ROW2(PRelu_##sfx, T, T, T, x < 0 ? x * y : x)
ACT_ROWS(f32, float)
ACT_ROWS(f64, double)
EW_ROW1(Sigmoid_f64, double, double, sigmoid_f64(x))
EW_ROW1(Gelu_f64, double, double, 0.5 * x * (1 + erf(x * 0.70710678118654752)))
EW_ROW1(GeluTanh_f64, double, double, gelu_tanh_f64(x))

/* f32 rows with the vmath kernels for contiguous rows (params: act_params) */
static inline const vmath_kernels *act_vm(const void *params) {
  const act_params *p = params;
  return p ? p->vm : NULL;
}
EW_ROW1_VMATH(Sigmoid_f32, VMATH_SIGMOID, act_vm(params), sigmoid_f32(x))
EW_ROW1_VMATH(Gelu_f32, VMATH_GELU_ERF, act_vm(params),
              0.5f * x * (1.0f + erff(x * 0.70710678118654752f)))
EW_ROW1_VMATH(GeluTanh_f32, VMATH_GELU_TANH, act_vm(params), gelu_tanh_f32(x))

/* Integer Relu, PRelu and Shrink (whose bias and threshold stay floats). */
#define SINT_ACT_ROWS(sfx, T, U)                                                          \
  EW_ROW1(Relu_##sfx, T, T, x < 0 ? (T)0 : x)                                            \
  EW_ROW2(PRelu_##sfx, T, T, T, x < 0 ? (T)((U)x * (U)y) : x)
EW_FOR_SINTS(SINT_ACT_ROWS)
#define UINT_ACT_ROWS(sfx, T, U) EW_ROW2(PRelu_##sfx, T, T, T, ((void)y, x)) /* never negative */
EW_FOR_UINTS(UINT_ACT_ROWS)
#define INT_SHRINK_ROWS(sfx, T, U)                                                        \
  EW_ROW1P(Shrink_##sfx, act_params, T, T,                                               \
           x < -p->alpha ? (T)(x + p->beta) : x > p->alpha ? (T)(x - p->beta) : (T)0)
EW_FOR_INTS(INT_SHRINK_ROWS)

#define F(OP) {EW_TABLE_FLOATS(OP)}
static const ew_table relu_tab = {EW_TABLE_FLOATS(Relu), EW_TABLE_SINTS(Relu)},
                      sigmoid_tab = F(Sigmoid), softplus_tab = F(Softplus),
                      softsign_tab = F(Softsign), mish_tab = F(Mish), gelu_tab = F(Gelu),
                      gelu_tanh_tab = F(GeluTanh), elu_tab = F(Elu), celu_tab = F(Celu),
                      selu_tab = F(Selu), leakyrelu_tab = F(LeakyRelu),
                      hardsigmoid_tab = F(HardSigmoid), hardswish_tab = F(HardSwish),
                      swish_tab = F(Swish), thresholdedrelu_tab = F(ThresholdedRelu),
                      shrink_tab = {EW_TABLE_FLOATS(Shrink), EW_TABLE_INTS(Shrink)},
                      prelu_tab = {EW_TABLE_FLOATS(PRelu), EW_TABLE_INTS(PRelu)};
#undef F

/* ---- one-input activations ---- */

static smelt_status act_infer(op_ctx *c, const ew_row_fn *tab) {
  TRY(ew_check_table(c, 0, tab));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status act_run(op_ctx *c, const ew_row_fn *tab, const act_params *p) {
  const tensor *ops[1] = {c->in[0]};
  return ew_apply_f32(c, c->out[0], 1, ops, tab[ops[0]->dtype], p);
}

static act_params attrs(op_ctx *c, double alpha, double beta, double gamma) {
  act_params p = {op_attr_float(c, "alpha", (float)alpha), op_attr_float(c, "beta", (float)beta),
                  op_attr_float(c, "gamma", (float)gamma), NULL};
  return p;
}

#define ACT_OP(NAME, ALPHA, BETA, GAMMA)                                                   \
  static smelt_status infer_##NAME(op_ctx *c) { return act_infer(c, NAME##_tab); }        \
  static smelt_status run_##NAME(op_ctx *c) {                                             \
    act_params p = attrs(c, ALPHA, BETA, GAMMA);                                          \
    return act_run(c, NAME##_tab, &p);                                                    \
  }
ACT_OP(relu, 0, 0, 0)
ACT_OP(softplus, 0, 0, 0)
ACT_OP(softsign, 0, 0, 0)
ACT_OP(mish, 0, 0, 0)
ACT_OP(elu, 1.0, 0, 0)
ACT_OP(celu, 1.0, 0, 0)
ACT_OP(selu, 1.67326319217681884765625, 0, 1.05070102214813232421875)
ACT_OP(leakyrelu, 0.01, 0, 0)
ACT_OP(hardsigmoid, 0.2, 0.5, 0)
ACT_OP(swish, 1.0, 0, 0)
ACT_OP(thresholdedrelu, 1.0, 0, 0)

static smelt_status infer_sigmoid(op_ctx *c) { return act_infer(c, sigmoid_tab); }
static smelt_status run_sigmoid(op_ctx *c) {
  act_params p = {.vm = vmath_for_ops()};
  return act_run(c, sigmoid_tab, &p);
}

/* HardSwish is HardSigmoid with alpha 1/6, beta 1/2, times x. */
static smelt_status infer_hardswish(op_ctx *c) { return act_infer(c, hardswish_tab); }
static smelt_status run_hardswish(op_ctx *c) {
  act_params p = {1.0 / 6, 0.5, 0, NULL};
  return act_run(c, hardswish_tab, &p);
}

/* Shrink: lambd and bias, kept in alpha and beta. */
static smelt_status infer_shrink(op_ctx *c) { return act_infer(c, shrink_tab); }
static smelt_status run_shrink(op_ctx *c) {
  act_params p = {op_attr_float(c, "lambd", 0.5f), op_attr_float(c, "bias", 0.0f), 0, NULL};
  return act_run(c, shrink_tab, &p);
}

static smelt_status gelu_tab_of(op_ctx *c, const ew_row_fn **tab) {
  const char *ap = ir_attr_string(c->node, "approximate", "none");
  if (!strcmp(ap, "none")) *tab = gelu_tab;
  else if (!strcmp(ap, "tanh")) *tab = gelu_tanh_tab;
  else
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute approximate is %s, expected none or tanh",
                   q(ap));
  return SMELT_OK;
}
static smelt_status infer_gelu(op_ctx *c) {
  const ew_row_fn *tab = NULL;
  TRY(gelu_tab_of(c, &tab));
  return act_infer(c, tab);
}
static smelt_status run_gelu(op_ctx *c) {
  const ew_row_fn *tab = NULL;
  TRY(gelu_tab_of(c, &tab));
  act_params p = {.vm = vmath_for_ops()};
  return act_run(c, tab, &p);
}

/* ---- PRelu: slope broadcasts to X (unidirectionally) ---- */

static smelt_status infer_prelu(op_ctx *c) {
  TRY(ew_check_table(c, 0, prelu_tab));
  TRY(ew_check_same_dtype(c, 0, 2));
  int r;
  int64_t d[SMELT_MAX_RANK];
  TRY(ew_broadcast_inputs(c, 0, 2, &r, d));
  const tensor *x = c->in[0];
  bool same = r == x->rank;
  for (int i = 0; same && i < r; i++) same = !dim_known(d[i]) || !dim_known(x->dims[i]) || d[i] == x->dims[i];
  if (!same && r >= 0 && x->rank >= 0) {
    char sx[160], ss[160];
    const tensor *s = c->in[1];
    return err_set(SMELT_ERR_INVALID_MODEL, "slope shape %s does not broadcast to X shape %s",
                   shape_str(ss, sizeof ss, s->rank, s->dims, NULL),
                   shape_str(sx, sizeof sx, x->rank, x->dims, NULL));
  }
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status run_prelu(op_ctx *c) {
  const tensor *ops[2] = {c->in[0], c->in[1]};
  return ew_apply_f32(c, c->out[0], 2, ops, prelu_tab[ops[0]->dtype], NULL);
}

/* ---- Clip ---- */

typedef struct clip_params {
  bool has_lo, has_hi;
  double flo, fhi;
  int64_t ilo, ihi; /* uint64 bounds as their bit patterns */
} clip_params;

/* min first, then max: with min > max every element becomes max (the spec). */
#define CLIP_ROW(sfx, T, LO, HI)                                                   \
  static inline T clip1_##sfx(T x, const clip_params *p) {                         \
    if (p->has_lo && x < (T)(LO)) x = (T)(LO);                                     \
    if (p->has_hi && x > (T)(HI)) x = (T)(HI);                                     \
    return x;                                                                      \
  }                                                                                \
  EW_ROW1P(Clip_##sfx, clip_params, T, T, clip1_##sfx(x, p))
#define CLIP_INT_ROW(sfx, T, U) CLIP_ROW(sfx, T, p->ilo, p->ihi)
CLIP_ROW(f32, float, p->flo, p->fhi)
CLIP_ROW(f64, double, p->flo, p->fhi)
EW_FOR_INTS(CLIP_INT_ROW)
static const ew_table clip_tab = {EW_TABLE_FLOATS(Clip), EW_TABLE_INTS(Clip)};
static const ew_table clip6_tab = {EW_TABLE_FLOATS(Clip)};

static smelt_status infer_clip(op_ctx *c) {
  TRY(ew_check_table(c, 0, c->opset < 11 ? clip6_tab : clip_tab));
  for (int k = 1; k < 3; k++) {
    const tensor *b = op_in(c, k);
    if (!b) continue;
    TRY(ew_check_same_dtype(c, 0, k + 1));
    int64_t n = tensor_numel(b);
    if (b->rank >= 0 && n >= 0 && n != 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d (%s) has %lld elements, expected a scalar",
                     k, k == 1 ? "min" : "max", (long long)n);
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status run_clip(op_ctx *c) {
  clip_params p = {0};
  if (c->opset < 11) {
    p.has_lo = ir_attr_find(c->node, "min") != NULL;
    p.has_hi = ir_attr_find(c->node, "max") != NULL;
    p.flo = op_attr_float(c, "min", -FLT_MAX);
    p.fhi = op_attr_float(c, "max", FLT_MAX);
  } else {
    const tensor *lo = op_in(c, 1), *hi = op_in(c, 2);
    p.has_lo = lo != NULL;
    p.has_hi = hi != NULL;
    if (lo) {
      p.flo = tensor_get_f64(lo, 0);
      p.ilo = tensor_get_i64(lo, 0);
    }
    if (hi) {
      p.fhi = tensor_get_f64(hi, 0);
      p.ihi = tensor_get_i64(hi, 0);
    }
  }
  const tensor *ops[1] = {c->in[0]};
  return ew_apply_f32(c, c->out[0], 1, ops, clip_tab[ops[0]->dtype], &p);
}

#define ROW(NAME, FN) {NAME, "", 1, 1, 1, 1, infer_##FN, run_##FN, false}
const op_def op_family_activation[] = {
    ROW("Relu", relu),
    ROW("Sigmoid", sigmoid),
    ROW("Softplus", softplus),
    ROW("Softsign", softsign),
    ROW("Mish", mish),
    ROW("Gelu", gelu),
    ROW("Elu", elu),
    ROW("Celu", celu),
    ROW("Selu", selu),
    ROW("LeakyRelu", leakyrelu),
    ROW("HardSigmoid", hardsigmoid),
    ROW("HardSwish", hardswish),
    ROW("Swish", swish),
    ROW("ThresholdedRelu", thresholdedrelu),
    ROW("Shrink", shrink),
    {"PRelu", "", 2, 2, 1, 1, infer_prelu, run_prelu, false},
    {"Clip", "", 1, 3, 1, 1, infer_clip, run_clip, false},
    {0}};
#undef ROW
