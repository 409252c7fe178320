/* Packed sub-byte types (int4 uint4 int2 uint2 float4e2m1) and float8e8m0:
 * the packing layout, storage sizes, every code of every 4- and 8-bit format
 * through decode → encode, encoders against independent brute-force oracles,
 * TensorProto decode (raw_data and int32_data), tensor_compare, and the ops
 * that take them (Cast's tiles and round_mode, BitCast, Reshape, Quantize/
 * DequantizeLinear, errors). */
#include <math.h>

#include "ew_util.h"
#include "ir/subbyte.h"
#include "onnx_test_util.h"
#include "ops/convert.h"
#include "runtime/compare.h"

#define D(...) ((int64_t[]){__VA_ARGS__})

static const smelt_dtype packed_ints[] = {SMELT_I4, SMELT_U4, SMELT_I2, SMELT_U2};

/* ---- dtype table and storage ---- */

static void test_dtypes(void) {
  CHECK(SMELT_F8E8M0 == 24 && SMELT_U2 == 25 && SMELT_I2 == 26); /* onnx.proto */
  CHECK(dtype_bits(SMELT_I4) == 4 && dtype_bits(SMELT_U4) == 4 && dtype_bits(SMELT_F4E2M1) == 4);
  CHECK(dtype_bits(SMELT_I2) == 2 && dtype_bits(SMELT_U2) == 2 && dtype_bits(SMELT_F8E8M0) == 8);
  CHECK(dtype_bits(SMELT_STRING) == 0 && dtype_bits(SMELT_C128) == 128 && dtype_bits(99) == 0);
  CHECK(dtype_size(SMELT_I4) == 0 && dtype_size(SMELT_I2) == 0 && dtype_size(SMELT_F8E8M0) == 1);
  CHECK(dtype_is_subbyte(SMELT_U2) && dtype_is_subbyte(SMELT_F4E2M1));
  CHECK(!dtype_is_subbyte(SMELT_U8) && !dtype_is_subbyte(SMELT_STRING));
  /* the byte-addressed predicates keep packed types out */
  CHECK(!dtype_is_int(SMELT_I4) && !dtype_is_float(SMELT_F4E2M1) && dtype_is_float(SMELT_F8E8M0));
  CHECK(!strcmp(dtype_name(SMELT_I2), "int2") && !strcmp(dtype_name(SMELT_U2), "uint2"));
  CHECK(!strcmp(dtype_name(SMELT_F8E8M0), "float8e8m0"));
  CHECK(dtype_from_name("int2") == SMELT_I2 && dtype_from_name("float8e8m0") == SMELT_F8E8M0);
  size_t nb = 99;
  CHECK(dtype_nbytes(SMELT_I4, 5, &nb) && nb == 3);
  CHECK(dtype_nbytes(SMELT_I2, 5, &nb) && nb == 2);
  CHECK(dtype_nbytes(SMELT_U2, 8, &nb) && nb == 2);
  CHECK(dtype_nbytes(SMELT_U2, 0, &nb) && nb == 0);
  CHECK(dtype_nbytes(SMELT_F32, 3, &nb) && nb == 12);
  CHECK(!dtype_nbytes(SMELT_STRING, 1, &nb) && !dtype_nbytes(SMELT_I4, -1, &nb));
  CHECK(!dtype_nbytes(SMELT_F64, INT64_MAX, &nb));
  CHECK(!dtype_nbytes(SMELT_I4, INT64_MAX, &nb)); /* n * bits overflows */
  CHECK(dtype_nbytes(SMELT_I2, (int64_t)1 << 40, &nb) && nb == (size_t)1 << 38);
  tensor t;
  CHECK_OK(tensor_alloc(&t, SMELT_I4, 2, D(3, 3)));
  CHECK(t.nbytes == 5 && t.owns_data);
  tensor u;
  CHECK_OK(tensor_clone(&u, &t));
  CHECK(u.nbytes == 5 && u.dtype == SMELT_I4);
  tensor_release(&u);
  tensor_release(&t);
  CHECK_OK(tensor_alloc(&t, SMELT_U2, 1, D(0)));
  CHECK(t.nbytes == 0 && t.data);
  tensor_release(&t);
  uint8_t buf[2] = {0};
  tensor_view(&t, SMELT_U2, 1, D(7), buf);
  CHECK(t.nbytes == 2 && !t.owns_data);
}

/* ---- packing ---- */

