/* Test driver for tests/scripts/tokenizer_compare.py: reads a tokenizer.json
 * and a JSON array of cases {"text": "...", "ids": [...]} and writes, per
 * case, smelt's encode of the text (with and without special tokens), its
 * decode of the given ids (keeping and skipping special tokens) and the
 * chunks a decode stream hands out for those ids (text as hex bytes; null
 * where the stream failed, as the library's DecodeStream may).
 *
 *   tok_compare TOKENIZER.json CASES.json OUT.json */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "util/json.h"

static int fail(const char *what) {
  fprintf(stderr, "tok_compare: %s: %s\n", what, smelt_last_error());
  return 1;
}

/* Text as hex (the JSON writer stops at NUL bytes, and decoded text may hold them). */
static void put_hex(json_writer *w, const char *s, size_t n) {
  char *h = malloc(2 * n + 1);
  for (size_t i = 0; i < n; i++) snprintf(h + 2 * i, 3, "%02x", (unsigned char)s[i]);
  h[2 * n] = 0;
  json_string(w, h);
  free(h);
}

static void put_ids(json_writer *w, const int32_t *ids, size_t n) {
  json_array_begin(w);
  for (size_t i = 0; i < n; i++) json_int(w, ids[i]);
  json_array_end(w);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tok_compare TOKENIZER.json CASES.json OUT.json\n");
    return 2;
  }
  tokenizer *t;
  if (tokenizer_load(argv[1], &t)) return fail("load");
  uint8_t *buf;
  size_t len;
  if (file_read_all(argv[2], &buf, &len, 0)) return fail("cases");
  json_doc doc;
  if (json_parse((const char *)buf, len, argv[2], &doc)) return fail("cases");
  json_writer w;
  json_init(&w, false);
  json_array_begin(&w);
  int rc = 0;
  for (size_t c = 0; c < doc.root.n && !rc; c++) {
    const json_value *cs = &doc.root.u.items[c];
    const json_value *text = json_get(cs, "text"), *jids = json_get(cs, "ids");
    json_object_begin(&w);
    if (text) {
      for (int plain = 0; plain < 2; plain++) {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode_ex(t, text->u.str, text->n, plain ? TOKENIZER_NO_SPECIAL : 0, &ids, &n)) {
          rc = fail("encode");
          break;
        }
        json_key(&w, plain ? "ids_plain" : "ids");
        put_ids(&w, ids, n);
        free(ids);
      }
    }
    if (jids && !rc) {
      int32_t *ids = malloc((jids->n + 1) * sizeof *ids);
      for (size_t i = 0; i < jids->n; i++) ids[i] = (int32_t)jids->u.items[i].u.number;
      for (int skip = 0; skip < 2 && !rc; skip++) {
        char *out;
        size_t n;
        if (tokenizer_decode_ex(t, ids, jids->n, skip ? TOKENIZER_SKIP_SPECIAL : 0, &out, &n)) {
          rc = fail("decode");
          break;
        }
        json_key(&w, skip ? "decoded_skip" : "decoded");
        put_hex(&w, out, n);
        free(out);
      }
      tokenizer_stream *s;
      if (!rc && tokenizer_stream_new(t, 0, &s)) rc = fail("stream");
      if (!rc) {
        json_key(&w, "stream");
        json_array_begin(&w);
        for (size_t i = 0; i < jids->n && !rc; i++) {
          const char *chunk;
          size_t n;
          if (tokenizer_stream_step(s, ids[i], &chunk, &n)) { /* as the library's DecodeStream can: null, then stop */
            json_null(&w);
            break;
          }
          put_hex(&w, chunk, n);
        }
        json_array_end(&w);
        tokenizer_stream_free(s);
      }
      free(ids);
    }
    json_object_end(&w);
  }
  json_array_end(&w);
  const char *out;
  size_t n;
  if (!rc && json_finish(&w, &out, &n)) rc = fail("write");
  if (!rc && file_write_atomic(argv[3], out, n)) rc = fail("write");
  json_free(&w);
  json_doc_free(&doc);
  free(buf);
  tokenizer_free(t);
  return rc;
}
