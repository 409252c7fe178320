/* What the compiler knows about a specialized graph: execution order,
 * consumers of every value, and how each node can be executed. */
#ifndef SMELT_COMPILE_CGRAPH_H
#define SMELT_COMPILE_CGRAPH_H

#include "codegen/kir.h"
#include "ir/ir.h"

typedef enum cn_kind {
  CN_CONST = 0, /* every output is a known constant: nothing to run */
  CN_VIEW,      /* output is the input's bytes with another shape (Reshape, Identity...) */
  CN_PW,        /* elementwise: can be generated */
  CN_RED,       /* reduction over trailing dims (Softmax, LayerNorm, Reduce*...) */
  CN_WIN,       /* 2-D pool or depthwise conv: a generated window kernel of its own */
  CN_LIB,       /* a library kernel (the op's run function) on planned buffers */
  CN_BREAK      /* graph break: the eager path (node_run) with run-time shapes */
} cn_kind;

typedef struct cn_info {
  cn_kind kind;
  const char *why; /* CN_BREAK / CN_LIB: the reason, for --explain and fullgraph */
  /* CN_PW: the output shape; CN_RED: the input shape, reduced from dim k on */
  int rank, k;
  int64_t dims[SMELT_MAX_RANK];
  win_geom win; /* CN_WIN */
  int def;      /* CN_PW: index in lower.c's pointwise table; CN_RED: the reduction kind */
} cn_info;

typedef struct cgraph {
  ir_graph *g;
  int *order; /* node ids in execution order */
  int *pos;   /* node id -> index in order */
  int *use_start, *use_node; /* CSR: consumers of value v are use_node[use_start[v]..use_start[v+1]) */
  bool *is_output;           /* value is a graph output */
  cn_info *info;             /* per node */
  int *vexpr;                /* per value, -1 between calls: lower_group's scratch */
  bool dynamic;              /* dynamic compile: no window kernels (their geometry is literal) */
  bool tune;                 /* max-autotune: generate candidates the library may beat */
  bool whole_eager;          /* subgraphs or sequences: the plan runs the graph eagerly */
  const char *whole_eager_why;
  int whole_eager_node;
} cgraph;

smelt_status cgraph_build(ir_graph *g, bool dynamic, bool tune, cgraph *cg);
void cgraph_free(cgraph *cg);

/* True if the value's shape is fully concrete. */
bool value_concrete(const ir_value *v);
/* Contiguous element strides of a dense shape. */
void shape_strides(int rank, const int64_t *dims, int64_t *st);

#endif
