/* The tokenizer (src/tokenizer) on small hand-made tokenizer.json files:
 * byte-level BPE, SentencePiece-style BPE with byte fallback, streaming a
 * character split across tokens, special tokens, and bad input: malformed
 * and unsupported files (clear errors naming where), every truncation and
 * random byte damage of a valid file (no crash, ASan runs this too),
 * invalid UTF-8 to encode, unknown ids to decode.  The comparison with the
 * `tokenizers` library on real text is tests/scripts/tokenizer_compare.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokenizer/tokenizer.h"

/* GPT-2 style: "Ġ" is the mapped space; the merges build "ab" and "Ġab". */
static const char *BYTE_LEVEL =
    "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 7, \"content\": \"<|endoftext|>\", \"special\": true,"
    " \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false}],"
    " \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false,"
    " \"trim_offsets\": true, \"use_regex\": true},"
    " \"post_processor\": {\"type\": \"ByteLevel\", \"trim_offsets\": true},"
    " \"decoder\": {\"type\": \"ByteLevel\"},"
    " \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"fuse_unk\": false, \"byte_fallback\": false,"
    " \"vocab\": {\"a\": 0, \"b\": 1, \"\\u0120\": 2, \"ab\": 3, \"\\u0120ab\": 4, \"c\": 5, \"'\": 6,"
    " \"<|endoftext|>\": 7, \"s\": 8, \"'s\": 9}, \"merges\": [\"a b\", \"\\u0120 ab\", [\"'\", \"s\"]]}}";

static char *llama_json(void) {
  /* Llama-2 legacy shape, with the 256 byte tokens */
  static char buf[32768];
  int n = snprintf(buf, sizeof buf,
                   "{\"version\": \"1.0\", \"added_tokens\": ["
                   "{\"id\": 0, \"content\": \"<unk>\", \"special\": true, \"normalized\": false},"
                   "{\"id\": 1, \"content\": \"<s>\", \"special\": true, \"normalized\": false},"
                   "{\"id\": 2, \"content\": \"</s>\", \"special\": true, \"normalized\": false}],"
                   " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"\\u2581\"},"
                   " {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}]},"
                   " \"pre_tokenizer\": null,"
                   " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\","
                   " \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [],"
                   " \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}},"
                   " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": \"\\u2581\"},"
                   " \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"},"
                   " {\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
                   " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true, \"byte_fallback\": true,"
                   " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
  for (int b = 0; b < 256; b++) n += snprintf(buf + n, sizeof buf - n, ", \"<0x%02X>\": %d", b, 3 + b);
  snprintf(buf + n, sizeof buf - n,
           ", \"\\u2581\": 259, \"h\": 260, \"i\": 261, \"hi\": 262, \"\\u2581hi\": 263}, \"merges\": [\"h i\", \"\\u2581 hi\"]}}");
  return buf;
}

static void ids_are(const tokenizer *t, const char *text, unsigned flags, const int32_t *want, size_t n_want) {
  int32_t *ids = NULL;
  size_t n = 0;
  CHECK_OK(tokenizer_encode_ex(t, text, strlen(text), flags, &ids, &n));
  int same = n == n_want && (!n || !memcmp(ids, want, n * sizeof *ids));
  CHECK(same);
  if (!same) {
    fprintf(stderr, "  '%s' gave", text);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
  }
  free(ids);
}

static void text_is(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, const char *want) {
  char *s = NULL;
  size_t len = 0;
  CHECK_OK(tokenizer_decode_ex(t, ids, n, flags, &s, &len));
  CHECK(s && len == strlen(want) && !memcmp(s, want, len));
  if (s && strcmp(s, want)) fprintf(stderr, "  decoded '%s', want '%s'\n", s, want);
  free(s);
}

