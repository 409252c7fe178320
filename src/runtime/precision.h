/* Session precision (smelt.h, smelt_precision): what this build implements. */
#ifndef SMELT_RUNTIME_PRECISION_H
#define SMELT_RUNTIME_PRECISION_H

#include "ir/ir.h"

/* SMELT_OK for the precisions this build runs (all five: fp32, bf16, fp16,
 * int8, int4); SMELT_ERR_INVALID_ARGUMENT for a value outside the enum. */
smelt_status precision_check(smelt_precision p);

/* For the eager executor at a precision other than fp32: a clone of g with
 * the autocast pass applied (passes/autocast.c), owned by the caller
 * (ir_graph_free); its log lines go to r (may be NULL).  *out is NULL for
 * fp32: run g itself. */
struct pass_report;
smelt_status precision_graph(const ir_graph *g, smelt_precision p, struct pass_report *r, ir_graph **out);

#endif
