/* The element functions every generated kernel carries (emit_prelude.c),
 * compiled with the real compiler and flags, in SIMD loops as the kernels
 * run them, against double-precision libm over wide sweeps and the special
 * values. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "prelude_lib.h"

typedef void (*vec_fn)(const float *x, float *y, int n);

static const char fns[] =
    "#define EXPORT __attribute__((visibility(\"default\")))\n"
    /* SIMD loops, as the generated kernels' element loops are (emit.c): the
     * vectorized functions are the ones checked */
    "#define L(n) _Pragma(\"omp simd\") for (int i = 0; i < n; i++)\n"
    "EXPORT void t_exp(const float *x, float *y, int n) { L(n) y[i] = sm_exp(x[i]); }\n"
    "EXPORT void t_log(const float *x, float *y, int n) { L(n) y[i] = sm_log(x[i]); }\n"
    "EXPORT void t_erf(const float *x, float *y, int n) { L(n) y[i] = sm_erf(x[i]); }\n"
    "EXPORT void t_tanh(const float *x, float *y, int n) { L(n) y[i] = sm_tanh(x[i]); }\n"
    "EXPORT void t_sig(const float *x, float *y, int n) { L(n) y[i] = sm_sigmoid(x[i]); }\n"
    "EXPORT void t_gelu(const float *x, float *y, int n) { L(n) y[i] = sm_gelu(x[i]); }\n"
    "EXPORT void t_gelut(const float *x, float *y, int n) { L(n) y[i] = sm_gelu_tanh(x[i]); }\n";

static double ref_sig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double ref_gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double ref_gelut(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

/* The GELUs' relative error where |GELU| > 1e-3 (the negative tail, where
 * x/2 (1 + erf) cancels): below 5e-5 (tools/gen/gelu_fit.py). */
static void gelu_tail(void *h, const char *sym, double (*ref)(double)) {
  vec_fn f = (vec_fn)dlsym(h, sym);
  CHECK(f != NULL);
  if (!f) return;
  enum { N = 100001 };
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) x[i] = (float)(-7.0 + 7.0 * i / (N - 1));
  f(x, y, N);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double want = ref((double)x[i]);
    if (fabs(want) > 1e-3 && fabs(y[i] - want) / fabs(want) > worst) worst = fabs(y[i] - want) / fabs(want);
  }
  CHECK(worst < 5e-5);
  printf("  %s negative tail: worst %.3g relative\n", sym, worst);
  free(x);
  free(y);
}

/* Error of got against the exact value in units of the float spacing at the
 * exact value (ulps), or absolute. */
static double ulps(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0 : 1e9;
  if (isinf(want)) return got == (float)want ? 0 : 1e9;
  double sp = fabs(want) < 1.17549435e-38 ? 1.4e-45 : ldexp(1.0, ilogb(want) - 23);
  return fabs((double)got - want) / sp;
}

typedef struct sweep {
  const char *name;
  double (*ref)(double);
  double lo, hi;
  double max_ulps, max_abs; /* pass if within either */
} sweep;

static void run_sweep(void *h, const sweep *s) {
  char sym[32];
  snprintf(sym, sizeof sym, "t_%s", s->name);
  vec_fn f = (vec_fn)dlsym(h, sym);
  CHECK(f != NULL);
  if (!f) return;
  enum { N = 200001 };
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) x[i] = (float)(s->lo + (s->hi - s->lo) * i / (N - 1));
  f(x, y, N);
  double worst_u = 0, worst_a = 0;
  int bad = 0;
  for (int i = 0; i < N; i++) {
    double want = s->ref((double)x[i]);
    double u = ulps(y[i], want), a = fabs((double)y[i] - want);
    if (u > s->max_ulps && a > s->max_abs) {
      if (bad++ < 3) fprintf(stderr, "%s(%.9g) = %.9g, want %.9g (%.1f ulp)\n", s->name, x[i], y[i], want, u);
    }
    if (u > worst_u) worst_u = u;
    if (a > worst_a) worst_a = a;
  }
  CHECK(bad == 0);
  printf("  %-5s on [%g, %g]: worst %.2f ulp, %.3g absolute\n", s->name, s->lo, s->hi, worst_u, worst_a);
  free(x);
  free(y);
}