static void test_byte_level(void) {
  tokenizer *t;
  CHECK_OK(tokenizer_load_bytes(BYTE_LEVEL, strlen(BYTE_LEVEL), "bl.json", &t));
  if (!t) return;
  /* "ab ab's c": pieces "ab", " ab", "'s", " c" ("Ġc" is no token: Ġ and c) */
  ids_are(t, "ab ab's c", 0, (int32_t[]){3, 4, 9, 2, 5}, 5);
  ids_are(t, "ab<|endoftext|>ab", 0, (int32_t[]){3, 7, 3}, 3);
  ids_are(t, "", 0, NULL, 0);
  ids_are(t, "xyz", 0, NULL, 0); /* characters without a token are dropped, as in tokenizers */
  text_is(t, (int32_t[]){3, 4, 9, 2, 5}, 5, 0, "ab ab's c");
  text_is(t, (int32_t[]){3, 7}, 2, 0, "ab<|endoftext|>");
  text_is(t, (int32_t[]){3, 7}, 2, TOKENIZER_SKIP_SPECIAL, "ab");
  int32_t id = -1;
  CHECK_OK(tokenizer_token_id(t, "<|endoftext|>", &id));
  CHECK(id == 7);
  CHECK(tokenizer_bos_id(t) == 7 && tokenizer_eos_id(t) == 7 && tokenizer_is_special(t, 7) && !tokenizer_is_special(t, 3));
  CHECK(tokenizer_token_id(t, "nope", &id) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(tokenizer_vocab_size(t) == 10 && !strcmp(tokenizer_id_token(t, 4), "\xc4\xa0" "ab") && !tokenizer_id_token(t, 99));
  /* bad input to encode and decode */
  int32_t *ids = NULL;
  size_t n = 0;
  CHECK(tokenizer_encode(t, "a\xff", 2, &ids, &n) == SMELT_ERR_INVALID_ARGUMENT && !ids);
  CHECK(strstr(smelt_last_error(), "offset 1"));
  char *s = NULL;
  CHECK(tokenizer_decode(t, (int32_t[]){3, 10}, 2, &s, &n) == SMELT_ERR_INVALID_ARGUMENT && !s);
  CHECK(strstr(smelt_last_error(), "id 10 (at position 1)"));
  CHECK(tokenizer_decode(t, (int32_t[]){-1}, 1, &s, &n) == SMELT_ERR_INVALID_ARGUMENT);
  tokenizer_free(t);
}

static void test_byte_fallback_and_stream(void) {
  tokenizer *t;
  const char *json = llama_json();
  CHECK_OK(tokenizer_load_bytes(json, strlen(json), "llama.json", &t));
  if (!t) return;
  /* "hi é": ▁hi ▁ then é as the bytes C3 A9 */
  int32_t want[] = {1, 263, 259, 3 + 0xC3, 3 + 0xA9};
  ids_are(t, "hi \xc3\xa9", 0, want, 5);
  ids_are(t, "hi \xc3\xa9", TOKENIZER_NO_SPECIAL, want + 1, 4);
  ids_are(t, "<s>hi", TOKENIZER_NO_SPECIAL, (int32_t[]){1, 263}, 2); /* ▁ prepended to the text after <s> too (legacy) */
  text_is(t, want, 5, 0, "<s> hi \xc3\xa9"); /* Strip takes a leading space only */
  text_is(t, want, 5, TOKENIZER_SKIP_SPECIAL, "hi \xc3\xa9");
  text_is(t, (int32_t[]){262, 3 + 0xC3}, 2, 0, "hi\xef\xbf\xbd"); /* a byte that is not UTF-8 alone: U+FFFD */
  CHECK(tokenizer_bos_id(t) == 1 && tokenizer_eos_id(t) == 2);
  /* streaming: é is split over two tokens and comes out whole with the second */
  tokenizer_stream *s;
  CHECK_OK(tokenizer_stream_new(t, TOKENIZER_SKIP_SPECIAL, &s));
  const char *expect[] = {"", "hi", " ", "", "\xc3\xa9"};
  for (int i = 0; i < 5 && s; i++) {
    const char *chunk = NULL;
    size_t len = 0;
    CHECK_OK(tokenizer_stream_step(s, want[i], &chunk, &len));
    CHECK(chunk && len == strlen(expect[i]) && !memcmp(chunk, expect[i], len));
  }
  const char *chunk;
  size_t len;
  CHECK(tokenizer_stream_step(s, 5000, &chunk, &len) == SMELT_ERR_INVALID_ARGUMENT);
  tokenizer_stream_free(s);
  tokenizer_free(t);
}

/* A copy of the byte-level file with one piece replaced. */
static char *with(const char *from, const char *to) {
  const char *p = strstr(BYTE_LEVEL, from);
  if (!p) {
    fprintf(stderr, "with: '%s' not in the file\n", from);
    abort();
  }
  size_t a = (size_t)(p - BYTE_LEVEL), nf = strlen(from), nt = strlen(to), n = strlen(BYTE_LEVEL);
  char *s = malloc(n - nf + nt + 1);
  memcpy(s, BYTE_LEVEL, a);
  memcpy(s + a, to, nt);
  memcpy(s + a + nt, p + nf, n - a - nf + 1);
  return s;
}

static void load_fails(const char *from, const char *to, smelt_status want, const char *needle) {
  char *json = with(from, to);
  tokenizer *t = (tokenizer *)1;
  smelt_status st = tokenizer_load_bytes(json, strlen(json), "bad.json", &t);
  CHECK(st == want && t == NULL);
  CHECK(strstr(smelt_last_error(), needle) != NULL);
  if (st != want || !strstr(smelt_last_error(), needle))
    fprintf(stderr, "  %s -> %s: got %s '%s', want '%s'\n", from, to, smelt_status_name(st), smelt_last_error(), needle);
  if (!st) tokenizer_free(t);
  free(json);
}

static void test_bad_files(void) {
  const smelt_status BAD = SMELT_ERR_INVALID_MODEL, UNSUP = SMELT_ERR_UNSUPPORTED;
  load_fails("\"type\": \"BPE\"", "\"type\": \"Unigram\"", UNSUP, "model: model type 'Unigram' is not supported");
  load_fails("{\"type\": \"ByteLevel\", \"add_prefix_space\"", "{\"type\": \"Whitespace\", \"add_prefix_space\"", UNSUP,
             "pre_tokenizer: pre-tokenizer type 'Whitespace' is not supported");
  load_fails("{\"type\": \"ByteLevel\"}", "{\"type\": \"WordPiece\"}", UNSUP, "decoder: decoder type 'WordPiece'");
  load_fails("\"a b\"", "\"a z\"", BAD, "model.merges[0]: token 'z' of this merge is not in model.vocab");
  load_fails("\"a b\"", "\"a  b\"", BAD, "model.merges[0]: expected two tokens separated by one space");
  load_fails("[\"'\", \"s\"]", "[\"'\"]", BAD, "model.merges[2]: expected \"a b\"");
  load_fails("\"c\": 5", "\"c\": -5", BAD, "model.vocab: expected an integer in 0..16777216, found -5");
  load_fails("\"c\": 5", "\"c\": 5.5", BAD, "found 5.5");
  load_fails("\"c\": 5", "\"c\": 99999999999", BAD, "model.vocab");
  load_fails("\"c\": 5", "\"c\": \"5\"", BAD, "the id of 'c' is string, not a number");
  load_fails("\"dropout\": null", "\"dropout\": 0.1", UNSUP, "model.dropout: BPE dropout");
  load_fails("\"fuse_unk\": false", "\"fuse_unk\": 1", BAD, "model.fuse_unk: expected boolean, found number");
  load_fails("\"version\": \"1.0\"", "\"version\": \"2.0\"", UNSUP, "version");
  load_fails("\"model\": {", "\"modell\": {", BAD, "model: missing (expected object)");
  load_fails("\"use_regex\": true}", "\"use_regex\": true}, \"x\": [}", BAD, "bad.json:1:");
  load_fails("{\"type\": \"ByteLevel\", \"add_prefix_space\": false,", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s+\"},"
             " \"behavior\": \"Isolated\", \"invert\": false, \"add_prefix_space\": false,", UNSUP,
             "the split pattern '\\\\s+' is not supported");
  load_fails("{\"id\": 7,", "{\"id\": \"7\",", BAD, "added_tokens[0].id: expected number, found string");
  load_fails("\"special\": true,", "\"special\": \"yes\",", BAD, "added_tokens[0].special: expected boolean");
  load_fails("\"type\": \"ByteLevel\", \"trim_offsets\": true}", "\"type\": \"TemplateProcessing\", \"single\": "
             "[{\"SpecialToken\": {\"id\": \"<x>\"}}], \"special_tokens\": {}}", BAD, "special token '<x>' is not in special_tokens");
  tokenizer *t = (tokenizer *)1;
  CHECK(tokenizer_load("/nonexistent/tokenizer.json", &t) == SMELT_ERR_IO && !t);
  CHECK(tokenizer_load_bytes("[]", 2, NULL, &t) == BAD && strstr(smelt_last_error(), "tokenizer.json:1:1: (document): expected object"));
}

/* Every truncation, and random damage, of valid files: an error or a
 * working tokenizer, never a crash. */
static void test_hostile(void) {
  const char *files[] = {BYTE_LEVEL, llama_json()};
  for (int f = 0; f < 2; f++) {
    size_t n = strlen(files[f]);
    for (size_t i = 0; i < n; i += (f ? 7 : 1)) {
      tokenizer *t;
      CHECK(tokenizer_load_bytes(files[f], i, "cut.json", &t) != SMELT_OK);
    }
    unsigned seed = 12345 + f;
    char *buf = malloc(n + 1);
    int loaded = 0;
    for (int k = 0; k < 1500; k++) {
      memcpy(buf, files[f], n + 1);
      for (int j = 0; j < 1 + k % 3; j++) {
        seed = seed * 1103515245u + 12345u;
        size_t at = (seed >> 8) % n;
        seed = seed * 1103515245u + 12345u;
        buf[at] = "{}[]\":,0123456789-.eE \\u\x80\xff\xc3\xa9" "ab"[(seed >> 8) % 28];
      }
      tokenizer *t = NULL;
      if (tokenizer_load_bytes(buf, n, "damaged.json", &t)) continue;
      loaded++;
      int32_t *ids = NULL;
      size_t m = 0;
      const char *text = "hi ab's \xc3\xa9 <s> x";
      if (!tokenizer_encode(t, text, strlen(text), &ids, &m)) {
        char *s = NULL;
        size_t len;
        if (!tokenizer_decode(t, ids, m, &s, &len)) free(s);
        free(ids);
      }
      tokenizer_free(t);
    }
    free(buf);
    printf("damaged file %d: %d of 1500 still loaded\n", f, loaded);
  }
}

/* The public API (smelt.h) over the same files. */
static void test_public_api(void) {
  const char *json = llama_json();
  smelt_tokenizer *t = NULL;
  CHECK_OK(smelt_tokenizer_load_bytes(json, strlen(json), &t));
  if (!t) return;
  int32_t *ids = NULL;
  size_t n = 0;
  CHECK_OK(smelt_tokenizer_encode(t, "hi \xc3\xa9", 5, 1, &ids, &n));
  CHECK(n == 5 && ids[0] == 1 && ids[1] == 263);
  char *text = NULL;
  size_t len = 0;
  CHECK_OK(smelt_tokenizer_decode(t, ids, n, 1, &text, &len));
  CHECK(text && !strcmp(text, "hi \xc3\xa9") && len == 5);
  smelt_free(text);
  CHECK_OK(smelt_tokenizer_decode(t, ids, n, 0, &text, &len));
  CHECK(text && !strcmp(text, "<s> hi \xc3\xa9"));
  smelt_free(text);
  smelt_tokenizer_stream *s = NULL;
  CHECK_OK(smelt_tokenizer_stream_new(t, 1, &s));
  char all[64] = "";
  for (size_t i = 0; s && i < n; i++) {
    const char *chunk;
    size_t k;
    CHECK_OK(smelt_tokenizer_stream_step(s, ids[i], &chunk, &k));
    strncat(all, chunk, k);
  }
  CHECK(!strcmp(all, "hi \xc3\xa9"));
  smelt_tokenizer_stream_free(s);
  smelt_free(ids);
  CHECK_OK(smelt_tokenizer_encode(t, "hi", 2, 0, &ids, &n));
  CHECK(n == 1 && ids[0] == 263);
  smelt_free(ids);
  int32_t id = -1;
  CHECK_OK(smelt_tokenizer_token_id(t, "</s>", &id));
  CHECK(id == 2 && smelt_tokenizer_eos_id(t) == 2 && smelt_tokenizer_bos_id(t) == 1);
  CHECK(smelt_tokenizer_vocab_size(t) == 264 && !strcmp(smelt_tokenizer_id_token(t, 262), "hi"));
  smelt_tokenizer_free(t);
  CHECK(smelt_tokenizer_load("/nonexistent.json", &t) == SMELT_ERR_IO);
}

int main(void) {
  test_public_api();
  test_byte_level();
  test_byte_fallback_and_stream();
  test_bad_files();
  test_hostile();
  return test_report("test_tokenizer");
}
