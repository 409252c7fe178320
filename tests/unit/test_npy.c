/* .npy reading and writing: round trips, numpy's own files, malformed input. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/err.h"
#include "util/file.h"
#include "ir/npy.h"

/* tests/data/npy/<name>, found from this source file's path. */
static void fixture_path(char *out, size_t n, const char *name) {
  const char *f = __FILE__, *unit = strstr(f, "unit/test_npy.c");
  snprintf(out, n, "%.*sdata/npy/%s", unit ? (int)(unit - f) : 0, f, name);
}

static uint8_t *read_fixture(const char *name, size_t *len) {
  char p[1024];
  fixture_path(p, sizeof p, name);
  uint8_t *buf = NULL;
  CHECK_OK(file_read_all(p, &buf, len, 1 << 20));
  return buf;
}

static smelt_status decode_fixture(const char *name, tensor *t) {
  size_t len = 0;
  uint8_t *buf = read_fixture(name, &len);
  smelt_status s = buf ? npy_decode(buf, len, t) : SMELT_ERR_IO;
  free(buf);
  return s;
}

/* ---- round trips ---- */

static const smelt_dtype all_npy_types[] = {SMELT_F16, SMELT_F32, SMELT_F64, SMELT_I8,  SMELT_U8,
                                            SMELT_I16, SMELT_U16, SMELT_I32, SMELT_U32, SMELT_I64,
                                            SMELT_U64, SMELT_BOOL, SMELT_C64, SMELT_C128};

static void roundtrip_one(smelt_dtype dt, int rank, const int64_t *dims) {
  tensor t, u;
  CHECK_OK(tensor_alloc(&t, dt, rank, dims));
  for (size_t i = 0; i < t.nbytes; i++)
    ((uint8_t *)t.data)[i] = dt == SMELT_BOOL ? (uint8_t)(i % 3 == 0) : (uint8_t)(i * 37 + 11);
  uint8_t *buf = NULL;
  size_t len = 0;
  CHECK_OK(npy_encode(&t, &buf, &len));
  CHECK(buf && len >= 64 + t.nbytes);
  if (buf) {
    CHECK(buf[6] == 1 && buf[7] == 0);
    size_t off = 10 + (size_t)(buf[8] | buf[9] << 8);
    CHECK(off % 64 == 0 && off + t.nbytes == len && buf[off - 1] == '\n');
    CHECK_OK(npy_decode(buf, len, &u));
    CHECK(u.dtype == dt && u.rank == rank && u.nbytes == t.nbytes && u.data && u.owns_data);
    CHECK(rank == 0 || !memcmp(u.dims, dims, sizeof(int64_t) * (size_t)rank));
    CHECK(t.nbytes == 0 || (u.data && !memcmp(u.data, t.data, t.nbytes)));
    tensor_release(&u);
  }
  free(buf);
  tensor_release(&t);
}

static void test_roundtrips(void) {
  static const int64_t dims[4] = {2, 3, 1, 5};
  for (size_t k = 0; k < sizeof all_npy_types / sizeof *all_npy_types; k++) {
    for (int rank = 0; rank <= 4; rank++) {
      roundtrip_one(all_npy_types[k], rank, dims);
      if (rank == 0) continue;
      int64_t empty[4] = {2, 3, 1, 5};
      empty[rank - 1] = 0; /* an empty tensor of each rank */
      roundtrip_one(all_npy_types[k], rank, empty);
    }
  }
  int64_t big[SMELT_MAX_RANK];
  for (int i = 0; i < SMELT_MAX_RANK; i++) big[i] = i % 3 ? 1 : 2;
  roundtrip_one(SMELT_F32, SMELT_MAX_RANK, big);
}

static void test_encode_refuses(void) {
  tensor t;
  uint8_t *buf = (uint8_t *)"x";
  size_t len = 7;
  int64_t d = 3;
  CHECK_OK(tensor_alloc(&t, SMELT_BF16, 1, &d));
  CHECK(npy_encode(&t, &buf, &len) == SMELT_ERR_UNSUPPORTED && !buf && len == 0);
  CHECK(strstr(err_message(), "bfloat16") != NULL);
  tensor_release(&t);
  CHECK_OK(tensor_alloc(&t, SMELT_F32, 1, &d));
  t.nbytes = 8; /* inconsistent with the shape */
  CHECK(npy_encode(&t, &buf, &len) == SMELT_ERR_INVALID_ARGUMENT);
  t.nbytes = 12;
  tensor_release(&t);
}

