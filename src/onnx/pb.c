/* Protobuf wire format reader and writer.  See pb.h. */
#include "onnx/pb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static const char *wire_name(unsigned w) {
  static const char *const names[8] = {"varint",      "fixed64",   "length-delimited",
                                       "start-group", "end-group", "fixed32",
                                       "wire type 6", "wire type 7"};
  return names[w & 7];
}

/* "<what> at byte N in <Type> (<detail>)": every wire-level error says where. */
static smelt_status pb_err(const pb_msg *m, const uint8_t *at, const char *what, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));
static smelt_status pb_err(const pb_msg *m, const uint8_t *at, const char *what, const char *fmt,
                           ...) {
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return err_set(SMELT_ERR_INVALID_MODEL, "%s at byte %zu in %s%s%s%s", what, pb_offset(m, at),
                 m->type, *detail ? " (" : "", detail, *detail ? ")" : "");
}

pb_msg pb_msg_make(const void *origin, const void *data, size_t len, const char *type) {
  pb_msg m = {(const uint8_t *)data, (const uint8_t *)data + len, (const uint8_t *)origin, type};
  return m;
}

pb_msg pb_msg_sub(const pb_msg *parent, const pb_field *f, const char *type) {
  return pb_msg_make(parent->origin, f->data, f->len, type);
}

/* At most 10 bytes; the 10th may only hold the top bit of a 64-bit value. */
static smelt_status read_varint(const pb_msg *m, const uint8_t **pp, const uint8_t *end,
                                uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t v = 0;
  for (int i = 0;; i++) {
    if (p >= end) return pb_err(m, *pp, "truncated varint", "%s", "");
    uint8_t b = *p++;
    if (i == 9 && b > 1) return pb_err(m, *pp, "varint longer than 64 bits", "%s", "");
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) break;
  }
  *pp = p;
  *out = v;
  return SMELT_OK;
}

static uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

smelt_status pb_next(pb_msg *m, pb_field *f, bool *more) {
  if (m->p >= m->end) {
    *more = false;
    return SMELT_OK;
  }
  const uint8_t *start = m->p;
  uint64_t tag = 0;
  TRY(read_varint(m, &m->p, m->end, &tag));
  uint64_t num = tag >> 3;
  unsigned wire = (unsigned)(tag & 7);
  if (num == 0 || num > 0x1fffffff)
    return pb_err(m, start, "invalid field number", "%llu", (unsigned long long)num);
  f->num = (uint32_t)num;
  f->wire = (pb_wire)wire;
  f->off = pb_offset(m, start);
  f->u = 0;
  f->data = NULL;
  f->len = 0;
  size_t left;
  switch (wire) {
    case PB_VARINT:
      TRY(read_varint(m, &m->p, m->end, &f->u));
      break;
    case PB_I64:
    case PB_I32: {
      int n = wire == PB_I64 ? 8 : 4;
      if ((size_t)(m->end - m->p) < (size_t)n)
        return pb_err(m, start, "truncated", "field %u: %s needs %d bytes, %zu left", f->num,
                      wire_name(wire), n, (size_t)(m->end - m->p));
      f->u = load_le(m->p, n);
      m->p += n;
      break;
    }
    case PB_LEN: {
      uint64_t len = 0;
      TRY(read_varint(m, &m->p, m->end, &len));
      left = (size_t)(m->end - m->p);
      if (len > left)
        return pb_err(m, start, "truncated", "field %u: length %llu, %zu bytes left", f->num,
                      (unsigned long long)len, left);
      f->data = m->p;
      f->len = (size_t)len;
      m->p += len;
      break;
    }
    case PB_SGROUP:
    case PB_EGROUP:
      return pb_err(m, start, "protobuf group", "field %u: %s; groups are not valid in ONNX",
                    f->num, wire_name(wire));
    default:
      return pb_err(m, start, "invalid wire type", "field %u: %s", f->num, wire_name(wire));
  }
  *more = true;
  return SMELT_OK;
}

smelt_status pb_want(const pb_msg *m, const pb_field *f, pb_wire w, const char *what) {
  if (f->wire == w) return SMELT_OK;
  return pb_err(m, m->origin + f->off, "wrong wire type", "field %u (%s) is %s, expected %s",
                f->num, what, wire_name(f->wire), wire_name(w));
}

smelt_status pb_get_i64(const pb_msg *m, const pb_field *f, const char *what, int64_t *out) {
  TRY(pb_want(m, f, PB_VARINT, what));
  *out = (int64_t)f->u;
  return SMELT_OK;
}

smelt_status pb_get_i32(const pb_msg *m, const pb_field *f, const char *what, int32_t *out) {
  TRY(pb_want(m, f, PB_VARINT, what));
  *out = (int32_t)(uint32_t)f->u; /* protobuf int32 semantics: keep the low 32 bits */
  return SMELT_OK;
}

