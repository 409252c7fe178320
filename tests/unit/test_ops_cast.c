/* Cast, CastLike, BitCast: every numeric pair, truncation and saturation of
 * float to int, integer wrap, bool, f16/bf16 rounding (no double rounding from
 * f64), the four float8 kinds with and without saturate, errors. */
#include "ew_util.h"
#include "ops/convert.h"

#define D(...) ((int64_t[]){__VA_ARGS__})
#define V(...) ((double[]){__VA_ARGS__})

static smelt_status cast(tensor *x, smelt_dtype to, int saturate, tensor *o) {
  ir_attr a[] = {ew_attr_int("to", to), ew_attr_int("saturate", saturate)};
  tensor *in[] = {x};
  return ew_run("Cast", 21, a, saturate < 0 ? 1 : 2, in, 1, o);
}

static void cast_case(smelt_dtype from, smelt_dtype to, int n, const double *x, const double *want) {
  tensor a = ew_mk(from, 1, D(n), x), o;
  CHECK_OK(cast(&a, to, -1, &o));
  bool ok = ew_expect(&o, to, 1, D(n), want, 0, "cast");
  if (!ok) fprintf(stderr, "  %s -> %s\n", dtype_name(from), dtype_name(to));
  CHECK(ok);
  tensor_release(&a);
  tensor_release(&o);
}

static void test_all_pairs(void) {
  smelt_dtype all[] = {SMELT_BOOL, SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F64, SMELT_I8, SMELT_I16,
                       SMELT_I32,  SMELT_I64, SMELT_U8,   SMELT_U16, SMELT_U32, SMELT_U64};
  int n = sizeof all / sizeof *all;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      bool to_bool = all[j] == SMELT_BOOL, from_bool = all[i] == SMELT_BOOL;
      const double *x = from_bool ? V(0, 1, 1, 0) : V(0, 1, 3, 100);
      const double *want = from_bool ? V(0, 1, 1, 0) : to_bool ? V(0, 1, 1, 1) : V(0, 1, 3, 100);
      cast_case(all[i], all[j], 4, x, want);
    }
}

static void test_float_to_int(void) {
  cast_case(SMELT_F32, SMELT_I32, 6, V(2.7, -2.7, 1e10, -1e10, NAN, INFINITY),
            V(2, -2, 2147483647, -2147483648.0, 0, 2147483647));
  cast_case(SMELT_F64, SMELT_U8, 5, V(300, -5, 255.9, 0.5, -INFINITY), V(255, 0, 255, 0, 0));
  cast_case(SMELT_F32, SMELT_I8, 3, V(-128.9, 127.9, -129), V(-128, 127, -128));
  tensor a = ew_mk(SMELT_F64, 1, D(4), V(1e19, -1e19, 9223372036854774784.0, -9223372036854775808.0)), o;
  CHECK_OK(cast(&a, SMELT_I64, -1, &o));
  CHECK(ew_expect_i64(&o, (int64_t[]){INT64_MAX, INT64_MIN, 9223372036854774784LL, INT64_MIN}, 4,
                      "f64->i64"));
  tensor_release(&o);
  CHECK_OK(cast(&a, SMELT_U64, -1, &o));
  CHECK(((uint64_t *)o.data)[0] == 10000000000000000000ULL && ((uint64_t *)o.data)[1] == 0);
  tensor_release(&o);
  tensor_release(&a);
  cast_case(SMELT_F16, SMELT_I16, 3, V(-65504, 65504, 1.5), V(-32768, 32767, 1));
}

