/* vmath (kernels/vmath.h) against the same functions in double (libm) on
 * every ISA path the machine has: the worst error in ulps of the float
 * result over 10.2 million inputs (every 1024th float bit pattern, i.e.
 * 4.2e6 points spread over the whole float line in both signs, plus 6e6
 * points uniform on [-20, 20], where the functions are not yet 0, 1 or x),
 * and the special values.  Also the Softmax and LayerNormalization row
 * kernels against double references, on lengths around the vector widths. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/vmath.h"

/* The bound each function must meet, in ulps (the measured worst is printed). */
static const double max_ulp[VMATH_OP_COUNT] = {
    [VMATH_EXP] = 1.5, [VMATH_ERF] = 3, [VMATH_TANH] = 2,
    [VMATH_SIGMOID] = 3, [VMATH_GELU_ERF] = 5, [VMATH_GELU_TANH] = 4, [VMATH_SILU] = 4};

static double ref(vmath_op op, double x) {
  switch (op) {
    case VMATH_EXP: return exp(x);
    case VMATH_ERF: return erf(x);
    case VMATH_TANH: return tanh(x);
    case VMATH_SIGMOID: return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
    case VMATH_GELU_ERF: return 0.5 * x * erfc(-x * 0.70710678118654752440);
    case VMATH_GELU_TANH: { /* 0.5 x (1 + tanh u) = x sigmoid(2u), without cancellation */
      double y = 2 * 0.79788456080286535588 * (x + 0.044715 * x * x * x);
      return y >= 0 ? x / (1 + exp(-y)) : x * exp(y) / (1 + exp(y));
    }
    case VMATH_SILU: return x >= 0 ? x / (1 + exp(-x)) : x * exp(x) / (1 + exp(x));
    default: return NAN;
  }
}

/* |got - want| in ulps of the float nearest want (subnormal spacing below
 * FLT_MIN); infinite when got is not the right infinity or NaN. */
static double ulp_err(float got, double want) {
  if (isnan(want)) return isnan(got) ? 0 : INFINITY;
  if (fabs(want) > FLT_MAX) {
    float w = (float)want;
    if (isinf(w)) return got == w ? 0 : INFINITY;
  }
  if (isnan(got) || isinf(got)) return INFINITY;
  double a = fabs(want), ulp;
  if (a < FLT_MIN) ulp = ldexp(1.0, -149);
  else {
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    ulp = ldexp(1.0, e - 24);
  }
  return fabs((double)got - want) / ulp;
}

#define CHUNK 65536

typedef struct stats {
  double worst[ISA_COUNT][VMATH_OP_COUNT];
  float worst_x[ISA_COUNT][VMATH_OP_COUNT];
} stats;

static void check_chunk(const float *x, int n, stats *st) {
  static double want[CHUNK];
  static float got[CHUNK];
  for (int op = 0; op < VMATH_OP_COUNT; op++) {
    for (int i = 0; i < n; i++) want[i] = ref((vmath_op)op, x[i]);
    for (int isa = 0; isa <= (int)isa_detect(); isa++) {
      const vmath_kernels *k = vmath_get((isa_level)isa);
      k->op[op](x, got, n);
      for (int i = 0; i < n; i++) {
        double e = ulp_err(got[i], want[i]);
        if (!(e <= st->worst[isa][op])) st->worst[isa][op] = e, st->worst_x[isa][op] = x[i];
      }
    }
  }
}

static void ulp_sweep(stats *st) {
  static float x[CHUNK];
  int n = 0;
  /* every 1024th bit pattern of both signs (NaN patterns included) */
  for (uint64_t b = 0; b < (1ull << 32); b += 1024) {
    uint32_t u = (uint32_t)b + 517; /* not only round patterns */
    memcpy(&x[n++], &u, 4);
    if (n == CHUNK) check_chunk(x, n, st), n = 0;
  }
  uint64_t s = 88172645463325252ull;
  for (int i = 0; i < 6000000; i++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x[n++] = (float)((double)(s >> 11) / (double)(1ull << 53) * 40.0 - 20.0);
    if (n == CHUNK) check_chunk(x, n, st), n = 0;
  }
  static const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                  FLT_MIN, -FLT_MIN, 1e-45f, -1e-45f, 88.7f, 88.73f, -87.3f,
                                  -103.9f, -104.f, 0.625f, -0.625f, 0.921875f, -0.921875f, 10.2f,
                                  -10.2f, 14.5f, -14.5f, 40.f, -40.f, 1.f, -1.f};
  memcpy(x + n, special, sizeof special);
  n += (int)(sizeof special / sizeof *special);
  check_chunk(x, n, st);
}

