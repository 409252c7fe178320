/* Slice against an independent reference (CPython's slice index rules) over
 * random starts/ends/steps, including negative steps, out-of-range bounds and
 * INT64 extremes; the opset-1 attribute form; ReverseSequence. */
#include "shape_test_util.h"

/* CPython's PySlice_AdjustIndices: start/stop for a given length and step,
 * except that ONNX clamps a start below -len to 0 for negative steps too. */
static int64_t py_slice(int64_t len, int64_t *start, int64_t stop, int64_t step) {
  int64_t st = *start;
  if (st < 0) {
    st = st < -len ? (step < 0 && len ? 0 : step < 0 ? -1 : 0) : st + len;
  } else if (st >= len) {
    st = step < 0 ? len - 1 : len;
  }
  if (stop < 0) {
    stop = stop < -len ? (step < 0 ? -1 : 0) : stop + len;
  } else if (stop >= len) {
    stop = step < 0 ? len - 1 : len;
  }
  *start = st;
  uint64_t mag = step < 0 ? (uint64_t)0 - (uint64_t)step : (uint64_t)step;
  if (step < 0) return stop < st ? (int64_t)((uint64_t)(st - stop - 1) / mag) + 1 : 0;
  return st < stop ? (int64_t)((uint64_t)(stop - st - 1) / mag) + 1 : 0;
}

