/* Trilu: upper/lower, k input (extremes), batches, every element size. */
#include "shape_test_util.h"

static void test_trilu(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor x = mk(all_sizes[k], 2, DIMS(3, 4), VALS(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3)), y;
    tensor *in[] = {&x};
    tensor ref = mk(all_sizes[k], 2, DIMS(3, 4), VALS(1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 2, 3));
    CHECK_OK(run1("Trilu", 14, NULL, 0, in, 1, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&x);
  }
  tensor x = mk(SMELT_F32, 3, DIMS(2, 3, 3), NULL), y;
  tensor kk = mk(SMELT_I64, 0, NULL, VALS(-1));
  tensor *in[] = {&x, &kk};
  ir_attr lower[] = {attr_i("upper", 0)};
  CHECK_OK(run1("Trilu", 14, lower, 1, in, 2, &y));
  CHECK(same(&y, 3, DIMS(2, 3, 3), VALS(0, 0, 0, 3, 0, 0, 6, 7, 0, 0, 0, 0, 12, 0, 0, 15, 16, 0)));
  tensor_release(&y);
  CHECK_OK(run1("Trilu", 14, NULL, 0, in, 2, &y)); /* upper, k = -1 */
  CHECK(same(&y, 3, DIMS(2, 3, 3), VALS(0, 1, 2, 3, 4, 5, 0, 7, 8, 9, 10, 11, 12, 13, 14, 0, 16, 17)));
  tensor_release(&y);
  *(int64_t *)kk.data = INT64_MAX;
  CHECK_OK(run1("Trilu", 14, NULL, 0, in, 2, &y)); /* upper beyond the matrix: all zero */
  CHECK(same(&y, 3, DIMS(2, 3, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)));
  tensor_release(&y);
  *(int64_t *)kk.data = INT64_MIN;
  CHECK_OK(run1("Trilu", 14, lower, 1, in, 2, &y)); /* lower far below: all zero */
  CHECK(same(&y, 3, DIMS(2, 3, 3), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)));
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&kk);
  x = mk(SMELT_F32, 1, DIMS(3), NULL);
  tensor *in1[] = {&x};
  CHECK(run1("Trilu", 14, NULL, 0, in1, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
  x = mk(SMELT_F32, 2, DIMS(0, 3), NULL);
  CHECK_OK(run1("Trilu", 14, NULL, 0, in1, 1, &y));
  CHECK(same(&y, 2, DIMS(0, 3), NULL));
  tensor_release(&y);
  tensor_release(&x);
}

int main(void) {
  test_trilu();
  return test_report("ops_trilu");
}
