/* Protobuf wire format: a small bounds-checked reader and writer (no libprotobuf).
 *
 * The reader walks one message at a time without allocating: pb_next yields
 * each field (tag, wire type, scalar value or the bytes of a length-delimited
 * payload, which may be a nested message, a string or a packed array).  Every
 * length is checked against the bytes that remain before anything uses it.
 * Groups (wire types 3/4) and the undefined wire types 6/7 are errors.
 *
 * Errors name the message type, the field number and the byte offset from
 * `origin` (the start of the whole buffer, e.g. the mmapped file). */
#ifndef SMELT_ONNX_PB_H
#define SMELT_ONNX_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "smelt.h"

typedef enum pb_wire {
  PB_VARINT = 0,
  PB_I64 = 1,
  PB_LEN = 2,
  PB_SGROUP = 3,
  PB_EGROUP = 4,
  PB_I32 = 5
} pb_wire;

/* The unread rest of one message. */
typedef struct pb_msg {
  const uint8_t *p, *end;
  const uint8_t *origin; /* start of the whole buffer (for offsets in messages) */
  const char *type;      /* message type name, e.g. "GraphProto" */
} pb_msg;

typedef struct pb_field {
  uint32_t num;
  pb_wire wire;
  uint64_t u;            /* PB_VARINT, PB_I64, PB_I32: the value (raw bits for fixed) */
  const uint8_t *data;   /* PB_LEN: the payload */
  size_t len;
  size_t off;            /* offset of the field's tag from origin */
} pb_field;

/* Scalar encodings of repeated fields (packed or not). */
typedef enum pb_scalar { PB_S_VARINT, PB_S_FIXED32, PB_S_FIXED64 } pb_scalar;

pb_msg pb_msg_make(const void *origin, const void *data, size_t len, const char *type);
/* The payload of a length-delimited field as a nested message. */
pb_msg pb_msg_sub(const pb_msg *parent, const pb_field *f, const char *type);
static inline size_t pb_offset(const pb_msg *m, const uint8_t *p) {
  return (size_t)(p - m->origin);
}

/* Reads the next field into *f.  *more is false (and f untouched) at the end. */
smelt_status pb_next(pb_msg *m, pb_field *f, bool *more);

/* Checks f's wire type; the error names what (e.g. "dims"). */
smelt_status pb_want(const pb_msg *m, const pb_field *f, pb_wire w, const char *what);
/* Typed singular fields: check the wire type and convert. */
smelt_status pb_get_i64(const pb_msg *m, const pb_field *f, const char *what, int64_t *out);
smelt_status pb_get_i32(const pb_msg *m, const pb_field *f, const char *what, int32_t *out);
smelt_status pb_get_f32(const pb_msg *m, const pb_field *f, const char *what, float *out);
/* Length-delimited bytes (strings are not NUL-terminated). */
smelt_status pb_get_bytes(const pb_msg *m, const pb_field *f, const char *what,
                          const uint8_t **data, size_t *len);

/* Repeated scalar field num of message m, packed or unpacked, in order. */
typedef struct pb_rep {
  pb_msg m;
  uint32_t num;
  pb_scalar kind;
  const char *what;
  const uint8_t *pk, *pk_end; /* current packed run */
} pb_rep;

void pb_rep_init(pb_rep *r, const pb_msg *m, uint32_t num, pb_scalar kind, const char *what);
/* Next element (raw bits for fixed kinds); *more false at the end. */
smelt_status pb_rep_next(pb_rep *r, uint64_t *v, bool *more);
/* Number of elements of the repeated field (validates them all). */
smelt_status pb_rep_count(const pb_msg *m, uint32_t num, pb_scalar kind, const char *what,
                          size_t *n);

/* ---- writer ---- */
typedef struct pb_buf {
  uint8_t *data; /* malloc'd */
  size_t len, cap;
  bool failed;   /* an allocation failed: pb_buf_finish reports it */
} pb_buf;

void pb_put_raw(pb_buf *b, const void *p, size_t n);
void pb_put_varint(pb_buf *b, uint64_t v);
void pb_put_tag(pb_buf *b, uint32_t num, pb_wire w);
void pb_put_varint_field(pb_buf *b, uint32_t num, uint64_t v);
void pb_put_bytes_field(pb_buf *b, uint32_t num, const void *p, size_t n);
static inline void pb_put_str_field(pb_buf *b, uint32_t num, const char *s) {
  pb_put_bytes_field(b, num, s, strlen(s));
}
/* On success hands over the bytes (*out malloc'd, caller frees); else frees them. */
smelt_status pb_buf_finish(pb_buf *b, uint8_t **out, size_t *len);
void pb_buf_discard(pb_buf *b);

#endif
