/* SequenceProto and OptionalProto → tensor (the .pb files of the ONNX test
 * data for sequence- and optional-typed values).
 *
 * The two messages share one wire layout (1 name, 2 elem_type, 3 tensor
 * value(s), 5 sequence value(s), 7 optional value(s)), and a TensorProto reads
 * field 1 as packed dims, so the bytes alone cannot always tell them apart: a
 * sequence of one tensor and an optional holding it are the same bytes.  The
 * caller says what it expects (the model's declared type); ONNX_VALUE_ANY
 * guesses: a TensorProto if it decodes, else a missing optional when the
 * element type is UNDEFINED, else a sequence.
 *
 * In smelt an optional that holds a value is that value; only a missing one
 * has its own kind (TENSOR_KIND_OPTIONAL_NONE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/import_internal.h"
#include "util/err.h"

/* SequenceProto/OptionalProto.elem_type (onnx's DataType enum). */
enum { ET_UNDEFINED = 0, ET_TENSOR = 1, ET_SPARSE = 2, ET_SEQUENCE = 3, ET_MAP = 4, ET_OPTIONAL = 5 };

/* Fields of both messages. */
enum { V_NAME = 1, V_ELEM_TYPE = 2, V_TENSOR = 3, V_SPARSE = 4, V_SEQUENCE = 5, V_MAP = 6, V_OPTIONAL = 7 };

#define VALUE_MAX_DEPTH 32
/* Sequences longer than this are refused (each element costs a header). */
#define VALUE_MAX_SEQ_LEN (1 << 24)

static smelt_status decode_as(onnx_imp *c, const pb_msg *m, onnx_value_hint hint, int depth,
                              tensor *out, pb_str *name);

typedef struct vscan {
  int32_t elem_type;
  pb_str name;
  size_t n_values; /* occurrences of fields 3, 5, 7 */
} vscan;

static smelt_status scan_value(const pb_msg *vm, vscan *s) {
  pb_msg m = *vm;
  pb_field f;
  bool more;
  memset(s, 0, sizeof *s);
  s->name.s = "";
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    switch (f.num) {
      case V_NAME: TRY(imp_name(&m, &f, "name", &s->name)); break;
      case V_ELEM_TYPE: TRY(pb_get_i32(&m, &f, "elem_type", &s->elem_type)); break;
      case V_SPARSE: return err_set(SMELT_ERR_UNSUPPORTED, "sparse tensor values are not supported");
      case V_MAP: return err_set(SMELT_ERR_UNSUPPORTED, "map values are not supported");
      case V_TENSOR: case V_SEQUENCE: case V_OPTIONAL:
        TRY(pb_want(&m, &f, PB_LEN, "value"));
        s->n_values++;
        break;
      default: break;
    }
  }
}

/* The message type a value field holds, as a decode hint. */
static onnx_value_hint field_hint(uint32_t num) {
  return num == V_TENSOR ? ONNX_VALUE_TENSOR : num == V_SEQUENCE ? ONNX_VALUE_SEQUENCE
                                                                 : ONNX_VALUE_OPTIONAL;
}

static bool is_value_field(uint32_t num) {
  return num == V_TENSOR || num == V_SEQUENCE || num == V_OPTIONAL;
}

static const char *field_type(uint32_t num) {
  return num == V_TENSOR ? "TensorProto" : num == V_SEQUENCE ? "SequenceProto" : "OptionalProto";
}

static smelt_status check_elem_field(int32_t elem_type, uint32_t num) {
  int32_t want = num == V_TENSOR ? ET_TENSOR : num == V_SEQUENCE ? ET_SEQUENCE : ET_OPTIONAL;
  if (elem_type != want)
    return err_set(SMELT_ERR_INVALID_MODEL, "elem_type %d does not match a value in field %u",
                   (int)elem_type, num);
  return SMELT_OK;
}