static void test_packing(void) {
  uint8_t b[3] = {0, 0, 0};
  sb_set(b, 4, 0, 0x3);
  sb_set(b, 4, 1, 0xa);
  sb_set(b, 4, 2, 0x1f); /* only the low 4 bits are stored */
  CHECK(b[0] == 0xa3 && b[1] == 0x0f && b[2] == 0); /* first element in the low bits */
  CHECK(sb_get(b, 4, 0) == 3 && sb_get(b, 4, 1) == 0xa && sb_get(b, 4, 2) == 0xf);
  sb_set(b, 4, 0, 0);
  CHECK(b[0] == 0xa0); /* the neighbour is kept */
  uint8_t c[2] = {0, 0};
  for (int i = 0; i < 7; i++) sb_set(c, 2, i, (unsigned)(i % 4));
  /* codes 0,1,2,3 | 0,1,2 at bits 0-1, 2-3, 4-5, 6-7 */
  CHECK(c[0] == (0 | 1 << 2 | 2 << 4 | 3 << 6) && c[1] == (0 | 1 << 2 | 2 << 4));
  for (int i = 0; i < 7; i++) CHECK(sb_get(c, 2, i) == (unsigned)(i % 4));
  /* every code at every position of a byte, with the other positions kept */
  for (int bits = 2; bits <= 4; bits += 2)
    for (int pos = 0; pos < 8 / bits; pos++)
      for (unsigned code = 0; code < 1u << bits; code++) {
        uint8_t x = 0x5a, before = x;
        sb_set(&x, bits, pos, code);
        CHECK(sb_get(&x, bits, pos) == code);
        unsigned mask = ((1u << bits) - 1) << (pos * bits);
        CHECK((x & ~mask & 0xff) == (before & ~mask & 0xff));
      }
  uint8_t codes[5] = {1, 2, 3, 0, 2}, back[5];
  uint8_t d[2] = {0xff, 0xff};
  sb_pack(d, 2, 1, 5, codes); /* from element 1: bits 2..11 */
  sb_unpack(d, 2, 1, 5, back);
  CHECK(!memcmp(codes, back, 5) && sb_get(d, 2, 0) == 3 && sb_get(d, 2, 6) == 3);
  for (unsigned code = 0; code < 16; code++) {
    CHECK(sb_int_value(SMELT_I4, code) == (code < 8 ? (int)code : (int)code - 16));
    CHECK(sb_int_value(SMELT_U4, code) == (int)code);
  }
  CHECK(sb_int_value(SMELT_I2, 2) == -2 && sb_int_value(SMELT_I2, 3) == -1);
  CHECK(sb_int_value(SMELT_I2, 1) == 1 && sb_int_value(SMELT_U2, 3) == 3);
  CHECK(sb_per_byte(SMELT_I4) == 2 && sb_per_byte(SMELT_U2) == 4 && sb_per_byte(SMELT_F32) == 1);
}

/* ---- conversions ---- */

/* float4e2m1 oracle: the nearest of the 8 magnitudes, ties to the even code,
 * saturating at 6; the sign is x's (so -0.1 → -0); NaN → +0. */
static unsigned f4_oracle(double x) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  if (isnan(x)) return 0;
  unsigned sign = signbit(x) ? 8 : 0, best = 0;
  double a = fabs(x);
  if (a > 6) return sign | 7;
  for (unsigned c = 1; c < 8; c++) {
    double dc = fabs(a - mag[c]), db = fabs(a - mag[best]);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return sign | best;
}

static void test_f4e2m1(void) {
  /* every code decodes to the table value and encodes back to itself */
  for (unsigned code = 0; code < 16; code++) {
    double v = cvt_minifloat_decode(SMELT_F4E2M1, code);
    CHECK(v == sb_f4e2m1_value(code) && !!signbit(v) == !!(code & 8));
    CHECK(cvt_minifloat_encode(SMELT_F4E2M1, v, true) == code);
    CHECK(cvt_minifloat_encode(SMELT_F4E2M1, v, false) == code);
  }
  CHECK(cvt_minifloat_decode(SMELT_F4E2M1, 7) == 6 && cvt_minifloat_decode(SMELT_F4E2M1, 9) == -0.5);
  /* a fine grid (every tie included) against the oracle */
  int bad = 0;
  for (int k = -8 * 64; k <= 8 * 64; k++) {
    double x = k / 64.0;
    if (cvt_minifloat_encode(SMELT_F4E2M1, x, true) != f4_oracle(x) && bad++ < 5)
      fprintf(stderr, "  f4e2m1(%g) = %u, oracle %u\n", x,
              cvt_minifloat_encode(SMELT_F4E2M1, x, true), f4_oracle(x));
  }
  CHECK(bad == 0);
  double specials[] = {INFINITY, -INFINITY, NAN, 1e300, -1e300, 1e-300, -1e-300, 0.25, 0.2500001,
                       5.0, 5.0000001, -2.5, 7.0, 6.0};
  for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
    CHECK(cvt_minifloat_encode(SMELT_F4E2M1, specials[i], false) == f4_oracle(specials[i]));
  CHECK(cvt_minifloat_encode(SMELT_F4E2M1, INFINITY, true) == 7);
  CHECK(cvt_minifloat_encode(SMELT_F4E2M1, -INFINITY, true) == 15);
  CHECK(cvt_minifloat_encode(SMELT_F4E2M1, NAN, true) == 0);
}

