/* Reduce* and ArgMax/ArgMin against naive loops written here. */
#include "nn_test_util.h"

static const char *ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                            "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                            "ReduceSumSquare"};

/* Naive: for each output, scan every input element whose kept coordinates match. */
static double naive_reduce(int op, const tensor *x, const bool *mask, int64_t o) {
  int64_t n = tensor_numel(x), cnt = 0;
  double acc = op == 4 ? 1 : op == 2 ? -INFINITY : op == 3 ? INFINITY : 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t rem = i, k = 0, mul = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      int64_t c = rem % x->dims[d];
      rem /= x->dims[d];
      if (!mask[d]) {
        k += c * mul;
        mul *= x->dims[d];
      }
    }
    if (k != o) continue;
    double v = tensor_get_f64(x, i);
    cnt++;
    switch (op) {
      case 0: case 1: case 7: acc += v; break;
      case 2: acc = fmax(acc, v); break;
      case 3: acc = fmin(acc, v); break;
      case 4: acc *= v; break;
      case 5: acc += fabs(v); break;
      case 6: case 9: acc += v * v; break;
      case 8: acc += exp(v); break;
    }
  }
  if (op == 1) acc /= (double)cnt;
  if (op == 6) acc = sqrt(acc);
  if (op == 7 || op == 8) acc = log(acc);
  return acc;
}

static void check_reduce(int op, int opset, smelt_dtype dt, int rank, const int64_t *dims,
                         int naxes, const int64_t *axes, int keep, int noop) {
  tensor x = {0}, ax = {0}, y = {0};
  nt_rand(&x, dt, rank, dims);
  int64_t n = tensor_numel(&x);
  if (dtype_is_int(dt) || dt == SMELT_BOOL)
    for (int64_t i = 0; i < n; i++)
      tensor_set_f64(&x, i, dt == SMELT_BOOL ? (double)(i % 3 == 1) : (double)((i * 7) % 11) - (dtype_is_unsigned_int(dt) ? 0 : 5));
  bool from_input = opset >= (op == 0 ? 13 : 18);
  ir_attr a[3];
  int na = 0;
  a[na++] = nt_int("keepdims", keep);
  a[na++] = nt_int("noop_with_empty_axes", noop);
  if (!from_input && naxes) a[na++] = nt_ints("axes", naxes, (int64_t *)axes);
  if (from_input) harness_i64(&ax, 1, (int64_t[]){naxes}, axes ? axes : (int64_t[]){0});
  tensor *in[] = {&x, from_input ? &ax : NULL}, *out[] = {&y};
  CHECK_OK(nt_run(ops[op], opset, a, na, in, 2, out, 1));
  bool mask[SMELT_MAX_RANK];
  for (int d = 0; d < rank; d++) mask[d] = naxes == 0 && !noop;
  for (int i = 0; i < naxes; i++) mask[axes[i] < 0 ? axes[i] + rank : axes[i]] = true;
  int64_t nout = 1, wd[SMELT_MAX_RANK];
  int wr = 0;
  for (int d = 0; d < rank; d++) {
    if (!mask[d]) nout *= dims[d], wd[wr++] = dims[d];
    else if (keep) wd[wr++] = 1;
  }
  CHECK(y.rank == wr && y.dtype == dt);
  for (int d = 0; d < wr && d < y.rank; d++) CHECK(y.dims[d] == wd[d]);
  double *want = malloc(sizeof(double) * (size_t)(nout + 1));
  for (int64_t o = 0; o < nout; o++) {
    want[o] = naive_reduce(op, &x, mask, o);
    if (dtype_is_int(dt)) want[o] = trunc(want[o]);
  }
  double tol = dt == SMELT_F16 ? 1e-2 : dtype_is_int(dt) || dt == SMELT_BOOL ? 0 : 1e-5;
  if (!nt_close(&y, want, nout, tol, tol, ops[op])) {
    CHECK(0);
    fprintf(stderr, "  %s opset %d naxes %d keep %d\n", ops[op], opset, naxes, keep);
  }
  free(want);
  tensor_release(&x);
  tensor_release(&ax);
  tensor_release(&y);
}

