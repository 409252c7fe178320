/* Arithmetic family: broadcasting against a naive oracle, every dtype, integer
 * wrap/division/modulo rules, Pow type mixes, variadic folds, static inference. */
#include "ew_util.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

/* Two-input op on shapes a, b checked element by element against fn applied
 * through the naive broadcast index. */
static void check_bcast(const char *op, smelt_dtype dt, int ra, const int64_t *da, int rb,
                        const int64_t *db, double (*fn)(double, double), smelt_pool *unused) {
  (void)unused;
  int64_t na = shape_numel(ra, da), nb = shape_numel(rb, db);
  tensor a = ew_mk(dt, ra, da, NULL), b = ew_mk(dt, rb, db, NULL), o;
  double lo = dtype_is_unsigned_int(dt) ? 0 : -3;
  for (int64_t i = 0; i < na; i++) tensor_set_f64(&a, i, (double)(i % 7) + lo);
  for (int64_t i = 0; i < nb; i++) tensor_set_f64(&b, i, (double)(i % 5) + 1);
  tensor *in[] = {&a, &b};
  smelt_status s = ew_run(op, 14, NULL, 0, in, 2, &o);
  CHECK_OK(s);
  if (!s) {
    int r = o.rank;
    int64_t idx[SMELT_MAX_RANK] = {0}, n = tensor_numel(&o);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++, ew_next_index(r, o.dims, idx)) {
      double x = tensor_get_f64(&a, ew_naive_index(r, idx, ra, da));
      double y = tensor_get_f64(&b, ew_naive_index(r, idx, rb, db));
      ok = tensor_get_f64(&o, i) == fn(x, y);
      if (!ok) fprintf(stderr, "%s %s: element %lld wrong\n", op, dtype_name(dt), (long long)i);
    }
    CHECK(ok);
  }
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&o);
}

static double add(double x, double y) { return x + y; }
static double mul(double x, double y) { return x * y; }
static double sub(double x, double y) { return x - y; }

static void test_broadcast_shapes(void) {
  static const struct {
    int ra, rb;
    int64_t da[5], db[5];
  } cases[] = {
      {0, 0, {0}, {0}},                     /* scalar op scalar */
      {2, 0, {2, 3}, {0}},                  /* tensor op scalar */
      {0, 1, {0}, {4}},
      {2, 1, {2, 3}, {3}},
      {2, 2, {2, 1}, {1, 3}},               /* outer product */
      {3, 2, {2, 1, 3}, {4, 1}},
      {1, 1, {1}, {7}},
      {2, 2, {3, 1}, {3, 5}},               /* column broadcast */
      {5, 5, {2, 1, 3, 1, 2}, {1, 4, 1, 5, 1}},
      {5, 3, {2, 3, 1, 4, 5}, {3, 4, 5}},
      {4, 4, {2, 3, 4, 5}, {1, 3, 1, 1}},   /* per-channel bias */
      {2, 2, {0, 3}, {1, 3}},               /* empty */
      {1, 0, {0}, {0}},
      {3, 3, {1, 1, 1}, {1, 1, 1}},
  };
  smelt_dtype types[] = {SMELT_F32, SMELT_I32, SMELT_F64, SMELT_I8, SMELT_F16};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
      check_bcast("Add", types[t], cases[i].ra, cases[i].da, cases[i].rb, cases[i].db, add, NULL);
      check_bcast("Mul", types[t], cases[i].rb, cases[i].db, cases[i].ra, cases[i].da, mul, NULL);
    }
  check_bcast("Sub", SMELT_I16, 2, D(3, 4), 1, D(4), sub, NULL);
}

