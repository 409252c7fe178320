/* Every pass of passes.def as a function, for the pipeline and for tests that
 * run one pass alone: smelt_status pass_<name>(g, o, r, &changes), where
 * *changes is increased by the number of rewrites made. */
#ifndef SMELT_PASSES_PASSES_LIST_H
#define SMELT_PASSES_PASSES_LIST_H

#include "passes/pass.h"

#define PASS(name, kind) \
  smelt_status pass_##name(ir_graph *g, const pass_options *o, pass_report *r, int *changes);
#include "passes/passes.def"
#undef PASS

#endif
