/* A plan step's run memo: what an op worked out on one run -- its kernel,
 * its prepared weights, its geometry -- kept for the step's later runs, so
 * they go straight to the kernel instead of asking the node's attributes,
 * the kernel registry and the cost model again (about a microsecond a node,
 * paid while the pool's other threads wait).
 *
 * The op decides what its memo holds and checks, on every use, that the run
 * matches the one that made it (input types, shapes, constant weights,
 * threads, ISA); a run that does not takes the op's full path.  One memo a
 * step, published once and never changed, so concurrent runs of a plan may
 * read it; freed with the plan.  op_ctx.memo is NULL outside a compiled
 * plan (eager runs, tests, static inference): nothing is remembered. */
#ifndef SMELT_OPS_OP_MEMO_H
#define SMELT_OPS_OP_MEMO_H

#include <stdatomic.h>
#include <stdbool.h>

#include "ops/op.h"

struct op_memo {
  _Atomic(void *) data; /* malloc'd by the op; NULL: none yet */
};

/* c's memo data, or NULL (none yet, or c has no memo slot). */
void *op_memo_get(const op_ctx *c);

/* True when c has a slot without data yet (a run worth recording). */
bool op_memo_open(const op_ctx *c);

/* Publishes data (from malloc) as c's memo; when c has no slot or another
 * run published first, data is freed. */
void op_memo_put(op_ctx *c, void *data);

/* Frees m's data; m is empty after. */
void op_memo_clear(op_memo *m);

#endif
