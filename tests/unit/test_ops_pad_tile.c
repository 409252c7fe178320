/* Pad (every mode, pads larger than the axis, negative pads, axes input,
 * attribute form), CenterCropPad, Tile, Expand.  Expected values come from
 * numpy.pad / numpy.tile / numpy.broadcast_to. */
#include "shape_test_util.h"

static smelt_status pad(tensor *x, const char *mode, int n, const int64_t *pads, tensor *cv,
                        tensor *axes, tensor *y) {
  tensor p = mk(SMELT_I64, 1, DIMS(n), NULL);
  if (n) memcpy(p.data, pads, 8 * (size_t)n);
  ir_attr a[] = {attr_s("mode", mode)};
  tensor *in[] = {x, &p, cv, axes};
  smelt_status s = run1("Pad", 19, a, 1, in, axes ? 4 : cv ? 3 : 2, y);
  tensor_release(&p);
  return s;
}

static void test_pad_modes(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(3, 2), VALS(1, 1.25, 2.5, 3.5, 4.5, 5.75)), y;
  CHECK_OK(pad(&x, "constant", 4, DIMS(0, 2, 0, 0), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(0, 0, 1, 1.25, 0, 0, 2.5, 3.5, 0, 0, 4.5, 5.75)));
  tensor_release(&y);
  CHECK_OK(pad(&x, "reflect", 4, DIMS(0, 2, 0, 0), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(1, 1.25, 1, 1.25, 2.5, 3.5, 2.5, 3.5, 4.5, 5.75, 4.5, 5.75)));
  tensor_release(&y);
  CHECK_OK(pad(&x, "edge", 4, DIMS(0, 2, 0, 0), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(1, 1, 1, 1.25, 2.5, 2.5, 2.5, 3.5, 4.5, 4.5, 4.5, 5.75)));
  tensor_release(&y);
  CHECK_OK(pad(&x, "wrap", 4, DIMS(0, 2, 0, 0), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(1, 1.25, 1, 1.25, 2.5, 3.5, 2.5, 3.5, 4.5, 5.75, 4.5, 5.75)));
  tensor_release(&y);
  CHECK(pad(&x, "mirror", 4, DIMS(0, 2, 0, 0), NULL, NULL, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(pad(&x, "constant", 3, DIMS(0, 2, 0), NULL, NULL, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(pad(&x, "constant", 4, DIMS(-2, 0, -2, 0), NULL, NULL, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x);
}

static void test_pad_large(void) {
  tensor x = mk(SMELT_I64, 2, DIMS(3, 4), NULL), y;
  CHECK_OK(pad(&x, "reflect", 4, DIMS(2, 5, 3, 1), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(8, 10),
             VALS(9, 10, 11, 10, 9, 8, 9, 10, 11, 10, 5, 6, 7, 6, 5, 4, 5, 6, 7, 6, 1, 2, 3, 2, 1,
                  0, 1, 2, 3, 2, 5, 6, 7, 6, 5, 4, 5, 6, 7, 6, 9, 10, 11, 10, 9, 8, 9, 10, 11, 10, 5,
                  6, 7, 6, 5, 4, 5, 6, 7, 6, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 5, 6, 7, 6, 5, 4, 5, 6,
                  7, 6)));
  tensor_release(&y);
  CHECK_OK(pad(&x, "wrap", 4, DIMS(4, 1, 0, 6), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(7, 11),
             VALS(11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 7, 4, 5,
                  6, 7, 4, 5, 6, 7, 4, 5, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8, 9, 3, 0, 1, 2, 3, 0, 1,
                  2, 3, 0, 1, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 11, 8, 9, 10, 11, 8, 9, 10, 11, 8,
                  9)));
  tensor_release(&y);
  CHECK_OK(pad(&x, "edge", 4, DIMS(1, 0, 2, 3), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(6, 7),
             VALS(0, 1, 2, 3, 3, 3, 3, 0, 1, 2, 3, 3, 3, 3, 4, 5, 6, 7, 7, 7, 7, 8, 9, 10, 11, 11,
                  11, 11, 8, 9, 10, 11, 11, 11, 11, 8, 9, 10, 11, 11, 11, 11)));
  tensor_release(&y);
  /* Negative pads crop: rows from 1, last column dropped, one row of 9 added. */
  tensor cv = mk(SMELT_I64, 0, NULL, VALS(9));
  CHECK_OK(pad(&x, "constant", 4, DIMS(-1, 0, 1, -1), &cv, NULL, &y));
  CHECK(same(&y, 2, DIMS(3, 3), VALS(4, 5, 6, 8, 9, 10, 9, 9, 9)));
  tensor_release(&y);
  /* axes input (opset 18+): only axis -1 padded. */
  tensor ax = mk(SMELT_I64, 1, DIMS(1), VALS(-1));
  CHECK_OK(pad(&x, "constant", 2, DIMS(1, 1), &cv, &ax, &y));
  CHECK(same(&y, 2, DIMS(3, 6), VALS(9, 0, 1, 2, 3, 9, 9, 4, 5, 6, 7, 9, 9, 8, 9, 10, 11, 9)));
  tensor_release(&y);
  tensor_release(&ax);
  tensor_release(&cv);
  tensor_release(&x);
  /* Every element size, constant value bytes copied exactly; rank 0 and empty inputs. */
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor xi = mk(all_sizes[k], 1, DIMS(2), VALS(1, 2)), c = mk(all_sizes[k], 0, NULL, VALS(3));
    tensor ref = mk(all_sizes[k], 1, DIMS(5), VALS(3, 1, 2, 3, 3));
    CHECK_OK(pad(&xi, "constant", 2, DIMS(1, 2), &c, NULL, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&xi);
    tensor_release(&c);
  }
  tensor e = mk(SMELT_F32, 2, DIMS(0, 2), NULL);
  CHECK_OK(pad(&e, "constant", 4, DIMS(1, 0, 0, 1), NULL, NULL, &y));
  CHECK(same(&y, 2, DIMS(1, 3), VALS(0, 0, 0)));
  tensor_release(&y);
  CHECK(pad(&e, "reflect", 4, DIMS(1, 0, 0, 0), NULL, NULL, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&e);
  tensor s = mk(SMELT_F32, 0, NULL, VALS(4));
  CHECK_OK(pad(&s, "constant", 0, NULL, NULL, NULL, &y));
  CHECK(same(&y, 0, NULL, VALS(4)));
  tensor_release(&y);
  tensor_release(&s);
}

static void test_pad_old_opsets(void) {
  tensor x = mk(SMELT_I32, 2, DIMS(1, 2), VALS(1, 2)), y;
  ir_attr a[] = {attr_ints("pads", 4, DIMS(0, 1, 0, 0)), attr_f("value", -7),
                 attr_s("mode", "constant")};
  tensor *in[] = {&x};
  CHECK_OK(run1("Pad", 2, a, 3, in, 1, &y));
  CHECK(y.dtype == SMELT_I32 && same(&y, 2, DIMS(1, 3), VALS(-7, 1, 2)));
  tensor_release(&y);
  ir_attr a1[] = {attr_ints("paddings", 4, DIMS(1, 0, 0, 0)), attr_s("mode", "edge")};
  CHECK_OK(run1("Pad", 1, a1, 2, in, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(1, 2, 1, 2)));
  tensor_release(&y);
  tensor_release(&x);
}

static void test_center_crop_pad(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(5, 3), NULL), y;
  tensor s = mk(SMELT_I64, 1, DIMS(2), VALS(2, 6));
  tensor *in[] = {&x, &s};
  CHECK_OK(run1("CenterCropPad", 18, NULL, 0, in, 2, &y));
  /* rows: crop 5 -> 2 starting at 1; cols: pad 3 -> 6 with 1 in front. */
  CHECK(same(&y, 2, DIMS(2, 6), VALS(0, 3, 4, 5, 0, 0, 0, 6, 7, 8, 0, 0)));
  tensor_release(&y);
  tensor_release(&s);
  s = mk(SMELT_I64, 1, DIMS(1), VALS(4));
  ir_attr ax[] = {attr_ints("axes", 1, DIMS(-2))};
  CHECK_OK(run1("CenterCropPad", 18, ax, 1, in, 2, &y));
  CHECK(same(&y, 2, DIMS(4, 3), VALS(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)));
  tensor_release(&y);
  CHECK(run1("CenterCropPad", 18, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&s);
  tensor_release(&x);
}

static void test_tile(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor x = mk(all_sizes[k], 2, DIMS(2, 2), VALS(0, 1, 1, 0)), y;
    tensor r = mk(SMELT_I64, 1, DIMS(2), VALS(2, 3));
    tensor ref = mk(all_sizes[k], 2, DIMS(4, 6),
                    VALS(0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0));
    tensor *in[] = {&x, &r};
    CHECK_OK(run1("Tile", 13, NULL, 0, in, 2, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&r);
    tensor_release(&x);
  }
  tensor x = mk(SMELT_F32, 3, DIMS(1, 2, 1), VALS(5, 6)), y;
  tensor r = mk(SMELT_I64, 1, DIMS(3), VALS(2, 1, 3));
  tensor *in[] = {&x, &r};
  CHECK_OK(run1("Tile", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 3, DIMS(2, 2, 3), VALS(5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6)));
  tensor_release(&y);
  tensor_set_f64(&r, 1, 0);
  CHECK_OK(run1("Tile", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 3, DIMS(2, 0, 3), NULL));
  tensor_release(&y);
  tensor_set_f64(&r, 1, -1);
  CHECK(run1("Tile", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&r);
  r = mk(SMELT_I64, 1, DIMS(2), VALS(1, 1));
  CHECK(run1("Tile", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&r);
  tensor_release(&x);
}

static void test_expand(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor x = mk(all_sizes[k], 2, DIMS(3, 1), VALS(1, 0, 1)), y;
    tensor s = mk(SMELT_I64, 1, DIMS(3), VALS(2, 1, 2));
    tensor ref = mk(all_sizes[k], 3, DIMS(2, 3, 2), VALS(1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1));
    tensor *in[] = {&x, &s};
    CHECK_OK(run1("Expand", 13, NULL, 0, in, 2, &y));
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&s);
    tensor_release(&x);
  }
  /* shape smaller than the input (1 keeps the input's dim), scalar input, errors. */
  tensor x = mk(SMELT_F32, 2, DIMS(2, 3), NULL), y;
  tensor s = mk(SMELT_I64, 1, DIMS(1), VALS(1));
  tensor *in[] = {&x, &s};
  CHECK_OK(run1("Expand", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 3), VALS(0, 1, 2, 3, 4, 5)));
  tensor_release(&y);
  tensor_set_f64(&s, 0, 4);
  CHECK(run1("Expand", 13, NULL, 0, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&s);
  tensor_release(&x);
  x = mk(SMELT_I8, 0, NULL, VALS(-3));
  s = mk(SMELT_I64, 1, DIMS(2), VALS(2, 0));
  CHECK_OK(run1("Expand", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 0), NULL));
  tensor_release(&y);
  tensor_set_f64(&s, 1, 2);
  CHECK_OK(run1("Expand", 13, NULL, 0, in, 2, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(-3, -3, -3, -3)));
  tensor_release(&y);
  tensor_release(&s);
  tensor_release(&x);
  int64_t B = dim_sym(0);
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(B, 1, 4)), so;
  s = mk(SMELT_I64, 1, DIMS(3), VALS(1, 5, 4));
  tensor *sin[] = {&sx, &s}, *sout[] = {&so};
  CHECK_OK(infer_static("Expand", 13, NULL, 0, sin, 2, sout, 1));
  CHECK(same(&so, 3, DIMS(B, 5, 4), NULL));
  tensor_release(&s);
}

int main(void) {
  test_pad_modes();
  test_pad_large();
  test_pad_old_opsets();
  test_center_crop_pad();
  test_tile();
  test_expand();
  return test_report("ops_pad_tile");
}
