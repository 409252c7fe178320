/* Quantization: half-to-even rounding on both signs, saturation, per-axis
 * with a negative axis, blocked layouts with a partial last block, float8
 * with and without saturate, output_dtype, DynamicQuantizeLinear corner
 * cases, integer matmul/conv with per-row/column/channel zero points. */
#include <math.h>

#include "ops/convert.h"
#include "shape_test_util.h"

static void test_quantize_rounding(void) {
  tensor x = mk(SMELT_F32, 1, DIMS(8), VALS(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1000, -1000));
  tensor s = mk(SMELT_F32, 0, NULL, VALS(1)), zi8 = mk(SMELT_I8, 0, NULL, VALS(1)), y;
  tensor *in[] = {&x, &s, &zi8};
  CHECK_OK(run1("QuantizeLinear", 21, NULL, 0, in, 3, &y));
  /* rounded first (half to even), then shifted by the zero point, then saturated */
  CHECK(y.dtype == SMELT_I8 && same(&y, 1, DIMS(8), VALS(-1, -1, 1, 1, 3, 3, 127, -128)));
  tensor_release(&y);
  tensor *in2[] = {&x, &s};
  ir_attr od[] = {attr_i("output_dtype", SMELT_I16)};
  CHECK_OK(run1("QuantizeLinear", 21, od, 1, in2, 2, &y)); /* no zero point: output_dtype */
  CHECK(y.dtype == SMELT_I16 && same(&y, 1, DIMS(8), VALS(-2, -2, 0, 0, 2, 2, 1000, -1000)));
  tensor_release(&y);
  CHECK_OK(run1("QuantizeLinear", 21, NULL, 0, in2, 2, &y)); /* default uint8 */
  CHECK(y.dtype == SMELT_U8 && same(&y, 1, DIMS(8), VALS(0, 0, 0, 0, 2, 2, 255, 0)));
  tensor_release(&y);
  ir_attr bad[] = {attr_i("output_dtype", SMELT_U16)};
  CHECK(run1("QuantizeLinear", 21, bad, 1, in, 3, &y) == SMELT_ERR_INVALID_MODEL); /* != zero point */
  tensor_release(&x), tensor_release(&s), tensor_release(&zi8);
}

static void test_quantize_axis_blocked(void) {
  /* per-axis on axis -2 of [2, 3, 1] */
  tensor x = mk(SMELT_F32, 3, DIMS(2, 3, 1), VALS(2, 4, 6, -2, -4, -6));
  tensor s = mk(SMELT_F32, 1, DIMS(3), VALS(1, 2, 4)), z = mk(SMELT_U8, 1, DIMS(3), VALS(10, 20, 30)), y;
  tensor *in[] = {&x, &s, &z};
  ir_attr ax[] = {attr_i("axis", -2)};
  CHECK_OK(run1("QuantizeLinear", 21, ax, 1, in, 3, &y));
  CHECK(same(&y, 3, DIMS(2, 3, 1), VALS(12, 22, 32, 8, 18, 28))); /* 6/4 = 1.5 -> 2 */
  tensor_release(&y);
  /* blocked: [2, 5] on axis 1 with block 2: blocks {0,1} {2,3} {4} */
  tensor xb = mk(SMELT_F32, 2, DIMS(2, 5), VALS(1, 2, 3, 4, 5, 10, 20, 30, 40, 50));
  tensor sb = mk(SMELT_F32, 2, DIMS(2, 3), VALS(1, 2, 5, 10, 20, 50)), yb;
  tensor *inb[] = {&xb, &sb};
  ir_attr blk[] = {attr_i("axis", 1), attr_i("block_size", 2), attr_i("output_dtype", SMELT_I8)};
  CHECK_OK(run1("QuantizeLinear", 21, blk, 3, inb, 2, &yb));
  CHECK(same(&yb, 2, DIMS(2, 5), VALS(1, 2, 2, 2, 1, 1, 2, 2, 2, 1)));
  tensor_release(&yb);
  tensor q = mk(SMELT_I8, 2, DIMS(2, 5), VALS(1, 2, 2, 2, 1, 1, 2, 2, 2, 1));
  tensor *dq[] = {&q, &sb};
  CHECK_OK(run1("DequantizeLinear", 21, blk, 2, dq, 2, &yb));
  CHECK(yb.dtype == SMELT_F32 && same(&yb, 2, DIMS(2, 5), VALS(1, 2, 4, 4, 5, 10, 20, 40, 40, 50)));
  tensor_release(&yb);
  /* a scale of the wrong blocked shape */
  tensor sw = mk(SMELT_F32, 2, DIMS(2, 2), VALS(1, 1, 1, 1));
  tensor *inw[] = {&xb, &sw};
  CHECK(run1("QuantizeLinear", 21, blk, 3, inw, 2, &yb) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&s), tensor_release(&z), tensor_release(&xb), tensor_release(&sb);
  tensor_release(&q), tensor_release(&sw);
}

