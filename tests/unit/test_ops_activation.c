/* Activations against textbook formulas in double, every float type,
 * attributes, overflow-prone inputs, integer variants, PRelu broadcasting and
 * every Clip form. */
#include "ew_util.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static double sigm(double x) { return 1 / (1 + exp(-x)); }
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_softplus(double x) { return log(1 + exp(x)); }
static double r_softsign(double x) { return x / (1 + fabs(x)); }
static double r_mish(double x) { return x * tanh(log(1 + exp(x))); }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2))); }
static double r_gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
/* Attributes are float32: the references use the float-rounded values. */
#define F32(v) ((double)(float)(v))
static double r_elu(double x) { return x < 0 ? F32(0.7) * (exp(x) - 1) : x; }
static double r_celu(double x) { return fmax(0, x) + fmin(0, F32(0.7) * (exp(x / F32(0.7)) - 1)); }
static double r_selu(double x) {
  double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  return x > 0 ? g * x : g * (a * exp(x) - a);
}
static double r_leaky(double x) { return x < 0 ? F32(0.1) * x : x; }
static double r_hardsig(double x) { return fmax(0, fmin(1, F32(0.3) * x + F32(0.4))); }
static double r_hardswish(double x) { return x * fmax(0, fmin(1, x / 6 + 0.5)); }
static double r_swish(double x) { return x * sigm(0.5 * x); }
static double r_thresh(double x) { return x > 1.5 ? x : 0; }
static double r_shrink(double x) { return x < -1 ? x + 0.25 : x > 1 ? x - 0.25 : 0; }

static void test_formulas(void) {
  ir_attr none[1] = {{0}};
  ir_attr a07[] = {ew_attr_float("alpha", 0.7f)}, a01[] = {ew_attr_float("alpha", 0.1f)};
  ir_attr hs[] = {ew_attr_float("alpha", 0.3f), ew_attr_float("beta", 0.4f)};
  ir_attr a05[] = {ew_attr_float("alpha", 0.5f)}, a15[] = {ew_attr_float("alpha", 1.5f)};
  ir_attr sh[] = {ew_attr_float("lambd", 1.0f), ew_attr_float("bias", 0.25f)};
  ir_attr gt[] = {ew_attr_str("approximate", "tanh")};
  const struct {
    const char *op;
    double (*ref)(double);
    const ir_attr *attrs;
    int n_attrs;
  } cases[] = {
      {"Relu", r_relu, none, 0},        {"Sigmoid", sigm, none, 0},
      {"Softplus", r_softplus, none, 0}, {"Softsign", r_softsign, none, 0},
      {"Mish", r_mish, none, 0},        {"Gelu", r_gelu, none, 0},
      {"Gelu", r_gelu_tanh, gt, 1},     {"Elu", r_elu, a07, 1},
      {"Celu", r_celu, a07, 1},         {"Selu", r_selu, none, 0},
      {"LeakyRelu", r_leaky, a01, 1},   {"HardSigmoid", r_hardsig, hs, 2},
      {"HardSwish", r_hardswish, none, 0}, {"Swish", r_swish, a05, 1},
      {"ThresholdedRelu", r_thresh, a15, 1}, {"Shrink", r_shrink, sh, 2},
  };
  struct {
    smelt_dtype t;
    double tol;
  } types[] = {{SMELT_F32, 3e-6}, {SMELT_F64, 1e-12}, {SMELT_F16, 3e-3}, {SMELT_BF16, 2e-2}};
  enum { N = 41 };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      double want[N];
      tensor a = ew_mk(types[t].t, 1, D(N), NULL), o;
      for (int i = 0; i < N; i++) {
        tensor_set_f64(&a, i, -5 + 10.0 * i / (N - 1));
        want[i] = cases[k].ref(tensor_get_f64(&a, i));
      }
      tensor *in[] = {&a};
      CHECK_OK(ew_run(cases[k].op, 24, cases[k].attrs, cases[k].n_attrs, in, 1, &o));
      bool ok = ew_expect(&o, types[t].t, 1, D(N), want, types[t].tol, cases[k].op);
      if (!ok) fprintf(stderr, "  %s %s\n", cases[k].op, dtype_name(types[t].t));
      CHECK(ok);
      tensor_release(&a);
      tensor_release(&o);
    }
}

