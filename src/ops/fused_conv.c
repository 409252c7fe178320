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
#include "ops/conv_memo.h"
#include "ops/conv_route.h"
#include "ops/fused_util.h"
#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status fconv_check(op_ctx *c) {
  op_ctx c2;
  tensor xf[2], *ins[4];
  TRY(fused_check_inputs(conv_x_as_f32(c, &c2, xf, ins))); /* X, residual may be bf16: ops/conv_route.h */
  fused_act act;
  return fused_act_read(c->node, &act);
}

static smelt_status check_residual(op_ctx *c) {
  return fused_check_residual(c, c->out[0]->rank, c->out[0]->dims);
}

static smelt_status fconv_infer(op_ctx *c) {
  TRY(fconv_check(c));
  TRY(conv_op_infer(c));
  return check_residual(c);
}

static smelt_status fconv_run(op_ctx *c) {
  bool hit;
  TRY(conv_memo_run(c, &hit)); /* a later run of a plan step: straight to its kernel */
  if (hit) return SMELT_OK;
  TRY(fconv_check(c));
  TRY(check_residual(c));
  const tensor *res = op_in(c, 3);
  if (res && tensor_numel(res) != tensor_numel(c->out[0]))
    return err_set(SMELT_ERR_INTERNAL, "residual size differs from the output's");
  conv_epilogue e = {.residual = res && res->dtype == SMELT_F32 ? res->data : NULL,
                     .residual_h = res && res->dtype == SMELT_BF16 ? res->data : NULL};
  TRY(fused_act_read(c->node, &e.act));
  return conv_memo_record_run(c, &e);
}

const op_def op_family_fused_conv[] = {
    {"Conv", "smelt", 2, 4, 1, 1, fconv_infer, fconv_run, false},
    {0}};
