/* Shape family: Identity Dropout Shape Size Reshape Flatten Squeeze Unsqueeze
 * Constant ConstantOfShape Range EyeLike. */
#include "shape_test_util.h"

static void test_identity_all_dtypes(void) {
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor x = mk(all_sizes[k], 3, DIMS(2, 1, 3), NULL), y;
    tensor *in[] = {&x};
    CHECK_OK(run1("Identity", 16, NULL, 0, in, 1, &y));
    CHECK(same_bytes(&x, &y));
    tensor_release(&y);
    tensor_release(&x);
  }
  tensor e = mk(SMELT_F32, 2, DIMS(0, 5), NULL), y; /* empty */
  tensor *in[] = {&e};
  CHECK_OK(run1("Identity", 16, NULL, 0, in, 1, &y));
  CHECK(same(&y, 2, DIMS(0, 5), NULL));
  tensor_release(&y);
  tensor_release(&e);
}

static void test_dropout(void) {
  tensor x = mk(SMELT_F32, 2, DIMS(2, 2), VALS(1, -2, 3, 0)), y = {0}, m = {0};
  tensor *in[] = {&x}, *out[] = {&y, &m};
  CHECK_OK(harness_run("Dropout", 13, NULL, 0, in, 1, out, 2));
  CHECK(same_bytes(&x, &y));
  CHECK(m.dtype == SMELT_BOOL && same(&m, 2, DIMS(2, 2), VALS(1, 1, 1, 1)));
  tensor_release(&y);
  tensor_release(&m);
  tensor ratio = mk(SMELT_F32, 0, NULL, VALS(0.5)), tm = mk(SMELT_BOOL, 0, NULL, VALS(1));
  tensor *in3[] = {&x, &ratio, &tm};
  CHECK(harness_run("Dropout", 13, NULL, 0, in3, 3, out, 2) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&y);
  tensor_release(&m);
  tensor_set_f64(&ratio, 0, 0.0);
  CHECK_OK(harness_run("Dropout", 13, NULL, 0, in3, 3, out, 2));
  CHECK(same_bytes(&x, &y));
  tensor_release(&y);
  tensor_release(&m);
  tensor_set_f64(&tm, 0, 0.0);
  tensor_set_f64(&ratio, 0, 0.5);
  CHECK_OK(harness_run("Dropout", 13, NULL, 0, in3, 3, out, 1));
  CHECK(same_bytes(&x, &y));
  tensor_release(&y);
  tensor_release(&x);
  tensor_release(&ratio);
  tensor_release(&tm);
}

static void test_shape_size(void) {
  tensor x = mk(SMELT_F16, 4, DIMS(2, 3, 0, 5), NULL), y;
  tensor *in[] = {&x};
  CHECK_OK(run1("Shape", 13, NULL, 0, in, 1, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 1, DIMS(4), VALS(2, 3, 0, 5)));
  tensor_release(&y);
  ir_attr a1[] = {attr_i("start", 1), attr_i("end", -1)};
  CHECK_OK(run1("Shape", 15, a1, 2, in, 1, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(3, 0)));
  tensor_release(&y);
  ir_attr a2[] = {attr_i("start", -10), attr_i("end", 10)};
  CHECK_OK(run1("Shape", 15, a2, 2, in, 1, &y));
  CHECK(same(&y, 1, DIMS(4), VALS(2, 3, 0, 5)));
  tensor_release(&y);
  ir_attr a3[] = {attr_i("start", 3), attr_i("end", 1)};
  CHECK_OK(run1("Shape", 15, a3, 2, in, 1, &y));
  CHECK(same(&y, 1, DIMS(0), NULL));
  tensor_release(&y);
  CHECK_OK(run1("Size", 13, NULL, 0, in, 1, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 0, NULL, VALS(0)));
  tensor_release(&y);
  tensor_release(&x);
  tensor s = mk(SMELT_I8, 0, NULL, VALS(7));
  tensor *ins[] = {&s};
  CHECK_OK(run1("Shape", 15, NULL, 0, ins, 1, &y));
  CHECK(same(&y, 1, DIMS(0), NULL));
  tensor_release(&y);
  CHECK_OK(run1("Size", 13, NULL, 0, ins, 1, &y));
  CHECK(same(&y, 0, NULL, VALS(1)));
  tensor_release(&y);
  tensor_release(&s);
  /* Static: symbolic input dims give a known-length shape. */
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(dim_sym(0), 4, DIM_UNKNOWN)), so;
  tensor *sin[] = {&sx}, *sout[] = {&so};
  CHECK_OK(infer_static("Shape", 15, a1, 2, sin, 1, sout, 1));
  CHECK(so.rank == 1 && so.dims[0] == 1);
  sx.rank = -1;
  CHECK_OK(infer_static("Shape", 15, NULL, 0, sin, 1, sout, 1));
  CHECK(so.rank == 1 && so.dims[0] == DIM_UNKNOWN);
}

