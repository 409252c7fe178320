/* Strided views through layout ops: a value made from another only by ops
 * that move or select elements (Transpose, Gather of one constant index,
 * Split, Slice with positive steps) and ops that only reshape (Reshape,
 * Squeeze, Unsqueeze, Flatten, Identity) is a strided view of the first
 * one's memory -- an element offset and a stride per dim -- whenever every
 * shape on the way is concrete and each reshape can be done without a copy
 * (as numpy's reshape decides).  A kernel that takes strided operands can
 * then read that first value in place, and the layout ops die. */
#ifndef SMELT_PASSES_VIEW_CHAIN_H
#define SMELT_PASSES_VIEW_CHAIN_H

#include "passes/rewrite.h"

#define VIEW_CHAIN_MAX 16 /* layout ops walked back at most */

typedef struct view_chain {
  int root;                            /* the value the view reads */
  int src_rank;
  int64_t src_dims[SMELT_MAX_RANK];    /* root's dims (concrete) */
  int rank;
  int64_t offset;                      /* elements into root */
  int64_t dims[SMELT_MAX_RANK], strides[SMELT_MAX_RANK]; /* of v, in v's axis order */
  bool moves;                          /* one of them moves or selects elements (not only a reshape) */
} view_chain;

/* Walks back from float32 value v through layout ops with concrete shapes
 * and replays them forward as a strided view of the value found there.
 * False (vc undefined) when v comes from no layout op, or a shape is not
 * concrete, or a reshape on the way would need a copy. */
bool view_chain_trace(rewriter *w, int v, view_chain *vc);

#endif
