#include "ir/npy.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/quote.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NPY_HOST_BIG 1
#else
#define NPY_HOST_BIG 0
#endif

/* numpy pads the header after the dict so the first dimension can grow in place
 * (GROWTH_AXIS_MAX_DIGITS) and aligns the data to ARRAY_ALIGN. */
#define NPY_GROWTH_DIGITS 21
#define NPY_ALIGN 64

typedef struct npy_type {
  char kind;   /* numpy kind letter: f i u b c */
  int size;    /* bytes */
  smelt_dtype dtype;
} npy_type;

static const npy_type npy_types[] = {
    {'f', 2, SMELT_F16}, {'f', 4, SMELT_F32},  {'f', 8, SMELT_F64},  {'i', 1, SMELT_I8},
    {'i', 2, SMELT_I16}, {'i', 4, SMELT_I32},  {'i', 8, SMELT_I64},  {'u', 1, SMELT_U8},
    {'u', 2, SMELT_U16}, {'u', 4, SMELT_U32},  {'u', 8, SMELT_U64},  {'b', 1, SMELT_BOOL},
    {'c', 8, SMELT_C64}, {'c', 16, SMELT_C128},
};

/* ---- header dict parser ----
 * The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } in any key order, with any whitespace, a trailing comma
 * or not, and (from Python 2 writers) "3L" integers. */

typedef struct hdr {
  const char *s;
  size_t n, pos;
  size_t base;   /* file offset of s[0], for messages */
  /* results */
  smelt_dtype dtype;
  bool swap;     /* data is in the other byte order */
  bool fortran;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  bool seen_descr, seen_order, seen_shape;
} hdr;

