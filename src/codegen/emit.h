/* C source for fused groups.
 *
 * Every kernel is two functions: a body smb_NAME(ctx, t0, t1) that runs tasks
 * [t0, t1) — a task is one row (row groups) or one chunk of a row (pointwise
 * groups) — and an entry NAME(args, params, rt) that splits the work over the
 * runtime's thread pool.  args: the operand pointers, inputs then outputs.
 * params: the sizes and strides in dynamic mode (NULL when static: then they
 * are literals in the code).  Only identifiers made here appear in the text;
 * constants are printed as hex floats. */
#ifndef SMELT_CODEGEN_EMIT_H
#define SMELT_CODEGEN_EMIT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "codegen/kir.h"
#include "util/strbuf.h"

#define EMIT_ABI 1
#define EMIT_MAX_PARAMS (2 + SMELT_MAX_RANK * (2 * KIR_MAX_OPERANDS + 1))

/* The tunable shape of the generated loops (max-autotune varies them). */
typedef struct emit_opts {
  int lanes;     /* reduction accumulators per row: 8, 16 or 32 */
  int unroll;    /* 0: the C compiler decides; else #pragma GCC unroll N on inner loops */
  int64_t grain; /* elements of work a task should at least have */
  bool dynamic;  /* sizes and strides read from the parameter block */
} emit_opts;

emit_opts emit_opts_default(void);

/* The elements a task of g should at least have, from `grain` (sized for an
 * Add: two operands read, one written) and what one element of g costs. */
int64_t emit_grain(const kir_group *g, int64_t grain);

/* Appends kernel `name` for g (whose collapsed loops are lp).  With
 * o->dynamic, params[0..*n_params) receive the values the kernel reads from
 * its parameter block; else *n_params is 0. */
void emit_kernel(strbuf *sb, const kir_group *g, const kir_loops *lp, const char *name,
                 const emit_opts *o, int64_t *params, int *n_params);

/* Appends window kernel `name` (pooling or depthwise convolution; static
 * geometry only).  Arguments: x, [w, bias, residual], y. */
void emit_window(strbuf *b, const win_geom *w, const char *name, const emit_opts *o);

/* Parameter values of g for a dynamic kernel (same order emit_kernel uses). */
int emit_params(const kir_group *g, const kir_loops *lp, int64_t *params);

/* The fixed head of every generated translation unit. */
const char *emit_prelude_text(void);

#endif
