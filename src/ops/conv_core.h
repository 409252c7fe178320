/* The Conv implementation shared by ONNX Conv (conv.c) and the fused
 * smelt.Conv (fused_conv.c): shape inference and the f32 im2col + GEMM core
 * with an epilogue (bias, residual and activation applied per output tile
 * right after its GEMM, bias/relu/clip inside the GEMM's own epilogue). */
#ifndef SMELT_OPS_CONV_CORE_H
#define SMELT_OPS_CONV_CORE_H

#include "ops/fused_act.h"

typedef struct conv_epilogue {
  const float *residual; /* same shape as Y, added before the activation; NULL: none */
  const uint16_t *residual_h; /* or the residual in bf16 (passes/bf16_acts.c); NULL: none */
  fused_act act;
  /* the run memo's recorder (ops/conv_memo.h): the route that runs the conv
   * as it is notes itself there; NULL in runs through copies */
  struct conv_memo *rec;
} conv_epilogue;

/* Conv's inference over inputs X, W, B (inputs 0..2 of c; others ignored). */
smelt_status conv_op_infer(op_ctx *c);
/* Conv's kernel: Y = act(conv(X, W) + B + residual).  A non-trivial epilogue
 * needs float32 (the caller checks). */
smelt_status conv_op_run(op_ctx *c, const conv_epilogue *e);
/* op_def.prepare of Conv and smelt.Conv: the fast kernel's weights into the cache. */
smelt_status conv_op_prepare(op_ctx *c);
/* Whether a smelt.Conv node of graph g (its input and weight shapes known)
 * takes the 1x1 route, whose kernels read each residual value just before
 * they write its output over it: compile/schedule.c then gives the output
 * the residual's buffer when the residual is last read there.  On any
 * other route conv_op_run, handed such an output, copies the residual
 * aside first, so a wrong answer here costs a copy, never a wrong result. */
bool conv_residual_in_place(const ir_graph *g, const ir_node *nd);
/* Whether Conv / smelt.Conv node nd of g (shapes known), marked bf16 by
 * autocast, runs on a bf16 kernel that reads and writes bf16 itself at
 * `threads` (ops/conv_route.h: conv_bf16_io_applies; its X fp32 or bf16,
 * W, B and the residual fp32): passes/bf16_acts.c asks it. */
bool conv_node_bf16_io(const ir_graph *g, const ir_node *nd, int threads);
/* ... and where it does, the kernel's layout there (kernels/conv_bf16.h:
 * cb_form); -1 where it does not.  x_cl, y_cl: its X, Y taken as
 * channels-last (1) or not (0), whatever the node says (-1: as it says,
 * cl_in, cl_out): the pass asks before it marks. */
int conv_node_bf16_form(const ir_graph *g, const ir_node *nd, int threads, int x_cl, int y_cl);
/* Whether Conv / smelt.Conv node nd of g (shapes known) is a depthwise
 * convolution that runs between channels-last bf16 activations
 * (conv_dw_cl_run: no residual; no activation, ReLU or a clamp) */
bool conv_node_dw_cl(const ir_graph *g, const ir_node *nd);
/* op_describe_fn of Conv and smelt.Conv: the geometry, the element type and
 * the kernel conv_op_run takes ("1x1 pointwise on X in place", "winograd
 * F(4x4,3x3)", "bf16 on AMX tiles", ...). */
smelt_status conv_op_describe(op_ctx *c, char *buf, size_t n);

#endif
