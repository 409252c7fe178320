/* NonZero, Compress, Unique, TopK, OneHot. */
#include "shape_test_util.h"

static void release_all(tensor *t, int n) {
  for (int i = 0; i < n; i++) tensor_release(&t[i]);
}

static void test_nonzero(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(2, 3), VALS(1, 0, -0.0, 0, 2, 3)), y;
  tensor *in[] = {&x};
  CHECK_OK(run1("NonZero", 13, NULL, 0, in, 1, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 2, DIMS(2, 3), VALS(0, 1, 1, 0, 1, 2)));
  tensor_release(&y);
  tensor_release(&x);
  x = mk(SMELT_BOOL, 0, NULL, VALS(1));
  CHECK_OK(run1("NonZero", 13, NULL, 0, in, 1, &y));
  CHECK(same(&y, 2, DIMS(0, 1), NULL));
  tensor_release(&y);
  tensor_release(&x);
  x = mk(SMELT_I64, 1, DIMS(0), NULL);
  CHECK_OK(run1("NonZero", 13, NULL, 0, in, 1, &y));
  CHECK(same(&y, 2, DIMS(1, 0), NULL));
  tensor_release(&y);
  tensor_release(&x);
  x = mk(SMELT_F16, 1, DIMS(3), VALS(0, -0.0, 0.5));
  CHECK_OK(run1("NonZero", 13, NULL, 0, in, 1, &y));
  CHECK(same(&y, 2, DIMS(1, 1), VALS(2)));
  tensor_release(&y);
  tensor_release(&x);
}