static smelt_status decode_sequence(onnx_imp *c, const pb_msg *vm, int depth, tensor *out,
                                    const vscan *s) {
  if (s->n_values > VALUE_MAX_SEQ_LEN)
    return err_set(SMELT_ERR_UNSUPPORTED, "sequence of %zu values is too long", s->n_values);
  memset(out, 0, sizeof *out);
  out->kind = TENSOR_KIND_SEQUENCE;
  if (s->n_values) {
    out->seq = calloc(s->n_values, sizeof *out->seq);
    if (!out->seq) return err_nomem("sequence", s->n_values * sizeof *out->seq);
  }
  pb_msg m = *vm;
  pb_field f;
  bool more;
  smelt_status st = SMELT_OK;
  while (!st) {
    st = pb_next(&m, &f, &more);
    if (st || !more) break;
    if (!is_value_field(f.num)) continue;
    st = check_elem_field(s->elem_type, f.num);
    tensor *e = st ? NULL : calloc(1, sizeof *e);
    if (!st && !e) st = err_nomem("sequence element", sizeof *e);
    if (st) break;
    out->seq[out->seq_len++] = e;
    pb_msg em = pb_msg_sub(&m, &f, field_type(f.num));
    st = decode_as(c, &em, field_hint(f.num), depth + 1, e, NULL);
    if (st) st = err_prefix(st, "sequence element %d: ", out->seq_len - 1);
  }
  /* The element dtype of the sequence: its first tensor's (all must agree). */
  for (int i = 0; !st && i < out->seq_len; i++) {
    const tensor *e = out->seq[i];
    if (e->kind == TENSOR_KIND_OPTIONAL_NONE) continue;
    if (out->dtype == SMELT_UNDEFINED) out->dtype = e->dtype;
    else if (e->dtype != out->dtype)
      st = err_set(SMELT_ERR_INVALID_MODEL, "sequence element %d is %s, element 0 is %s", i,
                   dtype_name(e->dtype), dtype_name(out->dtype));
  }
  if (st) tensor_release(out);
  return st;
}

static smelt_status decode_optional(onnx_imp *c, const pb_msg *vm, int depth, tensor *out,
                                    const vscan *s) {
  memset(out, 0, sizeof *out);
  if (s->n_values > 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "optional holds %zu values", s->n_values);
  if (!s->n_values) {
    out->kind = TENSOR_KIND_OPTIONAL_NONE;
    return SMELT_OK;
  }
  pb_msg m = *vm;
  pb_field f;
  bool more;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return err_set(SMELT_ERR_INTERNAL, "optional value vanished");
    if (!is_value_field(f.num)) continue;
    TRY(check_elem_field(s->elem_type, f.num));
    pb_msg em = pb_msg_sub(&m, &f, field_type(f.num));
    return decode_as(c, &em, field_hint(f.num), depth + 1, out, NULL);
  }
}

static smelt_status decode_as(onnx_imp *c, const pb_msg *m, onnx_value_hint hint, int depth,
                              tensor *out, pb_str *name) {
  memset(out, 0, sizeof *out);
  if (depth > VALUE_MAX_DEPTH)
    return err_set(SMELT_ERR_INVALID_MODEL, "values nest deeper than %d", VALUE_MAX_DEPTH);
  if (hint == ONNX_VALUE_TENSOR) {
    bool viewed;
    pb_str nm;
    TRY(imp_tensor(c, m, out, &nm, &viewed));
    if (name) *name = nm;
    return SMELT_OK;
  }
  vscan s;
  TRY(scan_value(m, &s));
  if (name) *name = s.name;
  if (hint == ONNX_VALUE_ANY)
    hint = s.elem_type == ET_UNDEFINED ? ONNX_VALUE_OPTIONAL : ONNX_VALUE_SEQUENCE;
  if (hint == ONNX_VALUE_SEQUENCE) return decode_sequence(c, m, depth, out, &s);
  return decode_optional(c, m, depth, out, &s);
}

smelt_status onnx_value_decode_as(const void *buf, size_t len, onnx_value_hint hint, tensor *out,
                                  char **name_out) {
  onnx_imp c = {0};
  c.origin = buf;
  c.copy_data = true; /* the result must outlive buf */
  if (name_out) *name_out = NULL;
  pb_msg m = pb_msg_make(buf, buf, len,
                         hint == ONNX_VALUE_SEQUENCE   ? "SequenceProto"
                         : hint == ONNX_VALUE_OPTIONAL ? "OptionalProto"
                                                       : "TensorProto");
  pb_str name = {"", 0};
  smelt_status st;
  if (hint == ONNX_VALUE_ANY) {
    st = decode_as(&c, &m, ONNX_VALUE_TENSOR, 0, out, &name);
    if (st) {
      char first[SMELT_ERR_MSG_MAX], second[SMELT_ERR_MSG_MAX];
      snprintf(first, sizeof first, "%s", err_message());
      m.type = "SequenceProto/OptionalProto";
      if (decode_as(&c, &m, ONNX_VALUE_ANY, 0, out, &name)) {
        snprintf(second, sizeof second, "%s", err_message());
        return err_set(st, "%s (nor is it a SequenceProto or OptionalProto: %s)", first, second);
      }
      err_clear();
    }
  } else {
    TRY(decode_as(&c, &m, hint, 0, out, &name));
  }
  if (name_out) {
    char *s = malloc(name.n + 1);
    if (!s) {
      tensor_release(out);
      return err_nomem("value name", name.n + 1);
    }
    if (name.n) memcpy(s, name.s, name.n);
    s[name.n] = 0;
    *name_out = s;
  }
  return SMELT_OK;
}

smelt_status onnx_value_decode(const void *buf, size_t len, tensor *out, char **name_out) {
  return onnx_value_decode_as(buf, len, ONNX_VALUE_ANY, out, name_out);
}
