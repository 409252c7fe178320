/* DFT, STFT, windows, MelWeightMatrix, Det: zero-padding and truncation by
 * dft_length, inverse round trips, irfft of odd lengths, complex STFT,
 * window symmetry, determinants of singular and permuted matrices. */
#include <math.h>

#include "shape_test_util.h"

static bool near_vals(const tensor *t, const double *v, int64_t n, double tol) {
  if (tensor_numel(t) != n) {
    fprintf(stderr, "  %lld elements, expected %lld\n", (long long)tensor_numel(t), (long long)n);
    return false;
  }
  for (int64_t i = 0; i < n; i++)
    if (fabs(tensor_get_f64(t, i) - v[i]) > tol) {
      fprintf(stderr, "  element %lld: %.9g, expected %.9g\n", (long long)i, tensor_get_f64(t, i), v[i]);
      return false;
    }
  return true;
}

static void test_dft_lengths(void) {
  /* real [1, 3, 1] on axis 1 with dft_length 4 (zero-padded) and 2 (truncated) */
  tensor x = mk(SMELT_F32, 3, DIMS(1, 3, 1), VALS(1, 2, 3)), y;
  tensor l4 = mk(SMELT_I64, 0, NULL, VALS(4)), l2 = mk(SMELT_I64, 0, NULL, VALS(2)), ax = mk(SMELT_I64, 0, NULL, VALS(1));
  tensor *in4[] = {&x, &l4, &ax}, *in2[] = {&x, &l2, &ax};
  CHECK_OK(run1("DFT", 20, NULL, 0, in4, 3, &y));
  /* X[k] = 1 + 2 w^k + 3 w^2k, w = e^{-i pi/2}: 6, -2-2i, 2, -2+2i */
  CHECK(y.rank == 3 && y.dims[1] == 4 && y.dims[2] == 2 && near_vals(&y, VALS(6, 0, -2, -2, 2, 0, -2, 2), 8, 1e-5));
  tensor_release(&y);
  CHECK_OK(run1("DFT", 20, NULL, 0, in2, 3, &y));
  CHECK(near_vals(&y, VALS(3, 0, -1, 0), 4, 1e-6));
  tensor_release(&y);
  ir_attr os[] = {attr_i("onesided", 1)};
  CHECK_OK(run1("DFT", 20, os, 1, in4, 3, &y)); /* 4 / 2 + 1 bins */
  CHECK(y.dims[1] == 3 && near_vals(&y, VALS(6, 0, -2, -2, 2, 0), 6, 1e-5));
  tensor_release(&y);
  /* opset 17: axis attribute, negative */
  ir_attr a17[] = {attr_i("axis", -2)};
  tensor *in17[] = {&x};
  CHECK_OK(run1("DFT", 17, a17, 1, in17, 1, &y));
  CHECK(near_vals(&y, VALS(6, 0, -1.5, 0.8660254, -1.5, -0.8660254), 6, 1e-5));
  tensor_release(&y);
  tensor last = mk(SMELT_I64, 0, NULL, VALS(-1));
  tensor *inl[] = {&x, NULL, &last};
  CHECK(run1("DFT", 20, NULL, 0, inl, 3, &y) == SMELT_ERR_INVALID_ARGUMENT); /* the re/im axis */
  tensor_release(&x), tensor_release(&l4), tensor_release(&l2), tensor_release(&ax), tensor_release(&last);
}

static void test_dft_round_trips(void) {
  /* complex signal of length 5: inverse(forward(x)) = x */
  double v[10] = {1, 0.5, -2, 1, 0.25, 0, 3, -1, -0.5, 2};
  tensor x = mk(SMELT_F64, 3, DIMS(1, 5, 2), v), f, b;
  tensor *in[] = {&x};
  ir_attr a[] = {attr_i("axis", 1)}, inv[] = {attr_i("axis", 1), attr_i("inverse", 1)};
  CHECK_OK(run1("DFT", 17, a, 1, in, 1, &f));
  tensor *in2[] = {&f};
  CHECK_OK(run1("DFT", 17, inv, 2, in2, 1, &b));
  CHECK(b.dtype == SMELT_F64 && near_vals(&b, v, 10, 1e-12));
  tensor_release(&f), tensor_release(&b);
  /* irfft of the one-sided spectrum of an odd-length real signal, with dft_length */
  tensor r = mk(SMELT_F32, 3, DIMS(1, 5, 1), VALS(1, -2, 3, 0.5, 4)), l5 = mk(SMELT_I64, 0, NULL, VALS(5));
  tensor ax = mk(SMELT_I64, 0, NULL, VALS(1));
  tensor *rin[] = {&r, NULL, &ax};
  ir_attr os[] = {attr_i("onesided", 1)}, ios[] = {attr_i("onesided", 1), attr_i("inverse", 1)};
  CHECK_OK(run1("DFT", 20, os, 1, rin, 3, &f));
  CHECK(f.dims[1] == 3);
  tensor *iin[] = {&f, &l5, &ax};
  CHECK_OK(run1("DFT", 20, ios, 2, iin, 3, &b));
  CHECK(b.dims[1] == 5 && b.dims[2] == 1 && near_vals(&b, VALS(1, -2, 3, 0.5, 4), 5, 1e-5));
  tensor_release(&f), tensor_release(&b), tensor_release(&x), tensor_release(&r), tensor_release(&l5);
  tensor_release(&ax);
}

