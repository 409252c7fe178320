/* The f16/bf16 conversions every generated kernel carries (emit_prelude.c:
 * sm_h2f, sm_f2h, sm_bf2f, sm_f2bf), compiled with the real compiler and
 * flags in vectorizable loops, against the reference's (ir/dtype.c) bit for
 * bit: every f16/bf16 pattern widened, and floats narrowed over a stride
 * through all 2^32 patterns plus every pattern of the ranges where rounding
 * changes regime (f16 subnormals, the largest finite f16, bf16 near inf). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "prelude_lib.h"
#include "ir/tensor.h"

static const char fns[] =
    "#define EXPORT __attribute__((visibility(\"default\")))\n"
    "EXPORT void t_h2f(const uint16_t *x, float *y, int n) { for (int i = 0; i < n; i++) y[i] = sm_h2f(x[i]); }\n"
    "EXPORT void t_bf2f(const uint16_t *x, float *y, int n) { for (int i = 0; i < n; i++) y[i] = sm_bf2f(x[i]); }\n"
    "EXPORT void t_f2h(const float *x, uint16_t *y, int n) { for (int i = 0; i < n; i++) y[i] = sm_f2h(x[i]); }\n"
    "EXPORT void t_f2bf(const float *x, uint16_t *y, int n) { for (int i = 0; i < n; i++) y[i] = sm_f2bf(x[i]); }\n";

typedef void (*widen_fn)(const uint16_t *, float *, int);
typedef void (*narrow_fn)(const float *, uint16_t *, int);

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void check_widen(void *h, const char *sym, float (*ref)(uint16_t)) {
  widen_fn f = (widen_fn)dlsym(h, sym);
  CHECK(f != NULL);
  if (!f) return;
  static uint16_t x[65536];
  static float y[65536];
  for (int i = 0; i < 65536; i++) x[i] = (uint16_t)i;
  f(x, y, 65536);
  int bad = 0;
  for (int i = 0; i < 65536; i++)
    if (bits(y[i]) != bits(ref(x[i])) && bad++ < 3)
      fprintf(stderr, "%s(0x%04x) = 0x%08x, want 0x%08x\n", sym, i, bits(y[i]), bits(ref(x[i])));
  CHECK(bad == 0);
}

/* Narrows n patterns from lo by step, in blocks; returns mismatches. */
static int narrow_range(narrow_fn f, uint16_t (*ref)(float), uint64_t lo, uint64_t hi, uint64_t step,
                        const char *sym) {
  enum { B = 1 << 16 };
  static float x[B];
  static uint16_t y[B];
  int bad = 0;
  for (uint64_t u = lo; u < hi;) {
    int n = 0;
    for (; n < B && u < hi; n++, u += step) {
      uint32_t w = (uint32_t)u;
      memcpy(&x[n], &w, 4);
    }
    f(x, y, n);
    for (int i = 0; i < n; i++)
      if (y[i] != ref(x[i]) && bad++ < 3)
        fprintf(stderr, "%s(0x%08x) = 0x%04x, want 0x%04x\n", sym, bits(x[i]), y[i], ref(x[i]));
  }
  return bad;
}

static void check_narrow(void *h, const char *sym, uint16_t (*ref)(float), const uint64_t (*ranges)[2], int nr) {
  narrow_fn f = (narrow_fn)dlsym(h, sym);
  CHECK(f != NULL);
  if (!f) return;
  int bad = narrow_range(f, ref, 0, UINT64_C(1) << 32, 251, sym); /* a prime stride: every low-bit pattern */
  for (int r = 0; r < nr; r++)
    for (uint64_t sign = 0; sign <= 0x80000000u; sign += 0x80000000u)
      bad += narrow_range(f, ref, ranges[r][0] | sign, ranges[r][1] | sign, 1, sym);
  CHECK(bad == 0);
}

int main(void) {
  prelude_lib L;
  if (prelude_lib_open(&L, "test_codegen_half", fns) == 77) return 77;
  void *h = L.h;
  if (h) {
    check_widen(h, "t_h2f", f16_to_f32);
    check_widen(h, "t_bf2f", bf16_to_f32);
    /* f16: zero to past the smallest normal (subnormal rounding), the largest
     * finite values to inf, inf and the NaNs' low end */
    static const uint64_t h_ranges[][2] = {{0x00000000, 0x00010000},
                                           {0x33000000, 0x38900000},
                                           {0x477f0000, 0x47810000},
                                           {0x7f7ff000, 0x7f810000}};
    /* bf16: the largest finite values to inf and NaNs, around 1.0 */
    static const uint64_t bf_ranges[][2] = {{0x7f7e0000, 0x7f810000}, {0x3f7f0000, 0x3f810000}};
    check_narrow(h, "t_f2h", f32_to_f16, h_ranges, 4);
    check_narrow(h, "t_f2bf", f32_to_bf16, bf_ranges, 2);
  }
  prelude_lib_close(&L);
  return test_report("test_codegen_half");
}
