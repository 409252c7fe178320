/* tensor_compare: tolerance semantics, NaN/inf, exact integers, structure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/compare.h"
#include "util/err.h"

static tensor vec_f64(const double *v, int64_t n) {
  tensor t;
  tensor_alloc(&t, SMELT_F64, 1, &n);
  memcpy(t.data, v, sizeof(double) * (size_t)n);
  return t;
}

static tensor vec_as(smelt_dtype dt, const double *v, int64_t n) {
  tensor t;
  tensor_alloc(&t, dt, 1, &n);
  for (int64_t i = 0; i < n; i++) tensor_set_f64(&t, i, v[i]);
  return t;
}

/* Compares one pair of scalars (as 1-element f64 vectors). */
static bool close1(double a, double e, double rtol, double atol) {
  tensor ta = vec_f64(&a, 1), te = vec_f64(&e, 1);
  compare_result r;
  smelt_status s = tensor_compare(&ta, &te, rtol, atol, &r);
  tensor_release(&ta);
  tensor_release(&te);
  return s == SMELT_OK && r.ok;
}

static void test_tolerance_edges(void) {
  CHECK(close1(1.0, 1.0, 0, 0));
  CHECK(!close1(1.0 + 1e-15, 1.0, 0, 0));
  /* |a-e| <= atol + rtol*|e|, inclusive, relative to the expected value */
  CHECK(close1(1.5, 1.0, 0, 0.5));
  CHECK(!close1(1.5000001, 1.0, 0, 0.5));
  CHECK(close1(3.0, 2.0, 0.5, 0));   /* 1 <= 0.5*2 */
  CHECK(close1(2.0, 3.0, 0.5, 0.0));  /* 1 <= 1.5 */
  CHECK(!close1(0.0, 3.0, 0.25, 0.0));
  CHECK(close1(0.0, 3.0, 0.25, 2.25)); /* 3 <= 2.25 + 0.75 */
  CHECK(!close1(0.0, 3.0, 0.25, 2.2499));
  CHECK(close1(-1.0, 1.0, 2.0, 0));   /* 2 <= 2*1 */
  CHECK(!close1(1.0, -1.0, 0.999, 0));
  CHECK(close1(1e-7, 0, 0, 1e-6));
  CHECK(!close1(1e-5, 0, 1e3, 1e-6)); /* rtol is useless around 0 */
}

static void test_nan_inf(void) {
  CHECK(close1(NAN, NAN, 0, 0));
  CHECK(close1(-NAN, NAN, 0, 0));
  CHECK(!close1(NAN, 1.0, 1e9, 1e9));
  CHECK(!close1(1.0, NAN, 1e9, 1e9));
  CHECK(close1(INFINITY, INFINITY, 0, 0));
  CHECK(close1(-INFINITY, -INFINITY, 0, 0));
  CHECK(!close1(INFINITY, -INFINITY, 1e9, 1e9));
  CHECK(!close1(1e300, INFINITY, 1e9, 1e9)); /* inf-inf tolerance would pass it */
  CHECK(!close1(INFINITY, 1e300, 1e9, 1e9));
  CHECK(!close1(NAN, INFINITY, 0, 0));
  CHECK(!close1(1e308, -1e308, 0, 1e300)); /* the difference overflows */
  CHECK(close1(1e308, -1e308, 3, 0));
}

