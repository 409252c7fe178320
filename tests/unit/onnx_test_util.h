/* Helpers for the ONNX reader tests: finding ../shared, reading files, and
 * building small ModelProto/GraphProto/TensorProto messages by hand with the
 * protobuf writer (so each test says exactly which bytes it feeds in). */
#ifndef SMELT_TEST_ONNX_TEST_UTIL_H
#define SMELT_TEST_ONNX_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx/onnx.h"
#include "onnx/pb.h"

/* The shared data folder: argv[1], else $SMELT_SHARED, else ../shared beside
 * the repository this file belongs to.  NULL if none exists. */
static inline const char *test_shared_dir(int argc, char **argv, char *buf, size_t n) {
  struct stat st;
  const char *cand = argc > 1 ? argv[1] : getenv("SMELT_SHARED");
  if (cand) {
    snprintf(buf, n, "%s", cand);
  } else {
    snprintf(buf, n, "%s", __FILE__); /* <repo>/tests/unit/onnx_test_util.h */
    for (int up = 0; up < 3; up++) {
      char *slash = strrchr(buf, '/');
      if (!slash) return NULL;
      *slash = 0;
    }
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "/../shared");
  }
  return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? buf : NULL;
}

/* Whole file, malloc'd; NULL on failure. */
static inline uint8_t *test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

static inline int test_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, len, f);
  return fclose(f) == 0 && w == len ? 0 : -1;
}

/* ---- message builders ---- */

/* Appends sub as a length-delimited field of b and resets sub. */
static inline void b_msg(pb_buf *b, uint32_t field, pb_buf *sub) {
  pb_put_bytes_field(b, field, sub->data, sub->len);
  pb_buf_discard(sub);
}

/* Calls fn for each entry of a comma-separated list ("a,,b" has 3 entries). */
static inline void b_each(const char *list, void (*fn)(pb_buf *, uint32_t, const char *, size_t),
                   pb_buf *b, uint32_t field) {
  if (!list) return;
  for (const char *p = list;;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    fn(b, field, p, n);
    if (!c) break;
    p = c + 1;
  }
}

static inline void b_put_name(pb_buf *b, uint32_t field, const char *s, size_t n) {
  pb_put_bytes_field(b, field, s, n);
}

/* One Dimension: a number, "?" (unknown) or a symbol name. */
static inline void b_put_dim(pb_buf *shape, uint32_t field, const char *s, size_t n) {
  pb_buf d = {0};
  if (n == 1 && s[0] == '?') {
  } else if (n && s[0] >= '0' && s[0] <= '9') {
    pb_put_varint_field(&d, 1, strtoull(s, NULL, 10));
  } else {
    pb_put_bytes_field(&d, 2, s, n);
  }
  b_msg(shape, field, &d);
}

/* TypeProto.Tensor; dims "batch,3,?" or "" (scalar) or NULL (no shape). */
static inline void b_tensor_type(pb_buf *type, int elem, const char *dims) {
  pb_buf tt = {0}, shape = {0};
  pb_put_varint_field(&tt, 1, (uint64_t)elem);
  if (dims) {
    if (*dims) b_each(dims, b_put_dim, &shape, 1);
    b_msg(&tt, 2, &shape);
  }
  b_msg(type, 1, &tt);
}

/* ValueInfoProto with a tensor type (elem < 0: no type at all). */
static inline void b_value_info(pb_buf *g, uint32_t field, const char *name, int elem, const char *dims) {
  pb_buf vi = {0}, type = {0};
  pb_put_str_field(&vi, 1, name);
  if (elem >= 0) {
    b_tensor_type(&type, elem, dims);
    b_msg(&vi, 2, &type);
  }
  b_msg(g, field, &vi);
}

/* Graph inputs/outputs/value_info. */
#define b_input(g, name, elem, dims) b_value_info(g, 11, name, elem, dims)
#define b_output(g, name, elem, dims) b_value_info(g, 12, name, elem, dims)

/* NodeProto: inputs/outputs as comma lists; attrs holds AttributeProto fields
 * (field 5 each), consumed. */
static inline void b_node(pb_buf *g, const char *name, const char *op, const char *domain,
                   const char *inputs, const char *outputs, pb_buf *attrs) {
  pb_buf n = {0};
  b_each(inputs, b_put_name, &n, 1);
  b_each(outputs, b_put_name, &n, 2);
  if (name) pb_put_str_field(&n, 3, name);
  pb_put_str_field(&n, 4, op);
  if (attrs && attrs->len) {
    pb_put_raw(&n, attrs->data, attrs->len);
    pb_buf_discard(attrs);
  }
  if (domain) pb_put_str_field(&n, 7, domain);
  b_msg(g, 1, &n);
}

