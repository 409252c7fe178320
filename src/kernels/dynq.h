/* 8-bit linear quantization with one scale and zero point (ONNX
 * QuantizeLinear / DequantizeLinear per tensor, DynamicQuantizeLinear), in
 * f32 as their references:
 *   quantize:   y = clamp(round(x / scale) + zp, lo, hi)  (round: to
 *               nearest even; NaN -> 0; lo, hi: 0, 255 or -128, 127)
 *   dequantize: y = (x - zp) * scale
 *   DynamicQuantizeLinear: lo = min(0, min x), hi = max(0, max x) (NaN
 *   ignored), scale = (hi == lo ? 1 : hi - lo) / 255, zp = clamp(round(0 -
 *   lo / scale), 0, 255), then quantize to uint8.
 * The scalar loops and the AVX2 ones give the same bytes. */
#ifndef SMELT_KERNELS_DYNQ_H
#define SMELT_KERNELS_DYNQ_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"

/* *lo, *hi: min(0, min x) and max(0, max x) over n values, NaN ignored. */
void dynq_range(isa_level isa, int64_t n, const float *x, float *lo, float *hi);
/* y[i] = clamp(round(x[i] / scale) + zp, 0, 255) (uint8), or in -128..127
 * stored as int8 bytes when sgn; NaN -> 0. */
void dynq_apply(isa_level isa, int64_t n, const float *x, float scale, float zp, bool sgn, uint8_t *y);
/* y[i] = (x[i] - zp) * scale, x uint8, or int8 when sgn. */
void dynq_dequant(isa_level isa, int64_t n, const uint8_t *x, bool sgn, float zp, float scale, float *y);

/* One element each way: the scalar loops and the vector loops' tails. */
static inline uint8_t dynq_q1(float x, float scale, float zp, bool sgn) {
  float lo = sgn ? -128.f : 0.f, hi = sgn ? 127.f : 255.f;
  float v = nearbyintf(x / scale) + zp;
  v = isnan(v) ? 0.f : v <= lo ? lo : v >= hi ? hi : v;
  return (uint8_t)(int32_t)v;
}
static inline float dynq_dq1(uint8_t x, bool sgn, float zp, float scale) {
  return ((float)(sgn ? (int8_t)x : x) - zp) * scale;
}

#if defined(__x86_64__) || defined(__i386__)
void dynq_range_avx2(int64_t n, const float *x, float *lo, float *hi);
void dynq_apply_avx2(int64_t n, const float *x, float scale, float zp, bool sgn, uint8_t *y);
void dynq_dequant_avx2(int64_t n, const uint8_t *x, bool sgn, float zp, float scale, float *y);
#endif

#endif
