/* Resize and Upsample.  Expected values come from the ONNX reference
 * implementation (onnx.reference, Resize-19) on the same inputs. */
#include <math.h>

#include "shape_test_util.h"

/* Float outputs agree with the float64 reference to float32 rounding. */
static bool close_to(const tensor *t, int rank, const int64_t *dims, const double *v) {
  if (!same(t, rank, dims, NULL)) return false;
  for (int64_t i = 0; i < tensor_numel(t); i++)
    if (fabs(tensor_get_f64(t, i) - v[i]) > 1e-5 * (1 + fabs(v[i]))) {
      fprintf(stderr, "  element %lld is %.9g, expected %.9g\n", (long long)i,
              tensor_get_f64(t, i), v[i]);
      return false;
    }
  return true;
}

/* Resize-19 with optional roi/scales/sizes (NULL = absent). */
static smelt_status resize(const ir_attr *a, int na, tensor *x, tensor *roi, tensor *scales,
                           tensor *sizes, tensor *y) {
  tensor *in[] = {x, roi, scales, sizes};
  int n = sizes ? 4 : scales ? 3 : roi ? 2 : 1;
  return run1("Resize", 19, a, na, in, n, y);
}

static void test_linear_cubic(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 1, 2, 3), VALS(1, 2, 3, 4, 5, 6)), y;
  tensor sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 2, 1.5));
  ir_attr lin[] = {attr_s("mode", "linear")};
  CHECK_OK(resize(lin, 1, &x, NULL, &sc, NULL, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 4, 4),
                 VALS(1.0, 1.5, 2.1666667461395264, 2.8333332538604736, 1.75, 2.25,
                      2.9166667461395264, 3.5833332538604736, 3.25, 3.75, 4.416666507720947,
                      5.083333492279053, 4.0, 4.5, 5.166666507720947, 5.833333492279053)));
  tensor_release(&y);
  tensor_release(&sc);
  sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 1, 2));
  ir_attr cub[] = {attr_s("mode", "cubic")};
  CHECK_OK(resize(cub, 1, &x, NULL, &sc, NULL, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 2, 6),
                 VALS(0.89453125, 1.19140625, 1.66796875, 2.33203125, 2.80859375, 3.10546875,
                      3.89453125, 4.19140625, 4.66796875, 5.33203125, 5.80859375, 6.10546875)));
  tensor_release(&y);
  tensor_release(&sc);
  sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 1, 0.7));
  ir_attr hps[] = {attr_s("mode", "linear"),
                   attr_s("coordinate_transformation_mode", "half_pixel_symmetric")};
  CHECK_OK(resize(hps, 2, &x, NULL, &sc, NULL, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 2, 2),
                 VALS(1.2857142686843872, 2.7142856121063232, 4.285714149475098,
                      5.714285850524902)));
  tensor_release(&y);
  tensor_release(&sc);
  tensor_release(&x);
}

static void test_antialias(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 1, 4, 4), NULL), y;
  tensor sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 0.5, 0.5));
  ir_attr lin[] = {attr_s("mode", "linear"), attr_i("antialias", 1)};
  CHECK_OK(resize(lin, 2, &x, NULL, &sc, NULL, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 2, 2), VALS(3.125, 4.875, 10.125, 11.875)));
  tensor_release(&y);
  tensor_release(&sc);
  sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 0.6, 0.6));
  ir_attr cub[] = {attr_s("mode", "cubic"), attr_i("antialias", 1), attr_i("exclude_outside", 1),
                   attr_f("cubic_coeff_a", -0.5f)};
  CHECK_OK(resize(cub, 4, &x, NULL, &sc, NULL, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 2, 2),
                 VALS(1.7692278623580933, 3.487131118774414, 8.640841484069824,
                      10.358744621276855)));
  tensor_release(&y);
  ir_attr bad[] = {attr_s("mode", "nearest"), attr_i("antialias", 1)};
  CHECK(resize(bad, 2, &x, NULL, &sc, NULL, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&sc);
  tensor_release(&x);
}

static void test_integer_types(void) {
  /* uint8 rounds half to even and saturates at 0 and 255 (cubic overshoots). */
  tensor x = mk(SMELT_U8, 4, DIMS(1, 1, 2, 3), VALS(0, 255, 10, 200, 3, 128)), y;
  tensor sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 1.5, 2));
  ir_attr ac[] = {attr_s("mode", "linear"), attr_s("coordinate_transformation_mode", "align_corners")};
  CHECK_OK(resize(ac, 2, &x, NULL, &sc, NULL, &y));
  CHECK(y.dtype == SMELT_U8 &&
        same(&y, 4, DIMS(1, 1, 3, 6),
             VALS(0, 102, 204, 206, 108, 10, 100, 112, 123, 117, 93, 69, 200, 121, 42, 28, 78, 128)));
  tensor_release(&y);
  tensor_release(&sc);
  sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 2, 2));
  ir_attr cub[] = {attr_s("mode", "cubic")};
  CHECK_OK(resize(cub, 1, &x, NULL, &sc, NULL, &y));
  CHECK(same(&y, 4, DIMS(1, 1, 4, 6),
             VALS(0, 57, 243, 249, 73, 0, 29, 86, 180, 177, 79, 20, 165, 132, 77, 59, 89, 106, 247,
                  160, 15, 0, 95, 158)));
  tensor_release(&y);
  tensor_release(&sc);
  tensor_release(&x);
  /* Nearest copies bytes: int64 beyond 2^53 stays exact. */
  x = mk(SMELT_I64, 2, DIMS(1, 3), VALS(5, -7, 0));
  ((int64_t *)x.data)[2] = (INT64_C(1) << 60) + 1;
  sc = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2.5));
  ir_attr ceil_[] = {attr_s("mode", "nearest"), attr_s("nearest_mode", "ceil")};
  CHECK_OK(resize(ceil_, 2, &x, NULL, &sc, NULL, &y));
  CHECK(same(&y, 2, DIMS(1, 7), NULL));
  if (y.rank == 2 && y.dims[1] == 7) {
    const int64_t *v = y.data;
    CHECK(v[0] == 5 && v[1] == -7 && v[2] == -7 && v[3] == -7);
    CHECK(v[4] == (INT64_C(1) << 60) + 1 && v[6] == (INT64_C(1) << 60) + 1);
  }
  tensor_release(&y);
  tensor_release(&sc);
  tensor_release(&x);
}