static smelt_status hdr_err(const hdr *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static smelt_status hdr_err(const hdr *h, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return err_set(SMELT_ERR_INVALID_ARGUMENT, ".npy header: %s at byte %zu", msg, h->base + h->pos);
}

static void hdr_ws(hdr *h) {
  while (h->pos < h->n && (h->s[h->pos] == ' ' || h->s[h->pos] == '\t' ||
                           h->s[h->pos] == '\n' || h->s[h->pos] == '\r'))
    h->pos++;
}

static int hdr_peek(const hdr *h) { return h->pos < h->n ? (unsigned char)h->s[h->pos] : -1; }

/* Describes the character at the cursor for messages ("end of header", "'x'"). */
static const char *hdr_what(const hdr *h, char buf[16]) {
  int c = hdr_peek(h);
  if (c < 0) return "end of header";
  if (c >= 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
  else snprintf(buf, 16, "byte 0x%02x", c);
  return buf;
}

static smelt_status hdr_expect(hdr *h, char c, const char *where) {
  char b[16];
  if (hdr_peek(h) != (unsigned char)c)
    return hdr_err(h, "expected '%c' %s, found %s", c, where, hdr_what(h, b));
  h->pos++;
  return SMELT_OK;
}

/* A quoted string without escapes (numpy never writes any); *str points into the header. */
static smelt_status hdr_string(hdr *h, const char **str, size_t *len, const char *what) {
  char b[16];
  int q = hdr_peek(h);
  if (q != '\'' && q != '"') return hdr_err(h, "expected a quoted %s, found %s", what, hdr_what(h, b));
  size_t start = ++h->pos;
  while (h->pos < h->n && h->s[h->pos] != q) {
    if (h->s[h->pos] == '\\') return hdr_err(h, "escape sequences are not supported in %s", what);
    h->pos++;
  }
  if (h->pos >= h->n) return hdr_err(h, "unterminated %s", what);
  *str = h->s + start;
  *len = h->pos - start;
  h->pos++;
  return SMELT_OK;
}

/* Copies file text for a message, replacing what would garble a terminal. */
static bool is_word(const hdr *h, const char *w) {
  size_t n = strlen(w);
  if (h->n - h->pos < n || memcmp(h->s + h->pos, w, n)) return false;
  size_t e = h->pos + n;
  /* a whole identifier, not a prefix of a longer one */
  return e >= h->n || !((h->s[e] >= 'a' && h->s[e] <= 'z') || (h->s[e] >= 'A' && h->s[e] <= 'Z') ||
                        (h->s[e] >= '0' && h->s[e] <= '9') || h->s[e] == '_');
}

static smelt_status parse_descr_value(hdr *h) {
  if (hdr_peek(h) == '[')
    return err_set(SMELT_ERR_UNSUPPORTED,
                   ".npy header: 'descr' is a structured dtype (a list) at byte %zu; only plain "
                   "numeric arrays are supported", h->base + h->pos);
  size_t at = h->base + h->pos;
  const char *d;
  size_t n;
  TRY(hdr_string(h, &d, &n, "'descr' value"));
  char order = '=';
  size_t i = 0;
  if (n > 0 && strchr("<>|=", d[0])) order = d[i++];
  char kind = i < n ? d[i++] : 0;
  int size = 0;
  bool digits = false;
  for (; i < n && d[i] >= '0' && d[i] <= '9' && size < 1000; i++, digits = true)
    size = size * 10 + (d[i] - '0');
  const npy_type *ty = NULL;
  if (i == n && digits)
    for (size_t k = 0; k < sizeof npy_types / sizeof *npy_types; k++)
      if (npy_types[k].kind == kind && npy_types[k].size == size) ty = &npy_types[k];
  if (!ty)
    return err_set(SMELT_ERR_UNSUPPORTED,
                   ".npy header: 'descr' %s at byte %zu is not a supported type (supported: "
                   "f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1 c8 c16)", q_n(d, n), at);
  h->dtype = ty->dtype;
  /* '|' and '=' mean native order; one-byte types have no order. */
  h->swap = ty->size > 1 && ((order == '>' && !NPY_HOST_BIG) || (order == '<' && NPY_HOST_BIG));
  return SMELT_OK;
}

static smelt_status parse_bool_value(hdr *h) {
  char b[16];
  if (is_word(h, "True")) {
    h->fortran = true;
    h->pos += 4;
  } else if (is_word(h, "False")) {
    h->fortran = false;
    h->pos += 5;
  } else {
    return hdr_err(h, "'fortran_order' must be True or False, found %s", hdr_what(h, b));
  }
  return SMELT_OK;
}

static smelt_status parse_dim(hdr *h, int64_t *out) {
  char b[16];
  if (hdr_peek(h) == '-') return hdr_err(h, "'shape' has a negative dimension");
  if (hdr_peek(h) < '0' || hdr_peek(h) > '9')
    return hdr_err(h, "expected a dimension in 'shape', found %s", hdr_what(h, b));
  int64_t v = 0;
  while (hdr_peek(h) >= '0' && hdr_peek(h) <= '9') {
    int dgt = hdr_peek(h) - '0';
    if (v > (INT64_MAX - dgt) / 10) return hdr_err(h, "'shape' has a dimension too large for int64");
    v = v * 10 + dgt;
    h->pos++;
  }
  if (hdr_peek(h) == 'L' || hdr_peek(h) == 'l') h->pos++; /* Python 2 long */
  *out = v;
  return SMELT_OK;
}

static smelt_status parse_shape_value(hdr *h) {
  char b[16];
  TRY(hdr_expect(h, '(', "to open the 'shape' tuple"));
  h->rank = 0;
  for (;;) {
    hdr_ws(h);
    if (hdr_peek(h) == ')') break;
    if (h->rank == SMELT_MAX_RANK)
      return hdr_err(h, "'shape' has more than %d dimensions", SMELT_MAX_RANK);
    TRY(parse_dim(h, &h->dims[h->rank++]));
    hdr_ws(h);
    if (hdr_peek(h) == ',') {
      h->pos++;
      continue;
    }
    if (hdr_peek(h) != ')')
      return hdr_err(h, "expected ',' or ')' in 'shape', found %s", hdr_what(h, b));
  }
  h->pos++;
  return SMELT_OK;
}

static smelt_status parse_entry(hdr *h) {
  size_t key_at = h->base + h->pos;
  const char *k;
  size_t kn;
  TRY(hdr_string(h, &k, &kn, "key"));
  hdr_ws(h);
  TRY(hdr_expect(h, ':', "after a key"));
  hdr_ws(h);
  bool *seen = NULL;
  smelt_status (*parse)(hdr *) = NULL;
  if (kn == 5 && !memcmp(k, "descr", 5)) {
    seen = &h->seen_descr;
    parse = parse_descr_value;
  } else if (kn == 13 && !memcmp(k, "fortran_order", 13)) {
    seen = &h->seen_order;
    parse = parse_bool_value;
  } else if (kn == 5 && !memcmp(k, "shape", 5)) {
    seen = &h->seen_shape;
    parse = parse_shape_value;
  } else {
    return err_set(SMELT_ERR_INVALID_ARGUMENT, ".npy header: unknown key %s at byte %zu",
                   q_n(k, kn), key_at);
  }
  if (*seen)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, ".npy header: key %s repeated at byte %zu", q_n(k, kn), key_at);
  *seen = true;
  return parse(h);
}

static smelt_status parse_dict(hdr *h) {
  char b[16];
  hdr_ws(h);
  TRY(hdr_expect(h, '{', "at the start of the header dict"));
  for (;;) {
    hdr_ws(h);
    if (hdr_peek(h) == '}') break;
    TRY(parse_entry(h));
    hdr_ws(h);
    if (hdr_peek(h) == ',') {
      h->pos++;
      continue;
    }
    if (hdr_peek(h) != '}')
      return hdr_err(h, "expected ',' or '}' after a value, found %s", hdr_what(h, b));
  }
  h->pos++;
  hdr_ws(h);
  if (h->pos != h->n) return hdr_err(h, "unexpected %s after the header dict", hdr_what(h, b));
  const char *missing = !h->seen_descr ? "descr" : !h->seen_order ? "fortran_order"
                        : !h->seen_shape ? "shape" : NULL;
  if (missing)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, ".npy header: no %s key", q(missing));
  return SMELT_OK;
}