smelt_status pb_get_f32(const pb_msg *m, const pb_field *f, const char *what, float *out) {
  TRY(pb_want(m, f, PB_I32, what));
  uint32_t bits = (uint32_t)f->u;
  memcpy(out, &bits, sizeof *out);
  return SMELT_OK;
}

smelt_status pb_get_bytes(const pb_msg *m, const pb_field *f, const char *what,
                          const uint8_t **data, size_t *len) {
  TRY(pb_want(m, f, PB_LEN, what));
  *data = f->data;
  *len = f->len;
  return SMELT_OK;
}

/* ---- repeated scalars ---- */

static int fixed_size(pb_scalar k) { return k == PB_S_FIXED32 ? 4 : k == PB_S_FIXED64 ? 8 : 0; }
static pb_wire scalar_wire(pb_scalar k) {
  return k == PB_S_FIXED32 ? PB_I32 : k == PB_S_FIXED64 ? PB_I64 : PB_VARINT;
}

void pb_rep_init(pb_rep *r, const pb_msg *m, uint32_t num, pb_scalar kind, const char *what) {
  r->m = *m;
  r->num = num;
  r->kind = kind;
  r->what = what;
  r->pk = r->pk_end = NULL;
}

smelt_status pb_rep_next(pb_rep *r, uint64_t *v, bool *more) {
  for (;;) {
    if (r->pk < r->pk_end) {
      int n = fixed_size(r->kind);
      if (!n) {
        TRY(read_varint(&r->m, &r->pk, r->pk_end, v));
      } else {
        *v = load_le(r->pk, n); /* run length was checked to be a multiple of n */
        r->pk += n;
      }
      *more = true;
      return SMELT_OK;
    }
    pb_field f;
    bool got;
    TRY(pb_next(&r->m, &f, &got));
    if (!got) {
      *more = false;
      return SMELT_OK;
    }
    if (f.num != r->num) continue;
    if (f.wire == PB_LEN) {
      int n = fixed_size(r->kind);
      if (n && f.len % (size_t)n)
        return pb_err(&r->m, r->m.origin + f.off, "bad packed field",
                      "field %u (%s) has %zu bytes, not a multiple of %d", f.num, r->what,
                      f.len, n);
      r->pk = f.data;
      r->pk_end = f.data + f.len;
      continue;
    }
    TRY(pb_want(&r->m, &f, scalar_wire(r->kind), r->what));
    *v = f.u;
    *more = true;
    return SMELT_OK;
  }
}

smelt_status pb_rep_count(const pb_msg *m, uint32_t num, pb_scalar kind, const char *what,
                          size_t *n) {
  pb_rep r;
  pb_rep_init(&r, m, num, kind, what);
  size_t count = 0;
  uint64_t v;
  bool more;
  for (;;) {
    TRY(pb_rep_next(&r, &v, &more));
    if (!more) break;
    count++;
  }
  *n = count;
  return SMELT_OK;
}

/* ---- writer ---- */

static bool buf_reserve(pb_buf *b, size_t n) {
  if (b->failed) return false;
  if (n <= b->cap - b->len) return true;
  size_t need = b->len + n;
  if (need < b->len) {
    b->failed = true;
    return false;
  }
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) {
      cap = need;
      break;
    }
    cap *= 2;
  }
  uint8_t *p = realloc(b->data, cap);
  if (!p) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void pb_put_raw(pb_buf *b, const void *p, size_t n) {
  if (!n || !buf_reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

void pb_put_varint(pb_buf *b, uint64_t v) {
  uint8_t tmp[10];
  int n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    n++;
  } while (v);
  pb_put_raw(b, tmp, (size_t)n);
}

void pb_put_tag(pb_buf *b, uint32_t num, pb_wire w) {
  pb_put_varint(b, ((uint64_t)num << 3) | (unsigned)w);
}

void pb_put_varint_field(pb_buf *b, uint32_t num, uint64_t v) {
  pb_put_tag(b, num, PB_VARINT);
  pb_put_varint(b, v);
}

void pb_put_bytes_field(pb_buf *b, uint32_t num, const void *p, size_t n) {
  pb_put_tag(b, num, PB_LEN);
  pb_put_varint(b, n);
  pb_put_raw(b, p, n);
}

void pb_buf_discard(pb_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

smelt_status pb_buf_finish(pb_buf *b, uint8_t **out, size_t *len) {
  if (b->failed) {
    size_t want = b->len;
    pb_buf_discard(b);
    return err_nomem("protobuf output", want);
  }
  if (!b->data && !buf_reserve(b, 1)) return err_nomem("protobuf output", 1);
  *out = b->data;
  *len = b->len;
  memset(b, 0, sizeof *b);
  return SMELT_OK;
}
