/* smelt.Conv: Conv with its epilogue, made by fuse_epilogue from Conv +
 * residual Add + activation.
 *
 *   Y = act(Conv(X, W, B) + residual)
 *
 * Inputs: X, W, B (optional), residual (optional, exactly Y's shape); float32
 * only.  Attributes: Conv's (kernel_shape, strides, pads, dilations, group,
 * auto_pad) plus activation / clip_min / clip_max (fused_act.h) and
 * has_bias / has_residual (must agree with the inputs given).  Runs on Conv's
 * own im2col + GEMM core (conv_core.h) with the epilogue applied per tile. */
#include <string.h>

#include "ops/conv_core.h"
#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status fconv_check(op_ctx *c) {
  static const smelt_dtype f32_only[] = {SMELT_F32, SMELT_UNDEFINED};
  for (int i = 0; i < c->n_in; i++)
    if (op_in(c, i) && !(c->static_infer && op_in(c, i)->dtype == SMELT_UNDEFINED))
      TRY(op_check_dtype(c, i, f32_only));
  const char *names[2] = {"has_bias", "has_residual"};
  for (int i = 0; i < 2; i++) {
    int64_t f = op_attr_int(c, names[i], -1);
    bool present = op_in(c, 2 + i) != NULL;
    if (f >= 0 && (f != 0) != present)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s is %lld but input %d is %s", names[i], (long long)f,
                     2 + i, present ? "given" : "absent");
  }
  fused_act act;
  return fused_act_read(c->node, &act);
}

static smelt_status check_residual(op_ctx *c) {
  const tensor *res = op_in(c, 3), *y = c->out[0];
  if (!res || res->rank < 0 || y->rank < 0) return SMELT_OK;
  bool ok = res->rank == y->rank;
  for (int d = 0; ok && d < y->rank; d++)
    ok = !dim_known(res->dims[d]) || !dim_known(y->dims[d]) || res->dims[d] == y->dims[d];
  if (ok) return SMELT_OK;
  char a[128], b[128];
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "residual shape %s is not the output shape %s",
                 shape_str(a, sizeof a, res->rank, res->dims, NULL),
                 shape_str(b, sizeof b, y->rank, y->dims, NULL));
}

static smelt_status fconv_infer(op_ctx *c) {
  TRY(fconv_check(c));
  TRY(conv_op_infer(c));
  return check_residual(c);
}

static smelt_status fconv_run(op_ctx *c) {
  TRY(fconv_check(c));
  TRY(check_residual(c));
  const tensor *res = op_in(c, 3);
  if (res && res->nbytes != c->out[0]->nbytes)
    return err_set(SMELT_ERR_INTERNAL, "residual size differs from the output's");
  conv_epilogue e = {.residual = res ? res->data : NULL};
  TRY(fused_act_read(c->node, &e.act));
  return conv_op_run(c, &e);
}

const op_def op_family_fused_conv[] = {
    {"Conv", "smelt", 2, 4, 1, 1, fconv_infer, fconv_run, false},
    {0}};
