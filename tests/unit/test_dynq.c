/* The 8-bit quantization loops (kernels/dynq.h: DynamicQuantizeLinear's
 * range and quantization, per-tensor QuantizeLinear to uint8 and int8,
 * DequantizeLinear from both) against the ONNX reference formulas (as
 * ops/quantize.c's reference loops compute them, in double), on every ISA
 * path the machine has: lengths off the vector width, ranges all positive,
 * all negative and mixed, values on the rounding midpoints, NaN and
 * infinities, zero points at both ends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/dynq.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / (double)(1ull << 52) - 1.0);
}

static void check_case(int64_t n, float shift, float mag, int special) {
  float *x = malloc(sizeof(float) * (size_t)(n + 1));
  uint8_t *y = malloc((size_t)n + 8), *want = malloc((size_t)n + 1);
  for (int64_t i = 0; i < n; i++) x[i] = urand() * mag + shift;
  if (special && n > 3) x[1] = NAN, x[2] = special > 1 ? INFINITY : -INFINITY, x[3] = 0.5f;
  float mn = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] > mx) mx = x[i];
    if (x[i] < mn) mn = x[i];
  }
  float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
  double zpd = nearbyint(0.0f - mn / scale);
  zpd = isnan(zpd) ? 0 : zpd < 0 ? 0 : zpd > 255 ? 255 : zpd;
  for (int64_t i = 0; i < n; i++) {
    double v = nearbyintf(x[i] / scale) + zpd;
    want[i] = isnan(v) ? 0 : v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
  }
  for (int isa = 0; isa <= (int)isa_detect(); isa++) {
    float lo, hi;
    dynq_range((isa_level)isa, n, x, &lo, &hi);
    CHECK(lo == mn && hi == mx);
    for (int64_t i = 0; i < n + 8; i++) y[i] = 0xab;
    dynq_apply((isa_level)isa, n, x, scale, (float)zpd, false, y);
    for (int64_t i = 0; i < n; i++)
      if (y[i] != want[i]) {
        fprintf(stderr, "%s n%lld: y[%lld] = %d, want %d (x %g)\n", isa_name((isa_level)isa), (long long)n,
                (long long)i, y[i], want[i], x[i]);
        CHECK(0);
        break;
      }
    CHECK(y[n] == 0xab);
  }
  free(x), free(y), free(want);
}

/* QuantizeLinear to uint8 / int8 with zero point zp, and DequantizeLinear back. */
static void check_q(int64_t n, float scale, int zp, bool sgn) {
  float *x = malloc(sizeof(float) * (size_t)(n + 1)), *d = malloc(sizeof(float) * (size_t)(n + 1));
  uint8_t *y = malloc((size_t)n + 8), *want = malloc((size_t)n + 1);
  double lo = sgn ? -128 : 0, hi = sgn ? 127 : 255;
  for (int64_t i = 0; i < n; i++) x[i] = urand() * 300.f * scale;
  if (n > 4) x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = 2.5f * scale, x[4] = -0.5f * scale;
  for (int64_t i = 0; i < n; i++) {
    double q = (double)(float)((double)x[i] / (double)scale); /* x / scale in f32 */
    double v = nearbyint(q) + zp;
    int64_t r = isnan(v) ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)hi : (int64_t)v;
    want[i] = (uint8_t)r;
  }
  for (int isa = 0; isa <= (int)isa_detect(); isa++) {
    for (int64_t i = 0; i < n + 8; i++) y[i] = 0xab;
    dynq_apply((isa_level)isa, n, x, scale, (float)zp, sgn, y);
    for (int64_t i = 0; i < n; i++)
      if (y[i] != want[i]) {
        fprintf(stderr, "%s quantize %s n%lld: y[%lld] = %d, want %d\n", isa_name((isa_level)isa), sgn ? "s8" : "u8",
                (long long)n, (long long)i, y[i], want[i]);
        CHECK(0);
        break;
      }
    CHECK(y[n] == 0xab);
    d[n] = 42.f;
    dynq_dequant((isa_level)isa, n, want, sgn, (float)zp, scale, d);
    for (int64_t i = 0; i < n; i++) {
      double q = sgn ? (int8_t)want[i] : want[i];
      float dw = (float)((q - zp) * (double)scale);
      if (d[i] != dw) {
        fprintf(stderr, "%s dequantize n%lld: d[%lld] = %g, want %g\n", isa_name((isa_level)isa), (long long)n,
                (long long)i, d[i], dw);
        CHECK(0);
        break;
      }
    }
    CHECK(d[n] == 42.f);
  }
  free(x), free(d), free(y), free(want);
}

int main(void) {
  static const int64_t qn[] = {1, 9, 1000};
  for (size_t k = 0; k < sizeof qn / sizeof *qn; k++) {
    check_q(qn[k], 0.0173f, 128, false);
    check_q(qn[k], 0.5f, 0, false);
    check_q(qn[k], 0.5f, 255, false);
    check_q(qn[k], 0.0173f, 0, true);
    check_q(qn[k], 1.0f, -128, true);
    check_q(qn[k], 1.0f, 127, true);
  }
  static const int64_t ns[] = {1, 7, 8, 9, 31, 1000};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
    for (int s = 0; s < 3; s++) {
      check_case(ns[k], 0.f, 3.f, s);
      check_case(ns[k], 5.f, 1.f, s);   /* all positive: lo = 0 */
      check_case(ns[k], -5.f, 1.f, s);  /* all negative: hi = 0 */
      check_case(ns[k], 0.f, 127.5f, s); /* scale near 1: quotients on .5 */
    }
  return test_report("test_dynq");
}
