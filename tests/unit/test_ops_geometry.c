/* GridSample, AffineGrid, Col2Im, RoiAlign, NonMaxSuppression, DeformConv:
 * hand-computed 1-D samples for every mode and padding, the identity grid
 * round trip, overlapping column sums, roi bins, NMS thresholds and limits,
 * and DeformConv with zero offsets against Conv. */
#include <math.h>

#include "shape_test_util.h"

static uint32_t lcg_state = 7;
static double lcg(void) {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return ((double)(lcg_state >> 8) / (double)(1u << 24)) - 0.5;
}

static bool near_vals(const tensor *t, const double *v, int64_t n, double tol) {
  if (tensor_numel(t) != n) return false;
  for (int64_t i = 0; i < n; i++)
    if (fabs(tensor_get_f64(t, i) - v[i]) > tol) {
      fprintf(stderr, "  element %lld: %.9g, expected %.9g\n", (long long)i, tensor_get_f64(t, i), v[i]);
      return false;
    }
  return true;
}

static void gs1(const char *mode, const char *pad, int align, const double *grid, const double *want) {
  tensor x = mk(SMELT_F32, 3, DIMS(1, 1, 4), VALS(10, 20, 30, 40)), g = mk(SMELT_F32, 3, DIMS(1, 3, 1), grid), y;
  tensor *in[] = {&x, &g};
  ir_attr a[] = {attr_s("mode", mode), attr_s("padding_mode", pad), attr_i("align_corners", align)};
  CHECK_OK(run1("GridSample", 20, a, 3, in, 2, &y));
  CHECK(near_vals(&y, want, 3, 1e-4));
  if (y.data && !near_vals(&y, want, 3, 1e-4)) fprintf(stderr, "  (%s, %s, %d)\n", mode, pad, align);
  tensor_release(&y), tensor_release(&x), tensor_release(&g);
}

static void test_grid_sample(void) {
  const double *g = VALS(-1, 0, 1.5);
  gs1("linear", "zeros", 1, g, VALS(10, 25, 10));
  gs1("linear", "border", 1, g, VALS(10, 25, 40));
  gs1("linear", "reflection", 1, g, VALS(10, 25, 32.5));
  gs1("nearest", "zeros", 0, g, VALS(10, 30, 0)); /* 1.5 rounds to even 2 */
  gs1("nearest", "border", 0, g, VALS(10, 30, 40));
  /* cubic over a constant image reproduces it wherever all taps are inside (border) */
  tensor x = mk(SMELT_F32, 4, DIMS(1, 2, 3, 3), NULL), grid = mk(SMELT_F32, 4, DIMS(1, 2, 2, 2), NULL), y;
  for (int i = 0; i < 18; i++) tensor_set_f64(&x, i, 5);
  for (int i = 0; i < 8; i++) tensor_set_f64(&grid, i, 2.2 * lcg());
  tensor *in[] = {&x, &grid};
  ir_attr a[] = {attr_s("mode", "cubic"), attr_s("padding_mode", "border")};
  CHECK_OK(run1("GridSample", 20, a, 2, in, 2, &y));
  CHECK(y.rank == 4 && y.dims[1] == 2 && y.dims[2] == 2 && y.dims[3] == 2);
  CHECK(near_vals(&y, VALS(5, 5, 5, 5, 5, 5, 5, 5), 8, 1e-5));
  tensor_release(&y), tensor_release(&x), tensor_release(&grid);
}

/* GridSample(X, AffineGrid(identity)) = X, for both align_corners. */
static void test_identity_grid(void) {
  for (int align = 0; align < 2; align++) {
    tensor th = mk(SMELT_F32, 3, DIMS(1, 2, 3), VALS(1, 0, 0, 0, 1, 0)), size = mk(SMELT_I64, 1, DIMS(4), VALS(1, 2, 3, 4));
    tensor grid, y, x = mk(SMELT_F32, 4, DIMS(1, 2, 3, 4), NULL);
    for (int i = 0; i < 24; i++) tensor_set_f64(&x, i, lcg());
    ir_attr a[] = {attr_i("align_corners", align)};
    tensor *in[] = {&th, &size};
    CHECK_OK(run1("AffineGrid", 20, a, 1, in, 2, &grid));
    CHECK(grid.rank == 4 && grid.dims[1] == 3 && grid.dims[2] == 4 && grid.dims[3] == 2);
    if (!align && grid.data) /* (x, y) of pixel (0, 0): centers at -1 + 1/W and -1 + 1/H */
      CHECK(fabs(tensor_get_f64(&grid, 0) + 0.75) < 1e-6 && fabs(tensor_get_f64(&grid, 1) + 2.0 / 3) < 1e-6);
    tensor *in2[] = {&x, &grid};
    CHECK_OK(run1("GridSample", 20, a, 1, in2, 2, &y));
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = tensor_get_f64(&x, i);
    CHECK(near_vals(&y, v, 24, 1e-5));
    tensor_release(&th), tensor_release(&size), tensor_release(&grid), tensor_release(&y), tensor_release(&x);
  }
}

