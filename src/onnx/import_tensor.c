/* TensorProto → tensor (initializers, attribute tensors, .pb test files), and
 * the reverse for .pb files.
 *
 * Data comes from exactly one place: raw_data (little-endian bytes, viewed in
 * place when aligned), one typed field (float_data, int32_data, ...) or an
 * external file.  The element count implied by dims must match what is there,
 * which also bounds every allocation by the size of the input. */
#include <stdlib.h>
#include <string.h>

#include "onnx/import_internal.h"
#include "onnx/image.h"
#include "util/copy_par.h"
#include "util/err.h"
#include "util/quote.h"
#include "util/ro_map.h"

enum {
  T_DIMS = 1,
  T_DATA_TYPE = 2,
  T_SEGMENT = 3,
  T_FLOAT = 4,
  T_INT32 = 5,
  T_STRING = 6,
  T_INT64 = 7,
  T_NAME = 8,
  T_RAW = 9,
  T_DOUBLE = 10,
  T_UINT64 = 11,
  T_EXTERNAL = 13,
  T_LOCATION = 14
};

typedef struct tscan {
  int32_t data_type;
  int32_t location;   /* 1: EXTERNAL */
  pb_str name;
  const uint8_t *raw; /* raw_data, if has_raw */
  size_t raw_len;
  bool has_raw, has_string, has[16]; /* has[field]: the typed field occurs */
  pb_str ext_loc;
  bool has_loc;
  uint64_t ext_off;
  int64_t ext_len;    /* -1: not given */
} tscan;

/* The typed field that holds values of dtype t, its encoding and how many
 * entries make one element (2 for complex). */
static int typed_field(smelt_dtype t, pb_scalar *kind, int *per_elem) {
  *per_elem = 1;
  switch (t) {
    case SMELT_C64: *per_elem = 2; /* fall through */
    case SMELT_F32: *kind = PB_S_FIXED32; return T_FLOAT;
    case SMELT_C128: *per_elem = 2; /* fall through */
    case SMELT_F64: *kind = PB_S_FIXED64; return T_DOUBLE;
    case SMELT_I64: *kind = PB_S_VARINT; return T_INT64;
    case SMELT_U32: case SMELT_U64: *kind = PB_S_VARINT; return T_UINT64;
    default: *kind = PB_S_VARINT; return T_INT32; /* every type of 16 bits or less, and int32 */
  }
}

static const char *field_name(int f) {
  switch (f) {
    case T_FLOAT: return "float_data";
    case T_INT32: return "int32_data";
    case T_INT64: return "int64_data";
    case T_DOUBLE: return "double_data";
    case T_UINT64: return "uint64_data";
    default: return "?";
  }
}

static bool parse_u64(pb_str s, uint64_t *out) {
  if (!s.n || s.n > 20) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < s.n; i++) {
    unsigned d = (unsigned)(s.s[i] - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

/* One StringStringEntryProto of external_data. */
static smelt_status scan_external_entry(const pb_msg *em, tscan *s) {
  pb_msg m = *em;
  pb_field f;
  bool more;
  pb_str key = {"", 0}, val = {"", 0};
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    if (f.num == 1) TRY(imp_name(&m, &f, "key", &key));
    if (f.num == 2) TRY(imp_bytes(&m, &f, "value", &val));
  }
  if (key.n == 8 && !memcmp(key.s, "location", 8)) {
    if (memchr(val.s, 0, val.n))
      return err_set(SMELT_ERR_INVALID_MODEL, "external data location contains a NUL byte");
    s->ext_loc = val;
    s->has_loc = true;
  } else if (key.n == 6 && !memcmp(key.s, "offset", 6)) {
    if (!parse_u64(val, &s->ext_off))
      return err_set(SMELT_ERR_INVALID_MODEL, "external data offset %s is not a number",
                     q_n(val.s, val.n));
  } else if (key.n == 6 && !memcmp(key.s, "length", 6)) {
    uint64_t v;
    if (!parse_u64(val, &v) || v > INT64_MAX)
      return err_set(SMELT_ERR_INVALID_MODEL, "external data length %s is not a number",
                     q_n(val.s, val.n));
    s->ext_len = (int64_t)v;
  }
  return SMELT_OK; /* "checksum" and unknown keys are ignored */
}

static smelt_status scan_tensor(const pb_msg *tm, tscan *s) {
  pb_msg m = *tm;
  pb_field f;
  bool more;
  memset(s, 0, sizeof *s);
  s->ext_len = -1;
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) break;
    switch (f.num) {
      case T_DATA_TYPE: TRY(pb_get_i32(&m, &f, "data_type", &s->data_type)); break;
      case T_SEGMENT:
        return err_set(SMELT_ERR_UNSUPPORTED,
                       "segmented tensors (TensorProto.segment) are not supported");
      case T_STRING: s->has_string = true; break;
      case T_NAME: TRY(imp_name(&m, &f, "name", &s->name)); break;
      case T_RAW:
        TRY(pb_get_bytes(&m, &f, "raw_data", &s->raw, &s->raw_len));
        s->has_raw = true;
        break;
      case T_FLOAT: case T_INT32: case T_INT64: case T_DOUBLE: case T_UINT64:
        s->has[f.num] = true;
        break;
      case T_EXTERNAL: {
        TRY(pb_want(&m, &f, PB_LEN, "external_data"));
        pb_msg em = pb_msg_sub(&m, &f, "StringStringEntryProto");
        TRY(scan_external_entry(&em, s));
        break;
      }
      case T_LOCATION: TRY(pb_get_i32(&m, &f, "data_location", &s->location)); break;
      default: break;
    }
  }
  return SMELT_OK;
}