static uint64_t rng = 88172645463325252ull;
static int64_t rnd(int64_t lo, int64_t hi) { /* inclusive */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

static int64_t pick_bound(int64_t dim) {
  switch (rnd(0, 5)) {
    case 0: return INT64_MAX;
    case 1: return INT64_MIN;
    case 2: return rnd(-dim - 3, -1);
    default: return rnd(0, dim + 3);
  }
}

static void random_slice_case(void) {
  int r = (int)rnd(1, 4);
  int64_t dims[4], xs[4];
  for (int i = 0; i < r; i++) dims[i] = rnd(0, 6);
  tensor x = mk(SMELT_I32, r, dims, NULL);
  for (int64_t i = 0; i < tensor_numel(&x); i++) ((int32_t *)x.data)[i] = (int32_t)i;
  su_dense_strides(r, dims, xs);
  int n = (int)rnd(1, r);
  int64_t axes[4], starts[4], ends[4], steps[4], perm[4] = {0, 1, 2, 3};
  for (int i = r - 1; i > 0; i--) { /* distinct axes in random order */
    int j = (int)rnd(0, i);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int64_t st[4] = {0}, step_ax[4] = {1, 1, 1, 1}, cnt[4];
  for (int i = 0; i < r; i++) cnt[i] = dims[i];
  for (int i = 0; i < n; i++) {
    int a = (int)perm[i];
    axes[i] = rnd(0, 1) ? a : a - r;
    starts[i] = pick_bound(dims[a]);
    ends[i] = pick_bound(dims[a]);
    steps[i] = rnd(0, 1) ? rnd(1, 3) : -rnd(1, 3);
    if (rnd(0, 9) == 0) steps[i] = rnd(0, 1) ? INT64_MAX : INT64_MIN;
    st[a] = starts[i];
    cnt[a] = py_slice(dims[a], &st[a], ends[i], steps[i]);
    step_ax[a] = steps[i];
  }
  tensor ts = mk(SMELT_I64, 1, DIMS(n), NULL), te = mk(SMELT_I64, 1, DIMS(n), NULL),
         ta = mk(SMELT_I64, 1, DIMS(n), NULL), tp = mk(SMELT_I64, 1, DIMS(n), NULL), y;
  memcpy(ts.data, starts, 8 * (size_t)n);
  memcpy(te.data, ends, 8 * (size_t)n);
  memcpy(ta.data, axes, 8 * (size_t)n);
  memcpy(tp.data, steps, 8 * (size_t)n);
  tensor *in[] = {&x, &ts, &te, &ta, &tp};
  smelt_status s = run1("Slice", 13, NULL, 0, in, 5, &y);
  CHECK_OK(s);
  if (!s) {
    bool ok = same(&y, r, cnt, NULL);
    int64_t total = tensor_numel(&y), idx[4] = {0};
    for (int64_t o = 0; ok && o < total; o++) {
      int64_t off = 0, rem = o;
      for (int k = r - 1; k >= 0; k--) {
        idx[k] = rem % cnt[k];
        rem /= cnt[k];
        off += (st[k] + idx[k] * step_ax[k]) * xs[k];
      }
      ok = ((int32_t *)y.data)[o] == (int32_t)off;
    }
    CHECK(ok);
  }
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&ts);
  tensor_release(&te);
  tensor_release(&ta);
  tensor_release(&tp);
}

static void test_slice_examples(void) {
  /* The ONNX spec's examples. */
  tensor x = mk(SMELT_F32, 2, DIMS(2, 4), VALS(1, 2, 3, 4, 5, 6, 7, 8)), y;
  tensor s = mk(SMELT_I64, 1, DIMS(2), VALS(1, 0)), e = mk(SMELT_I64, 1, DIMS(2), VALS(2, 3)),
         a = mk(SMELT_I64, 1, DIMS(2), VALS(0, 1)), st = mk(SMELT_I64, 1, DIMS(2), VALS(1, 2));
  tensor *in[] = {&x, &s, &e, &a, &st};
  CHECK_OK(run1("Slice", 13, NULL, 0, in, 5, &y));
  CHECK(same(&y, 2, DIMS(1, 2), VALS(5, 7)));
  tensor_release(&y);
  tensor_set_f64(&s, 0, 0);
  tensor_set_f64(&s, 1, 1);
  tensor_set_f64(&e, 0, -1);
  tensor_set_f64(&e, 1, 1000);
  CHECK_OK(run1("Slice", 13, NULL, 0, in, 3, &y)); /* default axes and steps */
  CHECK(same(&y, 2, DIMS(1, 3), VALS(2, 3, 4)));
  tensor_release(&y);
  /* Reverse everything with step -1 from INT64_MAX to INT64_MIN. */
  int64_t *sp = s.data, *ep = e.data;
  sp[0] = sp[1] = INT64_MAX;
  ep[0] = ep[1] = INT64_MIN;
  tensor_set_f64(&st, 0, -1);
  tensor_set_f64(&st, 1, -1);
  CHECK_OK(run1("Slice", 13, NULL, 0, in, 5, &y));
  CHECK(same(&y, 2, DIMS(2, 4), VALS(8, 7, 6, 5, 4, 3, 2, 1)));
  tensor_release(&y);
  tensor_set_f64(&st, 1, 0);
  CHECK(run1("Slice", 13, NULL, 0, in, 5, &y) == SMELT_ERR_INVALID_ARGUMENT); /* step 0 */
  tensor_set_f64(&st, 1, 1);
  tensor_set_f64(&a, 1, 0);
  CHECK(run1("Slice", 13, NULL, 0, in, 5, &y) == SMELT_ERR_INVALID_MODEL); /* axis twice */
  tensor_set_f64(&a, 1, 2);
  CHECK(run1("Slice", 13, NULL, 0, in, 5, &y) == SMELT_ERR_INVALID_MODEL); /* axis 2 of rank 2 */
  tensor a1 = mk(SMELT_I64, 1, DIMS(1), VALS(0));
  in[3] = &a1;
  CHECK(run1("Slice", 13, NULL, 0, in, 5, &y) == SMELT_ERR_INVALID_MODEL); /* lengths differ */
  tensor_release(&a1);
  /* int32 parameters. */
  tensor s32 = mk(SMELT_I32, 1, DIMS(1), VALS(-3)), e32 = mk(SMELT_I32, 1, DIMS(1), VALS(-1)),
         a32 = mk(SMELT_I32, 1, DIMS(1), VALS(-1));
  tensor *in32[] = {&x, &s32, &e32, &a32};
  CHECK_OK(run1("Slice", 13, NULL, 0, in32, 4, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(2, 3, 6, 7)));
  tensor_release(&y);
  /* Opset 1: attributes. */
  ir_attr at[] = {attr_ints("starts", 1, DIMS(1)), attr_ints("ends", 1, DIMS(3)),
                  attr_ints("axes", 1, DIMS(1))};
  tensor *in1[] = {&x};
  CHECK_OK(run1("Slice", 1, at, 3, in1, 1, &y));
  CHECK(same(&y, 2, DIMS(2, 2), VALS(2, 3, 6, 7)));
  tensor_release(&y);
  tensor_release(&s32);
  tensor_release(&e32);
  tensor_release(&a32);
  tensor_release(&x);
  tensor_release(&s);
  tensor_release(&e);
  tensor_release(&a);
  tensor_release(&st);
}

static void test_slice_dtypes_static(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor x = mk(all_sizes[k], 3, DIMS(2, 3, 4), NULL), y, ref = {0};
    tensor s = mk(SMELT_I64, 1, DIMS(1), VALS(-1)), e = mk(SMELT_I64, 1, DIMS(1), VALS(0)),
           a = mk(SMELT_I64, 1, DIMS(1), VALS(2)), st = mk(SMELT_I64, 1, DIMS(1), VALS(-2));
    tensor *in[] = {&x, &s, &e, &a, &st};
    CHECK_OK(run1("Slice", 13, NULL, 0, in, 5, &y));
    double v[12];
    for (int i = 0; i < 6; i++) v[2 * i] = 4 * i + 3, v[2 * i + 1] = 4 * i + 1;
    ref = mk(all_sizes[k], 3, DIMS(2, 3, 2), v);
    CHECK(same_bytes(&y, &ref));
    tensor_release(&y);
    tensor_release(&ref);
    tensor_release(&x);
    tensor_release(&s);
    tensor_release(&e);
    tensor_release(&a);
    tensor_release(&st);
  }
  int64_t B = dim_sym(0), S = dim_sym(1);
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(B, S, 10)), so;
  tensor s = mk(SMELT_I64, 1, DIMS(2), VALS(0, 2)), e = mk(SMELT_I64, 1, DIMS(2), VALS(0, 0)),
         a = mk(SMELT_I64, 1, DIMS(2), VALS(0, 2));
  ((int64_t *)e.data)[0] = INT64_MAX;
  ((int64_t *)e.data)[1] = -1;
  tensor *in[] = {&sx, &s, &e, &a}, *out[] = {&so};
  CHECK_OK(infer_static("Slice", 13, NULL, 0, in, 4, out, 1));
  CHECK(same(&so, 3, DIMS(B, S, 7), NULL));
  tensor su = mk_shape(SMELT_I64, 1, DIMS(2));
  in[1] = &su; /* starts unknown: only the named axes become unknown */
  CHECK_OK(infer_static("Slice", 13, NULL, 0, in, 4, out, 1));
  CHECK(same(&so, 3, DIMS(DIM_UNKNOWN, S, DIM_UNKNOWN), NULL));
  tensor_release(&s);
  tensor_release(&e);
  tensor_release(&a);
}