static void test_col2im(void) {
  tensor x = mk(SMELT_F32, 3, DIMS(1, 2, 2), VALS(1, 2, 3, 4)), img = mk(SMELT_I64, 1, DIMS(2), VALS(1, 3));
  tensor blk = mk(SMELT_I64, 1, DIMS(2), VALS(1, 2)), y;
  tensor *in[] = {&x, &img, &blk};
  CHECK_OK(run1("Col2Im", 18, NULL, 0, in, 3, &y));
  CHECK(same(&y, 4, DIMS(1, 1, 1, 3), VALS(1, 5, 4))); /* the middle pixel is covered twice */
  tensor_release(&y);
  ir_attr st[] = {attr_ints("strides", 2, DIMS(1, 2))};
  CHECK(run1("Col2Im", 18, st, 1, in, 3, &y) == SMELT_ERR_INVALID_ARGUMENT); /* 1 block, not 2 */
  ir_attr pd[] = {attr_ints("pads", 4, DIMS(0, 1, 0, 0))};
  tensor x3 = mk(SMELT_F32, 3, DIMS(1, 2, 3), VALS(1, 2, 3, 4, 5, 6));
  tensor *in3[] = {&x3, &img, &blk};
  CHECK_OK(run1("Col2Im", 18, pd, 1, in3, 3, &y)); /* the first tap of block 0 falls in the pad */
  CHECK(same(&y, 4, DIMS(1, 1, 1, 3), VALS(4 + 2, 5 + 3, 6)));
  tensor_release(&y), tensor_release(&x), tensor_release(&x3), tensor_release(&img), tensor_release(&blk);
}

static void test_roi_align(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 1, 2, 2), VALS(1, 2, 3, 4)), rois = mk(SMELT_F32, 2, DIMS(1, 4), VALS(0, 0, 1, 1));
  tensor bi = mk(SMELT_I64, 1, DIMS(1), VALS(0)), y;
  tensor *in[] = {&x, &rois, &bi};
  ir_attr avg[] = {attr_s("coordinate_transformation_mode", "output_half_pixel"), attr_i("sampling_ratio", 1)};
  CHECK_OK(run1("RoiAlign", 16, avg, 2, in, 3, &y));
  CHECK(near_vals(&y, VALS(2.5), 1, 1e-6));
  tensor_release(&y);
  ir_attr mx[] = {attr_s("coordinate_transformation_mode", "output_half_pixel"), attr_i("sampling_ratio", 1),
                  attr_s("mode", "max")};
  CHECK_OK(run1("RoiAlign", 16, mx, 3, in, 3, &y));
  CHECK(near_vals(&y, VALS(1), 1, 1e-6)); /* the largest weighted corner: 0.25 * 4 */
  tensor_release(&y);
  ir_attr hp[] = {attr_i("sampling_ratio", 1)};
  CHECK_OK(run1("RoiAlign", 16, hp, 1, in, 3, &y)); /* half_pixel: the sample sits on pixel (0, 0) */
  CHECK(near_vals(&y, VALS(1), 1, 1e-6));
  tensor_release(&y);
  tensor b2 = mk(SMELT_I64, 1, DIMS(1), VALS(1));
  tensor *in2[] = {&x, &rois, &b2};
  CHECK(run1("RoiAlign", 16, hp, 1, in2, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&rois), tensor_release(&bi), tensor_release(&b2);
}

static void nms(const double *max_out, const double *thr, int center, const double *want, int64_t n_want) {
  tensor boxes = center ? mk(SMELT_F32, 3, DIMS(1, 3, 4), VALS(0.5, 0.5, 1, 1, 0.55, 0.5, 1.1, 1, 2.5, 2.5, 1, 1))
                        : mk(SMELT_F32, 3, DIMS(1, 3, 4), VALS(0, 0, 1, 1, 0, 0, 1, 1.1, 2, 2, 3, 3));
  tensor scores = mk(SMELT_F32, 3, DIMS(1, 1, 3), VALS(0.9, 0.8, 0.7)), iou = mk(SMELT_F32, 1, DIMS(1), VALS(0.5));
  tensor mo = mk(SMELT_I64, 1, DIMS(1), max_out), st = mk(SMELT_F32, 1, DIMS(1), thr), y;
  tensor *in[] = {&boxes, &scores, max_out ? &mo : NULL, &iou, thr ? &st : NULL};
  ir_attr cp[] = {attr_i("center_point_box", center)};
  CHECK_OK(run1("NonMaxSuppression", 11, cp, 1, in, 5, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 2, DIMS(n_want, 3), want));
  tensor_release(&y), tensor_release(&boxes), tensor_release(&scores), tensor_release(&iou);
  tensor_release(&mo), tensor_release(&st);
}

