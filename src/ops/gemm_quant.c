/* The quantized element type of a GEMM's weight (gemm_quant.h). */
#include "ops/gemm_quant.h"

#include <string.h>

#include "kernels/q4gemm.h"
#include "ops/gemm_bf16.h"
#include "ops/gemm_int4.h"
#include "ops/gemm_int8.h"

ir_quant gemm_weight_quant(ir_quant_scheme scheme, bool trans_b) {
  if (scheme == IR_QUANT_INT4_GROUP) return (ir_quant){IR_QUANT_INT4_GROUP, (int8_t)(trans_b ? 1 : 0), Q4_GROUP, -1, -1};
  if (ir_quant_is_float(scheme)) return ir_quant_float(scheme);
  return (ir_quant){IR_QUANT_INT8_CHANNEL, (int8_t)(trans_b ? 0 : 1), 0, -1, -1};
}

ir_quant_scheme gemm_marked_scheme(const ir_node *nd) {
  return gemm_int8_marked(nd)   ? IR_QUANT_INT8_CHANNEL
         : gemm_int4_marked(nd) ? IR_QUANT_INT4_GROUP
         : gemm_bf16_marked(nd) ? IR_QUANT_BF16
         : gemm_f16_marked(nd)  ? IR_QUANT_F16
                                : IR_QUANT_NONE;
}

ir_quant_scheme gemm_weight_scheme(const ir_graph *g, const ir_node *nd, bool trans_b, ir_quant *q) {
  ir_quant_scheme s = gemm_marked_scheme(nd);
  int b = nd->n_inputs > 1 ? nd->inputs[1] : -1;
  const ir_quant *d = b >= 0 && b < g->n_values ? &g->values[b].quant : NULL;
  memset(q, 0, sizeof *q);
  /* float storage: the declaration first, the mark where there is none */
  if (d && ir_quant_is_float((ir_quant_scheme)d->scheme) && (s == IR_QUANT_NONE || ir_quant_is_float(s))) {
    *q = *d;
    return (ir_quant_scheme)d->scheme;
  }
  if (s == IR_QUANT_NONE) return s;
  *q = gemm_weight_quant(s, trans_b);
  if (d && !memcmp(d, q, sizeof *q)) *q = *d;
  return s;
}
