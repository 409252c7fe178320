/* Comparison, logic and Where: truth tables, NaN, every dtype, exact int64,
 * 3-way broadcasting against a naive oracle, errors, static inference. */
#include "ew_util.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static void cmp_case(const char *op, smelt_dtype dt, int n, const double *x, const double *y,
                     const double *want) {
  tensor a = ew_mk(dt, 1, D(n), x), b = ew_mk(dt, 1, D(n), y), o;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run(op, 16, NULL, 0, in, 2, &o));
  bool ok = ew_expect(&o, SMELT_BOOL, 1, D(n), want, 0, op);
  if (!ok) fprintf(stderr, "  %s %s\n", op, dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&o);
}

static void test_compare_all_types(void) {
  smelt_dtype all[] = {SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F64, SMELT_I8,  SMELT_I16,
                       SMELT_I32, SMELT_I64,  SMELT_U8,  SMELT_U16, SMELT_U32, SMELT_U64};
  for (size_t t = 0; t < sizeof all / sizeof *all; t++) {
    const double *x = V(1, 2, 3, 0), *y = V(2, 2, 1, 100);
    cmp_case("Equal", all[t], 4, x, y, V(0, 1, 0, 0));
    cmp_case("Less", all[t], 4, x, y, V(1, 0, 0, 1));
    cmp_case("Greater", all[t], 4, x, y, V(0, 0, 1, 0));
    cmp_case("LessOrEqual", all[t], 4, x, y, V(1, 1, 0, 1));
    cmp_case("GreaterOrEqual", all[t], 4, x, y, V(0, 1, 1, 0));
  }
  cmp_case("Equal", SMELT_BOOL, 4, V(0, 0, 1, 1), V(0, 1, 0, 1), V(1, 0, 0, 1));
  /* signed compare stays signed */
  cmp_case("Less", SMELT_I8, 2, V(-1, -128), V(1, 127), V(1, 1));
}

static void test_nan_and_exact(void) {
  const double *x = V(NAN, NAN, 1, -0.0, INFINITY), *y = V(NAN, 1, NAN, 0, INFINITY);
  cmp_case("Equal", SMELT_F32, 5, x, y, V(0, 0, 0, 1, 1));
  cmp_case("Less", SMELT_F64, 5, x, y, V(0, 0, 0, 0, 0));
  cmp_case("GreaterOrEqual", SMELT_F16, 5, x, y, V(0, 0, 0, 1, 1));
  /* int64 beyond 2^53 must not compare through double */
  tensor a = ew_mk(SMELT_I64, 1, D(2), NULL), b = ew_mk(SMELT_I64, 1, D(2), NULL), o;
  ((int64_t *)a.data)[0] = (1LL << 53) + 1;
  ((int64_t *)b.data)[0] = 1LL << 53;
  ((int64_t *)a.data)[1] = INT64_MAX;
  ((int64_t *)b.data)[1] = INT64_MAX - 1;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run("Equal", 13, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 1, D(2), V(0, 0), 0, "i64 equal"));
  tensor_release(&o);
  CHECK_OK(ew_run("Greater", 13, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 1, D(2), V(1, 1), 0, "i64 greater"));
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&b);
}

