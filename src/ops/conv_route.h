/* The Conv op's routes, as the kernel registry (conv_registry.h) calls
 * them: internal to ops/conv*.c.  ops/conv.c owns the geometry, the
 * im2col + GEMM driver, the depthwise loop, the im2col + transposed GEMM
 * route and the float64 loop; ops/conv_routes.c the fast kernels over
 * prepared weights (kernels/conv.h), the 1x1 routes and the strided 1x1
 * over its subsampled input; ops/conv_patch.c the patch conv (kernel ==
 * stride) as a 1x1 over its input rearranged space-to-depth. */
#ifndef SMELT_OPS_CONV_ROUTE_H
#define SMELT_OPS_CONV_ROUTE_H

#include "ops/conv_core.h"
#include "ops/conv_registry.h"
#include "ops/nn_util.h"

/* Positions up to which the im2col + transposed GEMM route takes a conv (a 16x16 plane) */
#define CONV_COL_T_MAX_S 256

typedef struct conv_geom {
  nn_window w;
  int64_t N, C, M, G, Cg, Mg;
  int64_t S_in, S_out, Kk, Kdim; /* spatial in/out sizes, taps, GEMM depth Cg*Kk */
  bool x_cl, y_cl;               /* X, Y channels-last bf16 (the node's cl_in, cl_out; kernels/conv.h:
                                  * conv2d_desc.x_cl, y_cl) */
} conv_geom;

/* A run's operands (prepare: X, B, Y and ep NULL, W the node's). */
typedef struct conv_call {
  op_ctx *c;
  const conv_geom *g;
  const float *X, *W, *B;
  float *Y;
  const conv_epilogue *ep;
} conv_call;

/* A copy out of X (the subsampled input, the column matrix) into dst,
 * split over items on the pool. */
typedef struct conv_xcopy_job {
  const conv_geom *g;
  const float *X;
  float *dst;
} conv_xcopy_job;

/* The query for g on c's node (its weight's form: W's declared element
 * type, else the node's precision mark; the session's cache, isa_active(),
 * the pool's threads, SMELT_CONV), computing in f32 (or f64 for a float64
 * conv). */
void conv_query_of(op_ctx *c, const conv_geom *g, conv_query *q);
/* W's (input 1's) element type as declared in c's graph (ir/quant.h:
 * passes/autocast.c declares bf16 the weights of the convolutions it marks
 * bf16); NULL: none, or one no conv weight form stands for. */
const ir_quant *conv_weight_declared(const op_ctx *c);
void conv_desc_of(const conv_geom *g, conv2d_desc *d);
/* The strided 1x1 conv g as a stride-1 one over its subsampled input (*g2); false: not one. */
bool conv_pw_subsample(const conv_geom *g, conv_geom *g2);
/* The patch conv g (kernel == stride, no pads, no dilation, one group, 1-D
 * or 2-D) as a 1x1 one over its input rearranged space-to-depth (*g2,
 * C * taps channels; ops/conv_patch.c); false: not one. */
bool conv_patch_geom(const conv_geom *g, conv_geom *g2);
/* Runs a->g as the conv g2 over a copy of X (N x g2->C x g2->S_in floats,
 * scratch for the call) that copy makes, items of a conv_xcopy_job split
 * over the pool (when the copy is 32K floats or more); what names the copy
 * in an out-of-memory error. */
smelt_status conv_run_rewritten(const conv_call *a, const conv_geom *g2, int64_t items, int64_t grain,
                                void (*copy)(void *ctx, int64_t i0, int64_t i1), const char *what);
/* "<how>, then <what runs g2>" into buf for --explain (g2 NULL: "?"). */
void conv_describe_rewritten(const conv_call *a, const conv_geom *g2, const char *how, char *buf, size_t n);
/* Runs g on the registry's entry for it (and the next when one declines). */
smelt_status conv_f32(op_ctx *c, const conv_geom *g, const float *X, const float *W, const float *B, float *Y,
                      const conv_epilogue *ep);
/* Prepares g's weights on the registry's entry for it. */
smelt_status conv_prepare_geom(op_ctx *c, const conv_geom *g);
/* What conv_f32 runs g on, for --explain. */
void conv_describe_geom(op_ctx *c, const conv_geom *g, char *buf, size_t n);

/* The part of ep the fast kernels apply themselves (residual, and Relu /
 * Clip as a clamp); *rest: the activation left for a pass after them. */
