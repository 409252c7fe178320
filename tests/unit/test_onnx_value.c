/* SequenceProto / OptionalProto decoding: hinted and guessed, nested,
 * empty, missing optionals, and malformed messages. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx/onnx.h"
#include "onnx/pb.h"

/* A TensorProto of n f32 values [n]. */
static void put_tensor(pb_buf *b, uint32_t field, const float *v, int64_t n, smelt_dtype dt) {
  tensor t;
  tensor_alloc(&t, dt, 1, &n);
  if (n) memcpy(t.data, v, t.nbytes);
  uint8_t *bytes;
  size_t len;
  if (!onnx_tensor_encode(&t, NULL, &bytes, &len)) {
    pb_put_bytes_field(b, field, bytes, len);
    free(bytes);
  }
  tensor_release(&t);
}

static void finish(pb_buf *b, uint8_t **out, size_t *len) {
  if (pb_buf_finish(b, out, len)) *out = NULL;
}

static void test_sequence(void) {
  pb_buf b = {0};
  pb_put_str_field(&b, 1, "seq");
  pb_put_varint_field(&b, 2, 1); /* elem_type TENSOR */
  put_tensor(&b, 3, (const float[]){1, 2}, 2, SMELT_F32);
  put_tensor(&b, 3, (const float[]){3}, 1, SMELT_F32);
  uint8_t *bytes;
  size_t len;
  finish(&b, &bytes, &len);
  tensor t;
  char *name = NULL;
  CHECK_OK(onnx_value_decode_as(bytes, len, ONNX_VALUE_SEQUENCE, &t, &name));
  CHECK(t.kind == TENSOR_KIND_SEQUENCE && t.seq_len == 2 && t.dtype == SMELT_F32);
  if (t.seq_len == 2) CHECK(t.seq[1]->dims[0] == 1 && ((float *)t.seq[1]->data)[0] == 3);
  CHECK(name && !strcmp(name, "seq"));
  free(name);
  tensor_release(&t);
  /* guessed: not a TensorProto, two values -> a sequence */
  CHECK_OK(onnx_value_decode(bytes, len, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_SEQUENCE && t.seq_len == 2);
  tensor_release(&t);
  /* as an optional it holds two values: an error */
  CHECK(onnx_value_decode_as(bytes, len, ONNX_VALUE_OPTIONAL, &t, NULL) == SMELT_ERR_INVALID_MODEL);
  free(bytes);
}

static void test_optional(void) {
  pb_buf b = {0};
  pb_put_str_field(&b, 1, "opt");
  pb_put_varint_field(&b, 2, 1);
  put_tensor(&b, 3, (const float[]){5}, 1, SMELT_F32);
  uint8_t *bytes;
  size_t len;
  finish(&b, &bytes, &len);
  tensor t;
  CHECK_OK(onnx_value_decode_as(bytes, len, ONNX_VALUE_OPTIONAL, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_TENSOR && t.rank == 1 && ((float *)t.data)[0] == 5);
  tensor_release(&t);
  /* the same bytes read as a sequence are a sequence of one */
  CHECK_OK(onnx_value_decode_as(bytes, len, ONNX_VALUE_SEQUENCE, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_SEQUENCE && t.seq_len == 1);
  tensor_release(&t);
  free(bytes);
  /* an empty optional: elem_type UNDEFINED and no value */
  pb_buf e = {0};
  pb_put_str_field(&e, 1, "none");
  finish(&e, &bytes, &len);
  CHECK_OK(onnx_value_decode_as(bytes, len, ONNX_VALUE_OPTIONAL, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_OPTIONAL_NONE);
  tensor_release(&t);
  CHECK_OK(onnx_value_decode(bytes, len, &t, NULL)); /* guessed the same way */
  CHECK(t.kind == TENSOR_KIND_OPTIONAL_NONE);
  tensor_release(&t);
  free(bytes);
}

/* An optional holding a sequence (field 5), holding an empty sequence. */
static void test_nested(void) {
  pb_buf inner = {0}, outer = {0};
  pb_put_varint_field(&inner, 2, 1);
  put_tensor(&inner, 3, (const float[]){7, 8}, 2, SMELT_F32);
  uint8_t *ib, *bytes;
  size_t il, len;
  finish(&inner, &ib, &il);
  pb_put_varint_field(&outer, 2, 3); /* elem_type SEQUENCE */
  pb_put_bytes_field(&outer, 5, ib, il);
  finish(&outer, &bytes, &len);
  tensor t;
  CHECK_OK(onnx_value_decode_as(bytes, len, ONNX_VALUE_OPTIONAL, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_SEQUENCE && t.seq_len == 1);
  tensor_release(&t);
  free(bytes);
  /* elem_type disagreeing with the field holding the value */
  pb_buf bad = {0};
  pb_put_varint_field(&bad, 2, 1);
  pb_put_bytes_field(&bad, 5, ib, il);
  finish(&bad, &bytes, &len);
  CHECK(onnx_value_decode_as(bytes, len, ONNX_VALUE_OPTIONAL, &t, NULL) == SMELT_ERR_INVALID_MODEL);
  free(bytes);
  free(ib);
}

static void test_bad(void) {
  /* elements of different dtypes */
  pb_buf b = {0};
  pb_put_varint_field(&b, 2, 1);
  put_tensor(&b, 3, (const float[]){1}, 1, SMELT_F32);
  put_tensor(&b, 3, (const float[]){1}, 1, SMELT_I32);
  uint8_t *bytes;
  size_t len;
  finish(&b, &bytes, &len);
  tensor t;
  CHECK(onnx_value_decode_as(bytes, len, ONNX_VALUE_SEQUENCE, &t, NULL) == SMELT_ERR_INVALID_MODEL);
  free(bytes);
  /* map values are not supported; truncated bytes are an error */
  pb_buf m = {0};
  pb_put_varint_field(&m, 2, 4);
  pb_put_bytes_field(&m, 6, "", 0);
  finish(&m, &bytes, &len);
  CHECK(onnx_value_decode_as(bytes, len, ONNX_VALUE_SEQUENCE, &t, NULL) == SMELT_ERR_UNSUPPORTED);
  free(bytes);
  const uint8_t trunc[] = {0x1a, 0x10, 0x08};
  CHECK(onnx_value_decode_as(trunc, sizeof trunc, ONNX_VALUE_SEQUENCE, &t, NULL) != SMELT_OK);
  CHECK(onnx_value_decode(trunc, sizeof trunc, &t, NULL) != SMELT_OK);
  /* a plain TensorProto still decodes as one */
  pb_buf p = {0};
  put_tensor(&p, 1, (const float[]){4}, 1, SMELT_F32);
  finish(&p, &bytes, &len);
  pb_msg mm = pb_msg_make(bytes, bytes, len, "x");
  pb_field f;
  bool more;
  CHECK_OK(pb_next(&mm, &f, &more)); /* unwrap: put_tensor nested it in field 1 */
  CHECK_OK(onnx_value_decode(f.data, f.len, &t, NULL));
  CHECK(t.kind == TENSOR_KIND_TENSOR && ((float *)t.data)[0] == 4);
  tensor_release(&t);
  free(bytes);
}

int main(void) {
  test_sequence();
  test_optional();
  test_nested();
  test_bad();
  return test_report("onnx_value");
}