static void test_every_dtype(void) {
  smelt_dtype all[] = {SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F64, SMELT_I8,  SMELT_I16,
                       SMELT_I32, SMELT_I64,  SMELT_U8,  SMELT_U16, SMELT_U32, SMELT_U64};
  const char *ops[] = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Pow"};
  /* 12 op 3, 8 op 2 in every type (Pow: 4^3, 8^2): results fit every type. */
  double want[] = {15, 9, 36, 4, 0, 12, 3, 64};
  double want2[] = {10, 6, 16, 4, 0, 8, 2, 64};
  for (size_t t = 0; t < sizeof all / sizeof *all; t++)
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
      double x0 = strcmp(ops[k], "Pow") ? 12 : 4;
      tensor a = ew_mk(all[t], 1, D(2), V(x0, 8)), b = ew_mk(all[t], 1, D(2), V(3, 2)), o;
      tensor *in[] = {&a, &b};
      CHECK_OK(ew_run(ops[k], 14, NULL, 0, in, 2, &o));
      bool ok = ew_expect(&o, all[t], 1, D(2), V(want[k], want2[k]), 0, ops[k]);
      if (!ok) fprintf(stderr, "  type %s\n", dtype_name(all[t]));
      CHECK(ok);
      tensor_release(&a);
      tensor_release(&b);
      tensor_release(&o);
    }
  /* Sum and Mean are float-only. */
  tensor a = ew_mk(SMELT_I32, 1, D(1), V(1)), o;
  tensor *in[] = {&a, &a};
  CHECK(ew_run("Sum", 13, NULL, 0, in, 2, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type int32") != NULL);
  tensor_release(&o);
  tensor_release(&a);
}

static void test_errors(void) {
  tensor a = ew_mk(SMELT_F32, 2, D(2, 3), NULL), b = ew_mk(SMELT_F32, 1, D(4), NULL);
  tensor c = ew_mk(SMELT_I64, 1, D(3), NULL), bo = ew_mk(SMELT_BOOL, 1, D(3), NULL), o;
  tensor *in1[] = {&a, &b};
  CHECK(ew_run("Add", 14, NULL, 0, in1, 2, &o) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "cannot be broadcast") != NULL);
  CHECK(strstr(smelt_last_error(), "node 'test' (Add)") != NULL);
  tensor_release(&o);
  tensor *in2[] = {&a, &c};
  CHECK(ew_run("Mul", 14, NULL, 0, in2, 2, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "input 1 has type int64 but input 0 has type float32") != NULL);
  tensor_release(&o);
  tensor *in3[] = {&bo, &bo};
  CHECK(ew_run("Add", 14, NULL, 0, in3, 2, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type bool, which Add does not support") != NULL);
  tensor_release(&o);
  tensor *in4[] = {&a, &c, &a};
  CHECK(ew_run("Max", 13, NULL, 0, in4, 3, &o) != SMELT_OK);
  tensor_release(&o);
  tensor *in5[] = {&a};
  CHECK(ew_run("Add", 14, NULL, 0, in5, 1, &o) == SMELT_ERR_INVALID_MODEL); /* arity */
  tensor_release(&o);
  ir_attr legacy[] = {ew_attr_int("broadcast", 1), ew_attr_int("axis", 0)};
  tensor *in6[] = {&a, &a};
  CHECK(ew_run("Add", 6, legacy, 2, in6, 2, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c);
  tensor_release(&bo);
}

/* Runs a two-input int op and compares exactly. */
static void int_case(const char *op, smelt_dtype dt, const ir_attr *attrs, int n_attrs,
                     const double *x, const double *y, const int64_t *want, int n) {
  tensor a = ew_mk(dt, 1, D(n), x), b = ew_mk(dt, 1, D(n), y), o;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run(op, 13, attrs, n_attrs, in, 2, &o));
  bool ok = o.dtype == dt && ew_expect_i64(&o, want, n, op);
  if (!ok) fprintf(stderr, "  %s %s\n", op, dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&o);
}

static void test_int_semantics(void) {
  /* wrap-around */
  int_case("Add", SMELT_I32, NULL, 0, V(2147483647, -2147483648.0), V(1, -1),
           (int64_t[]){INT32_MIN, INT32_MAX}, 2);
  int_case("Mul", SMELT_I8, NULL, 0, V(100, -128), V(3, -1), (int64_t[]){44, -128}, 2);
  int_case("Add", SMELT_U8, NULL, 0, V(200, 0), V(100, 0), (int64_t[]){44, 0}, 2);
  int_case("Sub", SMELT_U16, NULL, 0, V(0), V(1), (int64_t[]){65535}, 1);
  int_case("Mul", SMELT_U16, NULL, 0, V(65535), V(65535), (int64_t[]){1}, 1);
  int_case("Mul", SMELT_I64, NULL, 0, V(4611686018427387904.0), V(4), (int64_t[]){0}, 1);
  /* division truncates toward zero; /0 gives 0; MIN/-1 wraps */
  int_case("Div", SMELT_I32, NULL, 0, V(-3, 3, -3, 3, 7, -2147483648.0),
           V(2, 2, -2, -2, 0, -1), (int64_t[]){-1, 1, 1, -1, 0, INT32_MIN}, 6);
  int_case("Div", SMELT_I64, NULL, 0, V(-9223372036854775808.0), V(-1), (int64_t[]){INT64_MIN}, 1);
  int_case("Div", SMELT_U32, NULL, 0, V(4294967295.0, 5), V(2, 0), (int64_t[]){2147483647, 0}, 2);
  /* Mod: sign of the divisor; fmod=1: sign of the dividend */
  int_case("Mod", SMELT_I32, NULL, 0, V(-4, 4, -4, 4, 6, 5, -2147483648.0),
           V(3, -3, -3, 3, 3, 0, -1), (int64_t[]){2, -2, -1, 1, 0, 0, 0}, 7);
  ir_attr fm = ew_attr_int("fmod", 1);
  int_case("Mod", SMELT_I8, &fm, 1, V(-4, 4, -4, 4, -128), V(3, -3, -3, 3, -1),
           (int64_t[]){-1, 1, -1, 1, 0}, 5);
  int_case("Mod", SMELT_U8, NULL, 0, V(250, 7), V(7, 0), (int64_t[]){5, 0}, 2);
  /* Max/Min on the extremes */
  int_case("Max", SMELT_U64, NULL, 0, V(18446744073709549568.0), V(1), (int64_t[]){-2048}, 1);
  int_case("Min", SMELT_I64, NULL, 0, V(-9223372036854775808.0), V(0), (int64_t[]){INT64_MIN}, 1);
}

static void test_float_semantics(void) {
  ir_attr fm = ew_attr_int("fmod", 1);
  tensor a = ew_mk(SMELT_F32, 1, D(5), V(-4.5, 4.5, -4.5, 5.0, 1)),
         b = ew_mk(SMELT_F32, 1, D(5), V(2, -2, -2, 2.5, 0)), o;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run("Mod", 13, &fm, 1, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 1, D(5), V(-0.5, 0.5, -0.5, 0, NAN), 0, "fmod f32"));
  tensor_release(&o);
  CHECK_OK(ew_run("Mod", 13, NULL, 0, in, 2, &o)); /* numpy mod */
  CHECK(ew_expect(&o, SMELT_F32, 1, D(5), V(1.5, -1.5, -0.5, 0, NAN), 0, "mod f32"));
  tensor_release(&o);
  /* -0 result takes the divisor's sign under numpy mod */
  tensor z = ew_mk(SMELT_F64, 1, D(1), V(4)), zd = ew_mk(SMELT_F64, 1, D(1), V(-2));
  tensor *inz[] = {&z, &zd};
  CHECK_OK(ew_run("Mod", 13, NULL, 0, inz, 2, &o));
  CHECK(((double *)o.data)[0] == 0 && signbit(((double *)o.data)[0]));
  tensor_release(&o);
  /* NaN propagates through Max/Min from either side; inf arithmetic */
  tensor n1 = ew_mk(SMELT_F32, 1, D(4), V(NAN, 1, INFINITY, -0.0)),
         n2 = ew_mk(SMELT_F32, 1, D(4), V(1, NAN, 1, 0));
  tensor *inn[] = {&n1, &n2};
  CHECK_OK(ew_run("Max", 13, NULL, 0, inn, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 1, D(4), V(NAN, NAN, INFINITY, 0), 0, "max nan"));
  tensor_release(&o);
  CHECK_OK(ew_run("Min", 13, NULL, 0, inn, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 1, D(4), V(NAN, NAN, 1, 0), 0, "min nan"));
  tensor_release(&o);
  CHECK_OK(ew_run("Div", 13, NULL, 0, inn, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 1, D(4), V(NAN, NAN, INFINITY, NAN), 0, "div"));
  tensor_release(&o);
  /* f16 rounds each result: 2049 is not representable, 2048 + 1 -> 2048 */
  tensor h1 = ew_mk(SMELT_F16, 1, D(3), V(2048, 0.1, 65504)),
         h2 = ew_mk(SMELT_F16, 1, D(3), V(1, 0.2, 65504));
  tensor *inh[] = {&h1, &h2};
  CHECK_OK(ew_run("Add", 13, NULL, 0, inh, 2, &o));
  CHECK(ew_expect(&o, SMELT_F16, 1, D(3), V(2048, 0.2998046875, INFINITY), 0, "f16 add"));
  tensor_release(&o);
  tensor g1 = ew_mk(SMELT_BF16, 1, D(2), V(256, 3)), g2 = ew_mk(SMELT_BF16, 1, D(2), V(1, 7));
  tensor *ing[] = {&g1, &g2};
  CHECK_OK(ew_run("Mul", 13, NULL, 0, ing, 2, &o));
  CHECK(ew_expect(&o, SMELT_BF16, 1, D(2), V(256, 21), 0, "bf16 mul"));
  tensor_release(&o);
  CHECK_OK(ew_run("Add", 13, NULL, 0, ing, 2, &o));
  CHECK(ew_expect(&o, SMELT_BF16, 1, D(2), V(256, 10), 0, "bf16 add rounds 257 to 256"));
  tensor_release(&o);
  tensor *rel[] = {&a, &b, &z, &zd, &n1, &n2, &h1, &h2, &g1, &g2};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tensor_release(rel[i]);
}

static void test_pow(void) {
  tensor o;
  struct {
    smelt_dtype a, b, want_t;
    double x[4], y[4], want[4];
  } cases[] = {
      {SMELT_F32, SMELT_F32, SMELT_F32, {2, -3, 4, 0}, {2, 2, 0.5, -1}, {4, 9, 2, INFINITY}},
      {SMELT_F32, SMELT_I64, SMELT_F32, {2, -3, 4, 0.5}, {3, 3, -1, 2}, {8, -27, 0.25, 0.25}},
      {SMELT_F32, SMELT_U32, SMELT_F32, {2, -3, 4, 0.5}, {3, 3, 1, 2}, {8, -27, 4, 0.25}},
      {SMELT_I32, SMELT_F32, SMELT_I32, {1, 2, 3, 2}, {4, 5, 6, 0.5}, {1, 32, 729, 1}},
      {SMELT_I64, SMELT_I64, SMELT_I64, {2, -3, 2, -1}, {10, 3, -1, -3}, {1024, -27, 0, -1}},
      {SMELT_I32, SMELT_I64, SMELT_I32, {2, -3, 1, 7}, {31, 3, -5, 0}, {-2147483648.0, -27, 1, 1}},
      {SMELT_F64, SMELT_F64, SMELT_F64, {2, -8, 9, NAN}, {0.5, 1.0 / 3, 0.5, 0}, {M_SQRT2, NAN, 3, 1}},
      {SMELT_F16, SMELT_F32, SMELT_F16, {2, 3, -2, 0.5}, {2, 2, 3, 2}, {4, 9, -8, 0.25}},
      {SMELT_BF16, SMELT_I32, SMELT_BF16, {2, 3, -2, 0.5}, {2, 2, 3, 2}, {4, 9, -8, 0.25}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tensor a = ew_mk(cases[i].a, 1, D(4), cases[i].x), b = ew_mk(cases[i].b, 1, D(4), cases[i].y);
    tensor *in[] = {&a, &b};
    CHECK_OK(ew_run("Pow", 15, NULL, 0, in, 2, &o));
    bool ok = ew_expect(&o, cases[i].want_t, 1, D(4), cases[i].want, 1e-6, "pow");
    if (!ok) fprintf(stderr, "  pow case %zu\n", i);
    CHECK(ok);
    tensor_release(&o);
    tensor_release(&a);
    tensor_release(&b);
  }
  /* scalar exponent broadcast */
  tensor a = ew_mk(SMELT_F32, 2, D(2, 2), V(1, 2, 3, 4)), e = ew_mk(SMELT_F32, 0, NULL, V(3));
  tensor *in[] = {&a, &e};
  CHECK_OK(ew_run("Pow", 15, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 2), V(1, 8, 27, 64), 1e-6, "pow scalar"));
  tensor_release(&o);
  tensor bo = ew_mk(SMELT_BOOL, 1, D(1), V(1));
  tensor *inb[] = {&a, &bo};
  CHECK(ew_run("Pow", 15, NULL, 0, inb, 2, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 1 has type bool") != NULL);
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&e);
  tensor_release(&bo);
}

static void test_variadic(void) {
  tensor a = ew_mk(SMELT_F32, 2, D(2, 1), V(1, 5)), b = ew_mk(SMELT_F32, 1, D(3), V(3, 0, 9)),
         c = ew_mk(SMELT_F32, 0, NULL, V(4)), o;
  tensor *in[] = {&a, &b, &c};
  CHECK_OK(ew_run("Max", 13, NULL, 0, in, 3, &o));
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 3), V(4, 4, 9, 5, 5, 9), 0, "max3"));
  tensor_release(&o);
  CHECK_OK(ew_run("Min", 13, NULL, 0, in, 3, &o));
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 3), V(1, 0, 1, 3, 0, 4), 0, "min3"));
  tensor_release(&o);
  CHECK_OK(ew_run("Sum", 13, NULL, 0, in, 3, &o));
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 3), V(8, 5, 14, 12, 9, 18), 0, "sum3"));
  tensor_release(&o);
  CHECK_OK(ew_run("Mean", 13, NULL, 0, in, 3, &o));
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 3), V(8 / 3.0, 5 / 3.0, 14 / 3.0, 4, 3, 6), 1e-7,
                  "mean3"));
  tensor_release(&o);
  CHECK_OK(ew_run("Max", 13, NULL, 0, in, 1, &o)); /* one input: a copy */
  CHECK(ew_expect(&o, SMELT_F32, 2, D(2, 1), V(1, 5), 0, "max1"));
  tensor_release(&o);
  tensor h = ew_mk(SMELT_F16, 1, D(2), V(1, 2)), h2 = ew_mk(SMELT_F16, 1, D(2), V(2, 2));
  tensor *inh[] = {&h, &h2, &h2};
  CHECK_OK(ew_run("Mean", 13, NULL, 0, inh, 3, &o));
  CHECK(ew_expect(&o, SMELT_F16, 1, D(2), V(f16_to_f32(f32_to_f16(5 / 3.0f)), 2), 0, "mean f16"));
  tensor_release(&o);
  tensor i8 = ew_mk(SMELT_I8, 1, D(2), V(-5, 7)), i8b = ew_mk(SMELT_I8, 2, D(2, 1), V(0, 9));
  tensor *ini[] = {&i8, &i8b, &i8};
  CHECK_OK(ew_run("Max", 13, NULL, 0, ini, 3, &o));
  CHECK(ew_expect(&o, SMELT_I8, 2, D(2, 2), V(0, 7, 9, 9), 0, "max i8"));
  tensor_release(&o);
  tensor *rel[] = {&a, &b, &c, &h, &h2, &i8, &i8b};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tensor_release(rel[i]);
}