/* ---- numpy's own files ---- */

/* Our encoder writes exactly what np.save wrote for the same array. */
static void check_same_bytes_as_numpy(const char *name) {
  size_t len = 0, len2 = 0;
  uint8_t *ref = read_fixture(name, &len), *mine = NULL;
  tensor t;
  CHECK_OK(npy_decode(ref, len, &t));
  CHECK_OK(npy_encode(&t, &mine, &len2));
  CHECK(mine && len2 == len && !memcmp(mine, ref, len));
  if (!(mine && len2 == len && !memcmp(mine, ref, len))) fprintf(stderr, "  differs: %s\n", name);
  tensor_release(&t);
  free(mine);
  free(ref);
}

static void test_numpy_files(void) {
  const char *same[] = {"f32_2x3.npy", "i64_scalar.npy", "u8_empty_0x3.npy", "bool_5.npy",
                        "f16_3.npy",   "u32_1x1x1x2.npy"};
  for (size_t i = 0; i < sizeof same / sizeof *same; i++) check_same_bytes_as_numpy(same[i]);

  tensor t;
  CHECK_OK(decode_fixture("f32_2x3.npy", &t));
  CHECK(t.dtype == SMELT_F32 && t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 3);
  for (int i = 0; i < 6 && t.data; i++) CHECK(((float *)t.data)[i] == i * 0.5f - 1);
  tensor_release(&t);

  CHECK_OK(decode_fixture("f64_be_4.npy", &t)); /* big-endian, converted */
  static const double f64v[] = {1.5, -2.25, 1e300, -0.0};
  CHECK(t.dtype == SMELT_F64 && t.rank == 1 && t.dims[0] == 4);
  for (int i = 0; i < 4 && t.data; i++) CHECK(((double *)t.data)[i] == f64v[i]);
  CHECK(t.data && ((uint8_t *)t.data)[31] == 0x80); /* -0.0 keeps its sign */
  tensor_release(&t);

  CHECK_OK(decode_fixture("i64_scalar.npy", &t));
  CHECK(t.dtype == SMELT_I64 && t.rank == 0 && t.nbytes == 8);
  CHECK(t.data && *(int64_t *)t.data == -1234567890123);
  tensor_release(&t);

  CHECK_OK(decode_fixture("u8_empty_0x3.npy", &t));
  CHECK(t.dtype == SMELT_U8 && t.rank == 2 && t.dims[0] == 0 && t.dims[1] == 3);
  CHECK(t.nbytes == 0 && t.data != NULL);
  tensor_release(&t);

  CHECK_OK(decode_fixture("bool_5.npy", &t));
  static const uint8_t bv[] = {1, 0, 1, 1, 0};
  CHECK(t.dtype == SMELT_BOOL && t.nbytes == 5 && t.data && !memcmp(t.data, bv, 5));
  tensor_release(&t);

  CHECK_OK(decode_fixture("f16_3.npy", &t));
  CHECK(t.dtype == SMELT_F16 && t.nbytes == 6);
  CHECK(t.data && tensor_get_f64(&t, 0) == 1.0 && tensor_get_f64(&t, 1) == -0.5 &&
        tensor_get_f64(&t, 2) == 65504.0);
  tensor_release(&t);

  CHECK_OK(decode_fixture("i16_be_2x2_v2.npy", &t)); /* version 2.0, big-endian */
  static const int16_t iv[] = {1, -2, 300, -32768};
  CHECK(t.dtype == SMELT_I16 && t.rank == 2 && t.dims[0] == 2 && t.dims[1] == 2);
  CHECK(t.data && !memcmp(t.data, iv, sizeof iv));
  tensor_release(&t);

  CHECK_OK(decode_fixture("i32_v3.npy", &t)); /* version 3.0 */
  static const int32_t i3[] = {7, -8, 9};
  CHECK(t.dtype == SMELT_I32 && t.rank == 1 && t.data && !memcmp(t.data, i3, sizeof i3));
  tensor_release(&t);

  CHECK_OK(decode_fixture("u32_1x1x1x2.npy", &t));
  CHECK(t.dtype == SMELT_U32 && t.rank == 4 && t.dims[3] == 2);
  CHECK(t.data && ((uint32_t *)t.data)[1] == 4000000000u);
  tensor_release(&t);

  CHECK(decode_fixture("fortran_2x3.npy", &t) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(err_message(), "fortran_order") != NULL);
  CHECK(t.data == NULL);
}

