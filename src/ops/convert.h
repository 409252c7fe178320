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
 * NaN (or ±inf for E5M2).
 *
 * Packed types (ir/subbyte.h) take part everywhere through the *_at forms,
 * which address elements by index from a base pointer:
 *  - int4/uint4/int2/uint2: integer sources wrap modulo 2^bits as for other
 *    integer narrowing; float sources are truncated toward zero and then
 *    wrapped too (-9.0 → int4 7, as the ONNX reference and its test data do;
 *    the spec leaves out-of-range values undefined), NaN and ±inf give 0.
 *    QuantizeLinear saturates instead: it clamps before storing.
 *  - float4e2m1 (no inf/NaN): round to nearest even and always saturate to
 *    ±6; ±inf → ±6; NaN → +0 (what the ONNX conformance data expect; the
 *    ONNX float4 note says 6 — the data win, as they decide conformance).
 *  - float8e8m0 (2^(e-127), 0xff NaN, no sign or zero) rounds by
 *    cvt_opts.e8m0_round (Cast's round_mode, "up" by default).  Values are
 *    rounded from their exact magnitude (negative inputs are unspecified in
 *    ONNX; their magnitude is used, as the reference does), then range
 *    checked: a result above the largest (2^127) or ±inf → 2^127 with
 *    saturate, NaN without; a result below the smallest (2^-127, which "up"
 *    never gives for x != 0) or zero → 2^-127 with saturate, NaN without.
 *    This agrees with the ONNX reference (onnx.numpy_helper.to_float8e8m0)
 *    on every normal float32; it differs where the reference's bit trick is
 *    off: ±inf (reference NaN even with saturate; the spec's table says
 *    E8M0_MAX) and float32 subnormals. */
#ifndef SMELT_OPS_CONVERT_H
#define SMELT_OPS_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/tensor.h"

/* True for the types these helpers handle: ints, bool, f16 bf16 f32 f64, the
 * float8 kinds (with e8m0) and the packed int4 uint4 int2 uint2 float4e2m1. */
bool cvt_supported(smelt_dtype t);
/* True for the types read exactly as integers (ints, packed ints and bool). */
static inline bool cvt_is_intlike(smelt_dtype t) {
  return dtype_is_int(t) || t == SMELT_BOOL || t == SMELT_I4 || t == SMELT_U4 || t == SMELT_I2 ||
         t == SMELT_U2;
}

/* How float8e8m0 rounds (Cast's round_mode): up = toward +inf (away from
 * zero), down = toward zero, nearest = to the nearer power of two, ties up. */
typedef enum cvt_round { CVT_ROUND_UP = 0, CVT_ROUND_DOWN, CVT_ROUND_NEAREST } cvt_round;

/* What the stores do where a value does not fit: saturate (float8 kinds,
 * e8m0) and e8m0's rounding mode. */
typedef struct cvt_opts {
  bool saturate;
  cvt_round e8m0_round;
} cvt_opts;
static inline cvt_opts cvt_opts_default(void) { return (cvt_opts){true, CVT_ROUND_UP}; }

/* ---- element-indexed forms (every supported type, packed ones included) ----
 * Elements first, first + st, ... (st 0 = repeat one) of the tensor data at
 * base are read; stores write elements first .. first + n - 1 densely.
 * Stores into packed types rewrite whole bytes: see ir/subbyte.h before
 * storing into one tensor from several threads. */
void cvt_load_f64_at(smelt_dtype t, const void *base, int64_t first, int64_t st, int64_t n,
                     double *dst);
void cvt_load_i64_at(smelt_dtype t, const void *base, int64_t first, int64_t st, int64_t n,
                     int64_t *dst);
void cvt_store_f64_at(smelt_dtype t, const double *src, int64_t n, void *base, int64_t first,
                      const cvt_opts *o);
void cvt_store_i64_at(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n, void *base,
                      int64_t first, const cvt_opts *o);

/* ---- pointer forms: the same starting at element 0 of src/dst ---- */

/* n elements of type t from src (element stride st, 0 = repeat one) into dst. */
void cvt_load_f64(smelt_dtype t, const void *src, int64_t st, int64_t n, double *dst);
/* For int-like t: the value as int64 (uint64 kept as its bit pattern). */
void cvt_load_i64(smelt_dtype t, const void *src, int64_t st, int64_t n, int64_t *dst);
/* n values into dense dst of type t. */
void cvt_store_f64(smelt_dtype t, const double *src, int64_t n, void *dst, bool saturate);
/* src_unsigned: the int64s are uint64 bit patterns. */
void cvt_store_i64(smelt_dtype t, const int64_t *src, bool src_unsigned, int64_t n, void *dst,
                   bool saturate);

/* ---- small float formats (f16, bf16, float8, float4e2m1) ---- */
/* Encodes x in format t (F16, BF16, a float8 kind or F4E2M1), rounding to
 * nearest even; F8E8M0 rounds up (Cast's default; see cvt_e8m0_encode). */
uint32_t cvt_minifloat_encode(smelt_dtype t, double x, bool saturate);
double cvt_minifloat_decode(smelt_dtype t, uint32_t bits);
/* float8e8m0 with an explicit rounding mode (rules at the top). */
uint32_t cvt_e8m0_encode(double x, bool saturate, cvt_round r);

#endif