static void test_static_infer(void) {
  tensor a = {0}, b = {0}, o;
  a.dtype = SMELT_F32;
  a.rank = 3;
  a.dims[0] = dim_sym(0); /* batch */
  a.dims[1] = 1;
  a.dims[2] = 8;
  b.dtype = SMELT_F32;
  b.rank = 2;
  b.dims[0] = DIM_UNKNOWN;
  b.dims[1] = 8;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_static_infer("Add", 14, NULL, 0, in, 2, &o));
  CHECK(o.dtype == SMELT_F32 && o.rank == 3 && o.dims[0] == dim_sym(0) &&
        o.dims[1] == DIM_UNKNOWN && o.dims[2] == 8);
  b.rank = -1; /* unknown rank */
  CHECK_OK(ew_static_infer("Mul", 14, NULL, 0, in, 2, &o));
  CHECK(o.rank == -1 && o.dtype == SMELT_F32);
  b.rank = 1;
  b.dims[0] = 7;
  CHECK(ew_static_infer("Sub", 14, NULL, 0, in, 2, &o) == SMELT_ERR_INVALID_ARGUMENT);
  b.dtype = SMELT_I64;
  b.rank = 0;
  CHECK_OK(ew_static_infer("Pow", 15, NULL, 0, in, 2, &o));
  CHECK(o.dtype == SMELT_F32 && o.rank == 3);
}