static void test_reverse_sequence(void) {
  /* The spec's examples. */
  tensor x = mk(SMELT_F32, 2, DIMS(4, 4), NULL), y;
  tensor l = mk(SMELT_I64, 1, DIMS(4), VALS(4, 3, 2, 1));
  tensor *in[] = {&x, &l};
  ir_attr tb[] = {attr_i("time_axis", 0), attr_i("batch_axis", 1)};
  CHECK_OK(run1("ReverseSequence", 10, tb, 2, in, 2, &y));
  CHECK(same(&y, 2, DIMS(4, 4), VALS(12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15)));
  tensor_release(&y);
  tensor_release(&l);
  l = mk(SMELT_I64, 1, DIMS(4), VALS(1, 2, 3, 4));
  ir_attr bt[] = {attr_i("time_axis", 1), attr_i("batch_axis", 0)};
  CHECK_OK(run1("ReverseSequence", 10, bt, 2, in, 2, &y));
  CHECK(same(&y, 2, DIMS(4, 4), VALS(0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12)));
  tensor_release(&y);
  tensor_set_f64(&l, 3, 5);
  CHECK(run1("ReverseSequence", 10, bt, 2, in, 2, &y) == SMELT_ERR_RUNTIME);
  tensor_release(&y);
  tensor_release(&l);
  l = mk(SMELT_I64, 1, DIMS(3), VALS(1, 1, 1));
  CHECK(run1("ReverseSequence", 10, bt, 2, in, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  ir_attr same_ax[] = {attr_i("time_axis", 0), attr_i("batch_axis", 0)};
  CHECK(run1("ReverseSequence", 10, same_ax, 2, in, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&l);
  tensor_release(&x);
  /* Rank 3 with inner elements, 8-byte type. */
  x = mk(SMELT_I64, 3, DIMS(3, 2, 2), NULL);
  l = mk(SMELT_I64, 1, DIMS(2), VALS(3, 2));
  CHECK_OK(run1("ReverseSequence", 10, tb, 2, in, 2, &y));
  CHECK(same(&y, 3, DIMS(3, 2, 2), VALS(8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 10, 11)));
  tensor_release(&y);
  tensor_release(&l);
  tensor_release(&x);
}

int main(void) {
  for (int i = 0; i < 400; i++) random_slice_case();
  test_slice_examples();
  test_slice_dtypes_static();
  test_reverse_sequence();
  return test_report("ops_slice");
}
