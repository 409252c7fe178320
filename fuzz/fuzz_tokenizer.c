/* libFuzzer target: the tokenizer.json reader must reject any malformed file
 * with an error, never crash, hang or over-allocate; a file it accepts must
 * encode, decode and stream text without fault. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tokenizer *t;
  if (tokenizer_load_bytes((const char *)data, size, "fuzz.json", &t) != SMELT_OK) return 0;
  static const char text[] = "Hi ab's  \xc3\xa9\xe6\x97\xa5 <s></s><|endoftext|> 12345\n\t x\xf0\x9f\x98\x80";
  int32_t *ids;
  size_t n;
  if (tokenizer_encode(t, text, sizeof text - 1, &ids, &n) == SMELT_OK) {
    char *s;
    size_t len;
    if (tokenizer_decode_ex(t, ids, n, TOKENIZER_SKIP_SPECIAL, &s, &len) == SMELT_OK) free(s);
    tokenizer_stream *st;
    if (tokenizer_stream_new(t, 0, &st) == SMELT_OK) {
      for (size_t i = 0; i < n; i++) {
        const char *c;
        size_t k;
        if (tokenizer_stream_step(st, ids[i], &c, &k)) break;
      }
      tokenizer_stream_free(st);
    }
    free(ids);
  }
  /* every id the tokenizer has, decoded alone */
  int32_t v = tokenizer_vocab_size(t);
  for (int32_t id = 0; id < v && id < 4096; id++) {
    char *s;
    size_t len;
    if (tokenizer_decode(t, &id, 1, &s, &len) == SMELT_OK) free(s);
  }
  tokenizer_free(t);
  return 0;
}