static void test_stft(void) {
  /* complex signal, two-sided, frame 2 step 1, window [1, 0.5] */
  tensor s = mk(SMELT_F32, 3, DIMS(1, 3, 2), VALS(1, 1, 2, 0, 0, -1)), st = mk(SMELT_I64, 0, NULL, VALS(1));
  tensor w = mk(SMELT_F32, 1, DIMS(2), VALS(1, 0.5)), y;
  tensor *in[] = {&s, &st, &w};
  ir_attr two[] = {attr_i("onesided", 0)};
  CHECK_OK(run1("STFT", 17, two, 1, in, 3, &y));
  /* frame 0: (1+i), 0.5*2 = 1 -> [2+i, i]; frame 1: 2, 0.5*(-i) -> [2-0.5i, 2+0.5i] */
  CHECK(y.rank == 4 && y.dims[1] == 2 && y.dims[2] == 2 && near_vals(&y, VALS(2, 1, 0, 1, 2, -0.5, 2, 0.5), 8, 1e-6));
  tensor_release(&y);
  CHECK(run1("STFT", 17, NULL, 0, in, 3, &y) == SMELT_ERR_INVALID_ARGUMENT); /* onesided needs real */
  tensor big = mk(SMELT_I64, 0, NULL, VALS(4));
  tensor *in2[] = {&s, &st, NULL, &big};
  CHECK(run1("STFT", 17, two, 1, in2, 4, &y) == SMELT_ERR_INVALID_ARGUMENT); /* frame longer than signal */
  tensor_release(&s), tensor_release(&st), tensor_release(&w), tensor_release(&big);
}

static void test_windows(void) {
  tensor n = mk(SMELT_I64, 0, NULL, VALS(5)), y;
  tensor *in[] = {&n};
  ir_attr sym[] = {attr_i("periodic", 0)}, f64[] = {attr_i("output_datatype", SMELT_F64)};
  CHECK_OK(run1("HannWindow", 17, sym, 1, in, 1, &y)); /* symmetric: ends at 0, middle 1 */
  CHECK(near_vals(&y, VALS(0, 0.5, 1, 0.5, 0), 5, 1e-7));
  tensor_release(&y);
  CHECK_OK(run1("HammingWindow", 17, f64, 1, in, 1, &y)); /* periodic: N in the denominator */
  double a = 25.0 / 46.0, h[5];
  for (int i = 0; i < 5; i++) h[i] = a - (1 - a) * cos(2 * 3.14159265358979323846 * i / 5);
  CHECK(y.dtype == SMELT_F64 && near_vals(&y, h, 5, 1e-15));
  tensor_release(&y);
  CHECK_OK(run1("BlackmanWindow", 17, sym, 1, in, 1, &y));
  CHECK(near_vals(&y, VALS(0, 0.34, 1, 0.34, 0), 5, 1e-6));
  tensor_release(&y);
  tensor neg = mk(SMELT_I64, 0, NULL, VALS(-1));
  tensor *in2[] = {&neg};
  CHECK(run1("HannWindow", 17, NULL, 0, in2, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&n), tensor_release(&neg);
}

static void test_mel(void) {
  tensor bins = mk(SMELT_I64, 0, NULL, VALS(2)), len = mk(SMELT_I64, 0, NULL, VALS(8));
  tensor rate = mk(SMELT_I64, 0, NULL, VALS(16)), lo = mk(SMELT_F32, 0, NULL, VALS(0));
  tensor hi = mk(SMELT_F32, 0, NULL, VALS(8)), y;
  tensor *in[] = {&bins, &len, &rate, &lo, &hi};
  CHECK_OK(run1("MelWeightMatrix", 17, NULL, 0, in, 5, &y));
  CHECK(y.rank == 2 && y.dims[0] == 5 && y.dims[1] == 2);
  /* each filter is a triangle: its weights rise to 1 at the center and stay in [0, 1] */
  for (int64_t m = 0; m < 2 && y.rank == 2; m++) {
    double mx = 0;
    for (int64_t k = 0; k < 5; k++) {
      double w = tensor_get_f64(&y, k * 2 + m);
      CHECK(w >= 0 && w <= 1);
      if (w > mx) mx = w;
    }
    CHECK(mx == 1);
  }
  tensor_release(&y);
  tensor_release(&bins), tensor_release(&len), tensor_release(&rate), tensor_release(&lo), tensor_release(&hi);
}

static void test_det(void) {
  tensor x = mk(SMELT_F64, 3, DIMS(3, 2, 2), VALS(1, 2, 3, 4, 0, 1, 1, 0, 2, 4, 1, 2)), y;
  tensor *in[] = {&x};
  CHECK_OK(run1("Det", 11, NULL, 0, in, 1, &y));
  CHECK(same(&y, 1, DIMS(3), VALS(-2, -1, 0))); /* a row swap flips the sign; singular is 0 */
  tensor_release(&y);
  tensor z = mk(SMELT_F32, 2, DIMS(3, 3), VALS(2, 0, 0, 0, 0, 3, 0, 4, 0));
  tensor *in2[] = {&z};
  CHECK_OK(run1("Det", 11, NULL, 0, in2, 1, &y));
  CHECK(y.rank == 0 && near_vals(&y, VALS(-24), 1, 1e-5));
  tensor_release(&y);
  tensor r = mk(SMELT_F32, 2, DIMS(2, 3), NULL);
  tensor *in3[] = {&r};
  CHECK(run1("Det", 11, NULL, 0, in3, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&x), tensor_release(&z), tensor_release(&r);
}

int main(void) {
  test_dft_lengths();
  test_dft_round_trips();
  test_stft();
  test_windows();
  test_mel();
  test_det();
  return test_report("ops_signal");
}
