/* The JSON reader declared in util/json.h: recursive descent over the text,
 * the tree in an arena, every error with its line and column. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/arena.h"
#include "util/err.h"
#include "util/json.h"
#include "util/utf8.h"

typedef struct reader {
  const unsigned char *s;
  size_t n, pos;
  uint32_t line;
  size_t line_start;
  const char *where;
  arena *mem;
  char *scratch; /* string decoding buffer */
  size_t scratch_cap;
} reader;

/* Columns count bytes from the start of the line, from 1. */
static uint32_t col_of(const reader *r, size_t pos) {
  size_t c = pos - r->line_start + 1;
  return c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

__attribute__((format(printf, 2, 3))) static smelt_status fail(reader *r, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return err_set(SMELT_ERR_INVALID_MODEL, "%s:%u:%u: %s", r->where, r->line, col_of(r, r->pos), msg);
}

static void skip_ws(reader *r) {
  while (r->pos < r->n) {
    unsigned char c = r->s[r->pos];
    if (c == '\n') {
      r->line++;
      r->line_start = ++r->pos;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      r->pos++;
    } else {
      break;
    }
  }
}

static const char *what_is_here(const reader *r) {
  return r->pos >= r->n ? "the end of the text" : "this character";
}

static smelt_status scratch_put(reader *r, size_t *len, const char *b, size_t k) {
  if (*len + k + 1 > r->scratch_cap) {
    size_t cap = r->scratch_cap ? r->scratch_cap : 256;
    while (cap < *len + k + 1) cap *= 2;
    char *p = realloc(r->scratch, cap);
    if (!p) return err_nomem("JSON string", cap);
    r->scratch = p;
    r->scratch_cap = cap;
  }
  memcpy(r->scratch + *len, b, k);
  *len += k;
  return SMELT_OK;
}

static int hex4(const unsigned char *p, uint32_t *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i];
    unsigned d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 16;
    if (d == 16) return 0;
    *v = *v << 4 | d;
  }
  return 1;
}