static void test_int_to_int(void) {
  cast_case(SMELT_I32, SMELT_U8, 3, V(300, -1, 256), V(44, 255, 0));
  cast_case(SMELT_I32, SMELT_I8, 2, V(200, -200), V(-56, 56));
  cast_case(SMELT_U16, SMELT_I16, 1, V(65535), V(-1));
  tensor a = ew_mk(SMELT_I64, 1, D(3), NULL), o;
  int64_t *p = a.data;
  p[0] = -1;
  p[1] = (1LL << 53) + 1;
  p[2] = 0x123456789LL;
  CHECK_OK(cast(&a, SMELT_U64, -1, &o));
  CHECK(((uint64_t *)o.data)[0] == UINT64_MAX && ((uint64_t *)o.data)[1] == (1ULL << 53) + 1);
  tensor_release(&o);
  CHECK_OK(cast(&a, SMELT_I32, -1, &o));
  CHECK(ew_expect_i64(&o, (int64_t[]){-1, 1, 0x23456789}, 3, "i64->i32"));
  tensor_release(&o);
  CHECK_OK(cast(&a, SMELT_F64, -1, &o));
  CHECK(((double *)o.data)[1] == 9007199254740992.0); /* nearest even */
  tensor_release(&o);
  tensor_release(&a);
  tensor u = ew_mk(SMELT_U64, 1, D(1), NULL);
  ((uint64_t *)u.data)[0] = UINT64_MAX;
  CHECK_OK(cast(&u, SMELT_F32, -1, &o));
  CHECK(((float *)o.data)[0] == 18446744073709551616.0f);
  tensor_release(&o);
  CHECK_OK(cast(&u, SMELT_I64, -1, &o));
  CHECK(((int64_t *)o.data)[0] == -1);
  tensor_release(&o);
  tensor_release(&u);
}

static void test_bool_and_halves(void) {
  cast_case(SMELT_F32, SMELT_BOOL, 5, V(0, -0.0, NAN, 0.001, -INFINITY), V(0, 0, 1, 1, 1));
  cast_case(SMELT_F32, SMELT_F16, 6, V(65519, 65520, 1e-8, 5.9604644775390625e-08, -0.0, NAN),
            V(65504, INFINITY, 0, 5.9604644775390625e-08, -0.0, NAN));
  cast_case(SMELT_F64, SMELT_F16, 2, V(1e300, -1e300), V(INFINITY, -INFINITY));
  cast_case(SMELT_F64, SMELT_F32, 2, V(1e300, 0.1), V(INFINITY, (float)0.1));
  /* f64 -> f16/bf16 round once: 1 + 2^-11 + 2^-40 is above the halfway point
   * (a detour through f32 would make it a tie and round down to 1) */
  double probe = 1 + ldexp(1, -11) + ldexp(1, -40);
  cast_case(SMELT_F64, SMELT_F16, 1, &probe, V(1 + ldexp(1, -10)));
  double probe_bf = 1 + ldexp(1, -8) + ldexp(1, -40);
  cast_case(SMELT_F64, SMELT_BF16, 1, &probe_bf, V(1 + ldexp(1, -7)));
  cast_case(SMELT_F32, SMELT_BF16, 3, V(1.00390625, 1.01171875, 3e38), V(1, 1.015625, 3.00405527047391e+38));
  cast_case(SMELT_BF16, SMELT_F16, 2, V(65536, 0.5), V(INFINITY, 0.5));
}

/* Raw float8 bytes from doubles, and back. */
static void f8_case(smelt_dtype t, int saturate, int n, const double *x, const uint8_t *want) {
  tensor a = ew_mk(SMELT_F32, 1, D(n), x), o;
  CHECK_OK(cast(&a, t, saturate, &o));
  bool ok = o.dtype == t && o.nbytes == (size_t)n;
  for (int i = 0; ok && i < n; i++) {
    ok = ((uint8_t *)o.data)[i] == want[i];
    if (!ok)
      fprintf(stderr, "f8 %s sat %d: %g -> 0x%02x, want 0x%02x\n", dtype_name(t), saturate, x[i],
              ((uint8_t *)o.data)[i], want[i]);
  }
  CHECK(ok);
  /* decoding the expected bytes gives the values back (where finite) */
  tensor b, back;
  tensor_alloc(&b, t, 1, D(n));
  memcpy(b.data, want, (size_t)n);
  CHECK_OK(cast(&b, SMELT_F64, -1, &back));
  for (int i = 0; i < n; i++) {
    double v = ((double *)back.data)[i];
    CHECK(isnan(v) || v == cvt_minifloat_decode(t, want[i]));
  }
  tensor_release(&back);
  tensor_release(&b);
  tensor_release(&a);
  tensor_release(&o);
}

