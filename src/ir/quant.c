/* Quantized element types (quant.h): names for --explain. */
#include "ir/quant.h"

#include <stdio.h>

#include "ir/tensor.h"

bool ir_quant_is_float(ir_quant_scheme s) { return s == IR_QUANT_BF16 || s == IR_QUANT_F16; }

ir_quant ir_quant_float(ir_quant_scheme s) { return (ir_quant){(uint8_t)s, 0, 0, -1, -1}; }

const char *ir_quant_type_name(ir_quant_scheme s) {
  switch (s) {
    case IR_QUANT_INT8_CHANNEL:
    case IR_QUANT_INT8_TENSOR: return "int8";
    case IR_QUANT_INT4_GROUP: return "int4";
    case IR_QUANT_BF16: return "bf16";
    case IR_QUANT_F16: return "fp16";
    default: return "";
  }
}

char *ir_quant_describe(const ir_quant *q, int t, char *buf, size_t n) {
  const char *made = q->scale < 0 ? ", made at prepare" : "";
  switch ((ir_quant_scheme)q->scheme) {
    case IR_QUANT_INT8_CHANNEL:
      snprintf(buf, n, "int8 (per-channel scales along axis %d%s)", q->axis, made);
      break;
    case IR_QUANT_INT8_TENSOR: snprintf(buf, n, "int8 (one scale%s)", made); break;
    case IR_QUANT_INT4_GROUP:
      snprintf(buf, n, "int4 (scales per group of %d along axis %d%s)", (int)q->group, q->axis, made);
      break;
    case IR_QUANT_BF16:
    case IR_QUANT_F16:
      snprintf(buf, n, "%s (rounded at prepare)", ir_quant_type_name((ir_quant_scheme)q->scheme));
      break;
    default: snprintf(buf, n, "%s", dtype_name((smelt_dtype)t)); break;
  }
  return buf;
}