static void test_report_fields(void) {
  const double e[6] = {1, 2, 0, -4, 10, 100};
  const double a[6] = {1, 2.1, 0.001, -4, 13, 100.5};
  tensor te = vec_f64(e, 6), ta = vec_f64(a, 6);
  te.rank = ta.rank = 2;
  te.dims[0] = ta.dims[0] = 2;
  te.dims[1] = ta.dims[1] = 3;
  compare_result r;
  CHECK_OK(tensor_compare(&ta, &te, 0.01, 0.01, &r));
  /* failing: [0,1] (0.1 > 0.03), [1,1] (3 > 0.11); passing: [1,2] (0.5 <= 1.01), [0,2] */
  CHECK(!r.ok && r.count == 6 && r.mismatches == 2);
  CHECK(fabs(r.max_abs - 3.0) < 1e-12);
  CHECK(fabs(r.max_rel - 0.3) < 1e-12); /* [1,1]: 3/10; the 0 at [0,2] is skipped */
  CHECK(r.worst_index == 4 && r.worst_seq == -1); /* 3/0.11 beats 0.1/0.03 */
  CHECK(r.worst_actual == 13 && r.worst_expected == 10);
  CHECK(strstr(r.message, "2 of 6 elements differ") && strstr(r.message, "[1,1]"));
  printf("message: %s\n", r.message);

  CHECK_OK(tensor_compare(&ta, &te, 0.3, 1.0, &r)); /* everything passes */
  CHECK(r.ok && r.mismatches == 0 && r.message[0] == 0 && r.worst_index >= 0);

  ((double *)ta.data)[3] = NAN;
  CHECK_OK(tensor_compare(&ta, &te, 0.3, 1.0, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.worst_index == 3 && isnan(r.worst_actual));
  CHECK(isinf(r.max_abs) && strstr(r.message, "nan"));
  tensor_release(&ta);
  tensor_release(&te);
}

static void test_low_precision(void) {
  const double e[3] = {1.0, -2.5, 0.1};
  const smelt_dtype fts[] = {SMELT_F16, SMELT_BF16, SMELT_F32};
  for (int k = 0; k < 3; k++) {
    tensor te = vec_as(fts[k], e, 3), ta = vec_as(fts[k], e, 3);
    compare_result r;
    CHECK_OK(tensor_compare(&ta, &te, 0, 0, &r));
    CHECK(r.ok && r.count == 3);
    tensor_set_f64(&ta, 2, 0.2);
    CHECK_OK(tensor_compare(&ta, &te, 0, 0.05, &r));
    CHECK(!r.ok && r.mismatches == 1 && r.worst_index == 2);
    CHECK_OK(tensor_compare(&ta, &te, 0, 0.11, &r));
    CHECK(r.ok);
    tensor_release(&ta);
    tensor_release(&te);
  }
}

static void test_integers(void) {
  const double v[4] = {0, 5, -7, 100};
  tensor te = vec_as(SMELT_I32, v, 4), ta = vec_as(SMELT_I32, v, 4);
  compare_result r;
  CHECK_OK(tensor_compare(&ta, &te, 1, 1000, &r));
  CHECK(r.ok);
  ((int32_t *)ta.data)[1] = 6; /* off by one fails whatever the tolerance */
  ((int32_t *)ta.data)[3] = 90;
  CHECK_OK(tensor_compare(&ta, &te, 1, 1000, &r));
  CHECK(!r.ok && r.mismatches == 2 && r.worst_index == 3 && r.max_abs == 10);
  printf("message: %s\n", r.message);
  tensor_release(&ta);
  tensor_release(&te);

  /* int64 near the limits: exact, and the difference does not overflow */
  int64_t n = 2;
  tensor a64, e64;
  tensor_alloc(&a64, SMELT_I64, 1, &n);
  tensor_alloc(&e64, SMELT_I64, 1, &n);
  ((int64_t *)a64.data)[0] = ((int64_t *)e64.data)[0] = (int64_t)1 << 62;
  ((int64_t *)a64.data)[1] = INT64_MAX;
  ((int64_t *)e64.data)[1] = INT64_MIN;
  CHECK_OK(tensor_compare(&a64, &e64, 0, 0, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.max_abs == 18446744073709551615.0);
  ((int64_t *)a64.data)[1] = INT64_MIN;
  ((int64_t *)a64.data)[0] += 1; /* 2^62+1 vs 2^62: same as doubles, still different */
  CHECK_OK(tensor_compare(&a64, &e64, 0, 0, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.worst_index == 0 && r.max_abs == 1);
  tensor_release(&a64);
  tensor_release(&e64);

  tensor au, eu;
  tensor_alloc(&au, SMELT_U64, 1, &n);
  tensor_alloc(&eu, SMELT_U64, 1, &n);
  ((uint64_t *)au.data)[0] = UINT64_MAX;
  ((uint64_t *)eu.data)[0] = UINT64_MAX - 1;
  CHECK_OK(tensor_compare(&au, &eu, 0, 0, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.max_abs == 1);
  tensor_release(&au);
  tensor_release(&eu);

  const double b1[3] = {0, 1, 1}, b2[3] = {0, 1, 0};
  tensor ba = vec_as(SMELT_BOOL, b1, 3), be = vec_as(SMELT_BOOL, b2, 3);
  CHECK_OK(tensor_compare(&ba, &be, 1, 1, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.worst_index == 2);
  ((uint8_t *)be.data)[2] = 7; /* any nonzero byte is true */
  CHECK_OK(tensor_compare(&ba, &be, 0, 0, &r));
  CHECK(r.ok);
  tensor_release(&ba);
  tensor_release(&be);
}

static void test_structure(void) {
  const double v[6] = {1, 2, 3, 4, 5, 6};
  tensor a = vec_f64(v, 6), e = vec_f64(v, 6);
  compare_result r;
  a.rank = 2, a.dims[0] = 2, a.dims[1] = 3;
  e.rank = 2, e.dims[0] = 3, e.dims[1] = 2;
  CHECK_OK(tensor_compare(&a, &e, 1, 1, &r));
  CHECK(!r.ok && strstr(r.message, "shape [2,3], expected [3,2]"));
  e.rank = 1, e.dims[0] = 6;
  CHECK_OK(tensor_compare(&a, &e, 1, 1, &r));
  CHECK(!r.ok && strstr(r.message, "shape [2,3], expected [6]"));
  tensor f = vec_as(SMELT_F32, v, 6);
  a.rank = 1, a.dims[0] = 6;
  CHECK_OK(tensor_compare(&f, &e, 1, 1, &r));
  CHECK(!r.ok && strstr(r.message, "dtype float32, expected float64"));

  /* empty tensors of equal shape are equal */
  int64_t z[2] = {0, 4};
  tensor ea, ee;
  tensor_alloc(&ea, SMELT_F32, 2, z);
  tensor_alloc(&ee, SMELT_F32, 2, z);
  CHECK_OK(tensor_compare(&ea, &ee, 0, 0, &r));
  CHECK(r.ok && r.count == 0 && r.worst_index == -1);
  tensor_release(&ea);
  tensor_release(&ee);

  /* unusable input is an error, not a mismatch */
  a.nbytes = 40;
  CHECK(tensor_compare(&a, &e, 0, 0, &r) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(!r.ok && strstr(r.message, "does not match its shape"));
  a.nbytes = 48;
  CHECK(tensor_compare(&a, &e, -1, 0, &r) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(tensor_compare(&a, &e, 0, NAN, &r) == SMELT_ERR_INVALID_ARGUMENT);
  tensor s1 = {.dtype = SMELT_STRING, .rank = 0, .data = (void *)"x"}, s2 = s1;
  CHECK(tensor_compare(&s1, &s2, 0, 0, &r) == SMELT_ERR_UNSUPPORTED);
  CHECK(!r.ok && strstr(r.message, "string")); /* never a pass for a caller that skips the status */
  tensor_release(&a);
  tensor_release(&e);
  tensor_release(&f);
}

static tensor *new_vec(const double *v, int64_t n) {
  tensor *t = malloc(sizeof *t);
  *t = vec_as(SMELT_F32, v, n);
  return t;
}

static void make_seq(tensor *s, const double *v, int n) {
  memset(s, 0, sizeof *s);
  s->kind = TENSOR_KIND_SEQUENCE;
  s->dtype = SMELT_F32;
  s->seq_len = n;
  s->seq = calloc((size_t)n, sizeof *s->seq);
  for (int i = 0; i < n; i++) s->seq[i] = new_vec(v, i + 1);
}

static void test_sequences(void) {
  const double v[3] = {1, 2, 3};
  tensor a, e;
  compare_result r;
  make_seq(&a, v, 3);
  make_seq(&e, v, 3);
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(r.ok && r.count == 6);
  tensor_set_f64(a.seq[2], 1, 2.5);
  CHECK_OK(tensor_compare(&a, &e, 0, 0.1, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.worst_seq == 2 && r.worst_index == 1);
  CHECK(strstr(r.message, "sequence element 2"));
  tensor_set_f64(a.seq[2], 1, 2);
  a.seq[1]->dims[0] = 1, a.seq[1]->nbytes = 4;
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(!r.ok && strstr(r.message, "sequence element 1: shape [1], expected [2]"));
  tensor_release(&a);
  make_seq(&a, v, 2);
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(!r.ok && strstr(r.message, "sequence of 2 tensors, expected 3"));
  tensor t = vec_as(SMELT_F32, v, 3);
  CHECK_OK(tensor_compare(&t, &e, 0, 0, &r));
  CHECK(!r.ok && strstr(r.message, "got a tensor, expected a sequence"));
  tensor none1 = {.kind = TENSOR_KIND_OPTIONAL_NONE}, none2 = none1;
  CHECK_OK(tensor_compare(&none1, &none2, 0, 0, &r));
  CHECK(r.ok);
  CHECK_OK(tensor_compare(&t, &none2, 0, 0, &r));
  CHECK(!r.ok);
  tensor_release(&t);
  tensor_release(&a);
  tensor_release(&e);
}

int main(void) {
  test_tolerance_edges();
  test_nan_inf();
  test_report_fields();
  test_low_precision();
  test_integers();
  test_structure();
  test_sequences();
  return test_report("compare");
}
