/* Concat and Split: negative axes, empty inputs, every element size,
 * uneven num_outputs chunks, split input vs attribute, errors. */
#include "shape_test_util.h"

static void test_concat_basic(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    smelt_dtype dt = all_sizes[k];
    tensor a = mk(dt, 2, DIMS(2, 2), VALS(1, 2, 3, 4)), b = mk(dt, 2, DIMS(2, 1), VALS(5, 6)),
           e = mk(dt, 2, DIMS(2, 0), NULL), y, ref = mk(dt, 2, DIMS(2, 3), VALS(1, 2, 5, 3, 4, 6));
    tensor *in[] = {&a, &e, &b};
    ir_attr ax[] = {attr_i("axis", -1)};
    CHECK_OK(run1("Concat", 13, ax, 1, in, 3, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    ir_attr ax0[] = {attr_i("axis", 0)};
    tensor *in2[] = {&a, &a};
    ref = mk(dt, 2, DIMS(4, 2), VALS(1, 2, 3, 4, 1, 2, 3, 4));
    CHECK_OK(run1("Concat", 13, ax0, 1, in2, 2, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&a);
    tensor_release(&b);
    tensor_release(&e);
  }
  /* A single input, rank 1. */
  tensor a = mk(SMELT_I64, 1, DIMS(3), VALS(1, 2, 3)), y;
  tensor *in[] = {&a};
  ir_attr ax[] = {attr_i("axis", 0)};
  CHECK_OK(run1("Concat", 13, ax, 1, in, 1, &y));
  CHECK(same(&y, 1, DIMS(3), VALS(1, 2, 3)));
  tensor_release(&y);
  tensor_release(&a);
  /* Rank 6, middle axis. */
  tensor p = mk(SMELT_F32, 6, DIMS(2, 1, 2, 1, 2, 1), NULL),
         q = mk(SMELT_F32, 6, DIMS(2, 1, 3, 1, 2, 1), VALS(100, 101, 102, 103, 104, 105, 106, 107,
                                                            108, 109, 110, 111));
  tensor *in6[] = {&p, &q};
  ir_attr ax2[] = {attr_i("axis", -4)};
  CHECK_OK(run1("Concat", 13, ax2, 1, in6, 2, &y));
  CHECK(same(&y, 6, DIMS(2, 1, 5, 1, 2, 1),
             VALS(0, 1, 2, 3, 100, 101, 102, 103, 104, 105, 4, 5, 6, 7, 106, 107, 108, 109, 110,
                  111)));
  tensor_release(&y);
  tensor_release(&p);
  tensor_release(&q);
}

static void test_concat_errors_and_static(void) {
  tensor a = mk(SMELT_F32, 2, DIMS(2, 2), NULL), b = mk(SMELT_F32, 2, DIMS(3, 2), NULL), y;
  tensor c3 = mk(SMELT_F32, 3, DIMS(2, 2, 1), NULL), i32 = mk(SMELT_I32, 2, DIMS(2, 2), NULL);
  tensor *in[] = {&a, &b};
  ir_attr ax1[] = {attr_i("axis", 1)}, ax3[] = {attr_i("axis", 2)};
  CHECK(run1("Concat", 13, ax1, 1, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(run1("Concat", 13, ax3, 1, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(run1("Concat", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_MODEL); /* axis required */
  tensor *in2[] = {&a, &c3};
  CHECK(run1("Concat", 13, ax1, 1, in2, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor *in3[] = {&a, &i32};
  CHECK(run1("Concat", 13, ax1, 1, in3, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor s = mk(SMELT_F32, 0, NULL, NULL);
  tensor *in4[] = {&s, &s};
  ir_attr ax0[] = {attr_i("axis", 0)};
  CHECK(run1("Concat", 13, ax0, 1, in4, 2, &y) == SMELT_ERR_INVALID_MODEL); /* scalars */
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c3);
  tensor_release(&i32);
  tensor_release(&s);
  int64_t B = dim_sym(0), S = dim_sym(1);
  tensor p = mk_shape(SMELT_F32, 3, DIMS(B, S, 64)), q = mk_shape(SMELT_F32, 3, DIMS(B, 1, 64)),
         r = mk_shape(SMELT_F32, 3, DIMS(DIM_UNKNOWN, 2, 64)), so;
  tensor *sin[] = {&p, &q}, *sout[] = {&so};
  CHECK_OK(infer_static("Concat", 13, ax1, 1, sin, 2, sout, 1));
  CHECK(same(&so, 3, DIMS(B, DIM_UNKNOWN, 64), NULL));
  tensor *sin2[] = {&q, &r};
  CHECK_OK(infer_static("Concat", 13, ax1, 1, sin2, 2, sout, 1));
  CHECK(same(&so, 3, DIMS(B, 3, 64), NULL));
}

static smelt_status split(tensor *x, int opset, const ir_attr *a, int na, tensor *sp, tensor *outs,
                          int n) {
  tensor *in[] = {x, sp};
  return runn("Split", opset, a, na, in, sp ? 2 : 1, outs, n);
}

static void release_all(tensor *t, int n) {
  for (int i = 0; i < n; i++) tensor_release(&t[i]);
}

static void test_split(void) {
  tensor x = mk(SMELT_I16, 2, DIMS(2, 6), NULL), o[4];
  CHECK_OK(split(&x, 13, (ir_attr[]){attr_i("axis", 1)}, 1, NULL, o, 3));
  CHECK(same(&o[0], 2, DIMS(2, 2), VALS(0, 1, 6, 7)));
  CHECK(same(&o[1], 2, DIMS(2, 2), VALS(2, 3, 8, 9)));
  CHECK(same(&o[2], 2, DIMS(2, 2), VALS(4, 5, 10, 11)));
  release_all(o, 3);
  tensor sp = mk(SMELT_I64, 1, DIMS(3), VALS(1, 0, 5));
  CHECK_OK(split(&x, 13, (ir_attr[]){attr_i("axis", -1)}, 1, &sp, o, 3));
  CHECK(same(&o[0], 2, DIMS(2, 1), VALS(0, 6)));
  CHECK(same(&o[1], 2, DIMS(2, 0), NULL));
  CHECK(same(&o[2], 2, DIMS(2, 5), VALS(1, 2, 3, 4, 5, 7, 8, 9, 10, 11)));
  release_all(o, 3);
  ir_attr a11[] = {attr_i("axis", 1), attr_ints("split", 2, DIMS(4, 2))};
  CHECK_OK(split(&x, 11, a11, 2, NULL, o, 2));
  CHECK(same(&o[0], 2, DIMS(2, 4), VALS(0, 1, 2, 3, 6, 7, 8, 9)));
  CHECK(same(&o[1], 2, DIMS(2, 2), VALS(4, 5, 10, 11)));
  release_all(o, 2);
  /* opset 18 num_outputs: 6 into 4 is 2, 2, 2, 0; 7 into 3 would be 3, 3, 1. */
  ir_attr n4[] = {attr_i("axis", 1), attr_i("num_outputs", 4)};
  CHECK_OK(split(&x, 18, n4, 2, NULL, o, 4));
  CHECK(same(&o[3], 2, DIMS(2, 0), NULL) && same(&o[2], 2, DIMS(2, 2), VALS(4, 5, 10, 11)));
  release_all(o, 4);
  tensor_release(&x);
  x = mk(SMELT_F64, 1, DIMS(7), NULL);
  ir_attr n3[] = {attr_i("num_outputs", 3)};
  CHECK_OK(split(&x, 18, n3, 1, NULL, o, 3));
  CHECK(same(&o[0], 1, DIMS(3), VALS(0, 1, 2)) && same(&o[1], 1, DIMS(3), VALS(3, 4, 5)) &&
        same(&o[2], 1, DIMS(1), VALS(6)));
  release_all(o, 3);
  CHECK(split(&x, 13, NULL, 0, NULL, o, 3) == SMELT_ERR_INVALID_ARGUMENT); /* 7 not even */
  release_all(o, 3);
  CHECK(split(&x, 18, n3, 1, NULL, o, 2) == SMELT_ERR_INVALID_MODEL); /* count mismatch */
  release_all(o, 2);
  CHECK(split(&x, 13, NULL, 0, &sp, o, 2) == SMELT_ERR_INVALID_MODEL); /* 3 sizes, 2 outputs */
  release_all(o, 2);
  tensor_set_f64(&sp, 2, 7);
  CHECK(split(&x, 13, NULL, 0, &sp, o, 3) == SMELT_ERR_INVALID_ARGUMENT); /* sum 8 != 7 */
  release_all(o, 3);
  tensor_release(&x);
  tensor_release(&sp);
  /* Static: symbolic axis splits into unknown sizes, others keep symbols. */
  int64_t B = dim_sym(0);
  tensor sx = mk_shape(SMELT_F32, 2, DIMS(B, 8)), s0, s1, *sin[] = {&sx}, *sout[] = {&s0, &s1};
  CHECK_OK(infer_static("Split", 13, (ir_attr[]){attr_i("axis", 1)}, 1, sin, 1, sout, 2));
  CHECK(same(&s0, 2, DIMS(B, 4), NULL) && same(&s1, 2, DIMS(B, 4), NULL));
  CHECK_OK(infer_static("Split", 13, NULL, 0, sin, 1, sout, 2));
  CHECK(same(&s0, 2, DIMS(DIM_UNKNOWN, 8), NULL));
}

int main(void) {
  test_concat_basic();
  test_concat_errors_and_static();
  test_split();
  return test_report("ops_concat_split");
}