static void test_float8(void) {
  tensor x = mk(SMELT_F32, 1, DIMS(3), VALS(1000, -1000, 0.3));
  tensor s = mk(SMELT_F32, 0, NULL, VALS(1)), z = mk(SMELT_F8E4M3FN, 0, NULL, VALS(0)), y;
  tensor *in[] = {&x, &s, &z};
  CHECK_OK(run1("QuantizeLinear", 21, NULL, 0, in, 3, &y));
  CHECK(y.dtype == SMELT_F8E4M3FN);
  if (y.data) {
    const uint8_t *b = y.data;
    CHECK(cvt_minifloat_decode(SMELT_F8E4M3FN, b[0]) == 448 && cvt_minifloat_decode(SMELT_F8E4M3FN, b[1]) == -448);
    CHECK(fabs(cvt_minifloat_decode(SMELT_F8E4M3FN, b[2]) - 0.3) < 0.02);
  }
  tensor_release(&y);
  ir_attr ns[] = {attr_i("saturate", 0)};
  CHECK_OK(run1("QuantizeLinear", 21, ns, 1, in, 3, &y));
  if (y.data) CHECK(isnan(cvt_minifloat_decode(SMELT_F8E4M3FN, ((uint8_t *)y.data)[0])));
  tensor_release(&y);
  /* dequantize float8 into f16 through output_dtype */
  tensor q = mk(SMELT_F8E4M3FN, 1, DIMS(2), NULL), s2 = mk(SMELT_F32, 0, NULL, VALS(3));
  ((uint8_t *)q.data)[0] = (uint8_t)cvt_minifloat_encode(SMELT_F8E4M3FN, 2, true);
  ((uint8_t *)q.data)[1] = (uint8_t)cvt_minifloat_encode(SMELT_F8E4M3FN, -0.5, true);
  tensor *dq[] = {&q, &s2};
  ir_attr od[] = {attr_i("output_dtype", SMELT_F16)};
  CHECK_OK(run1("DequantizeLinear", 23, od, 1, dq, 2, &y));
  CHECK(y.dtype == SMELT_F16 && same(&y, 1, DIMS(2), VALS(6, -1.5)));
  tensor_release(&y);
  tensor_release(&x), tensor_release(&s), tensor_release(&z), tensor_release(&q), tensor_release(&s2);
}

