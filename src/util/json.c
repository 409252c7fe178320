#include "util/json.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/utf8.h"

static void fail(json_writer *w, smelt_status st, const char *fmt, ...) {
  if (w->status) return;
  w->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->error, sizeof w->error, fmt, ap);
  va_end(ap);
}

static void put(json_writer *w, const char *s, size_t n) {
  if (w->status) return;
  if (n > SIZE_MAX - w->len - 1) {
    fail(w, SMELT_ERR_NOMEM, "JSON document larger than memory");
    return;
  }
  if (w->len + n + 1 > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n + 1) cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
    char *b = realloc(w->buf, cap);
    if (!b) {
      fail(w, SMELT_ERR_NOMEM, "JSON buffer of %zu bytes", cap);
      return;
    }
    w->buf = b;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = 0;
}

static void puts_(json_writer *w, const char *s) { put(w, s, strlen(s)); }

void json_init(json_writer *w, bool pretty) {
  memset(w, 0, sizeof *w);
  w->pretty = pretty;
}

void json_free(json_writer *w) {
  free(w->buf);
  memset(w, 0, sizeof *w);
}

static void put_escaped(json_writer *w, const char *str, size_t n);

static void newline(json_writer *w) {
  if (!w->pretty) return;
  put(w, "\n", 1);
  for (int i = 0; i < w->depth; i++) put(w, "  ", 2);
}

/* Before any value: a comma and indent inside arrays; in objects the key did
 * that.  Pretty arrays of scalars stay on one line. */
static void before_value(json_writer *w, bool scalar) {
  if (w->status) return;
  if (w->depth == 0) {
    if (w->len) fail(w, SMELT_ERR_INTERNAL, "JSON: a second value at the top level");
    return;
  }
  int d = w->depth - 1;
  if (w->is_object[d]) {
    if (!w->key_pending) fail(w, SMELT_ERR_INTERNAL, "JSON: a value inside an object without a key");
    w->key_pending = false;
    return;
  }
  if (w->count[d] == 0) w->inline_array[d] = scalar;
  if (w->count[d]++) put(w, w->inline_array[d] && w->pretty ? ", " : ",", w->inline_array[d] && w->pretty ? 2 : 1);
  if (!w->inline_array[d]) newline(w);
}

void json_key(json_writer *w, const char *key) {
  if (w->status) return;
  if (w->depth == 0 || !w->is_object[w->depth - 1] || w->key_pending) {
    fail(w, SMELT_ERR_INTERNAL, "JSON: key '%.40s' outside an object or after another key", key ? key : "");
    return;
  }
  if (w->count[w->depth - 1]++) put(w, ",", 1);
  newline(w);
  put_escaped(w, key ? key : "", strlen(key ? key : ""));
  put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
  w->key_pending = true;
}

static void open_level(json_writer *w, bool object) {
  before_value(w, false);
  if (w->status) return;
  if (w->depth == JSON_MAX_DEPTH) {
    fail(w, SMELT_ERR_INTERNAL, "JSON: nesting deeper than %d", JSON_MAX_DEPTH);
    return;
  }
  put(w, object ? "{" : "[", 1);
  w->is_object[w->depth] = object;
  w->count[w->depth] = 0;
  w->inline_array[w->depth] = false;
  w->depth++;
}

static void close_level(json_writer *w, bool object) {
  if (w->status) return;
  if (w->depth == 0 || w->is_object[w->depth - 1] != object || w->key_pending) {
    fail(w, SMELT_ERR_INTERNAL, "JSON: closing %s that is not open (or a key has no value)",
         object ? "an object" : "an array");
    return;
  }
  int n = w->count[--w->depth];
  if (n && !w->inline_array[w->depth]) newline(w);
  put(w, object ? "}" : "]", 1);
}

void json_object_begin(json_writer *w) { open_level(w, true); }
void json_object_end(json_writer *w) { close_level(w, true); }
void json_array_begin(json_writer *w) { open_level(w, false); }
void json_array_end(json_writer *w) { close_level(w, false); }

static void put_escaped(json_writer *w, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  put(w, "\"", 1);
  while (i < n && s[i] && !w->status) {
    unsigned char c = s[i];
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\', esc[1] = (char)c;
      put(w, esc, 2);
      i++;
    } else if (c < 0x20 || c == 0x7F) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(w, esc, 6);
      i++;
    } else {
      size_t k = utf8_valid_len(s + i, n - i);
      if (k) put(w, (const char *)s + i, k);
      else put(w, "\\ufffd", 6);
      i += k ? k : 1;
    }
  }
  put(w, "\"", 1);
}

void json_string_n(json_writer *w, const char *s, size_t n) {
  if (!s) {
    json_null(w);
    return;
  }
  before_value(w, true);
  size_t len = 0;
  while (len < n && s[len]) len++;
  put_escaped(w, s, len);
}

void json_string(json_writer *w, const char *s) { json_string_n(w, s, SIZE_MAX); }

static void put_scalar(json_writer *w, const char *text) {
  before_value(w, true);
  puts_(w, text);
}

void json_number(json_writer *w, double v) {
  char b[40];
  if (!isfinite(v)) {
    put_scalar(w, "null");
    return;
  }
  /* shortest text that reads back to the same double */
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(b, sizeof b, "%.*g", prec, v);
    if (strtod(b, NULL) == v) break;
  }
  put_scalar(w, b);
}

void json_int(json_writer *w, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  put_scalar(w, b);
}

void json_bool(json_writer *w, bool v) { put_scalar(w, v ? "true" : "false"); }
void json_null(json_writer *w) { put_scalar(w, "null"); }

void json_kv_string(json_writer *w, const char *key, const char *s) {
  json_key(w, key);
  json_string(w, s);
}
void json_kv_number(json_writer *w, const char *key, double v) {
  json_key(w, key);
  json_number(w, v);
}
void json_kv_int(json_writer *w, const char *key, int64_t v) {
  json_key(w, key);
  json_int(w, v);
}
void json_kv_bool(json_writer *w, const char *key, bool v) {
  json_key(w, key);
  json_bool(w, v);
}

smelt_status json_finish(json_writer *w, const char **text, size_t *len) {
  if (!w->status && (w->depth || w->key_pending || !w->len))
    fail(w, SMELT_ERR_INTERNAL, "JSON: document ends with %d level(s) open", w->depth);
  if (w->status) return err_set(w->status, "%s", w->error);
  if (w->pretty) put(w, "\n", 1);
  if (w->status) return err_set(w->status, "%s", w->error);
  *text = w->buf;
  *len = w->len;
  return SMELT_OK;
}
