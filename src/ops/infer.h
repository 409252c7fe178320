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

#endif
