/* TensorProto decode/encode: every encoding of the data, the checks on it, and
 * the .pb test-data files of the conformance suite and the model zoo. */
#include <dirent.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "onnx_test_util.h"
#include "util/err.h"

static smelt_status decode_buf(pb_buf *b, tensor *t, char **name) {
  uint8_t *data;
  size_t len;
  TRY(pb_buf_finish(b, &data, &len));
  smelt_status s = onnx_tensor_decode(data, len, t, name);
  free(data); /* the decoded tensor must not point into the buffer */
  return s;
}

/* Round trip of every fixed-width dtype (packed ones too) through encode → decode. */
static void test_roundtrip_dtypes(void) {
  for (int dt = 1; dt < SMELT_DTYPE_COUNT; dt++) {
    if (!dtype_bits((smelt_dtype)dt)) continue;
    int64_t dims[3] = {2, 3, 5};
    tensor t;
    CHECK_OK(tensor_alloc(&t, (smelt_dtype)dt, 3, dims));
    for (size_t i = 0; i < t.nbytes; i++) ((uint8_t *)t.data)[i] = (uint8_t)(i * 7 + dt);
    uint8_t *buf;
    size_t len;
    CHECK_OK(onnx_tensor_encode(&t, "x", &buf, &len));
    tensor u;
    char *name;
    CHECK_OK(onnx_tensor_decode(buf, len, &u, &name));
    CHECK(u.dtype == t.dtype && u.rank == 3 && u.dims[2] == 5 && u.nbytes == t.nbytes);
    CHECK(u.owns_data && !memcmp(u.data, t.data, t.nbytes));
    CHECK(name && !strcmp(name, "x"));
    free(name);
    free(buf);
    tensor_release(&u);
    tensor_release(&t);
  }
  /* scalar and empty tensors, and no name */
  tensor s;
  CHECK_OK(tensor_alloc(&s, SMELT_I64, 0, NULL));
  *(int64_t *)s.data = -42;
  uint8_t *buf;
  size_t len;
  CHECK_OK(onnx_tensor_encode(&s, NULL, &buf, &len));
  tensor u;
  char *name;
  CHECK_OK(onnx_tensor_decode(buf, len, &u, &name));
  CHECK(u.rank == 0 && u.dtype == SMELT_I64 && *(int64_t *)u.data == -42 && !strcmp(name, ""));
  free(name);
  free(buf);
  tensor_release(&u);
  tensor_release(&s);
  int64_t ed[2] = {0, 4};
  CHECK_OK(tensor_alloc(&s, SMELT_F32, 2, ed));
  CHECK_OK(onnx_tensor_encode(&s, "e", &buf, &len));
  CHECK_OK(onnx_tensor_decode(buf, len, &u, NULL));
  CHECK(u.rank == 2 && u.dims[0] == 0 && u.nbytes == 0 && u.data);
  free(buf);
  tensor_release(&u);
  tensor_release(&s);
  /* things that cannot be encoded */
  tensor bad = {0};
  bad.dtype = SMELT_STRING;
  CHECK(onnx_tensor_encode(&bad, NULL, &buf, &len) == SMELT_ERR_UNSUPPORTED);
}

/* Builds a TensorProto with dims and data_type, then the caller's data. */
static void t_head(pb_buf *b, int dtype, int rank, const int64_t *dims) {
  for (int i = 0; i < rank; i++) pb_put_varint_field(b, 1, (uint64_t)dims[i]);
  pb_put_varint_field(b, 2, (uint64_t)dtype);
}