/* TensorProto with raw_data. */
static inline void b_tensor_raw(pb_buf *t, const char *name, int dtype, int rank, const int64_t *dims,
                         const void *data, size_t nbytes) {
  for (int i = 0; i < rank; i++) pb_put_varint_field(t, 1, (uint64_t)dims[i]);
  pb_put_varint_field(t, 2, (uint64_t)dtype);
  if (name) pb_put_str_field(t, 8, name);
  pb_put_bytes_field(t, 9, data, nbytes);
}

/* An initializer (GraphProto field 5) of float32 values. */
static inline void b_init_f32(pb_buf *g, const char *name, int rank, const int64_t *dims,
                       const float *v, size_t n) {
  pb_buf t = {0};
  b_tensor_raw(&t, name, 1, rank, dims, v, n * sizeof(float));
  b_msg(g, 5, &t);
}

/* ModelProto around a graph (consumed). */
static inline void b_model(pb_buf *m, int64_t ir_version, int64_t opset, pb_buf *graph) {
  pb_buf op = {0};
  pb_put_varint_field(m, 1, (uint64_t)ir_version);
  pb_put_str_field(m, 2, "smelt-test");
  b_msg(m, 7, graph);
  pb_put_str_field(&op, 1, "");
  pb_put_varint_field(&op, 2, (uint64_t)opset);
  b_msg(m, 8, &op);
}

/* Attribute builders: each appends one NodeProto.attribute field to attrs. */
static inline void b_attr_begin(pb_buf *a, const char *name, int type) {
  pb_put_str_field(a, 1, name);
  if (type) pb_put_varint_field(a, 20, (uint64_t)type);
}
static inline void b_attr_int(pb_buf *attrs, const char *name, int64_t v, int with_type) {
  pb_buf a = {0};
  b_attr_begin(&a, name, with_type ? 2 : 0);
  pb_put_varint_field(&a, 3, (uint64_t)v);
  b_msg(attrs, 5, &a);
}
static inline void b_attr_float(pb_buf *attrs, const char *name, float v, int with_type) {
  pb_buf a = {0};
  uint32_t bits;
  memcpy(&bits, &v, 4);
  b_attr_begin(&a, name, with_type ? 1 : 0);
  pb_put_tag(&a, 2, PB_I32);
  uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
  pb_put_raw(&a, le, 4);
  b_msg(attrs, 5, &a);
}
static inline void b_attr_string(pb_buf *attrs, const char *name, const void *s, size_t n,
                          int with_type) {
  pb_buf a = {0};
  b_attr_begin(&a, name, with_type ? 3 : 0);
  pb_put_bytes_field(&a, 4, s, n);
  b_msg(attrs, 5, &a);
}
/* packed or one field per element, as both occur in the wild */
static inline void b_attr_ints(pb_buf *attrs, const char *name, const int64_t *v, int n, int packed) {
  pb_buf a = {0}, p = {0};
  b_attr_begin(&a, name, 7);
  for (int i = 0; i < n; i++) {
    if (packed)
      pb_put_varint(&p, (uint64_t)v[i]);
    else
      pb_put_varint_field(&a, 8, (uint64_t)v[i]);
  }
  if (packed) b_msg(&a, 8, &p);
  b_msg(attrs, 5, &a);
}
static inline void b_attr_floats(pb_buf *attrs, const char *name, const float *v, int n) {
  pb_buf a = {0};
  b_attr_begin(&a, name, 6);
  pb_put_bytes_field(&a, 7, v, sizeof(float) * (size_t)n); /* packed, little-endian host */
  b_msg(attrs, 5, &a);
}
static inline void b_attr_strings(pb_buf *attrs, const char *name, const char *list) {
  pb_buf a = {0};
  b_attr_begin(&a, name, 8);
  b_each(list, b_put_name, &a, 9);
  b_msg(attrs, 5, &a);
}
/* TENSOR (field 5) or GRAPH (field 6) or TENSORS (10) / GRAPHS (11): sub consumed. */
static inline void b_attr_msg(pb_buf *attrs, const char *name, int type, uint32_t field, pb_buf *sub) {
  pb_buf a = {0};
  b_attr_begin(&a, name, type);
  b_msg(&a, field, sub);
  b_msg(attrs, 5, &a);
}

#endif
