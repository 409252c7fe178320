/* The quantized element type of a GEMM's weight B (ir/quant.h): int8 with
 * a scale per output channel (B's N axis), int4 with a scale per group of
 * Q4_GROUP along K, the scales made from B's float data when the GEMM
 * prepares it (ops/gemm_int8.h, ops/gemm_int4.h: once, cached); bf16 or
 * fp16 storage, B rounded to nearest even when the GEMM prepares it
 * (ops/gemm_bf16.h).  passes/autocast.c declares it on the weights of the
 * GEMMs it lowers to int8 / int4 / bf16 / fp16; the compiled path's GEMM
 * steps (runtime/gemm_registry.h) read it. */
#ifndef SMELT_OPS_GEMM_QUANT_H
#define SMELT_OPS_GEMM_QUANT_H

#include <stdbool.h>

#include "ir/ir.h"

/* The descriptor for scheme (INT8_CHANNEL, INT4_GROUP, BF16 or F16) of a
 * B stored transposed (N x K) or not (K x N). */
ir_quant gemm_weight_quant(ir_quant_scheme scheme, bool trans_b);
/* The scheme node nd's precision mark ("int8", "int4", "bf16", "fp16")
 * stands for; NONE without one. */
ir_quant_scheme gemm_marked_scheme(const ir_node *nd);
/* The element type node nd of g reads its weight B (input 1) as.  Float
 * storage (bf16, fp16): B's declaration, else the node's mark (a graph from
 * before the declaration), unless the mark is int8 / int4.  int8 / int4:
 * B's declared quantization when it is the descriptor gemm_weight_quant
 * gives for the node's mark and transB; otherwise the mark's (a weight two
 * GEMMs declare differently).  NONE for any other node.  *q: the
 * descriptor. */
ir_quant_scheme gemm_weight_scheme(const ir_graph *g, const ir_node *nd, bool trans_b, ir_quant *q);

#endif