/* At the opening quote: decodes the string into the arena. */
static smelt_status read_string(reader *r, const char **out, size_t *out_len) {
  size_t len = 0;
  r->pos++; /* the quote */
  for (;;) {
    if (r->pos >= r->n) return fail(r, "a string is not closed before the end of the text");
    /* a run of plain bytes at once */
    size_t start = r->pos;
    while (r->pos < r->n && r->s[r->pos] != '"' && r->s[r->pos] != '\\' && r->s[r->pos] >= 0x20 &&
           r->s[r->pos] < 0x80)
      r->pos++;
    if (r->pos > start) TRY(scratch_put(r, &len, (const char *)r->s + start, r->pos - start));
    if (r->pos >= r->n) continue;
    unsigned char c = r->s[r->pos];
    if (c == '"') {
      r->pos++;
      char *s = arena_strndup(r->mem, r->scratch ? r->scratch : "", len);
      if (!s) return err_nomem("JSON string", len + 1);
      *out = s;
      *out_len = len;
      return SMELT_OK;
    }
    if (c < 0x20) return fail(r, "control character 0x%02x inside a string (it must be escaped)", c);
    if (c >= 0x80) {
      uint32_t cp;
      size_t k = utf8_next(r->s + r->pos, r->n - r->pos, &cp);
      if (cp == UTF8_BAD) return fail(r, "invalid UTF-8 byte 0x%02x inside a string", c);
      TRY(scratch_put(r, &len, (const char *)r->s + r->pos, k));
      r->pos += k;
      continue;
    }
    /* an escape */
    if (r->pos + 1 >= r->n) return fail(r, "a string is not closed before the end of the text");
    unsigned char e = r->s[r->pos + 1];
    const char *simple = NULL;
    switch (e) {
    case '"': simple = "\""; break;
    case '\\': simple = "\\"; break;
    case '/': simple = "/"; break;
    case 'b': simple = "\b"; break;
    case 'f': simple = "\f"; break;
    case 'n': simple = "\n"; break;
    case 'r': simple = "\r"; break;
    case 't': simple = "\t"; break;
    case 'u': break;
    default: return fail(r, "unknown escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
    }
    if (simple) {
      TRY(scratch_put(r, &len, simple, 1));
      r->pos += 2;
      continue;
    }
    uint32_t cp;
    if (r->pos + 6 > r->n || !hex4(r->s + r->pos + 2, &cp)) return fail(r, "\\u must be followed by four hex digits");
    if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(r, "lone low surrogate \\u%04X in a string", cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      uint32_t lo;
      if (r->pos + 12 > r->n || r->s[r->pos + 6] != '\\' || r->s[r->pos + 7] != 'u' || !hex4(r->s + r->pos + 8, &lo) ||
          lo < 0xDC00 || lo > 0xDFFF)
        return fail(r, "high surrogate \\u%04X is not followed by a low surrogate", cp);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      r->pos += 6;
    }
    char b[4];
    TRY(scratch_put(r, &len, b, utf8_encode(cp, b)));
    r->pos += 6;
  }
}

static smelt_status read_number(reader *r, json_value *v) {
  size_t p = r->pos;
  const unsigned char *s = r->s;
  if (p < r->n && s[p] == '-') p++;
  if (p < r->n && s[p] == '0') p++;
  else if (p < r->n && s[p] >= '1' && s[p] <= '9')
    while (p < r->n && s[p] >= '0' && s[p] <= '9') p++;
  else
    return fail(r, "expected a value, found %s", what_is_here(r));
  if (p < r->n && s[p] == '.') {
    p++;
    if (p >= r->n || s[p] < '0' || s[p] > '9') return fail(r, "a number needs digits after '.'");
    while (p < r->n && s[p] >= '0' && s[p] <= '9') p++;
  }
  if (p < r->n && (s[p] == 'e' || s[p] == 'E')) {
    p++;
    if (p < r->n && (s[p] == '+' || s[p] == '-')) p++;
    if (p >= r->n || s[p] < '0' || s[p] > '9') return fail(r, "a number needs digits in its exponent");
    while (p < r->n && s[p] >= '0' && s[p] <= '9') p++;
  }
  char buf[64];
  size_t k = p - r->pos;
  if (k >= sizeof buf) {
    /* very long numbers: strtod on a heap copy */
    char *h = malloc(k + 1);
    if (!h) return err_nomem("JSON number", k + 1);
    memcpy(h, s + r->pos, k);
    h[k] = 0;
    v->u.number = strtod(h, NULL);
    free(h);
  } else {
    memcpy(buf, s + r->pos, k);
    buf[k] = 0;
    v->u.number = strtod(buf, NULL);
  }
  v->type = JSON_NUMBER;
  r->pos = p;
  return SMELT_OK;
}

static smelt_status read_value(reader *r, json_value *v, int depth);

/* Members of an array or object, collected on the heap, then moved to the arena. */
static smelt_status read_container(reader *r, json_value *v, int depth, bool object) {
  if (depth >= JSON_READ_MAX_DEPTH) return fail(r, "nesting deeper than %d levels", JSON_READ_MAX_DEPTH);
  r->pos++; /* [ or { */
  json_value *items = NULL;
  size_t n = 0, cap = 0;
  smelt_status st = SMELT_OK;
  skip_ws(r);
  if (r->pos < r->n && r->s[r->pos] == (object ? '}' : ']')) {
    r->pos++;
  } else {
    for (;;) {
      if (n == cap) {
        cap = cap ? cap * 2 : 8;
        json_value *p = realloc(items, cap * sizeof *items);
        if (!p) {
          st = err_nomem("JSON members", cap * sizeof *items);
          break;
        }
        items = p;
      }
      json_value *m = &items[n];
      memset(m, 0, sizeof *m);
      skip_ws(r);
      if (object) {
        if (r->pos >= r->n || r->s[r->pos] != '"') {
          st = fail(r, "expected a string key in an object, found %s", what_is_here(r));
          break;
        }
        if ((st = read_string(r, &m->key, &m->key_len))) break;
        skip_ws(r);
        if (r->pos >= r->n || r->s[r->pos] != ':') {
          st = fail(r, "expected ':' after the key \"%.40s\"", m->key);
          break;
        }
        r->pos++;
        skip_ws(r);
      }
      const char *key = m->key;
      size_t key_len = m->key_len;
      if ((st = read_value(r, m, depth + 1))) break;
      m->key = key;
      m->key_len = key_len;
      n++;
      skip_ws(r);
      if (r->pos < r->n && r->s[r->pos] == ',') {
        r->pos++;
        continue;
      }
      if (r->pos < r->n && r->s[r->pos] == (object ? '}' : ']')) {
        r->pos++;
        break;
      }
      st = fail(r, "expected ',' or '%c' in %s, found %s", object ? '}' : ']', object ? "an object" : "an array",
                what_is_here(r));
      break;
    }
  }
  if (!st && n) {
    json_value *dst = arena_alloc(r->mem, n * sizeof *dst);
    if (!dst) st = err_nomem("JSON members", n * sizeof *dst);
    else memcpy(dst, items, n * sizeof *dst);
    v->u.items = dst;
  }
  free(items);
  v->type = object ? JSON_OBJECT : JSON_ARRAY;
  v->n = n;
  return st;
}

static bool literal(reader *r, const char *word) {
  size_t k = strlen(word);
  if (r->n - r->pos < k || memcmp(r->s + r->pos, word, k)) return false;
  r->pos += k;
  return true;
}

static smelt_status read_value(reader *r, json_value *v, int depth) {
  skip_ws(r);
  v->line = r->line;
  v->col = col_of(r, r->pos);
  if (r->pos >= r->n) return fail(r, "expected a value, found the end of the text");
  switch (r->s[r->pos]) {
  case '{': return read_container(r, v, depth, true);
  case '[': return read_container(r, v, depth, false);
  case '"':
    v->type = JSON_STRING;
    return read_string(r, &v->u.str, &v->n);
  case 't':
  case 'f':
  case 'n':
    if (literal(r, "true")) v->type = JSON_BOOL, v->u.boolean = true;
    else if (literal(r, "false")) v->type = JSON_BOOL, v->u.boolean = false;
    else if (literal(r, "null")) v->type = JSON_NULL;
    else return fail(r, "expected a value (true, false, null...), found %s", what_is_here(r));
    return SMELT_OK;
  default: return read_number(r, v);
  }
}

smelt_status json_parse(const char *text, size_t len, const char *where, json_doc *doc) {
  memset(doc, 0, sizeof *doc);
  doc->mem = malloc(sizeof *doc->mem);
  if (!doc->mem) return err_nomem("JSON document", sizeof *doc->mem);
  arena_init(doc->mem);
  reader r = {.s = (const unsigned char *)text, .n = len, .line = 1, .where = where ? where : "JSON", .mem = doc->mem};
  if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) r.pos = r.line_start = 3; /* a UTF-8 byte order mark */
  smelt_status st = read_value(&r, &doc->root, 0);
  if (!st) {
    skip_ws(&r);
    if (r.pos < r.n) st = fail(&r, "unexpected text after the document");
  }
  free(r.scratch);
  if (st) json_doc_free(doc);
  return st;
}

void json_doc_free(json_doc *doc) {
  if (doc->mem) {
    arena_free(doc->mem);
    free(doc->mem);
  }
  memset(doc, 0, sizeof *doc);
}

const json_value *json_get(const json_value *o, const char *key) {
  if (!o || o->type != JSON_OBJECT) return NULL;
  size_t k = strlen(key);
  for (size_t i = 0; i < o->n; i++)
    if (o->u.items[i].key_len == k && !memcmp(o->u.items[i].key, key, k)) return &o->u.items[i];
  return NULL;
}

const char *json_type_name(json_type t) {
  static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
  return (unsigned)t < sizeof names / sizeof *names ? names[t] : "?";
}