/* lengths around the vector widths, odd offsets (unaligned rows) */
static void row_checks(void) {
  static const int64_t lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 255, 256, 257, 1000, 4099};
  float *x = malloc(sizeof(float) * 5000), *y = malloc(sizeof(float) * 5000);
  float *sc = malloc(sizeof(float) * 5000), *bi = malloc(sizeof(float) * 5000);
  double *w = malloc(sizeof(double) * 5000);
  uint64_t s = 12345;
  for (int i = 0; i < 5000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(s >> 11) / (double)(1ull << 53) * 16.0 - 8.0);
    sc[i] = 0.5f + (float)(i % 7) * 0.25f;
    bi[i] = (float)(i % 5) * 0.1f - 0.2f;
  }
  for (int isa = 0; isa <= (int)isa_detect(); isa++) {
    const vmath_kernels *k = vmath_get((isa_level)isa);
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
      int64_t n = lens[li];
      const float *xr = x + 3; /* unaligned */
      /* softmax */
      double m = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; i++) m = xr[i] > m ? xr[i] : m;
      for (int64_t i = 0; i < n; i++) sum += w[i] = exp((double)xr[i] - m);
      k->softmax_row(xr, y, n);
      double e = 0;
      for (int64_t i = 0; i < n; i++) e = fmax(e, fabs(y[i] - w[i] / sum) / (w[i] / sum + 1e-30));
      CHECK(e < 1e-6);
      /* layernorm */
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; i++) mean += xr[i];
      mean /= (double)n;
      for (int64_t i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
      var /= (double)n;
      double inv = 1 / sqrt(var + 1e-5);
      float mo = 0, io = 0;
      k->layernorm_row(xr, y, n, sc, li % 2 ? bi : NULL, 1e-5f, &mo, &io);
      e = 0;
      for (int64_t i = 0; i < n; i++) {
        double want = (xr[i] - mean) * inv * sc[i] + (li % 2 ? bi[i] : 0);
        e = fmax(e, fabs(y[i] - want) / (fabs(want) + 1));
      }
      CHECK(e < 2e-6);
      CHECK(fabs(mo - mean) <= 1e-6 * (fabs(mean) + 1) && fabs(io - inv) <= 1e-6 * inv);
      if (e >= 2e-6) fprintf(stderr, "layernorm %s n=%lld: error %.3g\n", isa_name((isa_level)isa), (long long)n, e);
    }
    /* NaN and +inf rows: all NaN, as the reference gives */
    float r[3] = {1.f, NAN, 2.f}, o[3];
    k->softmax_row(r, o, 3);
    CHECK(isnan(o[0]) && isnan(o[1]) && isnan(o[2]));
    /* in place */
    float ip[5] = {1, 2, 3, 4, 5};
    k->softmax_row(ip, ip, 5);
    CHECK(fabs(ip[4] - 0.63640865) < 1e-6);
  }
  free(x), free(y), free(sc), free(bi), free(w);
}

int main(void) {
  static stats st;
  ulp_sweep(&st);
  for (int isa = 0; isa <= (int)isa_detect(); isa++)
    for (int op = 0; op < VMATH_OP_COUNT; op++) {
      printf("%-7s %-10s max %.3f ulp (at %.9g)\n", isa_name((isa_level)isa),
             vmath_op_name((vmath_op)op), st.worst[isa][op], (double)st.worst_x[isa][op]);
      CHECK(st.worst[isa][op] <= max_ulp[op]);
    }
  row_checks();
  return test_report("test_vmath");
}