/* ---- decoding ---- */

static uint32_t rd_le(const uint8_t *p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Copies n elements of es bytes, reversing each unit of us bytes if swap. */
static void copy_elems(uint8_t *dst, const uint8_t *src, size_t nbytes, size_t us, bool swap) {
  if (!swap) {
    memcpy(dst, src, nbytes);
    return;
  }
  for (size_t o = 0; o < nbytes; o += us)
    for (size_t j = 0; j < us; j++) dst[o + j] = src[o + us - 1 - j];
}

static smelt_status npy_preamble(const uint8_t *b, size_t len, size_t *hdr_off, size_t *hdr_len) {
  if (len < NPY_MAGIC_LEN || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "not a .npy file: no \\x93NUMPY magic at byte 0");
  if (len < 8)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "truncated .npy file: %zu bytes, no version at byte 6", len);
  int major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0)
    return err_set(SMELT_ERR_UNSUPPORTED, ".npy format version %d.%d (byte 6) is not supported "
                   "(1.0, 2.0 and 3.0 are)", major, minor);
  int lsize = major == 1 ? 2 : 4;
  if (len < 8 + (size_t)lsize)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "truncated .npy file: %zu bytes, no header length "
                   "at byte 8", len);
  *hdr_off = 8 + (size_t)lsize;
  *hdr_len = rd_le(b + 8, lsize);
  if (*hdr_len > len - *hdr_off)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "truncated .npy file: header length %zu (byte 8) "
                   "runs past the end of the file (%zu bytes)", *hdr_len, len);
  return SMELT_OK;
}

smelt_status npy_decode(const void *buf, size_t len, tensor *out) {
  memset(out, 0, sizeof *out);
  if (!buf && len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "npy_decode: NULL buffer");
  const uint8_t *b = buf;
  size_t off = 0, hlen = 0;
  TRY(npy_preamble(b, len, &off, &hlen));
  hdr h = {.s = (const char *)b + off, .n = hlen, .base = off};
  TRY(parse_dict(&h));
  if (h.fortran)
    return err_set(SMELT_ERR_UNSUPPORTED, ".npy header: 'fortran_order' is True; only C-order "
                   "arrays are supported (save np.ascontiguousarray(a))");
  char sb[256];
  shape_str(sb, sizeof sb, h.rank, h.dims, NULL);
  int64_t numel = shape_numel(h.rank, h.dims);
  size_t es = dtype_size(h.dtype);
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / es)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, ".npy header: 'shape' %s has too many elements", sb);
  size_t need = (size_t)numel * es, have = len - off - hlen;
  if (need != have)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "expected %zu bytes of data, found %zu (%s %s, data "
                   "at byte %zu)", need, have, dtype_name(h.dtype), sb, off + hlen);
  TRY(tensor_alloc(out, h.dtype, h.rank, h.dims));
  bool cplx = h.dtype == SMELT_C64 || h.dtype == SMELT_C128;
  copy_elems(out->data, b + off + hlen, need, cplx ? es / 2 : es, h.swap);
  if (h.dtype == SMELT_BOOL) /* numpy stores 0/1; anything else is read as true */
    for (size_t i = 0; i < need; i++) ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
  return SMELT_OK;
}

/* ---- encoding ---- */

