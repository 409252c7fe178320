/* Seeded random inputs: the documented stream, ranges, determinism, errors.
 * The golden values come from an independent Python rendering of the algorithm
 * documented in runtime/inputs_gen.h (splitmix64 -> xoshiro256**). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "runtime/inputs_gen.h"
#include "util/err.h"

static void test_golden(void) {
  tensor t;
  int64_t n = 4;
  CHECK_OK(inputs_generate(&t, SMELT_F32, 1, &n, 42, 1, 0));
  static const int32_t k32[4] = {-680635, -5600970, 5729168, 5741956};
  for (int i = 0; i < 4; i++) CHECK(((float *)t.data)[i] == ldexpf((float)k32[i], -23));
  tensor_release(&t);

  n = 2;
  CHECK_OK(inputs_generate(&t, SMELT_F64, 1, &n, 42, 1, 0));
  CHECK(((double *)t.data)[0] == ldexp(-365413103284087.0, -52));
  CHECK(((double *)t.data)[1] == ldexp(-3006997538090338.0, -52));
  tensor_release(&t);

  n = 4;
  CHECK_OK(inputs_generate(&t, SMELT_F16, 1, &n, 42, 1, 0));
  static const int k16[4] = {-84, -684, 699, 700};
  for (int i = 0; i < 4; i++) CHECK(tensor_get_f64(&t, i) == ldexp(k16[i], -10));
  tensor_release(&t);

  n = 8;
  CHECK_OK(inputs_generate(&t, SMELT_I64, 1, &n, 7, 0, 0)); /* default bound 100 */
  static const int64_t i64[8] = {45, 56, 4, 10, 2, 55, 24, 0};
  CHECK(!memcmp(t.data, i64, sizeof i64));
  tensor_release(&t);

  n = 4;
  CHECK_OK(inputs_generate(&t, SMELT_I64, 1, &n, 7, 3, 50257)); /* a vocabulary size */
  static const int64_t tok[4] = {32622, 6588, 45249, 15421};
  CHECK(!memcmp(t.data, tok, sizeof tok));
  tensor_release(&t);

  n = 8;
  CHECK_OK(inputs_generate(&t, SMELT_BOOL, 1, &n, 0, -1, 0));
  static const uint8_t b[8] = {0, 0, 1, 0, 0, 0, 0, 0};
  CHECK(!memcmp(t.data, b, sizeof b));
  tensor_release(&t);
}

static void test_determinism(void) {
  int64_t d[3] = {3, 5, 7};
  tensor a, b, c, e;
  CHECK_OK(inputs_generate(&a, SMELT_F32, 3, d, 123, 0, 0));
  CHECK_OK(inputs_generate(&b, SMELT_F32, 3, d, 123, 0, 0));
  CHECK_OK(inputs_generate(&c, SMELT_F32, 3, d, 123, 1, 0)); /* another input */
  CHECK_OK(inputs_generate(&e, SMELT_F32, 3, d, 124, 0, 0)); /* another seed */
  CHECK(a.nbytes == 105 * 4 && !memcmp(a.data, b.data, a.nbytes));
  CHECK(memcmp(a.data, c.data, a.nbytes) != 0);
  CHECK(memcmp(a.data, e.data, a.nbytes) != 0);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c);
  tensor_release(&e);
}

/* Range and rough uniformity over n draws. */
static void test_ranges(void) {
  int64_t n = 20000;
  const smelt_dtype fts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
  for (int k = 0; k < 4; k++) {
    tensor t;
    CHECK_OK(inputs_generate(&t, fts[k], 1, &n, 99, k, 0));
    double sum = 0, lo = 2, hi = -2;
    for (int64_t i = 0; i < n; i++) {
      double v = tensor_get_f64(&t, i);
      sum += v;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    CHECK(lo >= -1 && hi < 1 && lo < -0.99 && hi > 0.98);
    CHECK(fabs(sum / n) < 0.03);
    tensor_release(&t);
  }
  const smelt_dtype its[] = {SMELT_I8, SMELT_U8, SMELT_I16, SMELT_U16, SMELT_I32,
                             SMELT_U32, SMELT_I64, SMELT_U64};
  for (int k = 0; k < 8; k++) {
    tensor t;
    int counts[10] = {0};
    CHECK_OK(inputs_generate(&t, its[k], 1, &n, 5, k, 10));
    bool in_range = true;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = tensor_get_i64(&t, i);
      if (v < 0 || v >= 10) in_range = false;
      else counts[v]++;
    }
    CHECK(in_range);
    for (int j = 0; j < 10; j++) CHECK(counts[j] > 1700 && counts[j] < 2300);
    tensor_release(&t);
  }
  /* a bound beyond the type is clamped to it */
  tensor t;
  CHECK_OK(inputs_generate(&t, SMELT_I8, 1, &n, 5, 0, 50257));
  int64_t mx = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = tensor_get_i64(&t, i);
    CHECK(v >= 0);
    mx = v > mx ? v : mx;
  }
  CHECK(mx == 127);
  tensor_release(&t);
  CHECK_OK(inputs_generate(&t, SMELT_I32, 1, &n, 5, 0, 1)); /* [0, 1) */
  int64_t nz = 0;
  for (int64_t i = 0; i < n; i++) nz += tensor_get_i64(&t, i) != 0;
  CHECK(nz == 0);
  tensor_release(&t);
  CHECK_OK(inputs_generate(&t, SMELT_BOOL, 1, &n, 5, 0, 0));
  int64_t ones = 0;
  for (int64_t i = 0; i < n; i++) ones += ((uint8_t *)t.data)[i];
  CHECK(ones > 9500 && ones < 10500);
  tensor_release(&t);
}

static void test_shapes_and_errors(void) {
  tensor t;
  CHECK_OK(inputs_generate(&t, SMELT_F32, 0, NULL, 1, 0, 0)); /* a scalar */
  CHECK(t.rank == 0 && t.nbytes == 4 && *(float *)t.data >= -1 && *(float *)t.data < 1);
  tensor_release(&t);
  int64_t z[2] = {4, 0};
  CHECK_OK(inputs_generate(&t, SMELT_I64, 2, z, 1, 0, 0)); /* empty */
  CHECK(t.nbytes == 0 && t.data != NULL && t.dims[1] == 0);
  tensor_release(&t);

  int64_t sym[2] = {2, -1};
  CHECK(inputs_generate(&t, SMELT_F32, 2, sym, 1, 3, 0) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err_message(), "input 3") && strstr(err_message(), "dimension 1"));
  CHECK(t.data == NULL);
  int64_t one = 1;
  CHECK(inputs_generate(&t, SMELT_STRING, 1, &one, 1, 2, 0) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(err_message(), "input 2") && strstr(err_message(), "string"));
  CHECK(inputs_generate(&t, SMELT_I64, 1, &one, 1, 0, -5) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(inputs_generate(&t, SMELT_F32, 13, z, 1, 0, 0) == SMELT_ERR_INVALID_ARGUMENT);
  int64_t huge[2] = {INT64_MAX / 2, 4};
  CHECK(inputs_generate(&t, SMELT_F32, 2, huge, 1, 0, 0) != SMELT_OK);
  CHECK(t.data == NULL);
}

int main(void) {
  test_golden();
  test_determinism();
  test_ranges();
  test_shapes_and_errors();
  return test_report("inputs_gen");
}