static void one(const char *op, int opset, smelt_dtype dt, const ir_attr *attrs, int n_attrs,
                int n, const double *x, const double *want, double tol) {
  tensor a = ew_mk(dt, 1, D(n), x), o;
  tensor *in[] = {&a};
  CHECK_OK(ew_run(op, opset, attrs, n_attrs, in, 1, &o));
  bool ok = ew_expect(&o, dt, 1, D(n), want, tol, op);
  if (!ok) fprintf(stderr, "  %s %s\n", op, dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&o);
}

static void test_extremes(void) {
  /* stable forms: no inf/inf or overflow to NaN */
  one("Sigmoid", 13, SMELT_F32, NULL, 0, 4, V(-100, 100, -1e30, NAN), V(3.7200759760208356e-44, 1, 0, NAN), 1e-6);
  one("Softplus", 13, SMELT_F32, NULL, 0, 3, V(100, -100, 1e30), V(100, 3.7200759760208356e-44, 1e30), 1e-6);
  one("Mish", 18, SMELT_F32, NULL, 0, 2, V(100, -100), V(100, -3.7200759760208356e-42), 1e-6);
  one("Relu", 14, SMELT_F32, NULL, 0, 3, V(NAN, -INFINITY, INFINITY), V(NAN, 0, INFINITY), 0);
  one("Elu", 6, SMELT_F16, NULL, 0, 2, V(-20, 60000), V(-1, 60000), 1e-3);
  /* integer Relu and Shrink */
  one("Relu", 14, SMELT_I8, NULL, 0, 3, V(-128, 0, 127), V(0, 0, 127), 0);
  one("Relu", 14, SMELT_I64, NULL, 0, 2, V(-5, 5), V(0, 5), 0);
  ir_attr sh[] = {ew_attr_float("lambd", 1.5f), ew_attr_float("bias", 1.0f)};
  one("Shrink", 9, SMELT_I32, sh, 2, 5, V(-3, -1, 0, 2, 5), V(-2, 0, 0, 1, 4), 0);
  one("Shrink", 9, SMELT_U8, sh, 2, 3, V(0, 1, 200), V(0, 0, 199), 0);
  /* Relu on unsigned, HardSwish on ints: not in the spec */
  tensor u = ew_mk(SMELT_U8, 1, D(1), NULL), o;
  tensor *in[] = {&u};
  CHECK(ew_run("Relu", 14, NULL, 0, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  CHECK(ew_run("HardSwish", 14, NULL, 0, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor f = ew_mk(SMELT_F32, 1, D(1), NULL);
  in[0] = &f;
  ir_attr bad[] = {ew_attr_str("approximate", "erf")};
  CHECK(ew_run("Gelu", 20, bad, 1, in, 1, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "approximate is 'erf'") != NULL);
  tensor_release(&o);
  tensor_release(&u);
  tensor_release(&f);
}

static void test_prelu(void) {
  /* NCHW with per-channel slope [C,1,1] */
  tensor x = ew_mk(SMELT_F32, 4, D(1, 2, 2, 2), V(-1, 2, -3, 4, -1, 2, -3, 4)),
         s = ew_mk(SMELT_F32, 3, D(2, 1, 1), V(0.5, 2)), o;
  tensor *in[] = {&x, &s};
  CHECK_OK(ew_run("PRelu", 16, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 4, D(1, 2, 2, 2), V(-0.5, 2, -1.5, 4, -2, 2, -6, 4), 0, "prelu"));
  tensor_release(&o);
  /* slope of X's full shape and scalar slope; int and f16 variants */
  tensor xi = ew_mk(SMELT_I32, 1, D(3), V(-4, 0, 4)), si = ew_mk(SMELT_I32, 0, NULL, V(3));
  tensor *ini[] = {&xi, &si};
  CHECK_OK(ew_run("PRelu", 16, NULL, 0, ini, 2, &o));
  CHECK(ew_expect(&o, SMELT_I32, 1, D(3), V(-12, 0, 4), 0, "prelu i32"));
  tensor_release(&o);
  tensor xh = ew_mk(SMELT_F16, 2, D(2, 2), V(-1, 1, -2, 2)), sh = ew_mk(SMELT_F16, 1, D(2), V(0.25, 0.5));
  tensor *inh[] = {&xh, &sh};
  CHECK_OK(ew_run("PRelu", 16, NULL, 0, inh, 2, &o));
  CHECK(ew_expect(&o, SMELT_F16, 2, D(2, 2), V(-0.25, 1, -0.5, 2), 0, "prelu f16"));
  tensor_release(&o);
  /* a slope that would grow X is an error */
  tensor big = ew_mk(SMELT_F32, 2, D(3, 1), NULL), x1 = ew_mk(SMELT_F32, 1, D(4), NULL);
  tensor *inb[] = {&x1, &big};
  CHECK(ew_run("PRelu", 16, NULL, 0, inb, 2, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "does not broadcast to X shape [4]") != NULL);
  tensor_release(&o);
  tensor *rel[] = {&x, &s, &xi, &si, &xh, &sh, &big, &x1};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tensor_release(rel[i]);
}

static void clip_case(smelt_dtype dt, const double *lo, const double *hi, int n, const double *x,
                      const double *want) {
  tensor a = ew_mk(dt, 1, D(n), x), l = {0}, h = {0}, o;
  if (lo) l = ew_mk(dt, 0, NULL, lo);
  if (hi) h = ew_mk(dt, 0, NULL, hi);
  tensor *in[] = {&a, lo ? &l : NULL, hi ? &h : NULL};
  CHECK_OK(ew_run("Clip", 13, NULL, 0, in, 3, &o));
  bool ok = ew_expect(&o, dt, 1, D(n), want, 0, "clip");
  if (!ok) fprintf(stderr, "  clip %s\n", dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&l);
  tensor_release(&h);
  tensor_release(&o);
}

static void test_clip(void) {
  const double *x = V(-5, -1, 0, 1, 5);
  smelt_dtype all[] = {SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F64, SMELT_I8,
                       SMELT_I16, SMELT_I32,  SMELT_I64, SMELT_U8 /* below */};
  for (int t = 0; t < 8; t++) {
    clip_case(all[t], V(-1), V(1), 5, x, V(-1, -1, 0, 1, 1));
    clip_case(all[t], V(0), NULL, 5, x, V(0, 0, 0, 1, 5));
    clip_case(all[t], NULL, V(0), 5, x, V(-5, -1, 0, 0, 0));
    clip_case(all[t], NULL, NULL, 5, x, x);
    clip_case(all[t], V(2), V(-2), 5, x, V(-2, -2, -2, -2, -2)); /* min > max: all max */
  }
  clip_case(SMELT_U8, V(10), V(200), 3, V(0, 100, 255), V(10, 100, 200));
  clip_case(SMELT_U64, V(1), V(18446744073709549568.0), 2, V(0, 5), V(1, 5));
  clip_case(SMELT_F32, V(-1), V(1), 3, V(NAN, -INFINITY, INFINITY), V(NAN, -1, 1));
  /* opset 6: bounds are attributes */
  ir_attr b6[] = {ew_attr_float("min", -0.5f), ew_attr_float("max", 0.5f)};
  one("Clip", 6, SMELT_F32, b6, 2, 3, V(-1, 0.25, 1), V(-0.5, 0.25, 0.5), 0);
  one("Clip", 6, SMELT_F32, b6 + 1, 1, 3, V(-1e30, 0.25, 1), V(-1e30, 0.25, 0.5), 1e-7);
  /* errors: non-scalar bound, mismatched type */
  tensor a = ew_mk(SMELT_F32, 1, D(3), NULL), v2 = ew_mk(SMELT_F32, 1, D(2), NULL),
         i = ew_mk(SMELT_I32, 0, NULL, NULL), o;
  tensor *in1[] = {&a, &v2};
  CHECK(ew_run("Clip", 13, NULL, 0, in1, 2, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "input 1 (min) has 2 elements, expected a scalar") != NULL);
  tensor_release(&o);
  tensor *in2[] = {&a, NULL, &i};
  CHECK(ew_run("Clip", 13, NULL, 0, in2, 3, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "input 2 has type int32 but input 0 has type float32") != NULL);
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&v2);
  tensor_release(&i);
}

static void test_pool(void) {
  int64_t n = 150001;
  tensor a = ew_mk(SMELT_BF16, 1, D(n), NULL), o1, o2;
  for (int64_t i = 0; i < n; i++) ((uint16_t *)a.data)[i] = f32_to_bf16((float)(i % 999) / 99 - 5);
  tensor *in[] = {&a};
  CHECK_OK(ew_run_pool("Gelu", 20, NULL, 0, in, 1, &o1, 4));
  CHECK_OK(ew_run("Gelu", 20, NULL, 0, in, 1, &o2));
  CHECK(o1.nbytes == o2.nbytes && !memcmp(o1.data, o2.data, o1.nbytes));
  tensor_release(&o1);
  tensor_release(&o2);
  tensor_release(&a);
}

int main(void) {
  test_formulas();
  test_extremes();
  test_prelu();
  test_clip();
  test_pool();
  return test_report("ops_activation");
}
