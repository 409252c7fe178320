/* Packed sub-byte tensors: int4, uint4, float4e2m1 (two elements per byte) and
 * int2, uint2 (four per byte).
 *
 * Layout (ONNX TensorProto): element i sits in byte i * bits / 8 at bit
 * (i * bits) % 8, so the first element of a byte is in its low bits.  A
 * tensor of n elements takes ceil(n * bits / 8) bytes (dtype_nbytes); the
 * padding bits of a last partial byte are written as zero and ignored when
 * read.  Every element access goes through this file, so the layout is
 * stated once.
 *
 * Concurrency: setting an element rewrites its whole byte.  Code that fills
 * one packed tensor from several threads must give each thread whole bytes
 * (element ranges starting and ending at multiples of sb_per_byte). */
#ifndef SMELT_IR_SUBBYTE_H
#define SMELT_IR_SUBBYTE_H

#include <stdint.h>

#include "ir/tensor.h"

/* Elements per byte of a packed type (2 or 4); 1 for byte-addressed types. */
static inline int sb_per_byte(smelt_dtype t) {
  int b = dtype_bits(t);
  return b > 0 && b < 8 ? 8 / b : 1;
}

/* The bits-wide code of element i. */
static inline unsigned sb_get(const void *data, int bits, int64_t i) {
  uint64_t bit = (uint64_t)i * (uint64_t)bits;
  unsigned byte = ((const uint8_t *)data)[bit >> 3];
  return (byte >> (bit & 7)) & ((1u << bits) - 1);
}

/* Stores the low `bits` bits of code as element i; the byte's other
 * elements are kept. */
static inline void sb_set(void *data, int bits, int64_t i, unsigned code) {
  uint64_t bit = (uint64_t)i * (uint64_t)bits;
  uint8_t *p = (uint8_t *)data + (bit >> 3);
  unsigned sh = (unsigned)(bit & 7), mask = ((1u << bits) - 1) << sh;
  *p = (uint8_t)((*p & ~mask) | ((code << sh) & mask));
}

/* The integer a code of int4/uint4/int2/uint2 stands for (two's complement
 * for the signed kinds). */
static inline int sb_int_value(smelt_dtype t, unsigned code) {
  switch (t) {
    case SMELT_I4: return (int)(code & 0xf) - (code & 0x8 ? 16 : 0);
    case SMELT_I2: return (int)(code & 0x3) - (code & 0x2 ? 4 : 0);
    default: return (int)code;
  }
}

/* Value of a float4e2m1 code: sign, 2 exponent bits (bias 1), 1 mantissa
 * bit; no infinities or NaN, so every code is finite. */
static inline float sb_f4e2m1_value(unsigned code) {
  static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = mag[code & 7];
  return code & 8 ? -v : v;
}

/* Unpacks n elements starting at element `first` into one code per byte. */
static inline void sb_unpack(const void *data, int bits, int64_t first, int64_t n, uint8_t *codes) {
  for (int64_t k = 0; k < n; k++) codes[k] = (uint8_t)sb_get(data, bits, first + k);
}

/* Packs n codes (one per byte, low bits used) into elements first.. of data. */
static inline void sb_pack(void *data, int bits, int64_t first, int64_t n, const uint8_t *codes) {
  for (int64_t k = 0; k < n; k++) sb_set(data, bits, first + k, codes[k]);
}

#endif