conv2d_epilogue conv_kernel_epilogue(const conv_epilogue *ep, fused_act *rest);
/* Y = act(Y + residual) over n elements on the pool. */
void conv_epilogue_after(smelt_pool *pool, const conv_epilogue *ep, float *y, int64_t n);
/* Y = W X over C rows of X on the transposed route over W^T packed (wt). */
struct gemm_packed;
smelt_status conv_pw_t_ep(op_ctx *c, const conv_geom *g, int64_t C, const float *X, const float *W,
                          const struct gemm_packed *wt, const float *B, const conv_epilogue *ep, float *Y);

/* bf16 activations (passes/bf16_acts.c keeps a conv's output in bf16 where
 * every reader is a convolution that takes it so):
 *   - whether node nd is marked bf16 by autocast;
 *   - whether c reads a bf16 X or residual (input 3), the other fp32 or
 *     bf16, beside fp32 W and B on a node so marked;
 *   - c itself, or c2 over ins (c->n_in entries) with X and the residual
 *     viewed as fp32, for the type checks (xf: two views);
 *   - whether c (X fp32 or bf16, W and B fp32) runs on a bf16 kernel that
 *     reads and writes bf16 itself (conv2d_bf16_io) with activation act,
 *     at `threads` (0: c's pool's);
 *   - runs c so when it applies (*done), else leaves it to the f32 copies. */
bool conv_marked_bf16(const ir_node *nd);
/* ... or given bf16 activations by bf16_acts without it (a depthwise
 * convolution over channels-last ones: cl_in / cl_out) */
bool conv_bf16_acts_node(const ir_node *nd);
bool conv_bf16_act_in(op_ctx *c);
op_ctx *conv_x_as_f32(op_ctx *c, op_ctx *c2, tensor *xf, tensor **ins);
bool conv_bf16_io_applies(op_ctx *c, const conv_geom *g, const fused_act *act, int threads);
/* conv_bf16_io_applies, also giving (where it does, each may be NULL) the
 * kernel's layout (cb_form) and c's geometry as the kernels see it */
bool conv_bf16_io_pick(op_ctx *c, const conv_geom *g, const fused_act *act, int threads, int *form,
                       conv2d_desc *d);
/* The channels-last bf16 operands bf16_acts gave node nd (kernels/
 * conv_bf16.h: CB_CL_X for X, CB_CL_R for the residual, CB_CL_Y for Y;
 * node attributes cl_in, cl_res, cl_out) */
unsigned conv_cl_of(const ir_node *nd);
/* Whether c (a depthwise convolution, its Y channels-last bf16, its X so
 * or fp32 / bf16 planes, no residual, activation act) runs on kernels/
 * conv_bf16.h's conv_dw_cl_run here; and the run, when it does (*done; cl:
 * the node's channels-last operands, CB_CL_Y and maybe CB_CL_X) */
bool conv_dw_cl_applies(op_ctx *c, const conv_geom *g, const fused_act *act);
/* The marks conv_dw_cl_try takes: Y channels-last, X so or not, no residual */
bool conv_dw_cl_marks(unsigned cl);
smelt_status conv_dw_cl_try(op_ctx *c, const conv_geom *g, const conv_epilogue *e, unsigned cl, bool *done);
/* Runs c on the bf16 kernel, its operands named in cl channels-last, when
 * conv_bf16_io_applies (*done); else leaves it to the f32 copies. */
smelt_status conv_bf16_io_run(op_ctx *c, const conv_geom *g, const conv_epilogue *e, unsigned cl, bool *done);

/* The registry's hooks (conv_kernel's prepare, run, describe). */
#define CONV_ROUTE(name)                                                                                         \
  smelt_status conv_route_##name##_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a,       \
                                           bool *taken);                                                       \
  smelt_status conv_route_##name##_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken); \
  void conv_route_##name##_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf,   \
                                    size_t n)
CONV_ROUTE(fast);
CONV_ROUTE(sub);
CONV_ROUTE(patch);
CONV_ROUTE(pw);
CONV_ROUTE(pw_t);
CONV_ROUTE(col_t);
CONV_ROUTE(im2col);
CONV_ROUTE(dw_loop);
CONV_ROUTE(f64);
#undef CONV_ROUTE
void conv_route_pw_raw_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n);

#endif
