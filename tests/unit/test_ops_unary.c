/* Unary math: every float op in every float type against libm in double,
 * Round half-to-even, integer Abs/Neg/Sign wrap, IsNaN/IsInf, edge values,
 * empty and rank-0 tensors, pooled runs, dtype errors. */
#include "ew_util.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static double sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }
static double recip(double x) { return 1 / x; }
static double neg(double x) { return -x; }

static const struct {
  const char *op;
  double (*ref)(double);
  double lo, hi; /* domain sampled */
} fns[] = {
    {"Abs", fabs, -5, 5},       {"Neg", neg, -5, 5},        {"Sign", sign, -5, 5},
    {"Reciprocal", recip, 0.1, 5}, {"Floor", floor, -5, 5}, {"Ceil", ceil, -5, 5},
    {"Sqrt", sqrt, 0, 9},       {"Exp", exp, -10, 10},      {"Log", log, 0.01, 100},
    {"Erf", erf, -3, 3},        {"Tanh", tanh, -5, 5},      {"Sin", sin, -6, 6},
    {"Cos", cos, -6, 6},        {"Tan", tan, -1.5, 1.5},    {"Asin", asin, -1, 1},
    {"Acos", acos, -1, 1},      {"Atan", atan, -9, 9},      {"Sinh", sinh, -5, 5},
    {"Cosh", cosh, -5, 5},      {"Asinh", asinh, -9, 9},    {"Acosh", acosh, 1, 9},
    {"Atanh", atanh, -0.99, 0.99},
};

static void test_float_ops(void) {
  struct {
    smelt_dtype t;
    double tol;
  } types[] = {{SMELT_F32, 2e-6}, {SMELT_F64, 1e-14}, {SMELT_F16, 2e-3}, {SMELT_BF16, 1.6e-2}};
  enum { N = 37 };
  for (size_t f = 0; f < sizeof fns / sizeof *fns; f++)
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      double x[N], want[N];
      tensor a = ew_mk(types[t].t, 1, D(N), NULL), o;
      for (int i = 0; i < N; i++) {
        tensor_set_f64(&a, i, fns[f].lo + (fns[f].hi - fns[f].lo) * i / (N - 1));
        x[i] = tensor_get_f64(&a, i); /* the value as stored in this type */
        want[i] = fns[f].ref(x[i]);
      }
      tensor *in[] = {&a};
      CHECK_OK(ew_run(fns[f].op, 13, NULL, 0, in, 1, &o));
      bool ok = ew_expect(&o, types[t].t, 1, D(N), want, types[t].tol, fns[f].op);
      if (!ok) fprintf(stderr, "  %s %s\n", fns[f].op, dtype_name(types[t].t));
      CHECK(ok);
      tensor_release(&a);
      tensor_release(&o);
    }
}

static void one(const char *op, smelt_dtype dt, const ir_attr *attrs, int n_attrs, int n,
                const double *x, smelt_dtype want_t, const double *want) {
  tensor a = ew_mk(dt, 1, D(n), x), o;
  tensor *in[] = {&a};
  CHECK_OK(ew_run(op, 20, attrs, n_attrs, in, 1, &o));
  bool ok = ew_expect(&o, want_t, 1, D(n), want, 0, op);
  if (!ok) fprintf(stderr, "  %s %s\n", op, dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&o);
}

static void test_edges(void) {
  const double *halves = V(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 3.5000001, 8388606.5, NAN);
  const double *even = V(0, 2, 2, -0.0, -2, -2, 2, 4, 8388606, NAN);
  one("Round", SMELT_F32, NULL, 0, 10, halves, SMELT_F32, even);
  one("Round", SMELT_F64, NULL, 0, 10, halves, SMELT_F64, even);
  one("Round", SMELT_F16, NULL, 0, 6, halves, SMELT_F16, even);
  one("Floor", SMELT_F32, NULL, 0, 4, V(-0.5, 0.5, -INFINITY, NAN), SMELT_F32, V(-1, 0, -INFINITY, NAN));
  one("Ceil", SMELT_F32, NULL, 0, 3, V(-0.5, 0.5, INFINITY), SMELT_F32, V(-0.0, 1, INFINITY));
  one("Sqrt", SMELT_F32, NULL, 0, 4, V(-1, 0, INFINITY, NAN), SMELT_F32, V(NAN, 0, INFINITY, NAN));
  one("Log", SMELT_F32, NULL, 0, 3, V(0, -1, INFINITY), SMELT_F32, V(-INFINITY, NAN, INFINITY));
  one("Exp", SMELT_F32, NULL, 0, 3, V(-INFINITY, 100, NAN), SMELT_F32, V(0, INFINITY, NAN));
  one("Exp", SMELT_F16, NULL, 0, 2, V(12, -20), SMELT_F16, V(INFINITY, 0));
  one("Reciprocal", SMELT_F32, NULL, 0, 2, V(0, -0.0), SMELT_F32, V(INFINITY, -INFINITY));
  one("Sign", SMELT_F32, NULL, 0, 4, V(-0.0, NAN, -INFINITY, 3), SMELT_F32, V(0, NAN, -1, 1));
  one("Tanh", SMELT_F32, NULL, 0, 3, V(-100, 100, NAN), SMELT_F32, V(-1, 1, NAN));
  /* integer Abs/Neg wrap at the minimum; Sign in every int type */
  tensor m = ew_mk(SMELT_I32, 1, D(3), V(-2147483648.0, -5, 7)), o;
  tensor *in[] = {&m};
  CHECK_OK(ew_run("Abs", 13, NULL, 0, in, 1, &o));
  CHECK(ew_expect_i64(&o, (int64_t[]){INT32_MIN, 5, 7}, 3, "abs i32"));
  tensor_release(&o);
  CHECK_OK(ew_run("Neg", 13, NULL, 0, in, 1, &o));
  CHECK(ew_expect_i64(&o, (int64_t[]){INT32_MIN, 5, -7}, 3, "neg i32"));
  tensor_release(&o);
  tensor_release(&m);
  one("Neg", SMELT_I8, NULL, 0, 2, V(-128, 127), SMELT_I8, V(-128, -127));
  one("Abs", SMELT_I64, NULL, 0, 2, V(-3, 0), SMELT_I64, V(3, 0));
  one("Abs", SMELT_U8, NULL, 0, 2, V(255, 0), SMELT_U8, V(255, 0));
  smelt_dtype ints[] = {SMELT_I8, SMELT_I16, SMELT_I32, SMELT_I64};
  for (int i = 0; i < 4; i++) one("Sign", ints[i], NULL, 0, 3, V(-9, 0, 9), ints[i], V(-1, 0, 1));
  smelt_dtype uints[] = {SMELT_U8, SMELT_U16, SMELT_U32, SMELT_U64};
  for (int i = 0; i < 4; i++) one("Sign", uints[i], NULL, 0, 2, V(0, 9), uints[i], V(0, 1));
}

