/* Shape values: what the small integer tensors of a model's shape
 * arithmetic hold, element by element (known, a symbolic dim, or unknown),
 * carried through one inference sweep (ops/infer.c) so that Reshape and
 * Expand with targets computed at run time get symbolic output dims, and,
 * when dims may be read as values, computations whose elements are all
 * known become constants (infer_shape_values.c). */
#ifndef SMELT_OPS_INFER_SHAPE_VALUES_H
#define SMELT_OPS_INFER_SHAPE_VALUES_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

#define SV_MAX SMELT_MAX_RANK

typedef struct shape_val {
  int n;       /* elements; -1: nothing known about the value */
  bool scalar; /* rank 0 (one element) rather than 1-D */
  int64_t v[SV_MAX];
  uint8_t k[SV_MAX]; /* per element: 0 unknown, 1 known (v), 2 symbolic (v is the dim) */
} shape_val;

/* One entry per value of g, all "nothing known"; NULL when out of memory
 * (inference then goes on without shape values). */
shape_val *shape_values_new(const ir_graph *g);
/* After node id's own inference: its output's shape value, Reshape's or
 * Expand's output dims from a computed target, and with dims_as_values a
 * constant for an output whose elements are all known. */
smelt_status shape_values_node(ir_graph *g, int id, shape_val *tab, bool dims_as_values);
/* Outside an inference sweep (a pass): node id's output as a constant (a
 * malloc'ed tensor the caller owns) when its elements are all known from
 * constants and the dims that Shape nodes feeding it read -- Gather(Shape(x),
 * 1) when x's dim 1 is concrete though others are symbolic; *out NULL
 * otherwise. */
smelt_status shape_values_fold(const ir_graph *g, int id, tensor **out);

#endif