static void test_logic(void) {
  tensor a = ew_mk(SMELT_BOOL, 2, D(2, 1), V(0, 1)), b = ew_mk(SMELT_BOOL, 1, D(2), V(0, 1)), o;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run("And", 7, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 2, D(2, 2), V(0, 0, 0, 1), 0, "and"));
  tensor_release(&o);
  CHECK_OK(ew_run("Or", 7, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 2, D(2, 2), V(0, 1, 1, 1), 0, "or"));
  tensor_release(&o);
  CHECK_OK(ew_run("Xor", 7, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 2, D(2, 2), V(0, 1, 1, 0), 0, "xor"));
  tensor_release(&o);
  CHECK_OK(ew_run("Not", 1, NULL, 0, in, 1, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 2, D(2, 1), V(1, 0), 0, "not"));
  tensor_release(&o);
  /* a bool byte other than 1 still reads as true */
  ((uint8_t *)a.data)[1] = 2;
  CHECK_OK(ew_run("Xor", 7, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_BOOL, 2, D(2, 2), V(0, 1, 1, 0), 0, "xor byte 2"));
  tensor_release(&o);
  tensor f = ew_mk(SMELT_F32, 1, D(2), V(0, 1));
  tensor *inf[] = {&f, &f};
  CHECK(ew_run("And", 7, NULL, 0, inf, 2, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type float32, which And does not support") != NULL);
  tensor_release(&o);
  CHECK(ew_run("Not", 1, NULL, 0, inf, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor *mixed[] = {&a, &f};
  CHECK(ew_run("Equal", 13, NULL, 0, mixed, 2, &o) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&f);
}

/* Where over three broadcast shapes against the naive index. */
static void where_case(smelt_dtype dt, int rc, const int64_t *dc, int rx, const int64_t *dx,
                       int ry, const int64_t *dy) {
  tensor c = ew_mk(SMELT_BOOL, rc, dc, NULL), x = ew_mk(dt, rx, dx, NULL), y = ew_mk(dt, ry, dy, NULL);
  for (int64_t i = 0; i < tensor_numel(&c); i++) ((uint8_t *)c.data)[i] = (uint8_t)(i % 3 == 0);
  for (int64_t i = 0; i < tensor_numel(&x); i++) tensor_set_f64(&x, i, (double)(i % 50) + 1);
  for (int64_t i = 0; i < tensor_numel(&y); i++)
    tensor_set_f64(&y, i, dtype_is_unsigned_int(dt) ? (double)(i % 50) + 100 : -(double)(i % 50) - 1);
  if (dt == SMELT_BOOL) /* bool: x all true, y all false */
    for (int64_t i = 0; i < tensor_numel(&y); i++) ((uint8_t *)y.data)[i] = 0;
  tensor o;
  tensor *in[] = {&c, &x, &y};
  smelt_status s = ew_run("Where", 16, NULL, 0, in, 3, &o);
  CHECK_OK(s);
  if (!s) {
    CHECK(o.dtype == dt);
    int r = o.rank;
    int64_t idx[SMELT_MAX_RANK] = {0};
    bool ok = true;
    for (int64_t i = 0; i < tensor_numel(&o) && ok; i++, ew_next_index(r, o.dims, idx)) {
      bool cv = ((uint8_t *)c.data)[ew_naive_index(r, idx, rc, dc)];
      double want = cv ? tensor_get_f64(&x, ew_naive_index(r, idx, rx, dx))
                       : tensor_get_f64(&y, ew_naive_index(r, idx, ry, dy));
      ok = tensor_get_f64(&o, i) == want;
    }
    if (!ok) fprintf(stderr, "where %s wrong\n", dtype_name(dt));
    CHECK(ok);
  }
  tensor_release(&c);
  tensor_release(&x);
  tensor_release(&y);
  tensor_release(&o);
}

static void test_where(void) {
  smelt_dtype types[] = {SMELT_F32, SMELT_F16, SMELT_F64, SMELT_I64, SMELT_I8, SMELT_BOOL,
                         SMELT_U16, SMELT_I32};
  for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
    where_case(types[t], 3, D(2, 1, 1), 3, D(1, 3, 1), 3, D(1, 1, 4));
    where_case(types[t], 0, NULL, 2, D(2, 3), 0, NULL);
    where_case(types[t], 1, D(5), 0, NULL, 2, D(3, 5));
    where_case(types[t], 5, D(2, 1, 2, 1, 3), 4, D(3, 1, 4, 1), 1, D(3));
    where_case(types[t], 2, D(0, 3), 1, D(3), 1, D(1));
  }
  tensor c = ew_mk(SMELT_F32, 1, D(2), NULL), x = ew_mk(SMELT_F32, 1, D(2), NULL),
         y = ew_mk(SMELT_I64, 1, D(2), NULL), o;
  tensor *in[] = {&c, &x, &x};
  CHECK(ew_run("Where", 16, NULL, 0, in, 3, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type float32") != NULL);
  tensor_release(&o);
  tensor cb = ew_mk(SMELT_BOOL, 1, D(2), NULL);
  tensor *in2[] = {&cb, &x, &y};
  CHECK(ew_run("Where", 16, NULL, 0, in2, 3, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "input 2 has type int64 but input 1 has type float32") != NULL);
  tensor_release(&o);
  tensor z = ew_mk(SMELT_F32, 1, D(3), NULL);
  tensor *in3[] = {&cb, &x, &z};
  CHECK(ew_run("Where", 16, NULL, 0, in3, 3, &o) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&o);
  tensor *rel[] = {&c, &x, &y, &cb, &z};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tensor_release(rel[i]);
}

static void test_static(void) {
  tensor a = {0}, b = {0}, o;
  a.dtype = SMELT_I64;
  a.rank = 2;
  a.dims[0] = dim_sym(1);
  a.dims[1] = 1;
  b.dtype = SMELT_I64;
  b.rank = 1;
  b.dims[0] = 6;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_static_infer("Equal", 13, NULL, 0, in, 2, &o));
  CHECK(o.dtype == SMELT_BOOL && o.rank == 2 && o.dims[0] == dim_sym(1) && o.dims[1] == 6);
  tensor c = {0};
  c.dtype = SMELT_BOOL;
  c.rank = 0;
  tensor *in3[] = {&c, &a, &b};
  CHECK_OK(ew_static_infer("Where", 16, NULL, 0, in3, 3, &o));
  CHECK(o.dtype == SMELT_I64 && o.rank == 2 && o.dims[1] == 6);
}

int main(void) {
  test_compare_all_types();
  test_nan_and_exact();
  test_logic();
  test_where();
  test_static();
  return test_report("ops_compare");
}
