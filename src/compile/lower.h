/* From ONNX nodes to the kernel IR (lower.c): which nodes the compiler can
 * generate code for (classification, used by cgraph.c) and what a set of
 * them computes (lowering, used by fuse.c). */
#ifndef SMELT_COMPILE_LOWER_H
#define SMELT_COMPILE_LOWER_H

#include "compile/cgraph.h"

/* Classification of one node: info->cls and, for pointwise nodes, the
 * entry of lower.c's table (info->def). */
void lower_classify(const cgraph *cg, int node, cn_info *info);

/* Builds the kernel IR for a set of nodes (in execution order) iterating over
 * I (rank r, outer dims k).  in_group marks the set.  Values produced in the
 * set and needed outside it become stores.  false if the set cannot be one
 * kernel (shapes do not line up, too big, unsupported form). */
bool lower_group(const cgraph *cg, const int *nodes, int n, const bool *in_group, int r, int k,
                 const int64_t *I, kir_group *kg);

#endif
