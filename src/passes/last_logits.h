/* Last-position logits: not a pipeline pass (passes.def) but run by the
 * generator (generate/gen_static.c) on its own copy of a decoder's graph,
 * whose caller keeps only the last position's logits: the LM head then runs
 * over one row per sequence instead of every prompt position.  See
 * last_logits.c. */
#ifndef SMELT_PASSES_LAST_LOGITS_H
#define SMELT_PASSES_LAST_LOGITS_H

#include "passes/pass.h"

/* logits: the value id of the logits graph output ([batch, seq, vocab]).
 * When it matches, the output becomes [batch, 1, vocab] (the last
 * position's row) and *done is true; else the graph is left as it was,
 * *done is false and why says why. */
smelt_status pass_last_logits(ir_graph *g, const pass_options *o, pass_report *r, int logits, bool *done, char *why,
                              size_t why_n);

#endif
