/* DynamicQuantizeLinear's arithmetic (ONNX), in f32 as its reference:
 *   lo = min(0, min x), hi = max(0, max x)   (NaN ignored)
 *   scale = (hi == lo ? 1 : hi - lo) / 255, zp = clamp(round(0 - lo / scale), 0, 255)
 *   y = clamp(round(x / scale) + zp, 0, 255)  (round: to nearest even; NaN -> 0)
 * The scalar loop and an AVX2 one give the same bytes. */
#ifndef SMELT_KERNELS_DYNQ_H
#define SMELT_KERNELS_DYNQ_H

#include <stdint.h>

#include "kernels/isa.h"

/* *lo, *hi: min(0, min x) and max(0, max x) over n values, NaN ignored. */
void dynq_range(isa_level isa, int64_t n, const float *x, float *lo, float *hi);
/* y[i] = clamp(round(x[i] / scale) + zp, 0, 255); NaN -> 0. */
void dynq_apply(isa_level isa, int64_t n, const float *x, float scale, float zp, uint8_t *y);

#if defined(__x86_64__) || defined(__i386__)
void dynq_range_avx2(int64_t n, const float *x, float *lo, float *hi);
void dynq_apply_avx2(int64_t n, const float *x, float scale, float zp, uint8_t *y);
#endif

#endif