static smelt_status read_dims(const pb_msg *tm, tensor *t) {
  pb_rep r;
  pb_rep_init(&r, tm, T_DIMS, PB_S_VARINT, "dims");
  uint64_t v;
  bool more;
  for (t->rank = 0;; t->rank++) {
    TRY(pb_rep_next(&r, &v, &more));
    if (!more) return SMELT_OK;
    if (t->rank == SMELT_MAX_RANK)
      return err_set(SMELT_ERR_UNSUPPORTED, "tensor has more than %d dims", SMELT_MAX_RANK);
    if ((int64_t)v < 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "tensor dim %d is negative (%lld)", t->rank,
                     (long long)(int64_t)v);
    t->dims[t->rank] = (int64_t)v;
  }
}

static smelt_status check_dtype(int32_t dt) {
  if (dt == SMELT_STRING) return err_set(SMELT_ERR_UNSUPPORTED, "string tensors are not supported");
  if (dt <= 0) return err_set(SMELT_ERR_INVALID_MODEL, "tensor has no data_type");
  if (dt >= SMELT_DTYPE_COUNT)
    return err_set(SMELT_ERR_UNSUPPORTED, "tensor data_type %d is not supported", (int)dt);
  if (!dtype_bits((smelt_dtype)dt))
    return err_set(SMELT_ERR_UNSUPPORTED, "%s tensors are not supported",
                   dtype_name((smelt_dtype)dt));
  return SMELT_OK;
}

/* Stores element i (entry of a typed field) as dtype t. */
static void store_typed(void *data, smelt_dtype t, size_t i, uint64_t v) {
  switch (t) {
    case SMELT_F32: case SMELT_C64: {
      uint32_t bits = (uint32_t)v;
      float f;
      memcpy(&f, &bits, sizeof f);
      ((float *)data)[i] = f;
      break;
    }
    case SMELT_F64: case SMELT_C128: {
      double d;
      memcpy(&d, &v, sizeof d);
      ((double *)data)[i] = d;
      break;
    }
    case SMELT_I64: case SMELT_U64: ((uint64_t *)data)[i] = v; break;
    case SMELT_I32: case SMELT_U32: ((uint32_t *)data)[i] = (uint32_t)v; break;
    case SMELT_I16: case SMELT_U16: case SMELT_F16: case SMELT_BF16:
      ((uint16_t *)data)[i] = (uint16_t)v;
      break;
    case SMELT_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    /* int8, uint8, float8 kinds; for packed types i counts bytes: each
     * int32_data entry holds one byte of packed elements, low bits first. */
    default: ((uint8_t *)data)[i] = (uint8_t)v; break;
  }
}

static smelt_status fill_typed(const pb_msg *tm, tensor *t, int field, pb_scalar kind) {
  pb_rep r;
  pb_rep_init(&r, tm, (uint32_t)field, kind, field_name(field));
  uint64_t v;
  bool more;
  for (size_t i = 0;; i++) {
    TRY(pb_rep_next(&r, &v, &more));
    if (!more) return SMELT_OK;
    store_typed(t->data, t->dtype, i, v);
  }
}

static void discard_copied(const void *src, size_t n, void *ctx) {
  (void)ctx;
  ro_map_discard(src, n);
}

static void release_copied(const void *src, size_t n, void *ctx) {
  (void)ctx;
  ro_map_release(src, n);
}

/* A large graph initializer's bytes in the model file's own mapping (not
 * an external file's): where an image (onnx/image.h) may hold them; its
 * offset in *off. */
static bool image_worthy(const onnx_imp *c, const uint8_t *p, size_t nbytes, uint64_t *off) {
  const onnx_model *m = c->m;
  if (!m || !c->discard_copied || !m->file_id || nbytes < ONNX_IMAGE_MIN_BYTES || !m->map) return false;
  const uint8_t *base = m->map;
  if (p < base || (size_t)(p - base) > m->map_len || nbytes > m->map_len - (size_t)(p - base)) return false;
  *off = (uint64_t)(p - base);
  return true;
}