static void test_float8(void) {
  const double *x = V(448, 500, INFINITY, NAN, -0.0, 0x1p-9, 0x1p-10, 0x1.8p-10, -464, -465);
  f8_case(SMELT_F8E4M3FN, 1, 10, x,
          (uint8_t[]){0x7e, 0x7e, 0x7e, 0x7f, 0x80, 0x01, 0x00, 0x01, 0xfe, 0xfe});
  f8_case(SMELT_F8E4M3FN, 0, 10, x,
          (uint8_t[]){0x7e, 0x7f, 0x7f, 0x7f, 0x80, 0x01, 0x00, 0x01, 0xfe, 0xff});
  const double *xu = V(240, 300, INFINITY, NAN, -0.0, 0x1p-10, 1, -1);
  f8_case(SMELT_F8E4M3FNUZ, 1, 8, xu, (uint8_t[]){0x7f, 0x7f, 0x7f, 0x80, 0x00, 0x01, 0x40, 0xc0});
  f8_case(SMELT_F8E4M3FNUZ, 0, 8, xu, (uint8_t[]){0x7f, 0x80, 0x80, 0x80, 0x00, 0x01, 0x40, 0xc0});
  const double *x5 = V(57344, 1e6, -INFINITY, 0x1p-16, 1.25, 1.125, -2);
  f8_case(SMELT_F8E5M2, 1, 7, x5, (uint8_t[]){0x7b, 0x7b, 0xfb, 0x01, 0x3d, 0x3c, 0xc0});
  f8_case(SMELT_F8E5M2, 0, 7, x5, (uint8_t[]){0x7b, 0x7c, 0xfc, 0x01, 0x3d, 0x3c, 0xc0});
  const double *x5u = V(57344, 1e6, -INFINITY, NAN, 1, -0.0);
  f8_case(SMELT_F8E5M2FNUZ, 1, 6, x5u, (uint8_t[]){0x7f, 0x7f, 0xff, 0x80, 0x40, 0x00});
  f8_case(SMELT_F8E5M2FNUZ, 0, 6, x5u, (uint8_t[]){0x7f, 0x80, 0x80, 0x80, 0x40, 0x00});
  /* decode specials */
  CHECK(isnan(cvt_minifloat_decode(SMELT_F8E4M3FN, 0xff)));
  CHECK(cvt_minifloat_decode(SMELT_F8E4M3FN, 0x7e) == 448);
  CHECK(cvt_minifloat_decode(SMELT_F8E5M2, 0x7c) == INFINITY);
  CHECK(isnan(cvt_minifloat_decode(SMELT_F8E5M2FNUZ, 0x80)));
  CHECK(cvt_minifloat_decode(SMELT_F8E4M3FNUZ, 0x01) == 0x1p-10);
  /* float8 to int and f16 */
  tensor a, o;
  tensor_alloc(&a, SMELT_F8E4M3FN, 1, D(3));
  memcpy(a.data, (uint8_t[]){0x7e, 0xfe, 0x7f}, 3);
  CHECK_OK(cast(&a, SMELT_I16, -1, &o));
  CHECK(ew_expect(&o, SMELT_I16, 1, D(3), V(448, -448, 0), 0, "f8->i16"));
  tensor_release(&o);
  CHECK_OK(cast(&a, SMELT_F16, -1, &o));
  CHECK(ew_expect(&o, SMELT_F16, 1, D(3), V(448, -448, NAN), 0, "f8->f16"));
  tensor_release(&o);
  tensor_release(&a);
  /* int to float8 saturates too */
  tensor i = ew_mk(SMELT_I32, 1, D(2), V(1000, -3)), o2;
  CHECK_OK(cast(&i, SMELT_F8E4M3FN, 1, &o2));
  CHECK(((uint8_t *)o2.data)[0] == 0x7e && ((uint8_t *)o2.data)[1] == 0xc4);
  tensor_release(&o2);
  tensor_release(&i);
}

