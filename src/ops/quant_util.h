/* Shared pieces of the quantization families (quantize.c, qlinear.c):
 * scale/zero-point layouts, exact rounding and saturation. */
#ifndef SMELT_OPS_QUANT_UTIL_H
#define SMELT_OPS_QUANT_UTIL_H

#include <math.h>

#include "ops/op.h"

/* How a scale or zero point maps onto the quantized tensor, which is viewed
 * as [outer, D, inner] around the quantization axis:
 *  per-tensor: one value;  per-axis: value d;  blocked: a tensor like x with
 *  ceil(D / block) entries on the axis, value (o, d / block, i). */
typedef enum q_mode { Q_PER_TENSOR, Q_PER_AXIS, Q_BLOCKED } q_mode;

typedef struct q_layout {
  q_mode mode;
  int64_t outer, D, inner, block, Db;
} q_layout;

/* Works out the layout of param (scale, or zero point with the same shape)
 * for x from the axis and block_size attributes; what names it in errors. */
smelt_status q_layout_make(op_ctx *c, const tensor *x, const tensor *param, const char *what,
                           q_layout *l);
/* The parameter index of element (o, d, i) of x. */
static inline int64_t q_index(const q_layout *l, int64_t o, int64_t d, int64_t i) {
  switch (l->mode) {
    case Q_PER_TENSOR: return 0;
    case Q_PER_AXIS: return d;
    default: return (o * l->Db + d / l->block) * l->inner + i;
  }
}

/* The integer quantized types and their ranges; false for other types. */
bool q_int_range(smelt_dtype t, int64_t *lo, int64_t *hi);
/* Rounds half to even (the current rounding mode, which smelt never changes)
 * and clamps into [lo, hi]; NaN becomes 0. */
static inline int64_t q_round_clamp(double v, int64_t lo, int64_t hi) {
  if (isnan(v)) return 0;
  double r = nearbyint(v);
  if (r <= (double)lo) return lo;
  if (r >= (double)hi) return hi;
  return (int64_t)r;
}

#endif