static void test_dequantize_int32(void) {
  tensor x = mk(SMELT_I32, 1, DIMS(3), VALS(-100000, 0, 7)), s = mk(SMELT_F64, 0, NULL, VALS(0.5)), y;
  tensor *in[] = {&x, &s};
  CHECK_OK(run1("DequantizeLinear", 21, NULL, 0, in, 2, &y));
  CHECK(y.dtype == SMELT_F64 && same(&y, 1, DIMS(3), VALS(-50000, 0, 3.5)));
  tensor_release(&y);
  tensor zp = mk(SMELT_U8, 0, NULL, VALS(1));
  tensor *bad[] = {&x, &s, &zp};
  CHECK(run1("DequantizeLinear", 21, NULL, 0, bad, 3, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&s), tensor_release(&zp);
}

static void test_dynamic(void) {
  tensor x = mk(SMELT_F32, 1, DIMS(3), VALS(-5.1, -2, -1)), y[3]; /* all negative: max is 0 */
  tensor *in[] = {&x};
  CHECK_OK(runn("DynamicQuantizeLinear", 11, NULL, 0, in, 1, y, 3));
  if (y[0].data) {
    CHECK(same(&y[2], 0, NULL, VALS(255)));
    CHECK(fabs(tensor_get_f64(&y[1], 0) - 5.1 / 255) < 1e-7);
    CHECK(same(&y[0], 1, DIMS(3), VALS(0, 155, 205)));
  }
  for (int i = 0; i < 3; i++) tensor_release(&y[i]);
  tensor c = mk(SMELT_F32, 1, DIMS(2), VALS(0, 0)); /* constant zero: scale 1/255 (range 1) */
  tensor *in2[] = {&c};
  CHECK_OK(runn("DynamicQuantizeLinear", 11, NULL, 0, in2, 1, y, 3));
  if (y[0].data) CHECK(same(&y[0], 1, DIMS(2), VALS(0, 0)) && same(&y[2], 0, NULL, VALS(0)));
  for (int i = 0; i < 3; i++) tensor_release(&y[i]);
  tensor_release(&x), tensor_release(&c);
}

static void test_matmul_integer(void) {
  /* per-row A zero point, per-column B zero point, batch broadcast of B */
  tensor a = mk(SMELT_U8, 3, DIMS(2, 2, 2), VALS(1, 2, 3, 4, 5, 6, 7, 8));
  tensor b = mk(SMELT_I8, 2, DIMS(2, 2), VALS(1, -1, 2, 3));
  tensor az = mk(SMELT_U8, 1, DIMS(2), VALS(1, 2)), bz = mk(SMELT_I8, 1, DIMS(2), VALS(0, 1)), y;
  tensor *in[] = {&a, &b, &az, &bz};
  CHECK_OK(run1("MatMulInteger", 10, NULL, 0, in, 4, &y));
  /* A - az: [[0,1],[1,2]], [[4,5],[5,6]];  B - bz: [[1,-2],[2,2]] */
  CHECK(y.dtype == SMELT_I32 && same(&y, 3, DIMS(2, 2, 2), VALS(2, 2, 5, 2, 14, 2, 17, 2)));
  tensor_release(&y);
  /* 1-D operands: a vector times a matrix */
  tensor v = mk(SMELT_U8, 1, DIMS(2), VALS(3, 4));
  tensor *in2[] = {&v, &b};
  CHECK_OK(run1("MatMulInteger", 10, NULL, 0, in2, 2, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(11, 9)));
  tensor_release(&y);
  tensor bad = mk(SMELT_I8, 2, DIMS(3, 2), NULL);
  tensor *in3[] = {&a, &bad};
  CHECK(run1("MatMulInteger", 10, NULL, 0, in3, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&a), tensor_release(&b), tensor_release(&az), tensor_release(&bz), tensor_release(&v);
  tensor_release(&bad);
}

static void test_qlinear_matmul_per_column(void) {
  tensor a = mk(SMELT_U8, 2, DIMS(1, 2), VALS(10, 20)), as = mk(SMELT_F32, 0, NULL, VALS(0.5));
  tensor az = mk(SMELT_U8, 0, NULL, VALS(10)), b = mk(SMELT_U8, 2, DIMS(2, 2), VALS(1, 2, 3, 4));
  tensor bs = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2)), bz = mk(SMELT_U8, 1, DIMS(2), VALS(0, 1));
  tensor ys = mk(SMELT_F32, 0, NULL, VALS(1)), yz = mk(SMELT_U8, 0, NULL, VALS(100)), y;
  tensor *in[] = {&a, &as, &az, &b, &bs, &bz, &ys, &yz};
  CHECK_OK(run1("QLinearMatMul", 21, NULL, 0, in, 8, &y));
  /* (a-10) = [0, 10]; b - bz = [[1,1],[3,3]]; acc = [30, 30]; * 0.5*[1,2] -> [15, 30] + 100 */
  CHECK(same(&y, 2, DIMS(1, 2), VALS(115, 130)));
  tensor_release(&y);
  tensor *ts[] = {&a, &as, &az, &b, &bs, &bz, &ys, &yz};
  tensor yz2 = mk(SMELT_U8, 0, NULL, VALS(250));
  ts[7] = &yz2;
  CHECK_OK(run1("QLinearMatMul", 21, NULL, 0, ts, 8, &y));
  CHECK(same(&y, 2, DIMS(1, 2), VALS(255, 255))); /* saturated */
  tensor_release(&y);
  tensor_release(&a), tensor_release(&as), tensor_release(&az), tensor_release(&b), tensor_release(&bs);
  tensor_release(&bz), tensor_release(&ys), tensor_release(&yz), tensor_release(&yz2);
}