/* e8m0 oracle: scan every power of two 2^k, k in [-127, 127]. */
static unsigned e8m0_oracle(double x, bool sat, cvt_round r) {
  if (isnan(x)) return 0xff;
  double a = fabs(x);
  int lo = -128; /* largest k with 2^k <= a (-128: none) */
  for (int k = -127; k <= 127; k++)
    if (ldexp(1, k) <= a) lo = k;
  int k;
  if (r == CVT_ROUND_DOWN) {
    k = lo;
  } else if (r == CVT_ROUND_UP) {
    k = lo == -128 ? -127 : ldexp(1, lo) == a ? lo : lo + 1;
    if (isinf(a)) k = 128;
  } else {
    k = lo == -128 ? (a >= 0.75 * ldexp(1, -127) ? -127 : -128) : a >= 1.5 * ldexp(1, lo) ? lo + 1 : lo;
    if (isinf(a)) k = 128;
  }
  if (lo == 127 && a >= ldexp(1, 128)) k = 128; /* beyond the largest, in double */
  if (a == 0) k = -128;
  if (k > 127) return sat ? 0xfe : 0xff;
  if (k < -127) return sat ? 0 : 0xff;
  return (unsigned)(k + 127);
}

static void test_e8m0(void) {
  const cvt_round modes[] = {CVT_ROUND_UP, CVT_ROUND_DOWN, CVT_ROUND_NEAREST};
  for (unsigned code = 0; code < 256; code++) {
    double v = cvt_minifloat_decode(SMELT_F8E8M0, code);
    if (code == 0xff) {
      CHECK(isnan(v));
      CHECK(cvt_e8m0_encode(v, true, CVT_ROUND_UP) == 0xff);
      continue;
    }
    CHECK(v == ldexp(1, (int)code - 127));
    for (int m = 0; m < 3; m++)
      for (int sat = 0; sat < 2; sat++) CHECK(cvt_e8m0_encode(v, sat, modes[m]) == code);
  }
  /* powers of two times a spread of mantissas (ties of nearest included), over
   * the whole range and beyond it, against the oracle */
  static const double mant[] = {1.0, 1.0000001, 1.25, 1.4999999, 1.5, 1.5000001, 1.75, 1.9999999};
  int bad = 0;
  for (int e = -140; e <= 130; e++)
    for (size_t j = 0; j < sizeof mant / sizeof *mant; j++)
      for (int m = 0; m < 3; m++)
        for (int sat = 0; sat < 2; sat++) {
          double x = ldexp(mant[j], e);
          unsigned got = cvt_e8m0_encode(x, sat, modes[m]), want = e8m0_oracle(x, sat, modes[m]);
          if (got != want && bad++ < 5)
            fprintf(stderr, "  e8m0(%g, sat %d, mode %d) = %u, oracle %u\n", x, sat, m, got, want);
        }
  CHECK(bad == 0);
  /* the ONNX test values (saturate, up) and the special cases of the spec's table */
  CHECK(cvt_e8m0_encode(0.0, true, CVT_ROUND_UP) == 0);
  CHECK(cvt_e8m0_encode(0.124, true, CVT_ROUND_UP) == 124);
  CHECK(cvt_e8m0_encode(1.1, true, CVT_ROUND_UP) == 128);
  CHECK(cvt_e8m0_encode(8.0, true, CVT_ROUND_UP) == 130);
  CHECK(cvt_e8m0_encode(INFINITY, true, CVT_ROUND_UP) == 0xfe);
  CHECK(cvt_e8m0_encode(INFINITY, false, CVT_ROUND_NEAREST) == 0xff);
  CHECK(cvt_e8m0_encode(0.0, false, CVT_ROUND_NEAREST) == 0xff);
  CHECK(cvt_e8m0_encode(NAN, true, CVT_ROUND_UP) == 0xff);
  CHECK(cvt_e8m0_encode(ldexp(1.5, 127), true, CVT_ROUND_UP) == 0xfe);
  CHECK(cvt_e8m0_encode(ldexp(1.5, 127), false, CVT_ROUND_UP) == 0xff);
  CHECK(cvt_e8m0_encode(ldexp(1.5, 127), false, CVT_ROUND_DOWN) == 0xfe);
  CHECK(cvt_e8m0_encode(ldexp(1, -130), true, CVT_ROUND_DOWN) == 0);
  CHECK(cvt_e8m0_encode(ldexp(1, -130), false, CVT_ROUND_DOWN) == 0xff);
  CHECK(cvt_e8m0_encode(-4.0, true, CVT_ROUND_UP) == 129); /* magnitude */
  CHECK(cvt_minifloat_encode(SMELT_F8E8M0, 3.0, true) == 129); /* default: up */
}

