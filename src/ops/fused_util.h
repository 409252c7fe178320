/* Checks shared by the fused smelt ops that take a bias and a residual
 * (smelt.Gemm, smelt.Conv): inputs 0 and 1 are the operands, 2 the bias and
 * 3 the residual, both optional. */
#ifndef SMELT_OPS_FUSED_UTIL_H
#define SMELT_OPS_FUSED_UTIL_H

#include "ops/op.h"

/* Every given input is float32 (an unknown type passes during static
 * inference), and has_bias / has_residual, where set, agree with whether
 * inputs 2 and 3 are given. */
smelt_status fused_check_inputs(op_ctx *c);
/* The residual, where given, has the output shape rank x dims; unknown
 * ranks and dims pass. */
smelt_status fused_check_residual(op_ctx *c, int rank, const int64_t *dims);

#endif