/* Lists a copy for the image a later load may view (without memory, the
 * list is given up: the image then holds no copies, which only costs the
 * next load its copies). */
static void note_copy(onnx_model *m, uint64_t off, const tensor *t) {
  if (m->n_copies == m->cap_copies) {
    int cap = m->cap_copies ? 2 * m->cap_copies : 64;
    onnx_copy *a = realloc(m->copies, sizeof *a * (size_t)cap);
    if (!a) {
      free(m->copies);
      m->copies = NULL;
      m->n_copies = m->cap_copies = -1; /* never again for this model */
      return;
    }
    m->copies = a;
    m->cap_copies = cap;
  }
  if (m->n_copies >= 0) m->copies[m->n_copies++] = (onnx_copy){off, t->nbytes, t->data};
}

/* Makes t hold [p, p+nbytes): a view when allowed and aligned, else the
 * same bytes in the model's image when it has them, else a copy (split
 * over a few threads when large: util/copy_par.h). */
static smelt_status take_bytes(onnx_imp *c, tensor *t, const uint8_t *p, size_t nbytes,
                               bool *viewed) {
  size_t es = dtype_size(t->dtype), align = es > 8 ? 8 : es ? es : 1; /* packed: bytes */
  if (!c->copy_data && nbytes && ((uintptr_t)p % align) == 0) {
    t->data = (void *)p; /* the mapping is read-only: constants are never written */
    t->nbytes = nbytes;
    t->owns_data = false;
    *viewed = true;
    return SMELT_OK;
  }
  uint64_t off;
  bool worthy = !c->copy_data && image_worthy(c, p, nbytes, &off);
  const void *img = worthy && c->m->image ? onnx_image_lookup(c->m->image, off, nbytes) : NULL;
  if (img) {
    t->data = (void *)img; /* a read-only mapping, unmapped with the model */
    t->nbytes = nbytes;
    t->owns_data = false;
    *viewed = true;
    c->m->n_imaged++;
    return SMELT_OK;
  }
  tensor shape = *t;
  /* every byte is copied below, once; most copies are read once more (by
   * the packer), so fresh small pages: their first touch is the cost */
  TRY(tensor_alloc_uninit_small_pages(t, shape.dtype, shape.rank, shape.dims));
  /* the copy is what every reader sees: when p is in the model file's
   * mapping, its pages need not stay resident beside it; nor, for an
   * initializer (imported once), in the model's copy of its bytes
   * (util/ro_map.h).  Dropped as the copy goes, so a large tensor is never
   * resident twice. */
  copy_par(t->data, p, nbytes, c->discard_copied ? discard_copied : release_copied, NULL);
  if (worthy && !c->m->image) note_copy(c->m, off, t);
  return SMELT_OK;
}

/* Checks that at most the expected typed field holds values and counts them. */
static smelt_status count_typed(const pb_msg *tm, const tscan *s, smelt_dtype dt, int want,
                                size_t *count) {
  *count = 0;
  static const int fields[] = {T_FLOAT, T_INT32, T_INT64, T_DOUBLE, T_UINT64};
  static const pb_scalar kinds[] = {PB_S_FIXED32, PB_S_VARINT, PB_S_VARINT, PB_S_FIXED64,
                                    PB_S_VARINT};
  for (int k = 0; k < 5; k++) {
    if (!s->has[fields[k]]) continue;
    size_t n;
    TRY(pb_rep_count(tm, (uint32_t)fields[k], kinds[k], field_name(fields[k]), &n));
    if (fields[k] == want)
      *count = n;
    else if (n)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s tensor has values in %s", dtype_name(dt),
                     field_name(fields[k]));
  }
  return SMELT_OK;
}