/* ---- hand-made headers ---- */

/* A .npy file with the given version, header text (taken as is) and data. */
static size_t make_npy(uint8_t *out, int major, const char *header, const void *data, size_t dn) {
  size_t hn = strlen(header), o = 0;
  memcpy(out, NPY_MAGIC, 6);
  out[6] = (uint8_t)major;
  out[7] = 0;
  o = 8;
  out[o++] = (uint8_t)hn;
  out[o++] = (uint8_t)(hn >> 8);
  if (major > 1) {
    out[o++] = 0;
    out[o++] = 0;
  }
  memcpy(out + o, header, hn);
  memcpy(out + o + hn, data, dn);
  return o + hn + dn;
}

static const float six[6] = {0, 1, 2, 3, 4, 5};

/* Decodes a file made from header over the six floats (first dn bytes). */
static smelt_status try_header(const char *header, size_t dn, tensor *t) {
  uint8_t buf[1024];
  size_t n = make_npy(buf, 1, header, six, dn);
  return npy_decode(buf, n, t);
}

static void expect_ok(const char *header, size_t dn, int rank, int64_t d0) {
  tensor t;
  smelt_status s = try_header(header, dn, &t);
  CHECK(s == SMELT_OK && t.rank == rank && (rank == 0 || t.dims[0] == d0));
  if (s) fprintf(stderr, "  header %s: %s\n", header, err_message());
  tensor_release(&t);
}

static void expect_err(const char *header, size_t dn, smelt_status code, const char *needle) {
  tensor t;
  smelt_status s = try_header(header, dn, &t);
  CHECK(s == code && strstr(err_message(), needle) != NULL && t.data == NULL);
  if (s != code || !strstr(err_message(), needle))
    fprintf(stderr, "  header %s: status %d, message '%s', wanted '%s'\n", header, s,
            err_message(), needle);
  tensor_release(&t);
}

static void test_header_variants(void) {
  expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 2, 2);
  expect_ok("{'shape':(6,),'fortran_order':False,'descr':'<f4'}", 24, 1, 6);
  expect_ok("  {\t\"descr\" : \"<f4\" ,\n 'fortran_order' : False , 'shape' : ( 6 , ) , }  \n",
            24, 1, 6);
  expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4, 0, 0);
  expect_ok("{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }", 24, 2, 3);
  expect_ok("{'descr': 'f4', 'fortran_order': False, 'shape': (1,2,3)}", 24, 3, 1);
  expect_ok("{'descr': '=f4', 'fortran_order': False, 'shape': (0,), }", 0, 1, 0);
}

static void test_header_errors(void) {
  const smelt_status BAD = SMELT_ERR_INVALID_ARGUMENT, UNS = SMELT_ERR_UNSUPPORTED;
  expect_err("{'descr': '<f4', 'fortran_order': False}", 24, BAD, "no 'shape' key");
  expect_err("{'descr': '<f4', 'shape': (6,)}", 24, BAD, "no 'fortran_order' key");
  expect_err("{'fortran_order': False, 'shape': (6,)}", 24, BAD, "no 'descr' key");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 24, BAD,
             "unknown key 'x' at byte 66");
  expect_err("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24, BAD,
             "key 'descr' repeated");
  expect_err("{'descr': '<U5', 'fortran_order': False, 'shape': (6,)}", 24, UNS, "'<U5'");
  expect_err("{'descr': '<V2', 'fortran_order': False, 'shape': (6,)}", 24, UNS, "'<V2'");
  expect_err("{'descr': '<f3', 'fortran_order': False, 'shape': (6,)}", 24, UNS, "'<f3'");
  expect_err("{'descr': '<f', 'fortran_order': False, 'shape': (6,)}", 24, UNS, "'<f'");
  expect_err("{'descr': '', 'fortran_order': False, 'shape': (6,)}", 24, UNS, "''");
  expect_err("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}", 24, UNS,
             "structured");
  expect_err("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3)}", 24, UNS, "fortran_order");
  expect_err("{'descr': '<f4', 'fortran_order': Truex, 'shape': (6,)}", 24, BAD, "True or False");
  expect_err("{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", 24, BAD, "True or False");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", 24, BAD, "negative");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': [6]}", 24, BAD, "expected '('");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (6 3)}", 24, BAD,
             "expected ',' or ')'");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (6,,)}", 24, BAD,
             "expected a dimension");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 24, BAD,
             "too large");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 24,
             BAD, "too many elements");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1)}", 4,
             BAD, "more than 12 dimensions");
  expect_err("{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", 24, UNS, "'<f4, '");
  expect_err("{'descr': '<f4", 0, BAD, "unterminated 'descr' value");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", 24, BAD,
             "expected ',' or '}'");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", 24, BAD,
             "unexpected 'x' after the header dict");
  expect_err("{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", 24, BAD,
             "expected ',' or '}' after a value");
  expect_err("{'descr' '<f4', 'fortran_order': False, 'shape': (6,)}", 24, BAD,
             "expected ':' after a key");
  expect_err("{descr: '<f4', 'fortran_order': False, 'shape': (6,)}", 24, BAD, "quoted key");
  expect_err("['descr', '<f4']", 24, BAD, "expected '{'");
  expect_err("", 24, BAD, "found end of header");
  expect_err("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (6,)}", 24, BAD, "escape");
  /* data size must match the shape exactly */
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 20, BAD,
             "expected 24 bytes of data, found 20");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}", 24, BAD,
             "expected 20 bytes of data, found 24");
  expect_err("{'descr': '<f4', 'fortran_order': False, 'shape': (0,)}", 4, BAD,
             "expected 0 bytes of data, found 4");
}

