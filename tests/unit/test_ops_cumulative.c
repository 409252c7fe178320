/* CumSum and CumProd: every supported type, exclusive/reverse, axes, wrap. */
#include "shape_test_util.h"

static smelt_status cum(const char *op, tensor *x, int64_t axis, int excl, int rev, tensor *y) {
  tensor a = mk(SMELT_I32, 0, NULL, VALS((double)axis));
  ir_attr at[] = {attr_i("exclusive", excl), attr_i("reverse", rev)};
  tensor *in[] = {x, &a};
  smelt_status s = run1(op, 14, at, 2, in, 2, y);
  tensor_release(&a);
  return s;
}

static void test_cumulative(void) {
  static const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32,
                                    SMELT_I64, SMELT_U32, SMELT_U64, SMELT_I8};
  for (int k = 0; k < 9; k++) {
    tensor x = mk(dts[k], 1, DIMS(5), VALS(1, 2, 3, 4, 5)), y;
    CHECK_OK(cum("CumSum", &x, 0, 0, 0, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(1, 3, 6, 10, 15)));
    tensor_release(&y);
    CHECK_OK(cum("CumSum", &x, 0, 1, 0, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(0, 1, 3, 6, 10)));
    tensor_release(&y);
    CHECK_OK(cum("CumSum", &x, -1, 0, 1, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(15, 14, 12, 9, 5)));
    tensor_release(&y);
    CHECK_OK(cum("CumSum", &x, 0, 1, 1, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(14, 12, 9, 5, 0)));
    tensor_release(&y);
    CHECK_OK(cum("CumProd", &x, 0, 0, 0, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(1, 2, 6, 24, 120)));
    tensor_release(&y);
    CHECK_OK(cum("CumProd", &x, 0, 1, 1, &y));
    CHECK(same(&y, 1, DIMS(5), VALS(120, 60, 20, 5, 1)));
    tensor_release(&y);
    tensor_release(&x);
  }
  tensor x = mk(SMELT_F32, 2, DIMS(2, 3), VALS(1, 2, 3, 4, 5, 6)), y;
  CHECK_OK(cum("CumSum", &x, 0, 0, 0, &y));
  CHECK(same(&y, 2, DIMS(2, 3), VALS(1, 2, 3, 5, 7, 9)));
  tensor_release(&y);
  CHECK_OK(cum("CumSum", &x, 1, 0, 0, &y));
  CHECK(same(&y, 2, DIMS(2, 3), VALS(1, 3, 6, 4, 9, 15)));
  tensor_release(&y);
  CHECK(cum("CumSum", &x, 2, 0, 0, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
  x = mk(SMELT_I32, 1, DIMS(2), VALS(2147483647, 1)); /* wraps, no UB */
  CHECK_OK(cum("CumSum", &x, 0, 0, 0, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(2147483647, -2147483648.0)));
  tensor_release(&y);
  tensor_release(&x);
  x = mk(SMELT_BOOL, 1, DIMS(2), NULL);
  CHECK(cum("CumSum", &x, 0, 0, 0, &y) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&x);
}

int main(void) {
  test_cumulative();
  return test_report("ops_cumulative");
}
