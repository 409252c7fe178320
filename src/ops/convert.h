/* Element conversions between any two numeric dtypes, for Cast and for the
 * ops whose operands mix types (Pow).  Every value passes through double
 * (floats) or 64-bit integers (integers and bool), which hold each source
 * value exactly (except int64 beyond 2^53 when it must become a float).
 *
 * Rules (ONNX Cast): float → int truncates toward zero; smelt saturates values
 * outside the target range and maps NaN to 0 (the spec leaves them undefined).
 * int → int wraps modulo 2^bits.  Anything → bool is x != 0.  float → float
 * rounds to nearest even; float8 targets follow the `saturate` rules of Cast-19:
 * with saturate, out-of-range values and ±inf become ±max; without, they become
 * NaN (or ±inf for E5M2). */
#ifndef SMELT_OPS_CONVERT_H
#define SMELT_OPS_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/tensor.h"

/* True for the types these helpers handle: ints, bool, f16 bf16 f32 f64 and
 * the four float8 kinds. */
bool cvt_supported(smelt_dtype t);
/* True for the types read exactly as integers (ints and bool). */
static inline bool cvt_is_intlike(smelt_dtype t) { return dtype_is_int(t) || t == SMELT_BOOL; }

/* n elements of type t from src (element stride st, 0 = repeat one) into dst. */
void cvt_load_f64(smelt_dtype t, const void *src, int64_t st, int64_t n, double *dst);
/* For int-like t: the value as int64 (uint64 kept as its bit pattern). */
void cvt_load_i64(smelt_dtype t, const void *src, int64_t st, int64_t n, int64_t *dst);
/* n values into dense dst of type t. */
void cvt_store_f64(smelt_dtype t, const double *src, int64_t n, void *dst, bool saturate);
/* src_unsigned: the int64s are uint64 bit patterns. */
void cvt_store_i64(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n, void *dst,
                   bool saturate);

/* ---- small float formats (f16, bf16, float8) ---- */
/* Encodes x in format t (F16, BF16 or a float8 kind), rounding to nearest even. */
uint32_t cvt_minifloat_encode(smelt_dtype t, double x, bool saturate);
double cvt_minifloat_decode(smelt_dtype t, uint32_t bits);

#endif