/* Every code of the other float8 kinds: decode → encode (without saturate,
 * which would send E5M2's infinities to the largest finite) is the identity;
 * NaN codes stay NaN. */
static void test_float8_codes(void) {
  const smelt_dtype f8[] = {SMELT_F8E4M3FN, SMELT_F8E4M3FNUZ, SMELT_F8E5M2, SMELT_F8E5M2FNUZ};
  for (int k = 0; k < 4; k++)
    for (unsigned code = 0; code < 256; code++) {
      double v = cvt_minifloat_decode(f8[k], code);
      unsigned back = cvt_minifloat_encode(f8[k], v, false);
      if (isnan(v)) CHECK(isnan(cvt_minifloat_decode(f8[k], back)));
      else CHECK(back == code);
    }
}

static void test_packed_ints(void) {
  cvt_opts o = cvt_opts_default();
  for (int k = 0; k < 4; k++) {
    smelt_dtype t = packed_ints[k];
    int bits = dtype_bits(t);
    unsigned ncodes = 1u << bits;
    /* every code, at every position, through i64 and f64 and back */
    uint8_t src[9] = {0}, dst[9] = {0}; /* 16 codes from element 1 */
    for (unsigned c = 0; c < ncodes; c++) sb_set(src, bits, (int64_t)c + 1, c);
    int64_t iv[16];
    double fv[16];
    cvt_load_i64_at(t, src, 1, 1, ncodes, iv);
    cvt_load_f64_at(t, src, 1, 1, ncodes, fv);
    for (unsigned c = 0; c < ncodes; c++) {
      CHECK(iv[c] == sb_int_value(t, c) && fv[c] == (double)iv[c]);
    }
    cvt_store_i64_at(t, iv, false, ncodes, dst, 1, &o);
    CHECK(!memcmp(src, dst, sizeof src));
    memset(dst, 0, sizeof dst);
    cvt_store_f64_at(t, fv, ncodes, dst, 1, &o);
    CHECK(!memcmp(src, dst, sizeof src));
    /* integers wrap modulo 2^bits */
    for (int64_t v = -40; v <= 40; v++) {
      uint8_t b = 0;
      cvt_store_i64_at(t, &v, false, 1, &b, 0, &o);
      CHECK(sb_get(&b, bits, 0) == (unsigned)(v & (ncodes - 1)));
    }
    /* floats truncate, then wrap; NaN and inf give 0 */
    double fx[] = {-9.0, 8.9, -0.5, 1e6, 1e6 + 3, 3e9 + 1, 2.5, -2.5, NAN, INFINITY, -INFINITY};
    int64_t trunc_of[] = {-9, 8, 0, 1000000, 1000003, 3000000001LL, 2, -2, 0, 0, 0};
    for (size_t i = 0; i < sizeof fx / sizeof *fx; i++) {
      uint8_t b = 0;
      cvt_store_f64_at(t, &fx[i], 1, &b, 0, &o);
      CHECK(sb_get(&b, bits, 0) == (unsigned)(trunc_of[i] & (ncodes - 1)));
    }
    /* uint64 sources wrap by their bit pattern */
    int64_t big = (int64_t)0xfffffffffffffff1ULL;
    uint8_t b = 0;
    cvt_store_i64_at(t, &big, true, 1, &b, 0, &o);
    CHECK(sb_get(&b, bits, 0) == (0xf1u & (ncodes - 1)));
  }
  /* the ONNX reference data: -9..15 as float into int4 wraps */
  double x[25];
  for (int i = 0; i < 25; i++) x[i] = i - 9;
  uint8_t p[13] = {0};
  cvt_opts o2 = cvt_opts_default();
  cvt_store_f64_at(SMELT_I4, x, 25, p, 0, &o2);
  int64_t back[25];
  cvt_load_i64_at(SMELT_I4, p, 0, 1, 25, back);
  CHECK(back[0] == 7 && back[1] == -8 && back[16] == 7 && back[17] == -8 && back[24] == -1);
  CHECK(p[12] >> 4 == 0); /* the padding stays zero */
  /* strided and repeated loads */
  cvt_load_i64_at(SMELT_I4, p, 1, 2, 4, back);
  CHECK(back[0] == -8 && back[1] == -6 && back[2] == -4 && back[3] == -2);
  cvt_load_i64_at(SMELT_I4, p, 3, 0, 3, back);
  CHECK(back[0] == -6 && back[1] == -6 && back[2] == -6);
  /* float4 stores from integers and loads as floats */
  int64_t iv[3] = {1, -7, 3};
  uint8_t f4[2] = {0};
  cvt_store_i64_at(SMELT_F4E2M1, iv, false, 3, f4, 0, &o2);
  double fv[3];
  cvt_load_f64_at(SMELT_F4E2M1, f4, 0, 1, 3, fv);
  CHECK(fv[0] == 1 && fv[1] == -6 && fv[2] == 3);
  CHECK(cvt_supported(SMELT_I2) && cvt_supported(SMELT_F4E2M1) && cvt_supported(SMELT_F8E8M0));
  CHECK(cvt_is_intlike(SMELT_U2) && !cvt_is_intlike(SMELT_F4E2M1));
}