static void test_sizes_roi_axes(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 1, 4, 4), NULL), y;
  tensor sz = mk(SMELT_I64, 1, DIMS(2), VALS(3, 7));
  ir_attr keep[] = {attr_s("mode", "nearest"), attr_ints("axes", 2, DIMS(2, 3)),
                    attr_s("keep_aspect_ratio_policy", "not_larger")};
  CHECK_OK(resize(keep, 3, &x, NULL, NULL, &sz, &y));
  CHECK(same(&y, 4, DIMS(1, 1, 3, 3), VALS(0, 1, 3, 4, 5, 7, 12, 13, 15)));
  tensor_release(&y);
  tensor_release(&sz);
  sz = mk(SMELT_I64, 1, DIMS(4), VALS(1, 1, 3, 3));
  tensor roi = mk(SMELT_F32, 1, DIMS(8), VALS(0, 0, 0.2, -0.2, 1, 1, 0.9, 1.3));
  ir_attr tf[] = {attr_s("mode", "linear"),
                  attr_s("coordinate_transformation_mode", "tf_crop_and_resize"),
                  attr_f("extrapolation_value", -1)};
  CHECK_OK(resize(tf, 3, &x, &roi, NULL, &sz, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 3, 3),
                 VALS(-1.0, 4.050000190734863, -1.0, -1.0, 8.25, -1.0, -1.0, 12.449999809265137,
                      -1.0)));
  tensor_release(&y);
  tensor sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 2, 2));
  ir_attr lin[] = {attr_s("mode", "linear")};
  CHECK(resize(lin, 1, &x, NULL, &sc, &sz, &y) == SMELT_ERR_INVALID_MODEL); /* both */
  CHECK(resize(lin, 1, &x, NULL, NULL, NULL, &y) == SMELT_ERR_INVALID_MODEL); /* neither */
  tensor_set_f64(&sc, 2, -1);
  CHECK(resize(lin, 1, &x, NULL, &sc, NULL, &y) == SMELT_ERR_INVALID_ARGUMENT);
  ir_attr badm[] = {attr_s("mode", "area")};
  tensor_set_f64(&sc, 2, 2);
  CHECK(resize(badm, 1, &x, NULL, &sc, NULL, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&sc);
  sc = mk(SMELT_F32, 1, DIMS(3), VALS(1, 2, 2));
  CHECK(resize(lin, 1, &x, NULL, &sc, NULL, &y) == SMELT_ERR_INVALID_MODEL); /* wrong count */
  tensor_release(&sc);
  tensor_release(&roi);
  tensor_release(&sz);
  tensor_release(&x);
  /* Static: known scales on symbolic batch keep the batch symbol. */
  int64_t B = dim_sym(0);
  tensor sx = mk_shape(SMELT_F32, 4, DIMS(B, 3, 32, DIM_UNKNOWN)), so;
  sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 2, 2));
  tensor *in[] = {&sx, NULL, &sc}, *out[] = {&so};
  CHECK_OK(infer_static("Resize", 19, lin, 1, in, 3, out, 1));
  CHECK(same(&so, 4, DIMS(B, 3, 64, DIM_UNKNOWN), NULL));
  tensor su = mk_shape(SMELT_F32, 1, DIMS(4));
  in[2] = &su;
  CHECK_OK(infer_static("Resize", 19, lin, 1, in, 3, out, 1));
  CHECK(same(&so, 4, DIMS(DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN), NULL));
  tensor_release(&sc);
}

static void test_upsample(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 1, 2, 2), VALS(1, 2, 3, 4)), y;
  tensor sc = mk(SMELT_F32, 1, DIMS(4), VALS(1, 1, 2, 3));
  tensor *in[] = {&x, &sc};
  CHECK_OK(run1("Upsample", 9, (ir_attr[]){attr_s("mode", "nearest")}, 1, in, 2, &y));
  CHECK(same(&y, 4, DIMS(1, 1, 4, 6),
             VALS(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4)));
  tensor_release(&y);
  /* Upsample-7: scales attribute, linear is asymmetric with edge clamping. */
  ir_attr a7[] = {attr_s("mode", "linear"),
                  attr_floats("scales", 4, (const float[]){1, 1, 2, 2})};
  tensor *in7[] = {&x};
  CHECK_OK(run1("Upsample", 7, a7, 2, in7, 1, &y));
  CHECK(close_to(&y, 4, DIMS(1, 1, 4, 4),
                 VALS(1, 1.5, 2, 2, 2, 2.5, 3, 3, 3, 3.5, 4, 4, 3, 3.5, 4, 4)));
  tensor_release(&y);
  tensor_release(&sc);
  tensor_release(&x);
}

int main(void) {
  test_linear_cubic();
  test_antialias();
  test_integer_types();
  test_sizes_roi_axes();
  test_upsample();
  return test_report("ops_resize");
}