static void test_compress(void) {
  tensor x = mk(SMELT_I16, 2, DIMS(3, 2), VALS(1, 2, 3, 4, 5, 6)), y;
  tensor cond = mk(SMELT_BOOL, 1, DIMS(3), VALS(0, 1, 1));
  tensor *in[] = {&x, &cond};
  ir_attr a0[] = {attr_i("axis", 0)};
  CHECK_OK(run1("Compress", 11, a0, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(3, 4, 5, 6)));
  tensor_release(&y);
  ir_attr a1[] = {attr_i("axis", -1)};
  tensor_release(&cond);
  cond = mk(SMELT_BOOL, 1, DIMS(2), VALS(0, 1));
  CHECK_OK(run1("Compress", 11, a1, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(3, 1), VALS(2, 4, 6)));
  tensor_release(&y);
  CHECK_OK(run1("Compress", 11, NULL, 0, in, 2, &y)); /* flattened: first 2 elements */
  CHECK(same(&y, 1, DIMS(1), VALS(2)));
  tensor_release(&y);
  tensor_release(&cond);
  cond = mk(SMELT_BOOL, 1, DIMS(4), VALS(0, 1, 1, 1));
  CHECK(run1("Compress", 11, a0, 1, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&cond);
  cond = mk(SMELT_I64, 1, DIMS(1), VALS(1));
  CHECK(run1("Compress", 11, a0, 1, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&cond);
  tensor_release(&x);
}

static void test_unique(void) {
  tensor x = mk(SMELT_F32, 1, DIMS(6), VALS(2, 1, 1, 3, 4, 3)), o[4];
  tensor *in[] = {&x};
  ir_attr unsorted[] = {attr_i("sorted", 0)};
  CHECK_OK(runn("Unique", 11, unsorted, 1, in, 1, o, 4));
  CHECK(same(&o[0], 1, DIMS(4), VALS(2, 1, 3, 4)));
  CHECK(same(&o[1], 1, DIMS(4), VALS(0, 1, 3, 4)));
  CHECK(same(&o[2], 1, DIMS(6), VALS(0, 1, 1, 2, 3, 2)));
  CHECK(same(&o[3], 1, DIMS(4), VALS(1, 2, 2, 1)));
  release_all(o, 4);
  CHECK_OK(runn("Unique", 11, NULL, 0, in, 1, o, 4));
  CHECK(same(&o[0], 1, DIMS(4), VALS(1, 2, 3, 4)));
  CHECK(same(&o[1], 1, DIMS(4), VALS(1, 0, 3, 4)));
  CHECK(same(&o[2], 1, DIMS(6), VALS(1, 0, 0, 2, 3, 2)));
  CHECK(same(&o[3], 1, DIMS(4), VALS(2, 1, 2, 1)));
  release_all(o, 4);
  tensor_release(&x);
  x = mk(SMELT_I64, 2, DIMS(2, 2), VALS(1, 3, 2, 3));
  CHECK_OK(runn("Unique", 11, NULL, 0, in, 1, o, 4));
  CHECK(same(&o[0], 1, DIMS(3), VALS(1, 2, 3)) && same(&o[1], 1, DIMS(3), VALS(0, 2, 1)) &&
        same(&o[2], 1, DIMS(4), VALS(0, 2, 1, 2)) && same(&o[3], 1, DIMS(3), VALS(1, 1, 2)));
  release_all(o, 4);
  tensor_release(&x);
  x = mk(SMELT_U8, 2, DIMS(3, 3), VALS(1, 0, 0, 1, 0, 0, 2, 3, 4));
  ir_attr ax0[] = {attr_i("axis", 0)};
  CHECK_OK(runn("Unique", 11, ax0, 1, in, 1, o, 4));
  CHECK(same(&o[0], 2, DIMS(2, 3), VALS(1, 0, 0, 2, 3, 4)) && same(&o[1], 1, DIMS(2), VALS(0, 2)) &&
        same(&o[2], 1, DIMS(3), VALS(0, 0, 1)) && same(&o[3], 1, DIMS(2), VALS(2, 1)));
  release_all(o, 4);
  /* Columns along axis -1: [1,1,2], [0,0,3], [0,0,4] -> sorted [0,0,3] < [0,0,4] < [1,1,2]. */
  ir_attr axn[] = {attr_i("axis", -1)};
  CHECK_OK(runn("Unique", 11, axn, 1, in, 1, o, 2));
  CHECK(same(&o[0], 2, DIMS(3, 3), VALS(0, 0, 1, 0, 0, 1, 3, 4, 2)) &&
        same(&o[1], 1, DIMS(3), VALS(1, 2, 0)));
  release_all(o, 2);
  tensor_release(&x);
  x = mk(SMELT_F64, 1, DIMS(0), NULL);
  CHECK_OK(runn("Unique", 11, NULL, 0, in, 1, o, 4));
  CHECK(same(&o[0], 1, DIMS(0), NULL) && same(&o[2], 1, DIMS(0), NULL));
  release_all(o, 4);
  tensor_release(&x);
}

static void test_topk(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(3, 4), NULL), o[2];
  tensor k = mk(SMELT_I64, 1, DIMS(1), VALS(3));
  tensor *in[] = {&x, &k};
  CHECK_OK(runn("TopK", 11, NULL, 0, in, 2, o, 2));
  CHECK(same(&o[0], 2, DIMS(3, 3), VALS(3, 2, 1, 7, 6, 5, 11, 10, 9)));
  CHECK(o[1].dtype == SMELT_I64 && same(&o[1], 2, DIMS(3, 3), VALS(3, 2, 1, 3, 2, 1, 3, 2, 1)));
  release_all(o, 2);
  ir_attr small0[] = {attr_i("largest", 0), attr_i("axis", -2)};
  tensor_set_f64(&k, 0, 2);
  CHECK_OK(runn("TopK", 11, small0, 2, in, 2, o, 2));
  CHECK(same(&o[0], 2, DIMS(2, 4), VALS(0, 1, 2, 3, 4, 5, 6, 7)));
  CHECK(same(&o[1], 2, DIMS(2, 4), VALS(0, 0, 0, 0, 1, 1, 1, 1)));
  release_all(o, 2);
  tensor_set_f64(&k, 0, 5);
  CHECK(runn("TopK", 11, NULL, 0, in, 2, o, 2) == SMELT_ERR_INVALID_ARGUMENT);
  release_all(o, 2);
  tensor_set_f64(&k, 0, 0);
  CHECK_OK(runn("TopK", 11, NULL, 0, in, 2, o, 2));
  CHECK(same(&o[0], 2, DIMS(3, 0), NULL));
  release_all(o, 2);
  tensor_release(&x);
  /* Ties: lower index first, for largest and smallest; integers beyond 2^53. */
  x = mk(SMELT_I64, 1, DIMS(6), VALS(0, 1, 0, 1, 2, 1));
  tensor_set_f64(&k, 0, 4);
  CHECK_OK(runn("TopK", 11, NULL, 0, in, 2, o, 2));
  CHECK(same(&o[0], 1, DIMS(4), VALS(2, 1, 1, 1)) && same(&o[1], 1, DIMS(4), VALS(4, 1, 3, 5)));
  release_all(o, 2);
  ir_attr small[] = {attr_i("largest", 0)};
  CHECK_OK(runn("TopK", 11, small, 1, in, 2, o, 2));
  CHECK(same(&o[1], 1, DIMS(4), VALS(0, 2, 1, 3)));
  release_all(o, 2);
  ((int64_t *)x.data)[0] = (INT64_C(1) << 60) + 1;
  ((int64_t *)x.data)[1] = (INT64_C(1) << 60);
  tensor_set_f64(&k, 0, 1);
  CHECK_OK(runn("TopK", 11, NULL, 0, in, 2, o, 2));
  CHECK(same(&o[1], 1, DIMS(1), VALS(0)));
  release_all(o, 2);
  tensor_release(&x);
  /* Opset 1: k attribute. */
  x = mk(SMELT_U64, 1, DIMS(3), VALS(5, 9, 7));
  ir_attr ka[] = {attr_i("k", 2)};
  tensor *in1[] = {&x};
  CHECK_OK(runn("TopK", 1, ka, 1, in1, 1, o, 2));
  CHECK(same(&o[0], 1, DIMS(2), VALS(9, 7)) && same(&o[1], 1, DIMS(2), VALS(1, 2)));
  release_all(o, 2);
  tensor_release(&x);
  tensor_release(&k);
}

static void test_onehot(void) {
  tensor ind = mk(SMELT_I64, 1, DIMS(4), VALS(1, -1, 3, 9)), d = mk(SMELT_F32, 0, NULL, VALS(3));
  tensor v = mk(SMELT_I32, 1, DIMS(2), VALS(-1, 5)), y;
  tensor *in[] = {&ind, &d, &v};
  CHECK_OK(run1("OneHot", 11, NULL, 0, in, 3, &y));
  CHECK(y.dtype == SMELT_I32 &&
        same(&y, 2, DIMS(4, 3), VALS(-1, 5, -1, -1, -1, 5, -1, -1, -1, -1, -1, -1)));
  tensor_release(&y);
  ir_attr a0[] = {attr_i("axis", 0)};
  CHECK_OK(run1("OneHot", 11, a0, 1, in, 3, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(-1, -1, -1, -1, 5, -1, -1, -1, -1, 5, -1, -1)));
  tensor_release(&y);
  tensor_release(&ind);
  ind = mk(SMELT_F32, 2, DIMS(2, 1), VALS(0, 2.7));
  ir_attr a1[] = {attr_i("axis", -2)};
  CHECK_OK(run1("OneHot", 11, a1, 1, in, 3, &y));
  CHECK(same(&y, 3, DIMS(2, 3, 1), VALS(5, -1, -1, -1, -1, 5)));
  tensor_release(&y);
  tensor_set_f64(&d, 0, 0);
  CHECK(run1("OneHot", 11, NULL, 0, in, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  ir_attr bad[] = {attr_i("axis", 3)};
  tensor_set_f64(&d, 0, 3);
  CHECK(run1("OneHot", 11, bad, 1, in, 3, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ind);
  tensor_release(&d);
  tensor_release(&v);
}

int main(void) {
  test_nonzero();
  test_compress();
  test_unique();
  test_topk();
  test_onehot();
  return test_report("ops_index");
}
