/* The static KV cache rewrite: not a pipeline pass (passes.def) but run by
 * the generator (generate/gen_static.c) on its own copy of a decoder's graph
 * before the pipeline, so that the copy reads and writes a cache allocated
 * once for max_length.  See static_kv.c. */
#ifndef SMELT_PASSES_STATIC_KV_H
#define SMELT_PASSES_STATIC_KV_H

#include "passes/pass.h"

/* past[j] / present[j]: the value ids of layer cache j's graph input and
 * output (n of them); total_dim: the dim (a symbol) the rewritten present
 * values get while lengths are symbolic.  All or nothing: when one cache does
 * not match, the graph is left as it was, *done is false and why says which
 * and why. */
smelt_status pass_static_kv(ir_graph *g, const pass_options *o, pass_report *r, const int *past,
                            const int *present, int n, int64_t total_dim, bool *done, char *why, size_t why_n);

#endif
