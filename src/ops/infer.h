/* Static type and shape inference over a whole graph (infer.c): each node's
 * op infer() in topological order, small constant nodes evaluated on the spot
 * with node_run so that shape arithmetic yields concrete shapes.  It sits in
 * ops/, above the op registry it calls, not in ir/. */
#ifndef SMELT_OPS_INFER_H
#define SMELT_OPS_INFER_H

#include "ir/ir.h"

/* Runs each node's type/shape inference in topological order, filling value
 * dtypes and shapes (symbolic where not concrete). */
smelt_status ir_graph_infer(ir_graph *g);

/* As ir_graph_infer, and Shape/Size of a value whose (reported) dims are all
 * concrete yield constants too, so the exporters' shape arithmetic behind them
 * (Shape -> Gather -> Concat -> Reshape -> Shape ...) resolves in one sweep
 * through every layer.  For the passes over a graph whose concrete dims are
 * guaranteed (sessions reject inputs that differ from a concrete dim); the
 * plain ir_graph_infer leaves Shape to run time. */
smelt_status ir_graph_infer_dims(ir_graph *g);

/* Whether the dims Shape/Size node nd reports of x (Shape's start/end slice)
 * are all concrete. */
bool infer_dims_suffice(const ir_node *nd, const ir_value *x);
/* The dims [*lo, *hi) of an input of rank `rank` that Shape node nd reads
 * (opset 15's start and end, clamped; all of them before). */
void infer_shape_window(const ir_node *nd, int rank, int64_t *lo, int64_t *hi);

#endif