static float call1(void *h, const char *name, float v) {
  vec_fn f = (vec_fn)dlsym(h, name);
  float y = 0;
  if (f) f(&v, &y, 1);
  return y;
}

static void test_specials(void *h) {
  float inf = INFINITY, nan = NAN;
  CHECK(isnan(call1(h, "t_exp", nan)) && call1(h, "t_exp", inf) == inf && call1(h, "t_exp", -inf) == 0);
  CHECK(call1(h, "t_exp", 89.f) == inf && call1(h, "t_exp", -110.f) == 0 && call1(h, "t_exp", 0.f) == 1.f);
  CHECK(isnan(call1(h, "t_log", -1.f)) && call1(h, "t_log", 0.f) == -inf && call1(h, "t_log", inf) == inf);
  CHECK(isnan(call1(h, "t_log", nan)) && call1(h, "t_log", 1.f) == 0.f);
  CHECK(ulps(call1(h, "t_log", 1e-40f), log(1e-40f)) < 4); /* denormal */
  CHECK(isnan(call1(h, "t_erf", nan)) && call1(h, "t_erf", inf) == 1.f && call1(h, "t_erf", -inf) == -1.f);
  CHECK(isnan(call1(h, "t_tanh", nan)) && call1(h, "t_tanh", inf) == 1.f && call1(h, "t_tanh", -inf) == -1.f);
  CHECK(call1(h, "t_tanh", 1e-30f) == 1e-30f && call1(h, "t_erf", 0.f) == 0.f);
  CHECK(isnan(call1(h, "t_sig", nan)) && call1(h, "t_sig", inf) == 1.f && call1(h, "t_sig", -inf) == 0.f);
  CHECK(isnan(call1(h, "t_gelu", nan)) && call1(h, "t_gelu", inf) == inf && call1(h, "t_gelu", 0.f) == 0.f);
  CHECK(isnan(call1(h, "t_gelut", nan)) && call1(h, "t_gelut", inf) == inf && call1(h, "t_gelut", 0.f) == 0.f);
}

int main(void) {
  prelude_lib L;
  if (prelude_lib_open(&L, "test_codegen_math", fns) == 77) return 77;
  void *h = L.h;
  if (h) {
    const sweep sweeps[] = {
        {"exp", exp, -103, 88.5, 2, 0},      {"exp", exp, -1, 1, 2, 0},
        {"log", log, 1e-30, 10, 2, 0},        {"log", log, 0.5, 2, 2, 0},
        {"log", log, 1, 3e38, 2, 0},          {"erf", erf, -6, 6, 1e9, 3e-7},
        {"erf", erf, -0.6, 0.6, 4, 1e-12},    {"tanh", tanh, -12, 12, 4, 1e-12},
        {"tanh", tanh, -0.7, 0.7, 4, 1e-12},  {"sig", ref_sig, -100, 100, 4, 1e-12},
        {"gelu", ref_gelu, -8, 8, 1e9, 5e-7}, {"gelut", ref_gelut, -8, 8, 1e9, 5e-7},
        {"gelu", ref_gelu, 6, 40, 1, 0},      {"gelut", ref_gelut, 6, 40, 1, 0}, /* x itself */
    };
    for (size_t i = 0; i < sizeof sweeps / sizeof *sweeps; i++) run_sweep(h, &sweeps[i]);
    test_specials(h);
    gelu_tail(h, "t_gelu", ref_gelu);
    gelu_tail(h, "t_gelut", ref_gelut);
  }
  prelude_lib_close(&L);
  return test_report("test_codegen_math");
}