static smelt_status reshape(tensor *x, int n, const int64_t *shape, int allowzero, tensor *y) {
  tensor s = mk(SMELT_I64, 1, DIMS(n), NULL);
  for (int i = 0; i < n; i++) ((int64_t *)s.data)[i] = shape[i];
  tensor *in[] = {x, &s};
  ir_attr a[] = {attr_i("allowzero", allowzero)};
  smelt_status st = run1("Reshape", 14, a, 1, in, 2, y);
  tensor_release(&s);
  return st;
}

static void test_reshape(void) {
  tensor x = mk(SMELT_I32, 3, DIMS(2, 3, 4), NULL), y;
  CHECK_OK(reshape(&x, 2, DIMS(4, -1), 0, &y));
  CHECK(same(&y, 2, DIMS(4, 6), NULL) && !memcmp(x.data, y.data, x.nbytes));
  tensor_release(&y);
  CHECK_OK(reshape(&x, 3, DIMS(0, -1, 2), 0, &y));
  CHECK(same(&y, 3, DIMS(2, 6, 2), NULL));
  tensor_release(&y);
  CHECK_OK(reshape(&x, 6, DIMS(1, 2, 1, 3, 4, 1), 0, &y)); /* rank 6 */
  CHECK(same(&y, 6, DIMS(1, 2, 1, 3, 4, 1), NULL));
  tensor_release(&y);
  CHECK(reshape(&x, 2, DIMS(5, -1), 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK(reshape(&x, 2, DIMS(5, 5), 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK(reshape(&x, 2, DIMS(-1, -1), 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK(reshape(&x, 4, DIMS(0, 0, 0, 0), 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK(reshape(&x, 1, DIMS(-2), 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK_OK(reshape(&x, 1, DIMS(-1), 0, &y));
  CHECK(same(&y, 1, DIMS(24), NULL));
  tensor_release(&y);
  tensor_release(&x);
  /* allowzero: 0 is a real size; only an empty input fits. */
  tensor e = mk(SMELT_F32, 2, DIMS(0, 3), NULL);
  CHECK_OK(reshape(&e, 3, DIMS(3, 0, 4), 1, &y));
  CHECK(same(&y, 3, DIMS(3, 0, 4), NULL));
  tensor_release(&y);
  CHECK(reshape(&e, 2, DIMS(3, 0), 0, &y) == SMELT_ERR_INVALID_ARGUMENT); /* 0 copies 3 */
  CHECK(reshape(&e, 2, DIMS(0, -1), 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&y);
  CHECK_OK(reshape(&e, 2, DIMS(-1, 3), 0, &y));
  CHECK(same(&y, 2, DIMS(0, 3), NULL));
  tensor_release(&y);
  tensor_release(&e);
  tensor sc = mk(SMELT_F64, 1, DIMS(1), VALS(2.5));
  CHECK_OK(reshape(&sc, 0, NULL, 0, &y)); /* to a scalar */
  CHECK(same(&y, 0, NULL, VALS(2.5)));
  tensor_release(&y);
  tensor_release(&sc);
}

static void test_reshape_static(void) {
  int64_t B = dim_sym(0), S = dim_sym(1);
  tensor x = mk_shape(SMELT_F32, 3, DIMS(B, S, 768)), s = mk(SMELT_I64, 1, DIMS(4), VALS(0, 0, 12, -1));
  tensor y, *in[] = {&x, &s}, *out[] = {&y};
  CHECK_OK(infer_static("Reshape", 14, NULL, 0, in, 2, out, 1));
  CHECK(same(&y, 4, DIMS(B, S, 12, 64), NULL));
  tensor_release(&s);
  /* [B,S,12,64] -> [0,0,-1]: symbols cancel. */
  tensor x2 = mk_shape(SMELT_F32, 4, DIMS(B, S, 12, 64));
  s = mk(SMELT_I64, 1, DIMS(3), VALS(0, 0, -1));
  in[0] = &x2;
  CHECK_OK(infer_static("Reshape", 14, NULL, 0, in, 2, out, 1));
  CHECK(same(&y, 3, DIMS(B, S, 768), NULL));
  tensor_release(&s);
  /* [B*S, 768] from [B,S,768] with -1 first: the remaining symbol is lost. */
  s = mk(SMELT_I64, 1, DIMS(2), VALS(-1, 768));
  in[0] = &x;
  CHECK_OK(infer_static("Reshape", 14, NULL, 0, in, 2, out, 1));
  CHECK(same(&y, 2, DIMS(DIM_UNKNOWN, 768), NULL));
  tensor_release(&s);
  /* Value unknown: rank from the shape input's length. */
  tensor su = mk_shape(SMELT_I64, 1, DIMS(3));
  in[1] = &su;
  CHECK_OK(infer_static("Reshape", 14, NULL, 0, in, 2, out, 1));
  CHECK(same(&y, 3, DIMS(DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN), NULL));
  tensor bad = mk_shape(SMELT_F32, 1, DIMS(3));
  in[1] = &bad;
  CHECK(infer_static("Reshape", 14, NULL, 0, in, 2, out, 1) == SMELT_ERR_INVALID_MODEL);
  /* Reshape-1: shape attribute. */
  tensor r = mk(SMELT_F32, 2, DIMS(2, 3), NULL), yo;
  ir_attr a[] = {attr_ints("shape", 2, DIMS(3, 2))};
  tensor *in1[] = {&r};
  CHECK_OK(run1("Reshape", 1, a, 1, in1, 1, &yo));
  CHECK(same(&yo, 2, DIMS(3, 2), VALS(0, 1, 2, 3, 4, 5)));
  tensor_release(&yo);
  tensor_release(&r);
}

static void test_flatten(void) {
  tensor x = mk(SMELT_U16, 4, DIMS(2, 3, 4, 5), NULL), y;
  tensor *in[] = {&x};
  int64_t ax[] = {0, 1, 2, 3, 4, -1, -4};
  int64_t exp[][2] = {{1, 120}, {2, 60}, {6, 20}, {24, 5}, {120, 1}, {24, 5}, {1, 120}};
  for (int i = 0; i < 7; i++) {
    ir_attr a[] = {attr_i("axis", ax[i])};
    CHECK_OK(run1("Flatten", 13, a, 1, in, 1, &y));
    CHECK(same(&y, 2, exp[i], NULL) && !memcmp(x.data, y.data, x.nbytes));
    tensor_release(&y);
  }
  ir_attr bad[] = {attr_i("axis", 5)};
  CHECK(run1("Flatten", 13, bad, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
  tensor s = mk(SMELT_F32, 0, NULL, VALS(3));
  in[0] = &s;
  ir_attr a0[] = {attr_i("axis", 0)};
  CHECK_OK(run1("Flatten", 13, a0, 1, in, 1, &y));
  CHECK(same(&y, 2, DIMS(1, 1), VALS(3)));
  tensor_release(&y);
  tensor_release(&s);
  int64_t B = dim_sym(0);
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(B, 3, 4)), so, *sin[] = {&sx}, *sout[] = {&so};
  CHECK_OK(infer_static("Flatten", 13, NULL, 0, sin, 1, sout, 1));
  CHECK(same(&so, 2, DIMS(B, 12), NULL));
  ir_attr a2[] = {attr_i("axis", 2)};
  CHECK_OK(infer_static("Flatten", 13, a2, 1, sin, 1, sout, 1));
  CHECK(same(&so, 2, DIMS(DIM_UNKNOWN, 4), NULL));
}

static void test_squeeze_unsqueeze(void) {
  tensor x = mk(SMELT_I64, 4, DIMS(1, 3, 1, 2), NULL), y;
  tensor *in1[] = {&x};
  CHECK_OK(run1("Squeeze", 13, NULL, 0, in1, 1, &y));
  CHECK(same(&y, 2, DIMS(3, 2), VALS(0, 1, 2, 3, 4, 5)));
  tensor_release(&y);
  tensor ax = mk(SMELT_I64, 1, DIMS(1), VALS(-2));
  tensor *in2[] = {&x, &ax};
  CHECK_OK(run1("Squeeze", 13, NULL, 0, in2, 2, &y));
  CHECK(same(&y, 3, DIMS(1, 3, 2), NULL));
  tensor_release(&y);
  tensor none = mk(SMELT_I64, 1, DIMS(0), NULL);
  tensor *in0[] = {&x, &none};
  CHECK_OK(run1("Squeeze", 13, NULL, 0, in0, 2, &y)); /* empty axes: all ones */
  CHECK(same(&y, 2, DIMS(3, 2), NULL));
  tensor_release(&y);
  CHECK_OK(run1("Unsqueeze", 13, NULL, 0, in0, 2, &y)); /* empty axes: unchanged */
  CHECK(same(&y, 4, DIMS(1, 3, 1, 2), NULL));
  tensor_release(&y);
  tensor_release(&none);
  ir_attr a[] = {attr_ints("axes", 2, DIMS(0, 2))};
  CHECK_OK(run1("Squeeze", 11, a, 1, in1, 1, &y));
  CHECK(same(&y, 2, DIMS(3, 2), NULL));
  tensor_release(&y);
  tensor_set_f64(&ax, 0, 1); /* size 3: cannot squeeze */
  CHECK(run1("Squeeze", 13, NULL, 0, in2, 2, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_set_f64(&ax, 0, 4);
  CHECK(run1("Squeeze", 13, NULL, 0, in2, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ax);
  /* Unsqueeze: axes relative to the output rank, any order, negative. */
  ax = mk(SMELT_I64, 1, DIMS(3), VALS(5, 0, -3));
  CHECK_OK(run1("Unsqueeze", 13, NULL, 0, in2, 2, &y));
  CHECK(same(&y, 7, DIMS(1, 1, 3, 1, 1, 1, 2), VALS(0, 1, 2, 3, 4, 5)));
  tensor_release(&y);
  ir_attr ua[] = {attr_ints("axes", 1, DIMS(4))};
  CHECK_OK(run1("Unsqueeze", 11, ua, 1, in1, 1, &y));
  CHECK(same(&y, 5, DIMS(1, 3, 1, 2, 1), NULL));
  tensor_release(&y);
  tensor_set_f64(&ax, 0, 0); /* duplicate axis 0 */
  CHECK(run1("Unsqueeze", 13, NULL, 0, in2, 2, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&ax);
  tensor_release(&x);
  tensor s = mk(SMELT_BOOL, 0, NULL, VALS(1));
  ax = mk(SMELT_I64, 1, DIMS(1), VALS(0));
  tensor *in3[] = {&s, &ax};
  CHECK_OK(run1("Unsqueeze", 13, NULL, 0, in3, 2, &y));
  CHECK(same(&y, 1, DIMS(1), VALS(1)));
  tensor_release(&s);
  tensor *in4[] = {&y, &ax};
  tensor z;
  CHECK_OK(run1("Squeeze", 13, NULL, 0, in4, 2, &z));
  CHECK(same(&z, 0, NULL, VALS(1)));
  tensor_release(&z);
  tensor_release(&y);
  tensor_release(&ax);
  /* Static: squeeze without axes on a symbolic dim has unknown rank. */
  tensor sx = mk_shape(SMELT_F32, 3, DIMS(dim_sym(0), 1, 4)), so, *sin[] = {&sx}, *sout[] = {&so};
  CHECK_OK(infer_static("Squeeze", 13, NULL, 0, sin, 1, sout, 1));
  CHECK(so.rank == -1);
  tensor sa = mk_shape(SMELT_I64, 1, DIMS(2));
  tensor *sin2[] = {&sx, &sa};
  CHECK_OK(infer_static("Unsqueeze", 13, NULL, 0, sin2, 2, sout, 1));
  CHECK(so.rank == 5 && so.dims[0] == DIM_UNKNOWN);
}

static void test_constant(void) {
  tensor v = mk(SMELT_I16, 2, DIMS(2, 2), VALS(1, -2, 3, -4)), y;
  ir_attr a[] = {attr_t("value", &v)};
  CHECK_OK(run1("Constant", 13, a, 1, NULL, 0, &y));
  CHECK(same_bytes(&v, &y));
  tensor_release(&y);
  ir_attr af[] = {attr_f("value_float", 2.5f)};
  CHECK_OK(run1("Constant", 13, af, 1, NULL, 0, &y));
  CHECK(y.dtype == SMELT_F32 && same(&y, 0, NULL, VALS(2.5)));
  tensor_release(&y);
  ir_attr ai[] = {attr_ints("value_ints", 3, DIMS(7, -8, 9))};
  CHECK_OK(run1("Constant", 13, ai, 1, NULL, 0, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 1, DIMS(3), VALS(7, -8, 9)));
  tensor_release(&y);
  ir_attr ai1[] = {attr_i("value_int", -3)};
  CHECK_OK(run1("Constant", 13, ai1, 1, NULL, 0, &y));
  CHECK(y.dtype == SMELT_I64 && same(&y, 0, NULL, VALS(-3)));
  tensor_release(&y);
  ir_attr afs[] = {attr_floats("value_floats", 2, (const float[]){0.5f, -1})};
  CHECK_OK(run1("Constant", 13, afs, 1, NULL, 0, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(0.5, -1)));
  tensor_release(&y);
  ir_attr as[] = {attr_s("value_string", "hi")};
  CHECK(run1("Constant", 13, as, 1, NULL, 0, &y) == SMELT_ERR_UNSUPPORTED);
  ir_attr two[] = {attr_t("value", &v), attr_f("value_float", 1)};
  CHECK(run1("Constant", 13, two, 2, NULL, 0, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(run1("Constant", 13, NULL, 0, NULL, 0, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&v);
}

static void test_constant_of_shape(void) {
  tensor s = mk(SMELT_I64, 1, DIMS(2), VALS(2, 3)), y;
  tensor *in[] = {&s};
  CHECK_OK(run1("ConstantOfShape", 9, NULL, 0, in, 1, &y));
  CHECK(y.dtype == SMELT_F32 && same(&y, 2, DIMS(2, 3), VALS(0, 0, 0, 0, 0, 0)));
  tensor_release(&y);
  for (int k = 0; k < N_ALL_SIZES; k++) {
    tensor v = mk(all_sizes[k], 1, DIMS(1), VALS(7));
    ir_attr a[] = {attr_t("value", &v)};
    CHECK_OK(run1("ConstantOfShape", 20, a, 1, in, 1, &y));
    CHECK(y.dtype == v.dtype && same(&y, 2, DIMS(2, 3), NULL));
    for (int i = 0; i < 6; i++)
      CHECK(!memcmp((char *)y.data + i * v.nbytes, v.data, v.nbytes));
    tensor_release(&y);
    tensor_release(&v);
  }
  tensor_release(&s);
  s = mk(SMELT_I64, 1, DIMS(0), NULL); /* empty shape: scalar */
  CHECK_OK(run1("ConstantOfShape", 9, NULL, 0, in, 1, &y));
  CHECK(same(&y, 0, NULL, VALS(0)));
  tensor_release(&y);
  tensor_release(&s);
  s = mk(SMELT_I64, 1, DIMS(2), VALS(0, 4)); /* zero-size */
  CHECK_OK(run1("ConstantOfShape", 9, NULL, 0, in, 1, &y));
  CHECK(same(&y, 2, DIMS(0, 4), NULL));
  tensor_release(&y);
  tensor_set_f64(&s, 0, -1);
  CHECK(run1("ConstantOfShape", 9, NULL, 0, in, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&s);
  tensor two = mk(SMELT_F32, 1, DIMS(2), NULL);
  ir_attr a2[] = {attr_t("value", &two)};
  s = mk(SMELT_I64, 1, DIMS(1), VALS(3));
  CHECK(run1("ConstantOfShape", 9, a2, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&two);
  tensor_release(&s);
}

static smelt_status range(smelt_dtype dt, double st, double li, double de, tensor *y) {
  tensor a = mk(dt, 0, NULL, VALS(st)), b = mk(dt, 0, NULL, VALS(li)), c = mk(dt, 0, NULL, VALS(de));
  tensor *in[] = {&a, &b, &c};
  smelt_status s = run1("Range", 11, NULL, 0, in, 3, y);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c);
  return s;
}

static void test_range(void) {
  tensor y;
  CHECK_OK(range(SMELT_I32, 10, 4, -3, &y));
  CHECK(y.dtype == SMELT_I32 && same(&y, 1, DIMS(2), VALS(10, 7)));
  tensor_release(&y);
  CHECK_OK(range(SMELT_F32, 1, 5, 2, &y));
  CHECK(same(&y, 1, DIMS(2), VALS(1, 3)));
  tensor_release(&y);
  CHECK_OK(range(SMELT_F64, 0, 1, 0.25, &y));
  CHECK(same(&y, 1, DIMS(4), VALS(0, 0.25, 0.5, 0.75)));
  tensor_release(&y);
  CHECK_OK(range(SMELT_F16, 0, 2, 0.5, &y));
  CHECK(same(&y, 1, DIMS(4), VALS(0, 0.5, 1, 1.5)));
  tensor_release(&y);
  CHECK_OK(range(SMELT_I16, 5, 5, 1, &y));
  CHECK(same(&y, 1, DIMS(0), NULL));
  tensor_release(&y);
  CHECK_OK(range(SMELT_I64, 0, 10, -1, &y));
  CHECK(same(&y, 1, DIMS(0), NULL));
  tensor_release(&y);
  CHECK_OK(range(SMELT_U8, 250, 255, 2, &y));
  CHECK(same(&y, 1, DIMS(3), VALS(250, 252, 254)));
  tensor_release(&y);
  CHECK(range(SMELT_I32, 0, 10, 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(range(SMELT_F32, 0, 10, 0, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(range(SMELT_I64, -4e18, 4e18, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(range(SMELT_F32, 0, 1e30, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(range(SMELT_F32, 0, 1.0 / 0.0, 1, &y) == SMELT_ERR_INVALID_ARGUMENT);
  /* int64 extremes: exact count without overflow. */
  tensor a = mk(SMELT_I64, 0, NULL, NULL), b = mk(SMELT_I64, 0, NULL, NULL),
         c = mk(SMELT_I64, 0, NULL, NULL);
  *(int64_t *)a.data = INT64_MIN;
  *(int64_t *)b.data = INT64_MAX;
  *(int64_t *)c.data = INT64_MAX;
  tensor *in[] = {&a, &b, &c};
  CHECK_OK(run1("Range", 11, NULL, 0, in, 3, &y));
  CHECK(y.rank == 1 && y.dims[0] == 3);
  if (y.rank == 1 && y.dims[0] == 3)
    CHECK(((int64_t *)y.data)[0] == INT64_MIN && ((int64_t *)y.data)[1] == -1 &&
          ((int64_t *)y.data)[2] == INT64_MAX - 1);
  tensor_release(&y);
  tensor_release(&a);
  tensor_release(&b);
  tensor_release(&c);
  tensor s1 = mk(SMELT_F32, 0, NULL, NULL), s2 = mk(SMELT_I32, 0, NULL, NULL);
  tensor *mixed[] = {&s1, &s2, &s1};
  CHECK(run1("Range", 11, NULL, 0, mixed, 3, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&s1);
  tensor_release(&s2);
}

static void test_eyelike(void) {
  tensor x = mk(SMELT_I32, 2, DIMS(3, 4), NULL), y;
  tensor *in[] = {&x};
  CHECK_OK(run1("EyeLike", 9, NULL, 0, in, 1, &y));
  CHECK(y.dtype == SMELT_I32 && same(&y, 2, DIMS(3, 4), VALS(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0)));
  tensor_release(&y);
  ir_attr a[] = {attr_i("k", 2), attr_i("dtype", SMELT_F64)};
  CHECK_OK(run1("EyeLike", 9, a, 2, in, 1, &y));
  CHECK(y.dtype == SMELT_F64 && same(&y, 2, DIMS(3, 4), VALS(0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0)));
  tensor_release(&y);
  ir_attr an[] = {attr_i("k", -1)};
  CHECK_OK(run1("EyeLike", 9, an, 1, in, 1, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0)));
  tensor_release(&y);
  ir_attr far[] = {attr_i("k", 9)};
  CHECK_OK(run1("EyeLike", 9, far, 1, in, 1, &y));
  CHECK(same(&y, 2, DIMS(3, 4), VALS(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)));
  tensor_release(&y);
  ir_attr fneg[] = {attr_i("k", -9)};
  CHECK_OK(run1("EyeLike", 9, fneg, 1, in, 1, &y));
  tensor_release(&y);
  tensor_release(&x);
  x = mk(SMELT_I32, 1, DIMS(3), NULL);
  CHECK(run1("EyeLike", 9, NULL, 0, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  tensor_release(&x);
}

int main(void) {
  test_identity_all_dtypes();
  test_dropout();
  test_shape_size();
  test_reshape();
  test_reshape_static();
  test_flatten();
  test_squeeze_unsqueeze();
  test_constant();
  test_constant_of_shape();
  test_range();
  test_eyelike();
  return test_report("ops_shape");
}