static void test_typed_fields(void) {
  tensor t;
  int64_t d3[1] = {3}, d2[1] = {2};
  /* float_data, packed */
  pb_buf b = {0};
  float fv[3] = {1.5f, -2.0f, 1e30f};
  t_head(&b, SMELT_F32, 1, d3);
  pb_put_bytes_field(&b, 4, fv, sizeof fv);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(t.dtype == SMELT_F32 && !memcmp(t.data, fv, sizeof fv));
  tensor_release(&t);
  /* float_data, unpacked (one fixed32 field per value) */
  t_head(&b, SMELT_F32, 1, d2);
  for (int i = 0; i < 2; i++) {
    pb_put_tag(&b, 4, PB_I32);
    pb_put_raw(&b, &fv[i], 4);
  }
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(((float *)t.data)[1] == -2.0f);
  tensor_release(&t);
  /* int32_data carries int8, uint16, bool, float16 and bfloat16 values */
  struct { int dt; int64_t in[3]; uint64_t want[3]; } cases[] = {
      {SMELT_I8, {-1, 127, -128}, {0xff, 0x7f, 0x80}},
      {SMELT_U16, {65535, 1, 0}, {0xffff, 1, 0}},
      {SMELT_BOOL, {1, 0, 1}, {1, 0, 1}},
      {SMELT_F16, {0x3c00, 0xc000, 0x7c00}, {0x3c00, 0xc000, 0x7c00}},
      {SMELT_BF16, {0x3f80, 0, 0xff80}, {0x3f80, 0, 0xff80}},
      {SMELT_I32, {-5, 2147483647, -2147483648LL}, {0xfffffffb, 0x7fffffff, 0x80000000}},
      {SMELT_F8E4M3FN, {0x38, 0x7e, 0}, {0x38, 0x7e, 0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    pb_buf p = {0};
    t_head(&b, cases[c].dt, 1, d3);
    for (int i = 0; i < 3; i++) pb_put_varint(&p, (uint64_t)cases[c].in[i]);
    pb_put_bytes_field(&b, 5, p.data, p.len);
    pb_buf_discard(&p);
    CHECK_OK(decode_buf(&b, &t, NULL));
    for (int i = 0; i < 3; i++) {
      uint64_t got = 0;
      memcpy(&got, (uint8_t *)t.data + i * dtype_size(t.dtype), dtype_size(t.dtype));
      CHECK(got == cases[c].want[i]);
    }
    tensor_release(&t);
  }
  /* int64_data, double_data, uint64_data (which also holds uint32) */
  t_head(&b, SMELT_I64, 1, d2);
  pb_put_varint_field(&b, 7, (uint64_t)-7);
  pb_put_varint_field(&b, 7, 1ull << 40);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(((int64_t *)t.data)[0] == -7 && ((int64_t *)t.data)[1] == 1ll << 40);
  tensor_release(&t);
  double dv[2] = {0.1, -1e300};
  t_head(&b, SMELT_F64, 1, d2);
  pb_put_bytes_field(&b, 10, dv, sizeof dv);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(!memcmp(t.data, dv, sizeof dv));
  tensor_release(&t);
  t_head(&b, SMELT_U32, 1, d2);
  pb_put_varint_field(&b, 11, 4000000000u);
  pb_put_varint_field(&b, 11, 3);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(((uint32_t *)t.data)[0] == 4000000000u && ((uint32_t *)t.data)[1] == 3);
  tensor_release(&t);
  /* complex64: two float_data entries per element */
  float cv[4] = {1, 2, 3, 4};
  t_head(&b, SMELT_C64, 1, d2);
  pb_put_bytes_field(&b, 4, cv, sizeof cv);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(t.nbytes == 16 && !memcmp(t.data, cv, 16));
  tensor_release(&t);
}

static void expect_error(pb_buf *b, smelt_status code, const char *text) {
  tensor t;
  smelt_status s = decode_buf(b, &t, NULL);
  CHECK(s == code);
  if (s == code && !strstr(smelt_last_error(), text))
    fprintf(stderr, "  message '%s' lacks '%s'\n", smelt_last_error(), text);
  CHECK(s != code || strstr(smelt_last_error(), text));
  if (!s) tensor_release(&t);
}

static void test_errors(void) {
  pb_buf b = {0};
  int64_t d3[1] = {3}, d22[2] = {2, 2};
  float fv[4] = {0};
  /* count mismatches */
  t_head(&b, SMELT_F32, 1, d3);
  pb_put_bytes_field(&b, 9, fv, 8);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "raw_data has 8 bytes, expected 12");
  t_head(&b, SMELT_F32, 2, d22);
  pb_put_bytes_field(&b, 4, fv, 12);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "float_data has 3 values, expected 4");
  t_head(&b, SMELT_F32, 1, d3);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "3 elements but no data");
  /* data in the wrong field for the type, or in two places */
  t_head(&b, SMELT_I64, 1, d3);
  pb_put_bytes_field(&b, 4, fv, 12);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "int64 tensor has values in float_data");
  t_head(&b, SMELT_F32, 1, d3);
  pb_put_bytes_field(&b, 4, fv, 12);
  pb_put_bytes_field(&b, 9, fv, 12);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "both raw_data and float_data");
  /* strings, sub-byte and unknown types */
  t_head(&b, SMELT_STRING, 1, d3);
  pb_put_str_field(&b, 6, "a");
  expect_error(&b, SMELT_ERR_UNSUPPORTED, "string tensors are not supported");
  t_head(&b, SMELT_F32, 0, NULL);
  pb_put_str_field(&b, 6, "a");
  expect_error(&b, SMELT_ERR_UNSUPPORTED, "string tensors are not supported");
  t_head(&b, 27, 1, d3);
  expect_error(&b, SMELT_ERR_UNSUPPORTED, "data_type 27");
  t_head(&b, 99, 1, d3);
  expect_error(&b, SMELT_ERR_UNSUPPORTED, "data_type 99");
  t_head(&b, 0, 1, d3);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "no data_type");
  /* shapes */
  int64_t neg[1] = {-2};
  t_head(&b, SMELT_F32, 1, neg);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "negative");
  int64_t many[13] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  t_head(&b, SMELT_F32, 13, many);
  expect_error(&b, SMELT_ERR_UNSUPPORTED, "more than 12 dims");
  int64_t huge[3] = {1ll << 40, 1ll << 40, 1ll << 40};
  t_head(&b, SMELT_F32, 3, huge);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "too many elements");
  /* a huge shape with little data must not allocate: it is a count mismatch */
  int64_t big[2] = {1ll << 20, 1ll << 20};
  t_head(&b, SMELT_F32, 2, big);
  pb_put_bytes_field(&b, 4, fv, 4);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "float_data has 1 values");
  /* external data without a folder */
  t_head(&b, SMELT_F32, 1, d3);
  pb_buf e = {0};
  pb_put_str_field(&e, 1, "location");
  pb_put_str_field(&e, 2, "w.bin");
  b_msg(&b, 13, &e);
  pb_put_varint_field(&b, 14, 1);
  expect_error(&b, SMELT_ERR_INVALID_MODEL, "external file ('w.bin')");
  /* an empty tensor needs no data */
  int64_t z[2] = {0, 5};
  tensor t;
  t_head(&b, SMELT_F32, 2, z);
  CHECK_OK(decode_buf(&b, &t, NULL));
  CHECK(t.nbytes == 0 && t.data);
  tensor_release(&t);
  /* wire-level garbage */
  const uint8_t junk[] = {0x0a, 0x7f, 0x01};
  CHECK(onnx_tensor_decode(junk, sizeof junk, &t, NULL) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "in TensorProto"));
}

