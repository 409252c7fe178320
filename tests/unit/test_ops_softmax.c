/* Softmax, LogSoftmax, Hardmax against naive loops written here. */
#include "nn_test_util.h"

/* Rows: opset >= 13 one axis; older opsets everything from axis on. */
static void naive(const char *op, const tensor *x, int axis, bool coerce, double *y) {
  int r = x->rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int i = 0; i < r; i++) {
    if (i < axis) outer *= x->dims[i];
    else if (i == axis || coerce) n *= x->dims[i];
    else inner *= x->dims[i];
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * n * inner + in;
      double mx = -INFINITY, sum = 0;
      int64_t arg = 0;
      for (int64_t k = 0; k < n; k++) {
        double v = tensor_get_f64(x, base + k * inner);
        if (v > mx) mx = v, arg = k;
      }
      for (int64_t k = 0; k < n; k++) sum += exp(tensor_get_f64(x, base + k * inner) - mx);
      for (int64_t k = 0; k < n; k++) {
        double v = tensor_get_f64(x, base + k * inner);
        y[base + k * inner] = !strcmp(op, "Softmax") ? exp(v - mx) / sum
                              : !strcmp(op, "LogSoftmax") ? v - mx - log(sum)
                                                          : (double)(k == arg);
      }
    }
}

static void check(smelt_pool *pool, const char *op, int opset, smelt_dtype dt, int rank,
                  const int64_t *dims, int axis, bool has_axis) {
  tensor x = {0}, y = {0};
  nt_rand(&x, dt, rank, dims);
  int64_t n = tensor_numel(&x);
  for (int64_t i = 0; i < n; i += 7) tensor_set_f64(&x, i, tensor_get_f64(&x, i) * 50); /* spread */
  if (!strcmp(op, "Hardmax") && n > 3) tensor_set_f64(&x, 1, tensor_get_f64(&x, 0)); /* a tie */
  ir_attr a[] = {nt_int("axis", axis)};
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run_pool(pool, op, opset, a, has_axis ? 1 : 0, in, 1, out, 1));
  int ax = has_axis ? axis : opset >= 13 ? -1 : 1;
  if (ax < 0) ax += rank;
  double *want = malloc(sizeof(double) * (size_t)(n + 1));
  naive(op, &x, ax, opset < 13, want);
  double tol = dt == SMELT_F16 ? 2e-2 : 1e-6;
  if (!nt_close(&y, want, n, tol, tol, op)) {
    CHECK(0);
    fprintf(stderr, "  %s opset %d axis %d\n", op, opset, ax);
  }
  free(want);
  tensor_release(&x);
  tensor_release(&y);
}

int main(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(3, &pool));
  const char *ops[] = {"Softmax", "LogSoftmax", "Hardmax"};
  int64_t d3[] = {3, 4, 17}, d4[] = {2, 3, 1, 5};
  for (int o = 0; o < 3; o++)
    for (int k = 0; k < 2; k++) {
      smelt_pool *p = k ? pool : NULL;
      for (int axis = -3; axis < 3; axis++) {
        check(p, ops[o], 13, SMELT_F32, 3, d3, axis, true);
        check(p, ops[o], 11, SMELT_F32, 3, d3, axis, true);
      }
      check(p, ops[o], 13, SMELT_F32, 3, d3, 0, false);
      check(p, ops[o], 11, SMELT_F32, 3, d3, 0, false);
      check(p, ops[o], 13, SMELT_F32, 4, d4, 2, true);
      check(p, ops[o], 13, SMELT_F16, 4, d4, 1, true);
      check(p, ops[o], 13, SMELT_F64, 4, d4, -1, true);
      check(p, ops[o], 13, SMELT_F32, 2, (int64_t[]){0, 5}, 1, true);
      check(p, ops[o], 1, SMELT_F32, 1, (int64_t[]){9}, 0, true);
    }
  /* large and -inf inputs stay finite where they should */
  tensor x = {0}, y = {0};
  harness_f32(&x, 1, (int64_t[]){4}, (float[]){1000.f, 1001.f, -INFINITY, 999.f});
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run("Softmax", 13, NULL, 0, in, 1, out, 1));
  const float *yv = y.data;
  CHECK(fabsf(yv[1] - 0.66524096f) < 1e-6f && yv[2] == 0.f);
  tensor_release(&y);
  ir_attr bad[] = {nt_int("axis", 3)};
  CHECK(nt_run("Softmax", 13, bad, 1, in, 1, out, 1) != SMELT_OK);
  CHECK(nt_err_has("axis 3 is out of range for rank 1"));
  tensor_release(&y);
  tensor_release(&x);
  nt_rand(&x, SMELT_I32, 1, (int64_t[]){3});
  CHECK(nt_run("Softmax", 13, NULL, 0, in, 1, out, 1) != SMELT_OK);
  tensor_release(&y);
  tensor_release(&x);
  pool_free(pool);
  return test_report("test_ops_softmax");
}