static smelt_status tensor_data(onnx_imp *c, const pb_msg *tm, const tscan *s, tensor *t,
                                size_t numel, size_t nbytes, bool *viewed) {
  pb_scalar kind;
  int per_elem, want = typed_field(t->dtype, &kind, &per_elem);
  size_t count;
  TRY(count_typed(tm, s, t->dtype, want, &count));
  if (s->location == 1) {
    if (s->has_raw || count)
      return err_set(SMELT_ERR_INVALID_MODEL, "tensor has both external and inline data");
    if (!s->has_loc)
      return err_set(SMELT_ERR_INVALID_MODEL, "external tensor has no 'location'");
    const uint8_t *p;
    TRY(imp_external(c, s->ext_loc, s->ext_off, s->ext_len, nbytes, &p));
    return take_bytes(c, t, p, nbytes, viewed);
  }
  if (s->has_raw && count)
    return err_set(SMELT_ERR_INVALID_MODEL, "tensor has both raw_data and %s", field_name(want));
  if (s->has_raw) {
    if (s->raw_len != nbytes)
      return err_set(SMELT_ERR_INVALID_MODEL, "raw_data has %zu bytes, expected %zu (%zu x %s)",
                     s->raw_len, nbytes, numel, dtype_name(t->dtype));
    return take_bytes(c, t, s->raw, nbytes, viewed);
  }
  /* Packed types keep one byte of elements per entry (onnx.proto). */
  size_t entries = dtype_is_subbyte(t->dtype) ? nbytes : numel * (size_t)per_elem;
  if (count != entries) {
    if (!count)
      return err_set(SMELT_ERR_INVALID_MODEL, "tensor has %zu elements but no data", numel);
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has %zu values, expected %zu%s", field_name(want),
                   count, entries, dtype_is_subbyte(t->dtype) ? " (packed bytes)" : "");
  }
  tensor shape = *t;
  TRY(tensor_alloc(t, shape.dtype, shape.rank, shape.dims));
  return count ? fill_typed(tm, t, want, kind) : SMELT_OK;
}

smelt_status imp_tensor(onnx_imp *c, const pb_msg *tm, tensor *t, pb_str *name, bool *viewed) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return err_set(SMELT_ERR_UNSUPPORTED, "ONNX tensors on big-endian hosts are not supported");
#endif
  tscan s;
  memset(t, 0, sizeof *t);
  *viewed = false;
  TRY(scan_tensor(tm, &s));
  if (name) *name = s.name;
  if (s.has_string) TRY(check_dtype(SMELT_STRING));
  TRY(check_dtype(s.data_type));
  t->dtype = (smelt_dtype)s.data_type;
  TRY(read_dims(tm, t));
  int64_t numel = tensor_numel(t);
  size_t nbytes;
  if (!dtype_nbytes(t->dtype, numel, &nbytes) || nbytes > SIZE_MAX / 2 ||
      (uint64_t)numel > SIZE_MAX / 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "tensor has too many elements");
  smelt_status st = tensor_data(c, tm, &s, t, (size_t)numel, nbytes, viewed);
  if (st) tensor_release(t);
  return st;
}

smelt_status imp_tensor_new(onnx_imp *c, const pb_msg *tm, tensor **out, pb_str *name,
                            bool *viewed) {
  tensor *t = malloc(sizeof *t);
  if (!t) return err_nomem("tensor header", sizeof *t);
  smelt_status st = imp_tensor(c, tm, t, name, viewed);
  if (st) {
    free(t);
    return st;
  }
  *out = t;
  return SMELT_OK;
}

/* ---- .pb files ---- */

smelt_status onnx_tensor_decode(const void *buf, size_t len, tensor *out, char **name_out) {
  onnx_imp c = {0};
  c.origin = buf;
  c.copy_data = true; /* the result must outlive buf */
  pb_msg tm = pb_msg_make(buf, buf, len, "TensorProto");
  pb_str name = {"", 0};
  bool viewed;
  if (name_out) *name_out = NULL;
  TRY(imp_tensor(&c, &tm, out, &name, &viewed));
  if (name_out) {
    char *s = malloc(name.n + 1);
    if (!s) {
      tensor_release(out);
      return err_nomem("tensor name", name.n + 1);
    }
    if (name.n) memcpy(s, name.s, name.n);
    s[name.n] = 0;
    *name_out = s;
  }
  return SMELT_OK;
}

smelt_status onnx_tensor_encode(const tensor *t, const char *name, uint8_t **buf, size_t *len) {
  if (t->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_UNSUPPORTED, "only plain tensors can be written as TensorProto");
  if (!dtype_bits(t->dtype))
    return err_set(SMELT_ERR_UNSUPPORTED, "cannot encode %s tensors", dtype_name(t->dtype));
  if (t->rank < 0 || t->rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor rank %d is invalid", t->rank);
  int64_t numel = tensor_numel(t);
  size_t nbytes; /* packed types are written packed, as raw_data holds them */
  if (!dtype_nbytes(t->dtype, numel, &nbytes) || nbytes != t->nbytes || (t->nbytes && !t->data))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor data does not match its shape");
  pb_buf b = {0};
  /* Field order and unpacked dims as onnx's own serializer writes them. */
  for (int i = 0; i < t->rank; i++) pb_put_varint_field(&b, T_DIMS, (uint64_t)t->dims[i]);
  pb_put_varint_field(&b, T_DATA_TYPE, (uint64_t)t->dtype);
  if (name && *name) pb_put_str_field(&b, T_NAME, name);
  pb_put_bytes_field(&b, T_RAW, t->data, t->nbytes);
  return pb_buf_finish(&b, buf, len);
}