/* Decodes every .pb in dir, re-encodes it and checks the result decodes to
 * the same tensor; raw_data files must re-encode to the very same bytes. */
static int roundtrip_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 3, ".pb")) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len;
    uint8_t *buf = test_read_file(path, &len);
    CHECK(buf != NULL);
    if (!buf) continue;
    tensor t, u;
    char *name = NULL;
    smelt_status s = onnx_tensor_decode(buf, len, &t, &name);
    CHECK_OK(s);
    if (s) {
      fprintf(stderr, "  %s\n", path);
      free(buf);
      continue;
    }
    files++;
    CHECK(t.nbytes == (size_t)tensor_numel(&t) * dtype_size(t.dtype));
    uint8_t *enc;
    size_t elen;
    CHECK_OK(onnx_tensor_encode(&t, name, &enc, &elen));
    CHECK_OK(onnx_tensor_decode(enc, elen, &u, NULL));
    CHECK(u.dtype == t.dtype && u.rank == t.rank && u.nbytes == t.nbytes);
    CHECK(!memcmp(u.dims, t.dims, sizeof(int64_t) * (size_t)t.rank));
    CHECK(!t.nbytes || !memcmp(u.data, t.data, t.nbytes));
    /* onnx's numpy_helper writes dims, data_type, name, raw_data, as we do */
    CHECK(elen == len && !memcmp(enc, buf, len));
    free(enc);
    free(name);
    free(buf);
    tensor_release(&t);
    tensor_release(&u);
  }
  closedir(d);
  return files;
}

static void test_pb_files(const char *shared) {
  static const char *const dirs[] = {
      "conformance/onnx-node/test_add/test_data_set_0",
      "conformance/onnx-node/test_conv_with_strides_padding/test_data_set_0",
      "conformance/onnx-node/test_cast_FLOAT_to_FLOAT16/test_data_set_0",
      "conformance/onnx-node/test_cast_FLOAT_to_BFLOAT16/test_data_set_0",
      "conformance/onnx-node/test_gather_0/test_data_set_0",
      "conformance/onnx-node/test_argmax_default_axis_example/test_data_set_0",
      "conformance/onnx-node/test_equal/test_data_set_0",
      "conformance/onnx-node/test_where_example/test_data_set_0",
      "conformance/onnx-node/test_cast_FLOAT_to_DOUBLE/test_data_set_0",
      "conformance/onnx-node/test_reduce_sum_empty_set/test_data_set_0",
      "models/resnet18/test_data_set_0",
      "models/bert_tiny/test_data_set_0",
      "models/gpt_tiny_kv/test_data_set_0",
  };
  int total = 0;
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", shared, dirs[i]);
    int n = roundtrip_dir(path);
    if (!n) fprintf(stderr, "  no .pb files decoded in %s\n", path);
    CHECK(n > 0);
    total += n;
  }
  printf("decoded and round-tripped %d .pb files\n", total);
}

int main(int argc, char **argv) {
  test_roundtrip_dtypes();
  test_typed_fields();
  test_errors();
  char buf[4096];
  const char *shared = test_shared_dir(argc, argv, buf, sizeof buf);
  if (shared)
    test_pb_files(shared);
  else
    test_skip("test_onnx_tensor", "the .pb files: no shared folder (pass it as argv[1] or SMELT_SHARED)");
  return test_report("onnx_tensor");
}
