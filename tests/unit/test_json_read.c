/* The JSON reader (util/json.h json_parse): values, escapes, errors with
 * line and column, and hostile input (truncations, deep nesting). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/json.h"

static smelt_status parse(const char *text, json_doc *doc) { return json_parse(text, strlen(text), "t.json", doc); }

static int fails_with(const char *text, const char *needle) {
  json_doc doc;
  smelt_status st = parse(text, &doc);
  if (!st) {
    json_doc_free(&doc);
    fprintf(stderr, "parsed, but should fail: %s\n", text);
    return 0;
  }
  if (st != SMELT_ERR_INVALID_MODEL || !strstr(smelt_last_error(), needle)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", smelt_last_error(), needle);
    return 0;
  }
  return 1;
}

static void test_values(void) {
  json_doc doc;
  const char *text = "{\"a\": [1, -2.5e3, true, false, null],\n \"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
                     " \"e\": {}, \"z\": [], \"n\": \"a\\u0000b\"}";
  CHECK_OK(parse(text, &doc));
  const json_value *a = json_get(&doc.root, "a");
  CHECK(a && a->type == JSON_ARRAY && a->n == 5);
  CHECK(a && a->u.items[0].u.number == 1 && a->u.items[1].u.number == -2500);
  CHECK(a && a->u.items[2].type == JSON_BOOL && a->u.items[2].u.boolean && !a->u.items[3].u.boolean);
  CHECK(a && a->u.items[4].type == JSON_NULL);
  const json_value *s = json_get(&doc.root, "s");
  CHECK(s && !strcmp(s->u.str, "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80"));
  CHECK(s && s->line == 2);
  const json_value *n = json_get(&doc.root, "n");
  CHECK(n && n->n == 3 && !memcmp(n->u.str, "a\0b", 3));
  CHECK(json_get(&doc.root, "e")->type == JSON_OBJECT && json_get(&doc.root, "z")->n == 0);
  CHECK(!json_get(&doc.root, "missing") && !json_get(a, "x"));
  json_doc_free(&doc);
  CHECK_OK(parse("\xEF\xBB\xBF [ ] ", &doc)); /* a byte order mark and spaces */
  json_doc_free(&doc);
}

static void test_errors(void) {
  CHECK(fails_with("", "t.json:1:1: expected a value"));
  CHECK(fails_with("{\"a\": 1,}", "expected a string key"));
  CHECK(fails_with("[1, 2", "expected ',' or ']'"));
  CHECK(fails_with("{\"a\" 1}", "expected ':'"));
  CHECK(fails_with("[1]\n x", "t.json:2:2: unexpected text after the document"));
  CHECK(fails_with("\"\\q\"", "unknown escape"));
  CHECK(fails_with("\"\\ud800\"", "not followed by a low surrogate"));
  CHECK(fails_with("\"\\udc00\"", "lone low surrogate"));
  CHECK(fails_with("\"\\u12\"", "four hex digits"));
  CHECK(fails_with("\"a\nb\"", "control character"));
  CHECK(fails_with("\"\xff\"", "invalid UTF-8"));
  CHECK(fails_with("\"\xed\xa0\x80\"", "invalid UTF-8")); /* an encoded surrogate */
  CHECK(fails_with("01", "unexpected text"));
  CHECK(fails_with("1.", "digits after '.'"));
  CHECK(fails_with("1e+", "exponent"));
  CHECK(fails_with("tru", "expected a value"));
  CHECK(fails_with("\"abc", "not closed"));
  /* nesting: 128 levels are refused, a crafted deep document cannot overflow the stack */
  char deep[1000];
  memset(deep, '[', 600);
  deep[600] = 0;
  CHECK(fails_with(deep, "nesting deeper than 128"));
}

/* Every cut of a valid document fails cleanly (ASan runs this too). */
static void test_truncations(void) {
  const char *text = "{\"k\": [1, {\"x\": \"\\u00e9\\ud83d\\ude00 y\"}, -3.5e-2, true, null], \"v\": \"\xc3\xa9\"}";
  size_t n = strlen(text);
  for (size_t i = 0; i < n; i++) {
    char *cut = malloc(i + 1);
    memcpy(cut, text, i);
    cut[i] = 0;
    json_doc doc;
    smelt_status st = json_parse(cut, i, "cut.json", &doc);
    CHECK(st == SMELT_ERR_INVALID_MODEL);
    if (!st) json_doc_free(&doc);
    free(cut);
  }
  json_doc doc;
  CHECK_OK(json_parse(text, n, "whole.json", &doc));
  json_doc_free(&doc);
}

int main(void) {
  test_values();
  test_errors();
  test_truncations();
  return test_report("test_json_read");
}
