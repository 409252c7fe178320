/* BitShift and BitwiseAnd/Or/Xor/Not: every integer type, broadcasting,
 * shifts by the full width, errors. */
#include "ew_util.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static void case2(const char *op, const ir_attr *attrs, int n_attrs, smelt_dtype dt, int ra,
                  const int64_t *da, const double *x, int rb, const int64_t *db, const double *y,
                  int ro, const int64_t *dout, const double *want) {
  tensor a = ew_mk(dt, ra, da, x), b = ew_mk(dt, rb, db, y), o;
  tensor *in[] = {&a, &b};
  CHECK_OK(ew_run(op, 18, attrs, n_attrs, in, 2, &o));
  bool ok = ew_expect(&o, dt, ro, dout, want, 0, op);
  if (!ok) fprintf(stderr, "  %s %s\n", op, dtype_name(dt));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&o);
}

static void test_bitwise(void) {
  smelt_dtype all[] = {SMELT_I8, SMELT_I16, SMELT_I32, SMELT_I64,
                       SMELT_U8, SMELT_U16, SMELT_U32, SMELT_U64};
  for (int t = 0; t < 8; t++) {
    /* [2,1] op [3] -> [2,3] */
    case2("BitwiseAnd", NULL, 0, all[t], 2, D(2, 1), V(12, 7), 1, D(3), V(10, 3, 0), 2, D(2, 3),
          V(8, 0, 0, 2, 3, 0));
    case2("BitwiseOr", NULL, 0, all[t], 2, D(2, 1), V(12, 7), 1, D(3), V(10, 3, 0), 2, D(2, 3),
          V(14, 15, 12, 15, 7, 7));
    case2("BitwiseXor", NULL, 0, all[t], 2, D(2, 1), V(12, 7), 1, D(3), V(10, 3, 0), 2, D(2, 3),
          V(6, 15, 12, 13, 4, 7));
  }
  smelt_dtype s[] = {SMELT_I8, SMELT_I16, SMELT_I32, SMELT_I64};
  for (int t = 0; t < 4; t++) {
    tensor a = ew_mk(s[t], 1, D(3), V(0, 5, -1)), o;
    tensor *in[] = {&a};
    CHECK_OK(ew_run("BitwiseNot", 18, NULL, 0, in, 1, &o));
    CHECK(ew_expect(&o, s[t], 1, D(3), V(-1, -6, 0), 0, "not signed"));
    tensor_release(&o);
    tensor_release(&a);
  }
  tensor u = ew_mk(SMELT_U8, 1, D(2), V(0, 200)), o;
  tensor *in[] = {&u};
  CHECK_OK(ew_run("BitwiseNot", 18, NULL, 0, in, 1, &o));
  CHECK(ew_expect(&o, SMELT_U8, 1, D(2), V(255, 55), 0, "not u8"));
  tensor_release(&o);
  tensor_release(&u);
  tensor f = ew_mk(SMELT_F32, 1, D(1), NULL), b = ew_mk(SMELT_BOOL, 1, D(1), NULL);
  tensor *inf[] = {&f, &f};
  CHECK(ew_run("BitwiseAnd", 18, NULL, 0, inf, 2, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type float32, which BitwiseAnd does not support"));
  tensor_release(&o);
  tensor *inb[] = {&b};
  CHECK(ew_run("BitwiseNot", 18, NULL, 0, inb, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor_release(&f);
  tensor_release(&b);
}

static void test_shift(void) {
  ir_attr left[] = {ew_attr_str("direction", "LEFT")}, right[] = {ew_attr_str("direction", "RIGHT")};
  struct {
    smelt_dtype t;
    double bits;
  } u[] = {{SMELT_U8, 8}, {SMELT_U16, 16}, {SMELT_U32, 32}, {SMELT_U64, 64}};
  for (int t = 0; t < 4; t++) {
    double top = ldexp(1, (int)u[t].bits - 1);
    case2("BitShift", left, 1, u[t].t, 1, D(4), V(1, 3, 1, 1), 1, D(4), V(1, 2, u[t].bits - 1, u[t].bits),
          1, D(4), V(2, 12, top, 0));
    case2("BitShift", right, 1, u[t].t, 1, D(4), V(16, 3, top, top), 1, D(4),
          V(2, 1, u[t].bits - 1, u[t].bits + 3), 1, D(4), V(4, 1, 1, 0));
    /* scalar shift broadcast */
    case2("BitShift", left, 1, u[t].t, 1, D(3), V(1, 2, 3), 0, NULL, V(2), 1, D(3), V(4, 8, 12));
  }
  case2("BitShift", left, 1, SMELT_U8, 1, D(1), V(255), 1, D(1), V(1), 1, D(1), V(254)); /* wraps */
  tensor a = ew_mk(SMELT_I32, 1, D(1), NULL), o;
  tensor *in[] = {&a, &a};
  CHECK(ew_run("BitShift", 11, left, 1, in, 2, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  tensor b = ew_mk(SMELT_U32, 1, D(1), NULL);
  tensor *inb[] = {&b, &b};
  ir_attr bad[] = {ew_attr_str("direction", "UP")};
  CHECK(ew_run("BitShift", 11, bad, 1, inb, 2, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "direction is 'UP'") != NULL);
  tensor_release(&o);
  CHECK(ew_run("BitShift", 11, NULL, 0, inb, 2, &o) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&o);
  tensor_release(&a);
  tensor_release(&b);
}

int main(void) {
  test_bitwise();
  test_shift();
  return test_report("ops_bitwise");
}
