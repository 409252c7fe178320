/* Protobuf wire format: varints, fixed, length-delimited, groups, packed and
 * unpacked repeated scalars, truncation and the writer. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx/pb.h"
#include "util/err.h"

/* Reads all fields of buf; returns the status of the first failure. */
static smelt_status read_all(const uint8_t *buf, size_t len, pb_field *out, int cap, int *n) {
  pb_msg m = pb_msg_make(buf, buf, len, "TestProto");
  bool more;
  *n = 0;
  for (;;) {
    pb_field f;
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (*n < cap) out[*n] = f;
    (*n)++;
  }
}

static void test_varints(void) {
  pb_field f[4];
  int n;
  /* field 1 varint 300 */
  const uint8_t a[] = {0x08, 0xac, 0x02};
  CHECK_OK(read_all(a, sizeof a, f, 4, &n));
  CHECK(n == 1 && f[0].num == 1 && f[0].wire == PB_VARINT && f[0].u == 300);
  /* 10-byte varint: UINT64_MAX (and -1 as int64) */
  const uint8_t b[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  CHECK_OK(read_all(b, sizeof b, f, 4, &n));
  CHECK(n == 1 && f[0].num == 2 && f[0].u == UINT64_MAX);
  int64_t i64;
  int32_t i32;
  pb_msg m = pb_msg_make(b, b, sizeof b, "TestProto");
  CHECK_OK(pb_get_i64(&m, &f[0], "x", &i64));
  CHECK(i64 == -1);
  CHECK_OK(pb_get_i32(&m, &f[0], "x", &i32));
  CHECK(i32 == -1);
  /* a non-minimal encoding is valid protobuf */
  const uint8_t c[] = {0x08, 0x81, 0x80, 0x00};
  CHECK_OK(read_all(c, sizeof c, f, 4, &n));
  CHECK(n == 1 && f[0].u == 1);
  /* 11 bytes: too long */
  const uint8_t d[] = {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  CHECK(read_all(d, sizeof d, f, 4, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "byte 1") && strstr(smelt_last_error(), "TestProto"));
  /* 10th byte carrying more than the 64th bit: overflow */
  const uint8_t e[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
  CHECK(read_all(e, sizeof e, f, 4, &n) == SMELT_ERR_INVALID_MODEL);
  /* truncated varint */
  const uint8_t g[] = {0x08, 0x80};
  CHECK(read_all(g, sizeof g, f, 4, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "truncated varint at byte 1"));
  /* truncated tag */
  const uint8_t h[] = {0x80};
  CHECK(read_all(h, sizeof h, f, 4, &n) == SMELT_ERR_INVALID_MODEL);
}

static void test_wire_types(void) {
  pb_field f[8];
  int n;
  /* fixed32 1.5f, fixed64, bytes "hi", unknown varint */
  const uint8_t a[] = {0x15, 0x00, 0x00, 0xc0, 0x3f,                         /* 2: I32 */
                       0x19, 1, 2, 3, 4, 5, 6, 7, 8,                         /* 3: I64 */
                       0x22, 0x02, 'h', 'i',                                 /* 4: LEN */
                       0xf8, 0xff, 0xff, 0xff, 0x0f, 0x05};                  /* 2^29-1: varint */
  CHECK_OK(read_all(a, sizeof a, f, 8, &n));
  CHECK(n == 4);
  pb_msg m = pb_msg_make(a, a, sizeof a, "TestProto");
  float fl = 0;
  CHECK_OK(pb_get_f32(&m, &f[0], "f", &fl));
  CHECK(fl == 1.5f);
  CHECK(f[1].wire == PB_I64 && f[1].u == 0x0807060504030201ull);
  CHECK(f[2].wire == PB_LEN && f[2].len == 2 && !memcmp(f[2].data, "hi", 2) && f[2].off == 14);
  CHECK(f[3].num == 0x1fffffff && f[3].u == 5);
  /* wrong wire type for a typed getter names the field */
  CHECK(pb_get_i64(&m, &f[2], "dims", &(int64_t){0}) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "dims") && strstr(smelt_last_error(), "byte 14"));
  /* groups and wire types 6/7 are errors */
  const uint8_t sg[] = {0x0b, 0x0c};
  CHECK(read_all(sg, sizeof sg, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "group"));
  const uint8_t eg[] = {0x0c};
  CHECK(read_all(eg, sizeof eg, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  const uint8_t w6[] = {0x0e, 0x00}, w7[] = {0x0f, 0x00};
  CHECK(read_all(w6, sizeof w6, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(read_all(w7, sizeof w7, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  /* field number 0 */
  const uint8_t z[] = {0x00, 0x01};
  CHECK(read_all(z, sizeof z, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  /* field number above 2^29-1 */
  const uint8_t big[] = {0x80, 0x80, 0x80, 0x80, 0x10, 0x00};
  CHECK(read_all(big, sizeof big, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  /* truncated fixed32/fixed64 */
  const uint8_t t32[] = {0x15, 0x00, 0x00}, t64[] = {0x19, 1, 2, 3, 4, 5, 6, 7};
  CHECK(read_all(t32, sizeof t32, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(read_all(t64, sizeof t64, f, 8, &n) == SMELT_ERR_INVALID_MODEL);
}

static void test_lengths(void) {
  pb_field f[2];
  int n;
  /* a length past the end is checked before anything uses it */
  const uint8_t a[] = {0x0a, 0x05, 'a', 'b'};
  CHECK(read_all(a, sizeof a, f, 2, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "truncated at byte 0 in TestProto"));
  /* a huge (2^63) length */
  const uint8_t b[] = {0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  CHECK(read_all(b, sizeof b, f, 2, &n) == SMELT_ERR_INVALID_MODEL);
  /* nested message offsets count from the start of the whole buffer */
  const uint8_t c[] = {0x0a, 0x03, 0x12, 0x05, 'x'};
  CHECK_OK(read_all(c, sizeof c, f, 2, &n));
  pb_msg outer = pb_msg_make(c, c, sizeof c, "Outer");
  pb_msg inner = pb_msg_sub(&outer, &f[0], "Inner");
  pb_field g;
  bool more;
  CHECK(pb_next(&inner, &g, &more) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "at byte 2 in Inner"));
  /* empty message */
  CHECK_OK(read_all(c, 0, f, 2, &n));
  CHECK(n == 0);
}

static smelt_status collect(const uint8_t *buf, size_t len, uint32_t num, pb_scalar kind,
                            uint64_t *out, int cap, int *n) {
  pb_msg m = pb_msg_make(buf, buf, len, "TestProto");
  pb_rep r;
  pb_rep_init(&r, &m, num, kind, "values");
  bool more;
  *n = 0;
  for (;;) {
    uint64_t v;
    TRY(pb_rep_next(&r, &v, &more));
    if (!more) return SMELT_OK;
    if (*n < cap) out[*n] = v;
    (*n)++;
  }
}

static void test_repeated(void) {
  uint64_t v[8];
  int n;
  size_t count;
  /* field 1: unpacked 1, packed {2, 300}, other field between, unpacked 4 */
  const uint8_t a[] = {0x08, 0x01, 0x0a, 0x03, 0x02, 0xac, 0x02, 0x10, 0x09, 0x08, 0x04};
  CHECK_OK(collect(a, sizeof a, 1, PB_S_VARINT, v, 8, &n));
  CHECK(n == 4 && v[0] == 1 && v[1] == 2 && v[2] == 300 && v[3] == 4);
  CHECK_OK(pb_rep_count(&(pb_msg){a, a + sizeof a, a, "T"}, 1, PB_S_VARINT, "x", &count));
  CHECK(count == 4);
  /* packed fixed32: 2 floats, then an unpacked one */
  float fl[3] = {1.0f, -2.5f, 3.25f};
  uint8_t b[32];
  size_t o = 0;
  b[o++] = 0x0a;
  b[o++] = 8;
  memcpy(b + o, fl, 8);
  o += 8;
  b[o++] = 0x0d;
  memcpy(b + o, fl + 2, 4);
  o += 4;
  CHECK_OK(collect(b, o, 1, PB_S_FIXED32, v, 8, &n));
  CHECK(n == 3);
  for (int i = 0; i < 3 && n == 3; i++) {
    uint32_t bits = (uint32_t)v[i];
    float x;
    memcpy(&x, &bits, 4);
    CHECK(x == fl[i]);
  }
  /* packed fixed32 run not a multiple of 4 */
  const uint8_t c[] = {0x0a, 0x03, 1, 2, 3};
  CHECK(collect(c, sizeof c, 1, PB_S_FIXED32, v, 8, &n) == SMELT_ERR_INVALID_MODEL);
  CHECK(strstr(smelt_last_error(), "not a multiple of 4"));
  /* packed varint run that ends inside a varint */
  const uint8_t d[] = {0x0a, 0x02, 0x01, 0x80};
  CHECK(collect(d, sizeof d, 1, PB_S_VARINT, v, 8, &n) == SMELT_ERR_INVALID_MODEL);
  /* unpacked element with the wrong wire type */
  const uint8_t e[] = {0x0d, 0, 0, 0, 0};
  CHECK(collect(e, sizeof e, 1, PB_S_VARINT, v, 8, &n) == SMELT_ERR_INVALID_MODEL);
  /* fixed64 */
  const uint8_t f[] = {0x09, 1, 0, 0, 0, 0, 0, 0, 0x80, 0x0a, 8, 2, 0, 0, 0, 0, 0, 0, 0};
  CHECK_OK(collect(f, sizeof f, 1, PB_S_FIXED64, v, 8, &n));
  CHECK(n == 2 && v[0] == 0x8000000000000001ull && v[1] == 2);
  /* empty packed run */
  const uint8_t g[] = {0x0a, 0x00};
  CHECK_OK(collect(g, sizeof g, 1, PB_S_VARINT, v, 8, &n));
  CHECK(n == 0);
}

static void test_writer(void) {
  pb_buf b = {0};
  pb_put_varint_field(&b, 1, 300);
  pb_put_varint_field(&b, 2, UINT64_MAX);
  pb_put_str_field(&b, 3, "abc");
  pb_put_varint_field(&b, 0x1fffffff, 0);
  uint8_t *out;
  size_t len;
  CHECK_OK(pb_buf_finish(&b, &out, &len));
  pb_field f[8];
  int n;
  CHECK_OK(read_all(out, len, f, 8, &n));
  CHECK(n == 4 && f[0].u == 300 && f[1].u == UINT64_MAX && f[2].len == 3 &&
        !memcmp(f[2].data, "abc", 3) && f[3].num == 0x1fffffff);
  CHECK(len == 3 + 11 + 5 + 6);
  free(out);
  pb_buf e = {0};
  CHECK_OK(pb_buf_finish(&e, &out, &len));
  CHECK(len == 0 && out);
  free(out);
}

int main(void) {
  test_varints();
  test_wire_types();
  test_lengths();
  test_repeated();
  test_writer();
  return test_report("onnx_pb");
}