/* ---- TensorProto ---- */

static smelt_status decode(pb_buf *b, tensor *t) {
  uint8_t *data;
  size_t len;
  TRY(pb_buf_finish(b, &data, &len));
  smelt_status s = onnx_tensor_decode(data, len, t, NULL);
  free(data);
  return s;
}

static void head(pb_buf *b, int dtype, int64_t n) {
  pb_put_varint_field(b, 1, (uint64_t)n);
  pb_put_varint_field(b, 2, (uint64_t)dtype);
}

static void test_tensor_proto(void) {
  tensor t;
  pb_buf b = {0};
  /* int4 raw_data, odd count: 5 elements in 3 bytes */
  uint8_t raw[3] = {0x9f, 0x70, 0x08};
  head(&b, SMELT_I4, 5);
  pb_put_bytes_field(&b, 9, raw, 3);
  CHECK_OK(decode(&b, &t));
  CHECK(t.dtype == SMELT_I4 && t.nbytes == 3 && !memcmp(t.data, raw, 3));
  int64_t want[5] = {-1, -7, 0, 7, -8};
  CHECK(ew_expect_i64(&t, want, 5, "int4 raw"));
  /* and back: encode keeps the packed bytes */
  uint8_t *enc;
  size_t len;
  CHECK_OK(onnx_tensor_encode(&t, "w", &enc, &len));
  tensor u;
  CHECK_OK(onnx_tensor_decode(enc, len, &u, NULL));
  CHECK(u.dtype == SMELT_I4 && u.nbytes == 3 && !memcmp(u.data, raw, 3));
  free(enc);
  tensor_release(&u);
  tensor_release(&t);
  /* raw_data of the wrong length */
  head(&b, SMELT_I4, 5);
  pb_put_bytes_field(&b, 9, raw, 2);
  CHECK(decode(&b, &t) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "raw_data has 2 bytes, expected 3") != NULL);
  /* int32_data: one packed byte per entry (onnx.proto) */
  pb_buf p = {0};
  pb_put_varint(&p, 0x9f);
  pb_put_varint(&p, 0x70);
  pb_put_varint(&p, 0x08);
  head(&b, SMELT_I4, 5);
  pb_put_bytes_field(&b, 5, p.data, p.len);
  CHECK_OK(decode(&b, &t));
  CHECK(t.nbytes == 3 && ew_expect_i64(&t, want, 5, "int4 int32_data"));
  tensor_release(&t);
  /* five int32_data entries for five elements is the wrong count */
  pb_put_varint(&p, 1);
  pb_put_varint(&p, 2);
  head(&b, SMELT_U4, 5);
  pb_put_bytes_field(&b, 5, p.data, p.len);
  CHECK(decode(&b, &t) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "int32_data has 5 values, expected 3 (packed bytes)") != NULL);
  pb_buf_discard(&p);
  /* uint2 and int2: four per byte */
  uint8_t r2[2] = {0xe4, 0x02}; /* codes 0 1 2 3 | 2 */
  head(&b, SMELT_U2, 5);
  pb_put_bytes_field(&b, 9, r2, 2);
  CHECK_OK(decode(&b, &t));
  CHECK(ew_expect_i64(&t, (int64_t[]){0, 1, 2, 3, 2}, 5, "uint2"));
  tensor_release(&t);
  head(&b, SMELT_I2, 5);
  pb_put_bytes_field(&b, 9, r2, 2);
  CHECK_OK(decode(&b, &t));
  CHECK(ew_expect_i64(&t, (int64_t[]){0, 1, -2, -1, -2}, 5, "int2"));
  tensor_release(&t);
  /* float4e2m1 and float8e8m0 */
  uint8_t r4[2] = {0xf1, 0x0a}; /* 0.5, -6, -1 */
  head(&b, SMELT_F4E2M1, 3);
  pb_put_bytes_field(&b, 9, r4, 2);
  CHECK_OK(decode(&b, &t));
  CHECK(ew_expect(&t, SMELT_F4E2M1, 1, D(3), (double[]){0.5, -6, -1}, 0, "float4e2m1"));
  tensor_release(&t);
  uint8_t r8[3] = {127, 0, 0xff};
  head(&b, SMELT_F8E8M0, 3);
  pb_put_bytes_field(&b, 9, r8, 3);
  CHECK_OK(decode(&b, &t));
  CHECK(ew_expect(&t, SMELT_F8E8M0, 1, D(3), (double[]){1, ldexp(1, -127), NAN}, 0, "e8m0"));
  tensor_release(&t);
  /* an empty packed tensor needs no data */
  head(&b, SMELT_I2, 0);
  CHECK_OK(decode(&b, &t));
  CHECK(t.nbytes == 0 && t.data);
  tensor_release(&t);
}

