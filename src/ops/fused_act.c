/* Activations applied by the fused smelt ops (see fused_act.h).  Formulas
 * follow the eager kernels (activation.c) so that fused and unfused graphs
 * agree to rounding. */
#include "ops/fused_act.h"

#include <math.h>
#include <string.h>

#include "kernels/vmath.h"
#include "util/err.h"
#include "util/quote.h"

static const char *const act_names[] = {"none", "relu", "clip", "sigmoid", "tanh", "gelu", "silu", "gelu_tanh"};

const char *fused_act_name(fused_act_kind k) {
  return (unsigned)k < sizeof act_names / sizeof *act_names ? act_names[k] : NULL;
}

bool fused_act_parse(const char *name, fused_act_kind *k) {
  for (unsigned i = 0; i < sizeof act_names / sizeof *act_names; i++)
    if (!strcmp(name, act_names[i])) {
      *k = (fused_act_kind)i;
      return true;
    }
  return false;
}

/* The vmath function of an activation computed outside the tile. */
static int vmath_op_of(fused_act_kind k) {
  switch (k) {
    case FUSED_ACT_SIGMOID: return VMATH_SIGMOID;
    case FUSED_ACT_SILU: return VMATH_SILU;
    case FUSED_ACT_TANH: return VMATH_TANH;
    case FUSED_ACT_GELU: return VMATH_GELU_ERF;
    case FUSED_ACT_GELU_TANH: return VMATH_GELU_TANH;
    default: return -1;
  }
}

smelt_status fused_act_read(const ir_node *nd, fused_act *a) {
  const char *name = ir_attr_string(nd, "activation", "none");
  if (!fused_act_parse(name, &a->kind))
    return err_set(SMELT_ERR_INVALID_MODEL, "unknown activation %s", q(name));
  a->lo = ir_attr_float(nd, "clip_min", -INFINITY);
  a->hi = ir_attr_float(nd, "clip_max", INFINITY);
  a->vm = vmath_op_of(a->kind) >= 0 ? vmath_for_ops() : NULL;
  if (a->kind == FUSED_ACT_CLIP && !(a->lo <= a->hi))
    return err_set(SMELT_ERR_INVALID_MODEL, "clip_min %g is above clip_max %g", a->lo, a->hi);
  return SMELT_OK;
}

bool fused_act_in_gemm(const fused_act *a, gemm_epilogue *e) {
  switch (a->kind) {
    case FUSED_ACT_NONE: e->act = GEMM_ACT_NONE; return true;
    case FUSED_ACT_RELU: e->act = GEMM_ACT_RELU; return true;
    case FUSED_ACT_CLIP:
      e->act = GEMM_ACT_CLIP;
      e->clip_lo = a->lo;
      e->clip_hi = a->hi;
      return true;
    default: e->act = GEMM_ACT_NONE; return false;
  }
}

static inline float sigmoid_f(float x) {
  if (x >= 0) return 1.f / (1.f + expf(-x));
  float e = expf(x);
  return e / (1.f + e);
}

void fused_act_apply(const fused_act *a, float *y, int64_t n) {
  int op = vmath_op_of(a->kind);
  const vmath_kernels *vm = op < 0 ? NULL : a->vm ? a->vm : vmath_for_ops();
  if (vm) {
    vm->op[op](y, y, n);
    return;
  }
  switch (a->kind) {
    case FUSED_ACT_NONE: return;
    case FUSED_ACT_RELU:
      for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0 ? 0.f : y[i];
      return;
    case FUSED_ACT_CLIP:
      for (int64_t i = 0; i < n; i++) y[i] = y[i] < a->lo ? a->lo : y[i] > a->hi ? a->hi : y[i];
      return;
    case FUSED_ACT_SIGMOID:
      for (int64_t i = 0; i < n; i++) y[i] = sigmoid_f(y[i]);
      return;
    case FUSED_ACT_SILU:
      for (int64_t i = 0; i < n; i++) y[i] *= sigmoid_f(y[i]);
      return;
    case FUSED_ACT_TANH:
      for (int64_t i = 0; i < n; i++) y[i] = tanhf(y[i]);
      return;
    case FUSED_ACT_GELU:
      for (int64_t i = 0; i < n; i++) y[i] = 0.5f * y[i] * (1.f + erff(y[i] * 0.70710678118654752f));
      return;
    case FUSED_ACT_GELU_TANH:
      for (int64_t i = 0; i < n; i++)
        y[i] = 0.5f * y[i] * (1.f + tanhf(0.7978845608028654f * (y[i] + 0.044715f * y[i] * y[i] * y[i])));
      return;
  }
}

typedef struct act_job {
  const fused_act *a;
  float *y;
} act_job;

static void act_chunk(void *ctx, int64_t b, int64_t e) {
  act_job *j = ctx;
  fused_act_apply(j->a, j->y + b, e - b);
}

void fused_act_apply_pool(smelt_pool *pool, const fused_act *a, float *y, int64_t n) {
  if (a->kind == FUSED_ACT_NONE || n <= 0) return;
  act_job j = {a, y};
  pool_parallel_for(pool, n, 16384, act_chunk, &j);
}