static void test_preamble_errors(void) {
  uint8_t buf[256];
  size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", six, 24);
  tensor t;
  CHECK_OK(npy_decode(buf, n, &t));
  tensor_release(&t);
  /* every truncation of a valid file is an error, never a crash */
  for (size_t k = 0; k < n; k++) {
    CHECK(npy_decode(buf, k, &t) != SMELT_OK && t.data == NULL);
    uint8_t *copy = malloc(k ? k : 1); /* exact size, so ASan sees any overread */
    memcpy(copy, buf, k);
    CHECK(npy_decode(copy, k, &t) != SMELT_OK);
    free(copy);
  }
  CHECK(npy_decode(NULL, 0, &t) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(err_message(), "magic") != NULL);
  buf[0] = 0x92;
  CHECK(npy_decode(buf, n, &t) == SMELT_ERR_INVALID_ARGUMENT && strstr(err_message(), "magic"));
  buf[0] = 0x93;
  buf[6] = 4;
  CHECK(npy_decode(buf, n, &t) == SMELT_ERR_UNSUPPORTED && strstr(err_message(), "version 4.0"));
  buf[6] = 1;
  buf[7] = 1;
  CHECK(npy_decode(buf, n, &t) == SMELT_ERR_UNSUPPORTED && strstr(err_message(), "version 1.1"));
  buf[7] = 0;
  buf[9] = 0x7f; /* header length past the end */
  CHECK(npy_decode(buf, n, &t) == SMELT_ERR_INVALID_ARGUMENT && strstr(err_message(), "byte 8"));
  /* a v2 header read with a 32-bit length */
  n = make_npy(buf, 2, "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}", six, 24);
  CHECK_OK(npy_decode(buf, n, &t));
  CHECK(t.dtype == SMELT_I32 && t.dims[0] == 6);
  tensor_release(&t);
  buf[11] = 1; /* length 2^24 + ... */
  CHECK(npy_decode(buf, n, &t) == SMELT_ERR_INVALID_ARGUMENT && strstr(err_message(), "byte 8"));
}

static void test_bool_and_complex(void) {
  uint8_t buf[256];
  const uint8_t raw[4] = {0, 1, 2, 255};
  size_t n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,)}", raw, 4);
  tensor t;
  CHECK_OK(npy_decode(buf, n, &t));
  static const uint8_t norm[4] = {0, 1, 1, 1};
  CHECK(t.data && !memcmp(t.data, norm, 4));
  tensor_release(&t);
  /* big-endian complex64: each half swapped on its own */
  const uint8_t be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}; /* 1.0, -2.0 */
  n = make_npy(buf, 1, "{'descr': '>c8', 'fortran_order': False, 'shape': ()}", be, 8);
  CHECK_OK(npy_decode(buf, n, &t));
  CHECK(t.dtype == SMELT_C64 && t.data && ((float *)t.data)[0] == 1.0f &&
        ((float *)t.data)[1] == -2.0f);
  tensor_release(&t);
}

int main(void) {
  test_roundtrips();
  test_encode_refuses();
  test_numpy_files();
  test_header_variants();
  test_header_errors();
  test_preamble_errors();
  test_bool_and_complex();
  return test_report("npy");
}