/* ---- tensor_compare ---- */

static void test_compare(void) {
  tensor a, e;
  compare_result r;
  CHECK_OK(tensor_alloc(&a, SMELT_I4, 1, D(3)));
  CHECK_OK(tensor_alloc(&e, SMELT_I4, 1, D(3)));
  int64_t v[3] = {-8, 7, -1};
  cvt_opts o = cvt_opts_default();
  cvt_store_i64_at(SMELT_I4, v, false, 3, a.data, 0, &o);
  cvt_store_i64_at(SMELT_I4, v, false, 3, e.data, 0, &o);
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(r.ok && r.count == 3);
  ((uint8_t *)a.data)[1] |= 0x10; /* the padding bits do not count */
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(r.ok);
  sb_set(a.data, 4, 2, 0x7); /* -1 → 7 */
  CHECK_OK(tensor_compare(&a, &e, 1, 1, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.max_abs == 8 && r.worst_index == 2);
  tensor_release(&a);
  tensor_release(&e);
  /* float4e2m1: by value (-0 equals +0; 6 is not 4) */
  CHECK_OK(tensor_alloc(&a, SMELT_F4E2M1, 1, D(2)));
  CHECK_OK(tensor_alloc(&e, SMELT_F4E2M1, 1, D(2)));
  ((uint8_t *)a.data)[0] = 0x78; /* -0, 6 */
  ((uint8_t *)e.data)[0] = 0x70; /* +0, 6 */
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(r.ok);
  ((uint8_t *)e.data)[0] = 0x60; /* +0, 4 */
  CHECK_OK(tensor_compare(&a, &e, 0.01, 0, &r));
  CHECK(!r.ok && r.mismatches == 1 && r.worst_actual == 6 && r.worst_expected == 4);
  /* a wrong byte count is an error, not a pass */
  a.nbytes = 2;
  CHECK(tensor_compare(&a, &e, 0, 0, &r) == SMELT_ERR_INVALID_ARGUMENT && !r.ok);
  a.nbytes = 1;
  tensor_release(&a);
  tensor_release(&e);
  /* e8m0: decoded, NaN matches NaN */
  CHECK_OK(tensor_alloc(&a, SMELT_F8E8M0, 1, D(2)));
  CHECK_OK(tensor_alloc(&e, SMELT_F8E8M0, 1, D(2)));
  memcpy(a.data, (uint8_t[]){0xff, 130}, 2);
  memcpy(e.data, (uint8_t[]){0xff, 130}, 2);
  CHECK_OK(tensor_compare(&a, &e, 0, 0, &r));
  CHECK(r.ok);
  ((uint8_t *)a.data)[1] = 131;
  CHECK_OK(tensor_compare(&a, &e, 0.1, 0, &r));
  CHECK(!r.ok && r.worst_actual == 16 && r.worst_expected == 8);
  tensor_release(&a);
  tensor_release(&e);
}

/* ---- ops ---- */

static smelt_status cast_attrs(tensor *x, const ir_attr *a, int na, tensor *o) {
  tensor *in[] = {x};
  return ew_run("Cast", 25, a, na, in, 1, o);
}

static void test_cast_op(void) {
  /* f32 → int4 → f32 over more than one tile, odd count */
  int n = 515;
  tensor x, q, y;
  CHECK_OK(tensor_alloc(&x, SMELT_F32, 1, D(n)));
  for (int i = 0; i < n; i++) ((float *)x.data)[i] = (float)(i % 23) - 11.5f;
  ir_attr to_i4[] = {ew_attr_int("to", SMELT_I4)};
  CHECK_OK(cast_attrs(&x, to_i4, 1, &q));
  CHECK(q.dtype == SMELT_I4 && q.nbytes == 258 && q.dims[0] == n);
  ir_attr to_f32[] = {ew_attr_int("to", SMELT_F32)};
  CHECK_OK(cast_attrs(&q, to_f32, 1, &y));
  int bad = 0;
  for (int i = 0; i < n; i++) {
    double t = trunc((double)((float *)x.data)[i]);
    double w = fmod(t, 16);
    if (w < 0) w += 16;
    if (w >= 8) w -= 16;
    if (((float *)y.data)[i] != (float)w) bad++;
  }
  CHECK(bad == 0);
  tensor_release(&y);
  /* int4 → uint2 (integer wrap) and int4 → int4 (copy) */
  ir_attr to_u2[] = {ew_attr_int("to", SMELT_U2)};
  CHECK_OK(cast_attrs(&q, to_u2, 1, &y));
  CHECK(y.nbytes == 129);
  bad = 0;
  for (int i = 0; i < n; i++)
    if (tensor_get_i64(&y, i) != (tensor_get_i64(&q, i) & 3)) bad++;
  CHECK(bad == 0);
  tensor_release(&y);
  CHECK_OK(cast_attrs(&q, to_i4, 1, &y));
  CHECK(y.nbytes == q.nbytes && !memcmp(y.data, q.data, q.nbytes));
  tensor_release(&y);
  tensor_release(&q);
  tensor_release(&x);
  /* e8m0 round_mode */
  tensor e = ew_mk(SMELT_F32, 1, D(4), (double[]){3.0, 1.4, 0.75, 100.0});
  const char *modes[] = {"up", "down", "nearest"};
  double want[3][4] = {{4, 2, 1, 128}, {2, 1, 0.5, 64}, {4, 1, 1, 128}};
  for (int m = 0; m < 3; m++) {
    ir_attr a[] = {ew_attr_int("to", SMELT_F8E8M0), ew_attr_str("round_mode", modes[m])};
    CHECK_OK(cast_attrs(&e, a, 2, &y));
    CHECK(ew_expect(&y, SMELT_F8E8M0, 1, D(4), want[m], 0, modes[m]));
    tensor_release(&y);
  }
  ir_attr bad_mode[] = {ew_attr_int("to", SMELT_F8E8M0), ew_attr_str("round_mode", "odd")};
  CHECK(cast_attrs(&e, bad_mode, 2, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "round_mode") != NULL);
  tensor_release(&y);
  tensor_release(&e);
  /* float4e2m1 through CastLike */
  tensor f = ew_mk(SMELT_F16, 1, D(5), (double[]){0.25, 0.75, -5, 1e4, -0.0});
  tensor like;
  CHECK_OK(tensor_alloc(&like, SMELT_F4E2M1, 1, D(0)));
  tensor *in2[] = {&f, &like};
  CHECK_OK(ew_run("CastLike", 25, NULL, 0, in2, 2, &y));
  CHECK(ew_expect(&y, SMELT_F4E2M1, 1, D(5), (double[]){0, 1, -4, 6, 0}, 0, "castlike f4"));
  CHECK(signbit(tensor_get_f64(&y, 4)));
  tensor_release(&y);
  tensor_release(&like);
  tensor_release(&f);
}

static void test_shape_ops(void) {
  tensor x, y;
  CHECK_OK(tensor_alloc(&x, SMELT_I4, 2, D(3, 3)));
  for (int i = 0; i < 9; i++) tensor_set_f64(&x, i, i - 4);
  tensor shp = ew_mk(SMELT_I64, 1, D(2), (double[]){1, 9});
  tensor *in[] = {&x, &shp};
  CHECK_OK(ew_run("Reshape", 21, NULL, 0, in, 2, &y));
  CHECK(y.dtype == SMELT_I4 && y.rank == 2 && y.dims[1] == 9 && y.nbytes == 5);
  CHECK(ew_expect_i64(&y, (int64_t[]){-4, -3, -2, -1, 0, 1, 2, 3, 4}, 9, "reshape int4"));
  tensor_release(&y);
  CHECK_OK(ew_run("Identity", 21, NULL, 0, in, 1, &y));
  CHECK(y.nbytes == 5 && !memcmp(y.data, x.data, 5));
  tensor_release(&y);
  /* ops that move elements refuse packed types clearly */
  CHECK(ew_run("Transpose", 21, NULL, 0, in, 1, &y) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "int4") && strstr(smelt_last_error(), "packed sub-byte"));
  tensor_release(&y);
  /* BitCast between packed types of one width; not to another width */
  ir_attr to_u4[] = {ew_attr_int("to", SMELT_U4)};
  CHECK_OK(ew_run("BitCast", 26, to_u4, 1, in, 1, &y));
  CHECK(y.dtype == SMELT_U4 && y.nbytes == 5 && !memcmp(y.data, x.data, 5));
  CHECK(tensor_get_i64(&y, 0) == 12);
  tensor_release(&y);
  ir_attr to_i8[] = {ew_attr_int("to", SMELT_I8)};
  CHECK(ew_run("BitCast", 26, to_i8, 1, in, 1, &y) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "int4 (4 bits), target int8 (8 bits)") != NULL);
  tensor_release(&y);
  tensor_release(&shp);
  tensor_release(&x);
}

