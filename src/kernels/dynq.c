/* 8-bit linear quantization (kernels/dynq.h): scalar loops and the
 * dispatch.  Complexity: one pass over x each (DynamicQuantizeLinear: two). */
#include "kernels/dynq.h"

#include <math.h>

void dynq_range(isa_level isa, int64_t n, const float *x, float *lo, float *hi) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= ISA_AVX2) {
    dynq_range_avx2(n, x, lo, hi);
    return;
  }
#endif
  (void)isa;
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] > mx) mx = x[i];
    if (x[i] < mn) mn = x[i];
  }
  *lo = mn, *hi = mx;
}

void dynq_apply(isa_level isa, int64_t n, const float *x, float scale, float zp, bool sgn, uint8_t *y) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= ISA_AVX2) {
    dynq_apply_avx2(n, x, scale, zp, sgn, y);
    return;
  }
#endif
  (void)isa;
  for (int64_t i = 0; i < n; i++) y[i] = dynq_q1(x[i], scale, zp, sgn);
}

void dynq_dequant(isa_level isa, int64_t n, const uint8_t *x, bool sgn, float zp, float scale, float *y) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= ISA_AVX2) {
    dynq_dequant_avx2(n, x, sgn, zp, scale, y);
    return;
  }
#endif
  (void)isa;
  for (int64_t i = 0; i < n; i++) y[i] = dynq_dq1(x[i], sgn, zp, scale);
}