/* Large tensors go through the pool; results must match the inline walk. */
static void test_pool(void) {
  int64_t rows = 300, cols = 1001;
  tensor a = ew_mk(SMELT_F32, 2, D(rows, cols), NULL), b = ew_mk(SMELT_F32, 2, D(rows, 1), NULL);
  for (int64_t i = 0; i < rows * cols; i++) ((float *)a.data)[i] = (float)(i % 1000) * 0.5f;
  for (int64_t i = 0; i < rows; i++) ((float *)b.data)[i] = (float)i;
  tensor o1, o2;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run_pool("Sub", 14, NULL, 0, in, 2, &o1, 4));
  CHECK_OK(ew_run("Sub", 14, NULL, 0, in, 2, &o2));
  CHECK(o1.nbytes == o2.nbytes && !memcmp(o1.data, o2.data, o1.nbytes));
  bool ok = true;
  for (int64_t i = 0; i < rows * cols && ok; i++)
    ok = ((float *)o1.data)[i] == (float)(i % 1000) * 0.5f - (float)(i / cols);
  CHECK(ok);
  tensor_release(&o1);
  tensor_release(&o2);
  tensor h = ew_mk(SMELT_F16, 2, D(rows, cols), NULL);
  for (int64_t i = 0; i < rows * cols; i++) ((uint16_t *)h.data)[i] = f32_to_f16((float)(i % 64));
  tensor *inh[] = {&h, &h};
  CHECK_OK(ew_run_pool("Add", 14, NULL, 0, inh, 2, &o1, 3));
  ok = true;
  for (int64_t i = 0; i < rows * cols && ok; i++)
    ok = f16_to_f32(((uint16_t *)o1.data)[i]) == 2.0f * (float)(i % 64);
  CHECK(ok);
  tensor_release(&o1);
  tensor_release(&h);
  tensor_release(&a);
  tensor_release(&b);
}

int main(void) {
  test_broadcast_shapes();
  test_every_dtype();
  test_errors();
  test_int_semantics();
  test_float_semantics();
  test_pow();
  test_variadic();
  test_static_infer();
  test_pool();
  return test_report("ops_binary");
}
