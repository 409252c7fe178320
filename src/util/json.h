/* A small JSON writer into a growing buffer, for benchmark results and traces,
 * and a reader (json_parse, below) for configuration files such as
 * tokenizer.json.
 *
 * Commas and nesting are tracked for the caller: open an object or array, put
 * keys and values, close it.  Every string (keys too) is escaped: quote,
 * backslash and control characters, and bytes that are not valid UTF-8 become
 * U+FFFD, so text taken from a model file always yields valid JSON.  Numbers
 * that are not finite are written as null (JSON has no NaN).
 *
 * Errors are sticky: the first misuse (a value where a key is due, closing
 * what is not open, nesting deeper than JSON_MAX_DEPTH) or allocation failure
 * is remembered, later calls do nothing, and json_finish reports it. */
#ifndef SMELT_UTIL_JSON_H
#define SMELT_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

#define JSON_MAX_DEPTH 32

typedef struct json_writer {
  char *buf;
  size_t len, cap;
  int depth;
  bool is_object[JSON_MAX_DEPTH]; /* per open level: object (keys expected) or array */
  int count[JSON_MAX_DEPTH];      /* items written at that level */
  bool inline_array[JSON_MAX_DEPTH]; /* pretty: an array of scalars, kept on one line */
  bool key_pending;               /* a key was written; its value is due */
  bool pretty;                    /* newlines and two-space indents */
  smelt_status status;
  char error[160];
} json_writer;

/* Starts an empty document.  pretty: indent nested levels. */
void json_init(json_writer *w, bool pretty);
/* Frees the buffer. */
void json_free(json_writer *w);

void json_object_begin(json_writer *w);
void json_object_end(json_writer *w);
void json_array_begin(json_writer *w);
void json_array_end(json_writer *w);
/* Inside an object: the key of the next value. */
void json_key(json_writer *w, const char *key);
void json_string(json_writer *w, const char *s); /* NULL writes null */
/* Up to n bytes of s (stops early at a NUL). */
void json_string_n(json_writer *w, const char *s, size_t n);
void json_number(json_writer *w, double v);      /* %.17g-exact; non-finite: null */
void json_int(json_writer *w, int64_t v);
void json_bool(json_writer *w, bool v);
void json_null(json_writer *w);

/* Shorthands for a key and its value inside an object. */
void json_kv_string(json_writer *w, const char *key, const char *s);
void json_kv_number(json_writer *w, const char *key, double v);
void json_kv_int(json_writer *w, const char *key, int64_t v);
void json_kv_bool(json_writer *w, const char *key, bool v);

/* Checks that every level is closed and no error happened; on success
 * *text (NUL-terminated, owned by w) and *len hold the document. */
smelt_status json_finish(json_writer *w, const char **text, size_t *len);

/* ---- reader ----
 * json_parse reads a whole document (RFC 8259: UTF-8, no comments, no
 * trailing commas) into a tree allocated in the document's arena.  Hostile
 * input cannot crash it: nesting is capped at JSON_READ_MAX_DEPTH, strings
 * must be valid UTF-8 without raw control characters, \u escapes must pair
 * surrogates.  Errors name the source, line and column:
 * "tokenizer.json:3:17: expected ',' or '}' in an object". */
#define JSON_READ_MAX_DEPTH 128

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
  json_type type;
  uint32_t line, col; /* where the value starts: line and byte column, from 1 */
  size_t n;           /* string: bytes (a \u0000 escape may put NULs inside); array/object: members */
  const char *key;    /* member of an object: its key (NUL-terminated), else NULL */
  size_t key_len;
  union {
    bool boolean;
    double number;
    const char *str;         /* NUL-terminated */
    const json_value *items; /* array items, object members (in file order) */
  } u;
};

typedef struct json_doc {
  json_value root;
  struct arena *mem; /* everything the tree points to */
} json_doc;

smelt_status json_parse(const char *text, size_t len, const char *where, json_doc *doc);
void json_doc_free(json_doc *doc);

/* The first member of object o named key; NULL if o is not an object or has none. */
const json_value *json_get(const json_value *o, const char *key);
/* A name for the type ("object", "string"...) for messages. */
const char *json_type_name(json_type t);

#endif