static void test_nms(void) {
  nms(VALS(10), NULL, 0, VALS(0, 0, 0, 0, 0, 2), 2);
  nms(VALS(10), NULL, 1, VALS(0, 0, 0, 0, 0, 2), 2);
  nms(VALS(10), VALS(0.75), 0, VALS(0, 0, 0), 1); /* the score threshold drops box 2 */
  nms(VALS(1), NULL, 0, VALS(0, 0, 0), 1);
  nms(NULL, NULL, 0, NULL, 0); /* no max_output_boxes_per_class: nothing */
}

static void test_deform_conv(void) {
  tensor x = mk(SMELT_F32, 4, DIMS(1, 4, 4, 5), NULL), w = mk(SMELT_F32, 4, DIMS(4, 2, 2, 3), NULL);
  for (int64_t i = 0; i < 80; i++) tensor_set_f64(&x, i, lcg());
  for (int64_t i = 0; i < 48; i++) tensor_set_f64(&w, i, lcg());
  tensor b = mk(SMELT_F32, 1, DIMS(4), VALS(0.1, -0.2, 0.3, 0)), ref, y;
  ir_attr at[] = {attr_i("group", 2), attr_ints("pads", 4, DIMS(1, 0, 0, 1)), attr_ints("strides", 2, DIMS(1, 2))};
  tensor *cin[] = {&x, &w, &b};
  CHECK_OK(run1("Conv", 11, at, 3, cin, 3, &ref));
  int64_t oh = ref.dims[2], ow = ref.dims[3];
  tensor off = mk(SMELT_F32, 4, DIMS(1, 2 * 6 * 2, oh, ow), NULL), mask = mk(SMELT_F32, 4, DIMS(1, 2 * 6, oh, ow), NULL);
  for (int64_t i = 0; i < tensor_numel(&mask); i++) tensor_set_f64(&mask, i, 1);
  for (int64_t i = 0; i < tensor_numel(&off); i++) tensor_set_f64(&off, i, 0);
  ir_attr dat[] = {at[0], at[1], at[2], attr_i("offset_group", 2)};
  tensor *din[] = {&x, &w, &off, &b, &mask};
  CHECK_OK(run1("DeformConv", 19, dat, 4, din, 5, &y)); /* zero offsets, unit mask: plain Conv */
  double v[64];
  for (int64_t i = 0; i < tensor_numel(&ref) && i < 64; i++) v[i] = tensor_get_f64(&ref, i);
  CHECK(tensor_numel(&ref) <= 64 && near_vals(&y, v, tensor_numel(&ref), 1e-5));
  tensor_release(&y);
  /* a half mask halves the result without bias; an offset of +1 row shifts the input */
  for (int64_t i = 0; i < tensor_numel(&mask); i++) tensor_set_f64(&mask, i, 0.5);
  tensor *din2[] = {&x, &w, &off, NULL, &mask};
  tensor *cin2[] = {&x, &w};
  tensor ref2;
  CHECK_OK(run1("Conv", 11, at, 3, cin2, 2, &ref2));
  CHECK_OK(run1("DeformConv", 19, dat, 4, din2, 5, &y));
  for (int64_t i = 0; i < tensor_numel(&ref2) && i < 64; i++) v[i] = 0.5 * tensor_get_f64(&ref2, i);
  CHECK(near_vals(&y, v, tensor_numel(&ref2), 1e-5));
  tensor_release(&y), tensor_release(&ref2);
  tensor small = mk(SMELT_F32, 4, DIMS(1, 3, oh, ow), NULL);
  tensor *bad[] = {&x, &w, &small};
  CHECK(run1("DeformConv", 19, dat, 4, bad, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&w), tensor_release(&b), tensor_release(&ref), tensor_release(&off);
  tensor_release(&mask), tensor_release(&small);
}

int main(void) {
  test_grid_sample();
  test_identity_grid();
  test_col2im();
  test_roi_align();
  test_nms();
  test_deform_conv();
  return test_report("ops_geometry");
}