static void test_castlike_bitcast(void) {
  tensor a = ew_mk(SMELT_F32, 2, D(1, 2), V(1.0, -2.5)), like = ew_mk(SMELT_I8, 0, NULL, NULL), o;
  tensor *in[] = {&a, &like};
  CHECK_OK(ew_run("CastLike", 21, NULL, 0, in, 2, &o));
  CHECK(ew_expect(&o, SMELT_I8, 2, D(1, 2), V(1, -2), 0, "castlike"));
  tensor_release(&o);
  ir_attr to_i32[] = {ew_attr_int("to", SMELT_I32)};
  CHECK_OK(ew_run("BitCast", 26, to_i32, 1, in, 1, &o));
  CHECK(o.dtype == SMELT_I32 && o.rank == 2 && ((int32_t *)o.data)[0] == 0x3f800000 &&
        ((uint32_t *)o.data)[1] == 0xc0200000u);
  tensor_release(&o);
  ir_attr to_i64[] = {ew_attr_int("to", SMELT_I64)};
  CHECK(ew_run("BitCast", 26, to_i64, 1, in, 1, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "input 0 is float32 (4 bytes), target int64 (8 bytes)") != NULL);
  tensor_release(&o);
  /* errors */
  CHECK(ew_run("Cast", 21, NULL, 0, in, 1, &o) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "attribute 'to' is missing") != NULL);
  tensor_release(&o);
  ir_attr to_s[] = {ew_attr_int("to", SMELT_STRING)};
  CHECK(ew_run("Cast", 21, to_s, 1, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "target type string is not supported") != NULL);
  tensor_release(&o);
  tensor str = {0};
  str.dtype = SMELT_STRING;
  str.rank = 1;
  str.dims[0] = 2;
  tensor *ins_str[] = {&str};
  CHECK(ew_static_infer("Cast", 21, to_i32, 1, ins_str, 1, &o) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "input 0 has type string, which Cast does not support") != NULL);
  ir_attr to_bad[] = {ew_attr_int("to", 99)};
  CHECK(ew_run("Cast", 21, to_bad, 1, in, 1, &o) == SMELT_ERR_UNSUPPORTED);
  tensor_release(&o);
  /* static inference keeps symbolic dims */
  tensor s = {0};
  s.dtype = SMELT_F16;
  s.rank = 2;
  s.dims[0] = dim_sym(2);
  s.dims[1] = 3;
  tensor *ins[] = {&s};
  CHECK_OK(ew_static_infer("Cast", 21, to_i32, 1, ins, 1, &o));
  CHECK(o.dtype == SMELT_I32 && o.rank == 2 && o.dims[0] == dim_sym(2));
  tensor_release(&a);
  tensor_release(&like);
}

static void test_pool(void) {
  int64_t n = 100000;
  tensor a = ew_mk(SMELT_I64, 2, D(n / 100, 100), NULL), o1, o2;
  for (int64_t i = 0; i < n; i++) ((int64_t *)a.data)[i] = i * 3 - n;
  ir_attr to[] = {ew_attr_int("to", SMELT_F16)};
  tensor *in[] = {&a};
  CHECK_OK(ew_run_pool("Cast", 21, to, 1, in, 1, &o1, 4));
  CHECK_OK(ew_run("Cast", 21, to, 1, in, 1, &o2));
  CHECK(o1.nbytes == o2.nbytes && !memcmp(o1.data, o2.data, o1.nbytes));
  CHECK(f16_to_f32(((uint16_t *)o1.data)[33330]) == -10.0f);
  CHECK(f16_to_f32(((uint16_t *)o1.data)[0]) == -INFINITY);
  tensor_release(&o1);
  tensor_release(&o2);
  tensor_release(&a);
}

int main(void) {
  test_all_pairs();
  test_float_to_int();
  test_int_to_int();
  test_bool_and_halves();
  test_float8();
  test_castlike_bitcast();
  test_pool();
  return test_report("ops_cast");
}