static void test_conv_integer(void) {
  /* group 2, stride 2, per-output-channel weight zero points */
  tensor x = mk(SMELT_U8, 3, DIMS(1, 2, 4), VALS(1, 2, 3, 4, 5, 6, 7, 8));
  tensor w = mk(SMELT_U8, 3, DIMS(2, 1, 2), VALS(2, 3, 4, 5)), xz = mk(SMELT_U8, 0, NULL, VALS(1));
  tensor wz = mk(SMELT_U8, 1, DIMS(2), VALS(1, 4)), y;
  tensor *in[] = {&x, &w, &xz, &wz};
  ir_attr at[] = {attr_i("group", 2), attr_ints("strides", 1, DIMS(2))};
  CHECK_OK(run1("ConvInteger", 10, at, 2, in, 4, &y));
  /* channel 0: x-1 = 0 1 2 3, w-1 = 1 2 -> (0+2, 2+6) ; channel 1: 4 5 6 7, w-4 = 0 1 -> (5, 7) */
  CHECK(y.dtype == SMELT_I32 && same(&y, 3, DIMS(1, 2, 2), VALS(2, 8, 5, 7)));
  tensor_release(&y);
  /* QLinearConv: requantize with per-channel w scale, int32 bias */
  tensor xs = mk(SMELT_F32, 0, NULL, VALS(1)), ws = mk(SMELT_F32, 1, DIMS(2), VALS(0.5, 2));
  tensor ys = mk(SMELT_F32, 0, NULL, VALS(1)), yz = mk(SMELT_U8, 0, NULL, VALS(10));
  tensor bias = mk(SMELT_I32, 1, DIMS(2), VALS(1, -1));
  tensor *qin[] = {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &bias};
  CHECK_OK(run1("QLinearConv", 10, at, 2, qin, 9, &y));
  /* (2+1)*0.5=1.5->2, (8+1)*0.5=4.5->4 ; (5-1)*2=8, (7-1)*2=12 ; +10 */
  CHECK(y.dtype == SMELT_U8 && same(&y, 3, DIMS(1, 2, 2), VALS(12, 14, 18, 22)));
  tensor_release(&y);
  tensor_release(&x), tensor_release(&w), tensor_release(&xz), tensor_release(&wz), tensor_release(&xs);
  tensor_release(&ws), tensor_release(&ys), tensor_release(&yz), tensor_release(&bias);
}

int main(void) {
  test_quantize_rounding();
  test_quantize_axis_blocked();
  test_float8();
  test_dequantize_int32();
  test_dynamic();
  test_matmul_integer();
  test_qlinear_matmul_per_column();
  test_conv_integer();
  return test_report("ops_quantize");
}