static const char *npy_descr(smelt_dtype t) {
  switch (t) {
    case SMELT_F16: return "<f2";
    case SMELT_F32: return "<f4";
    case SMELT_F64: return "<f8";
    case SMELT_I8: return "|i1";
    case SMELT_U8: return "|u1";
    case SMELT_I16: return "<i2";
    case SMELT_U16: return "<u2";
    case SMELT_I32: return "<i4";
    case SMELT_U32: return "<u4";
    case SMELT_I64: return "<i8";
    case SMELT_U64: return "<u8";
    case SMELT_BOOL: return "|b1";
    case SMELT_C64: return "<c8";
    case SMELT_C128: return "<c16";
    default: return NULL;
  }
}

/* The dict text exactly as numpy's _write_array_header writes it (keys sorted). */
static size_t npy_dict_text(char *buf, size_t n, const tensor *t, const char *descr) {
  char shape[SMELT_MAX_RANK * 24 + 8];
  size_t o = 0;
  o += (size_t)snprintf(shape + o, sizeof shape - o, "(");
  for (int i = 0; i < t->rank; i++)
    o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  snprintf(shape + o, sizeof shape - o, t->rank == 1 ? ",)" : ")");
  int pad = 0;
  if (t->rank > 0) {
    char d0[24];
    pad = NPY_GROWTH_DIGITS - snprintf(d0, sizeof d0, "%lld", (long long)t->dims[0]);
    if (pad < 0) pad = 0;
  }
  int w = snprintf(buf, n, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }%*s", descr,
                   shape, pad, "");
  return w < 0 ? 0 : (size_t)w;
}

static smelt_status npy_check_tensor(const tensor *t, const char **descr) {
  if (t->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_UNSUPPORTED, "only plain tensors can be saved as .npy (not a sequence "
                   "or optional)");
  *descr = npy_descr(t->dtype);
  if (!*descr)
    return err_set(SMELT_ERR_UNSUPPORTED, "%s tensors cannot be saved as .npy: numpy has no such "
                   "type%s", dtype_name(t->dtype),
                   t->dtype == SMELT_BF16 ? " (convert to float32 first)" : "");
  if (t->rank < 0 || t->rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot save a tensor of rank %d", t->rank);
  char sb[256];
  int64_t numel = shape_numel(t->rank, t->dims);
  size_t es = dtype_size(t->dtype);
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / es || (size_t)numel * es != t->nbytes ||
      (!t->data && t->nbytes))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot save %s %s: it holds %zu bytes of data, "
                   "expected %lld x %zu", dtype_name(t->dtype),
                   shape_str(sb, sizeof sb, t->rank, t->dims, NULL), t->nbytes, (long long)numel, es);
  return SMELT_OK;
}

smelt_status npy_encode(const tensor *t, uint8_t **buf, size_t *len) {
  *buf = NULL;
  *len = 0;
  const char *descr = NULL;
  TRY(npy_check_tensor(t, &descr));
  char dict[SMELT_MAX_RANK * 24 + 160];
  size_t dn = npy_dict_text(dict, sizeof dict, t, descr);
  if (dn == 0 || dn >= sizeof dict) return err_set(SMELT_ERR_INTERNAL, ".npy header too long");
  size_t hlen = dn + 1; /* + '\n' */
  int lsize = 2; /* version 1.0 unless its 16-bit header length cannot hold the header */
  size_t pad = NPY_ALIGN - (8 + (size_t)lsize + hlen) % NPY_ALIGN;
  if (hlen + pad > 65535) {
    lsize = 4;
    pad = NPY_ALIGN - (8 + (size_t)lsize + hlen) % NPY_ALIGN;
  }
  size_t off = 8 + (size_t)lsize + hlen + pad;
  if (t->nbytes > SIZE_MAX - off) return err_nomem(".npy file", SIZE_MAX);
  uint8_t *p = malloc(off + t->nbytes);
  if (!p) return err_nomem(".npy file", off + t->nbytes);
  memcpy(p, NPY_MAGIC, NPY_MAGIC_LEN);
  p[6] = lsize == 2 ? 1 : 2;
  p[7] = 0;
  size_t hl = hlen + pad;
  for (int i = 0; i < lsize; i++) p[8 + i] = (uint8_t)(hl >> (8 * i));
  memcpy(p + 8 + lsize, dict, dn);
  memset(p + 8 + lsize + dn, ' ', pad);
  p[off - 1] = '\n';
  size_t es = dtype_size(t->dtype);
  bool cplx = t->dtype == SMELT_C64 || t->dtype == SMELT_C128;
  if (t->nbytes) copy_elems(p + off, t->data, t->nbytes, cplx ? es / 2 : es, NPY_HOST_BIG && es > 1);
  *buf = p;
  *len = off + t->nbytes;
  return SMELT_OK;
}