/* QuantizeLinear/DequantizeLinear rows that start inside a byte (inner 3). */
static void test_quantize(void) {
  tensor x = ew_mk(SMELT_F32, 2, D(3, 3), (double[]){0, 2.5, -20, 3, -3, 7, 9, -9, 0.6});
  tensor s = ew_mk(SMELT_F32, 1, D(3), (double[]){1, 2, 4});
  tensor zp = ew_mk(SMELT_I4, 1, D(3), (double[]){1, -1, 0});
  ir_attr axis0[] = {ew_attr_int("axis", 0)};
  tensor *in[] = {&x, &s, &zp};
  tensor q, y;
  CHECK_OK(ew_run("QuantizeLinear", 25, axis0, 1, in, 3, &q));
  CHECK(q.dtype == SMELT_I4 && q.nbytes == 5);
  CHECK(ew_expect_i64(&q, (int64_t[]){1, 3, -8, 1, -3, 3, 2, -2, 0}, 9, "quantize int4"));
  tensor *din[] = {&q, &s, &zp};
  CHECK_OK(ew_run("DequantizeLinear", 25, axis0, 1, din, 3, &y));
  CHECK(ew_expect(&y, SMELT_F32, 2, D(3, 3), (double[]){0, 2, -9, 4, -4, 8, 8, -8, 0}, 0,
                  "dequantize int4"));
  tensor_release(&y);
  tensor_release(&q);
  tensor_release(&zp);
  /* uint2, per tensor */
  tensor x2 = ew_mk(SMELT_F32, 1, D(7), (double[]){0, 1, 2, 3, 4, -1, 5});
  tensor s1 = ew_mk(SMELT_F32, 0, NULL, (double[]){1});
  tensor z2 = ew_mk(SMELT_U2, 0, NULL, (double[]){1});
  tensor *in2[] = {&x2, &s1, &z2};
  CHECK_OK(ew_run("QuantizeLinear", 25, NULL, 0, in2, 3, &q));
  CHECK(q.dtype == SMELT_U2 && q.nbytes == 2);
  CHECK(ew_expect_i64(&q, (int64_t[]){1, 2, 3, 3, 3, 0, 3}, 7, "quantize uint2"));
  tensor_release(&q);
  /* float4e2m1: round to nearest even, saturate */
  tensor z4;
  CHECK_OK(tensor_alloc(&z4, SMELT_F4E2M1, 0, NULL));
  tensor *in4[] = {&x2, &s1, &z4};
  CHECK_OK(ew_run("QuantizeLinear", 25, NULL, 0, in4, 3, &q));
  CHECK(ew_expect(&q, SMELT_F4E2M1, 1, D(7), (double[]){0, 1, 2, 3, 4, -1, 4}, 0, "quantize f4"));
  tensor_release(&q);
  tensor_release(&z4);
  tensor_release(&z2);
  tensor_release(&s1);
  tensor_release(&x2);
  tensor_release(&s);
  tensor_release(&x);
}

int main(void) {
  test_dtypes();
  test_packing();
  test_f4e2m1();
  test_e8m0();
  test_float8_codes();
  test_packed_ints();
  test_tensor_proto();
  test_compare();
  test_cast_op();
  test_shape_ops();
  test_quantize();
  return test_report("subbyte");
}
