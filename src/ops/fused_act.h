/* The activation a fused smelt op applies to its result (smelt.Gemm,
 * smelt.Conv): attribute `activation` = "none" | "relu" | "clip" | "sigmoid" |
 * "tanh" | "gelu" (the exact, erf form) | "silu" (x * sigmoid(x), ONNX's
 * Sigmoid + Mul) | "gelu_tanh" (Gelu with approximate = "tanh"), with
 * `clip_min` / `clip_max` for clip (defaults: -inf / +inf).  Relu and clip
 * run inside the GEMM's epilogue while the tile is in registers; the others
 * on each block right after it, on the vectorized functions of
 * kernels/vmath.h that the eager Sigmoid, Tanh and Gelu use (silu: x / (1 +
 * e^-x) in one division). */
#ifndef SMELT_OPS_FUSED_ACT_H
#define SMELT_OPS_FUSED_ACT_H

#include "kernels/gemm.h"
#include "ops/op.h"

typedef enum fused_act_kind {
  FUSED_ACT_NONE = 0,
  FUSED_ACT_RELU,
  FUSED_ACT_CLIP,
  FUSED_ACT_SIGMOID,
  FUSED_ACT_TANH,
  FUSED_ACT_GELU,
  FUSED_ACT_SILU,
  FUSED_ACT_GELU_TANH
} fused_act_kind;

typedef struct fused_act {
  fused_act_kind kind;
  float lo, hi; /* clip bounds */
  /* the vectorized functions for an activation applied after the tile, found
   * once by fused_act_read (NULL: looked up per call, or libm's on the
   * portable path) */
  const struct vmath_kernels *vm;
} fused_act;

/* Reads the node's activation attributes; error naming a bad one. */
smelt_status fused_act_read(const ir_node *nd, fused_act *a);
/* "relu", ... for attributes and logs; NULL for an unknown kind. */
const char *fused_act_name(fused_act_kind k);
/* Parses a name; false if unknown. */
bool fused_act_parse(const char *name, fused_act_kind *k);
/* The GEMM epilogue can apply it in the tile (none, relu, clip): sets e->act. */
bool fused_act_in_gemm(const fused_act *a, gemm_epilogue *e);
/* y[0..n) = act(y[0..n)). */
void fused_act_apply(const fused_act *a, float *y, int64_t n);
/* The same over n elements on the pool's threads. */
void fused_act_apply_pool(smelt_pool *pool, const fused_act *a, float *y, int64_t n);

#endif
