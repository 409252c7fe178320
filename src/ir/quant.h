/* Quantized element types: a value's dtype plus a quantization descriptor
 * is the element type the compiled path reads (docs/BACKENDS.md,
 * "Quantized element types").
 *
 *   scheme         what a reader of the value computes with
 *   NONE           the dtype as it is
 *   INT8_CHANNEL   int8, one fp32 scale per index of `axis` (a GEMM
 *                  weight's output channel N), symmetric (no zero point)
 *   INT8_TENSOR    int8, one fp32 scale for the whole tensor
 *   INT4_GROUP     int4, one fp32 scale per `group` consecutive elements
 *                  along `axis` (a GEMM weight's K: 32 or 128) per column
 *   BF16           float storage: bf16, the float data rounded to nearest
 *                  even once when the reader prepares it; no scales
 *   F16            likewise IEEE fp16 (binary16)
 *
 * `scale` and `zero_point` name values holding them (ids in the same graph),
 * or are -1: the scales are computed from the value's float data when its
 * reader prepares it -- once per session, kept in the op cache and the
 * prepared-weight store (a constant weight that autocast declares int8,
 * int4, bf16 or fp16: its float data stays, for any other reader, and is
 * the source of the reduced copy).  BF16 and F16 have no scales: axis,
 * group 0, scale and zero_point -1.  The descriptor is a declaration about the form;
 * it never changes the value's data, its dtype or its shape. */
#ifndef SMELT_IR_QUANT_H
#define SMELT_IR_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ir_quant_scheme {
  IR_QUANT_NONE = 0,
  IR_QUANT_INT8_CHANNEL,
  IR_QUANT_INT8_TENSOR,
  IR_QUANT_INT4_GROUP,
  IR_QUANT_BF16,
  IR_QUANT_F16,
  IR_QUANT_COUNT
} ir_quant_scheme;

typedef struct ir_quant {
  uint8_t scheme;     /* ir_quant_scheme */
  int8_t axis;        /* the scales' axis (INT8_CHANNEL) or the groups' (INT4_GROUP) */
  int32_t group;      /* INT4_GROUP: elements per group along axis */
  int32_t scale;      /* value id of the scales, or -1: computed at prepare */
  int32_t zero_point; /* value id of the zero points, or -1: symmetric */
} ir_quant;

/* BF16 or F16: float storage, no scales. */
bool ir_quant_is_float(ir_quant_scheme s);
/* The descriptor of float storage s (BF16 or F16): no axis, no scales. */
ir_quant ir_quant_float(ir_quant_scheme s);
/* The quantized element type a scheme stands for ("int8", "int4", "bf16",
 * "fp16"; "" for NONE). */
const char *ir_quant_type_name(ir_quant_scheme s);
/* "int8 (per-channel scales along axis 1, made at prepare)", "bf16
 * (rounded at prepare)" into buf; for NONE, dtype_name of t.  Returns buf. */
char *ir_quant_describe(const ir_quant *q, int t, char *buf, size_t n);

#endif
