/* The JSON writer: escaping, numbers, nesting and misuse. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/json.h"

/* Writes one string value and compares the document with want. */
static int string_is(const char *s, size_t n, const char *want) {
  json_writer w;
  json_init(&w, false);
  json_string_n(&w, s, n);
  const char *text = NULL;
  size_t len = 0;
  int ok = json_finish(&w, &text, &len) == SMELT_OK && !strcmp(text, want) && len == strlen(want);
  if (!ok) fprintf(stderr, "got %s, want %s\n", text ? text : "(error)", want);
  json_free(&w);
  return ok;
}

static void test_escaping(void) {
  CHECK(string_is("plain", SIZE_MAX, "\"plain\""));
  CHECK(string_is("a\"b\\c", SIZE_MAX, "\"a\\\"b\\\\c\""));
  CHECK(string_is("l1\nl2\t\r", SIZE_MAX, "\"l1\\u000al2\\u0009\\u000d\""));
  CHECK(string_is("\x01\x1f\x7f", SIZE_MAX, "\"\\u0001\\u001f\\u007f\""));
  CHECK(string_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", SIZE_MAX, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""));
  CHECK(string_is("x\xffy", SIZE_MAX, "\"x\\ufffdy\""));             /* not UTF-8 */
  CHECK(string_is("\xe2\x82", SIZE_MAX, "\"\\ufffd\\ufffd\""));        /* cut short */
  CHECK(string_is("\xc0\xaf", SIZE_MAX, "\"\\ufffd\\ufffd\""));        /* overlong */
  CHECK(string_is("\xed\xa0\x80", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\"")); /* surrogate */
  CHECK(string_is("\xf4\x90\x80\x80", SIZE_MAX, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"")); /* > U+10FFFF */
  CHECK(string_is("abc", 2, "\"ab\""));
  CHECK(string_is("\xc3\xa9", 1, "\"\\ufffd\""));                    /* n cuts a sequence */
  CHECK(string_is("", SIZE_MAX, "\"\""));
}

static void test_document(void) {
  json_writer w;
  json_init(&w, false);
  json_object_begin(&w);
  json_kv_string(&w, "na\"me", "v");
  json_kv_number(&w, "pi", 0.1);
  json_kv_number(&w, "nan", NAN);
  json_kv_number(&w, "inf", -INFINITY);
  json_kv_int(&w, "big", INT64_MIN);
  json_kv_bool(&w, "t", true);
  json_key(&w, "arr");
  json_array_begin(&w);
  json_int(&w, 1);
  json_object_begin(&w);
  json_object_end(&w);
  json_array_begin(&w);
  json_array_end(&w);
  json_null(&w);
  json_string(&w, NULL);
  json_array_end(&w);
  json_object_end(&w);
  const char *text;
  size_t len;
  CHECK_OK(json_finish(&w, &text, &len));
  const char *want = "{\"na\\\"me\":\"v\",\"pi\":0.1,\"nan\":null,\"inf\":null,"
                     "\"big\":-9223372036854775808,\"t\":true,\"arr\":[1,{},[],null,null]}";
  CHECK(!strcmp(text, want));
  if (strcmp(text, want)) fprintf(stderr, "got  %s\nwant %s\n", text, want);
  json_free(&w);
}

static void test_pretty(void) {
  json_writer w;
  json_init(&w, true);
  json_object_begin(&w);
  json_key(&w, "a");
  json_array_begin(&w);
  json_number(&w, 1.5);
  json_number(&w, 2);
  json_array_end(&w);
  json_key(&w, "o");
  json_object_begin(&w);
  json_kv_int(&w, "k", 3);
  json_object_end(&w);
  json_object_end(&w);
  const char *text;
  size_t len;
  CHECK_OK(json_finish(&w, &text, &len));
  const char *want = "{\n  \"a\": [1.5, 2],\n  \"o\": {\n    \"k\": 3\n  }\n}\n";
  CHECK(!strcmp(text, want));
  if (strcmp(text, want)) fprintf(stderr, "got  %s\nwant %s\n", text, want);
  json_free(&w);
}

static void test_numbers_round_trip(void) {
  double v[] = {1.0 / 3, 1e-300, 123456789.123, 0.0, -2.5e17};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    json_writer w;
    json_init(&w, false);
    json_number(&w, v[i]);
    const char *text;
    size_t len;
    CHECK_OK(json_finish(&w, &text, &len));
    CHECK(strtod(text, NULL) == v[i]);
    json_free(&w);
  }
}

static smelt_status finish_status(json_writer *w) {
  const char *text;
  size_t len;
  smelt_status s = json_finish(w, &text, &len);
  json_free(w);
  return s;
}

static void test_misuse(void) {
  json_writer w;
  json_init(&w, false);
  json_object_begin(&w);
  json_int(&w, 1); /* no key */
  json_object_end(&w);
  CHECK(finish_status(&w) != SMELT_OK);

  json_init(&w, false);
  json_object_begin(&w);
  CHECK(finish_status(&w) != SMELT_OK); /* left open */

  json_init(&w, false);
  json_array_begin(&w);
  json_object_end(&w); /* wrong closer */
  CHECK(finish_status(&w) != SMELT_OK);

  json_init(&w, false);
  json_int(&w, 1);
  json_int(&w, 2); /* two top-level values */
  CHECK(finish_status(&w) != SMELT_OK);

  json_init(&w, false);
  json_array_begin(&w);
  json_key(&w, "k"); /* key in an array */
  json_array_end(&w);
  CHECK(finish_status(&w) != SMELT_OK);

  json_init(&w, false);
  for (int i = 0; i < JSON_MAX_DEPTH + 1; i++) json_array_begin(&w);
  CHECK(finish_status(&w) != SMELT_OK);

  json_init(&w, false);
  CHECK(finish_status(&w) != SMELT_OK); /* empty document */
}

int main(void) {
  test_escaping();
  test_document();
  test_pretty();
  test_numbers_round_trip();
  test_misuse();
  return test_report("test_json");
}