static void test_reduce(void) {
  int64_t d3[] = {3, 4, 5};
  int64_t axes_sets[][3] = {{0}, {1}, {2}, {-1}, {0, 2}, {1, 2}, {0, 1}, {0, 1, 2}};
  int nsets[] = {1, 1, 1, 1, 2, 2, 2, 3};
  for (int op = 0; op < 10; op++) {
    for (int s = 0; s < 8; s++)
      for (int keep = 0; keep < 2; keep++) {
        check_reduce(op, 18, SMELT_F32, 3, d3, nsets[s], axes_sets[s], keep, 0);
        check_reduce(op, 13, SMELT_F32, 3, d3, nsets[s], axes_sets[s], keep, 0);
      }
    check_reduce(op, 18, SMELT_F32, 3, d3, 0, NULL, 1, 0);  /* all axes */
    check_reduce(op, 18, SMELT_F32, 3, d3, 0, NULL, 0, 1);  /* noop */
    check_reduce(op, 11, SMELT_F32, 3, d3, 0, NULL, 0, 0);
    check_reduce(op, 18, SMELT_F64, 4, (int64_t[]){2, 3, 1, 5}, 2, (int64_t[]){1, 3}, 1, 0);
    check_reduce(op, 18, SMELT_F16, 2, (int64_t[]){3, 4}, 1, (int64_t[]){1}, 0, 0);
    /* empty set: reduce a zero-sized axis */
    check_reduce(op, 18, SMELT_F32, 3, (int64_t[]){2, 0, 3}, 1, (int64_t[]){1}, 1, 0);
    /* empty output: a zero-sized kept axis */
    check_reduce(op, 18, SMELT_F32, 3, (int64_t[]){2, 0, 3}, 1, (int64_t[]){2}, 0, 0);
  }
  int int_ops[] = {0, 1, 2, 3, 4, 5, 9};
  for (int i = 0; i < 7; i++) {
    check_reduce(int_ops[i], 18, SMELT_I64, 3, d3, 2, (int64_t[]){0, 2}, 0, 0);
    check_reduce(int_ops[i], 18, SMELT_I32, 3, d3, 1, (int64_t[]){1}, 1, 0);
  }
  check_reduce(2, 18, SMELT_U8, 3, d3, 1, (int64_t[]){2}, 1, 0);
  check_reduce(3, 18, SMELT_U64, 3, d3, 1, (int64_t[]){0}, 1, 0);
  check_reduce(2, 20, SMELT_BOOL, 3, d3, 1, (int64_t[]){2}, 0, 0);
  check_reduce(3, 20, SMELT_BOOL, 3, d3, 1, (int64_t[]){1}, 1, 0);

  /* empty-set values of integer Max/Min are the type's limits */
  tensor x = {0}, ax = {0}, y = {0};
  tensor_alloc(&x, SMELT_I32, 2, (int64_t[]){2, 0});
  harness_i64(&ax, 1, (int64_t[]){1}, (int64_t[]){1});
  tensor *in[] = {&x, &ax}, *out[] = {&y};
  CHECK_OK(nt_run("ReduceMax", 18, NULL, 0, in, 2, out, 1));
  CHECK(y.dims[0] == 2 && ((int32_t *)y.data)[0] == INT32_MIN);
  tensor_release(&y);
  /* errors */
  tensor_release(&ax);
  harness_i64(&ax, 1, (int64_t[]){2}, (int64_t[]){1, -1});
  CHECK(nt_run("ReduceSum", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("appears twice"));
  tensor_release(&y);
  tensor_release(&ax);
  harness_i64(&ax, 1, (int64_t[]){1}, (int64_t[]){2});
  CHECK(nt_run("ReduceSum", 13, NULL, 0, in, 2, out, 1) != SMELT_OK);
  CHECK(nt_err_has("out of range"));
  tensor_release(&y);
  tensor_release(&ax);
  tensor_release(&x);
  /* static: unknown axes value with keepdims keeps the rank */
  tensor sx = nt_shape(SMELT_F32, 3, (int64_t[]){dim_sym(0), 1, 8});
  tensor sa = nt_shape(SMELT_I64, 1, (int64_t[]){1}), so = {0};
  tensor *sin[] = {&sx, &sa}, *sout[] = {&so};
  CHECK_OK(nt_infer("ReduceMean", 18, NULL, 0, sin, 2, sout, 1));
  CHECK(so.rank == 3 && so.dims[0] == DIM_UNKNOWN && so.dims[1] == 1 && so.dims[2] == DIM_UNKNOWN);
  ir_attr ax2[] = {nt_ints("axes", 1, (int64_t[]){2})};
  CHECK_OK(nt_infer("ReduceMean", 13, ax2, 1, sin, 1, sout, 1));
  CHECK(so.rank == 3 && so.dims[0] == dim_sym(0) && so.dims[2] == 1);
}

static void check_arg(bool is_max, smelt_dtype dt, int axis, int keep, int last) {
  int64_t dims[] = {3, 4, 5};
  tensor x = {0}, y = {0};
  tensor_alloc(&x, dt, 3, dims);
  for (int64_t i = 0; i < 60; i++) tensor_set_f64(&x, i, (double)((i * 7) % 5)); /* many ties */
  ir_attr a[] = {nt_int("axis", axis), nt_int("keepdims", keep), nt_int("select_last_index", last)};
  tensor *in[] = {&x}, *out[] = {&y};
  CHECK_OK(nt_run(is_max ? "ArgMax" : "ArgMin", 13, a, 3, in, 1, out, 1));
  int ax = axis < 0 ? axis + 3 : axis;
  int64_t stride = ax == 2 ? 1 : ax == 1 ? 5 : 20, n = dims[ax];
  double want[60];
  int64_t no = 0;
  for (int64_t i = 0; i < 60; i++) {
    if ((i / stride) % n) continue; /* first element of each row along the axis */
    int64_t best = 0;
    for (int64_t k = 1; k < n; k++) {
      double v = tensor_get_f64(&x, i + k * stride), b = tensor_get_f64(&x, i + best * stride);
      if (is_max ? (v > b || (last && v == b)) : (v < b || (last && v == b))) best = k;
    }
    want[no++] = (double)best;
  }
  CHECK(y.dtype == SMELT_I64 && y.rank == (keep ? 3 : 2));
  CHECK(nt_close(&y, want, no, 0, 0, is_max ? "ArgMax" : "ArgMin"));
  tensor_release(&x);
  tensor_release(&y);
}

int main(void) {
  test_reduce();
  for (int m = 0; m < 2; m++)
    for (int axis = -1; axis < 3; axis++)
      for (int k = 0; k < 2; k++)
        for (int l = 0; l < 2; l++) {
          check_arg(m, SMELT_F32, axis, k, l);
          check_arg(m, SMELT_I64, axis, k, l);
        }
  check_arg(true, SMELT_U8, 1, 1, 0);
  check_arg(false, SMELT_F16, 2, 0, 1);
  return test_report("test_ops_reduce");
}