static void test_isnan_isinf(void) {
  const double *x = V(NAN, INFINITY, -INFINITY, 0, -1e30);
  smelt_dtype types[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
  for (int t = 0; t < 4; t++) {
    int n = types[t] == SMELT_F16 ? 4 : 5; /* -1e30 is inf in f16 */
    one("IsNaN", types[t], NULL, 0, n, x, SMELT_BOOL, V(1, 0, 0, 0, 0));
    one("IsInf", types[t], NULL, 0, n, x, SMELT_BOOL, V(0, 1, 1, 0, 0));
    ir_attr pos[] = {ew_attr_int("detect_negative", 0)};
    one("IsInf", types[t], pos, 1, n, x, SMELT_BOOL, V(0, 1, 0, 0, 0));
    ir_attr neg[] = {ew_attr_int("detect_positive", 0)};
    one("IsInf", types[t], neg, 1, n, x, SMELT_BOOL, V(0, 0, 1, 0, 0));
  }
}

static void test_shapes_and_errors(void) {
  tensor s = ew_mk(SMELT_F32, 0, NULL, V(4)), e = ew_mk(SMELT_F32, 3, D(2, 0, 3), NULL), o;
  tensor *in[] = {&s};
  CHECK_OK(ew_run("Sqrt", 13, NULL, 0, in, 1, &o));
  CHECK(ew_expect(&o, SMELT_F32, 0, NULL, V(2), 0, "rank 0"));
  tensor_release(&o);
  in[0] = &e;
  CHECK_OK(ew_run("Exp", 13, NULL, 0, in, 1, &o));
  CHECK(ew_expect(&o, SMELT_F32, 3, D(2, 0, 3), NULL, 0, "empty"));
  tensor_release(&o);
  tensor i = ew_mk(SMELT_I32, 1, D(2), NULL), u = ew_mk(SMELT_U8, 1, D(2), NULL);
  in[0] = &i;
  CHECK(ew_run("Sqrt", 13, NULL, 0, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type int32, which Sqrt does not support") != NULL);
  tensor_release(&o);
  in[0] = &u;
  CHECK(ew_run("Neg", 13, NULL, 0, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor x = {0};
  x.dtype = SMELT_F16;
  x.rank = 2;
  x.dims[0] = dim_sym(0);
  x.dims[1] = 5;
  in[0] = &x;
  CHECK_OK(ew_static_infer("IsNaN", 13, NULL, 0, in, 1, &o));
  CHECK(o.dtype == SMELT_BOOL && o.rank == 2 && o.dims[0] == dim_sym(0) && o.dims[1] == 5);
  CHECK_OK(ew_static_infer("Cos", 13, NULL, 0, in, 1, &o));
  CHECK(o.dtype == SMELT_F16 && o.rank == 2);
  tensor_release(&s);
  tensor_release(&e);
  tensor_release(&i);
  tensor_release(&u);
}

static void test_pool(void) {
  int64_t n = 200003;
  tensor a = ew_mk(SMELT_F32, 1, D(n), NULL), o1, o2;
  for (int64_t i = 0; i < n; i++) ((float *)a.data)[i] = (float)(i % 1000) / 100.0f - 5;
  tensor *in[] = {&a};
  CHECK_OK(ew_run_pool("Tanh", 13, NULL, 0, in, 1, &o1, 4));
  CHECK_OK(ew_run("Tanh", 13, NULL, 0, in, 1, &o2));
  CHECK(o1.nbytes == o2.nbytes && !memcmp(o1.data, o2.data, o1.nbytes));
  tensor_release(&o1);
  tensor_release(&o2);
  tensor_release(&a);
}

int main(void) {
  test_float_ops();
  test_edges();
  test_isnan_isinf();
  test_shapes_and_errors();
  test_pool();
  return test_report("ops_unary");
}
