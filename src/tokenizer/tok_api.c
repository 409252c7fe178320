/* Lookups on a loaded tokenizer, and the public C API (smelt_tokenizer_*
 * in smelt.h), which is the internal one under smelt_ names. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/err.h"
#include "util/quote.h"

smelt_status tokenizer_token_id(const tokenizer *t, const char *token, int32_t *id) {
  if (!t || !token || !id) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_token_id: NULL argument");
  size_t n = strlen(token);
  for (size_t k = 0; k < t->n_added; k++)
    if (t->added[k].content.n == n && !memcmp(t->added[k].content.s, token, n)) {
      *id = t->added[k].id;
      return SMELT_OK;
    }
  int32_t v = tok_strmap_get(&t->vocab, token, n);
  if (v < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer: no token %s", q(token));
  *id = v;
  return SMELT_OK;
}

const char *tokenizer_id_token(const tokenizer *t, int32_t id) {
  if (!t || id < 0 || id >= t->n_ids) return NULL;
  return t->id_text[id].s;
}

int32_t tokenizer_vocab_size(const tokenizer *t) { return t ? t->n_ids : 0; }
int32_t tokenizer_bos_id(const tokenizer *t) { return t ? t->bos_id : -1; }
int32_t tokenizer_eos_id(const tokenizer *t) { return t ? t->eos_id : -1; }
int tokenizer_is_special(const tokenizer *t, int32_t id) { return t && id >= 0 && id < t->n_ids && t->is_special[id]; }

/* ---- smelt.h ---- */
smelt_status smelt_tokenizer_load(const char *tokenizer_json_path, smelt_tokenizer **out) {
  return tokenizer_load(tokenizer_json_path, out);
}
smelt_status smelt_tokenizer_load_bytes(const char *json, size_t len, smelt_tokenizer **out) {
  return tokenizer_load_bytes(json, len, NULL, out);
}
void smelt_tokenizer_free(smelt_tokenizer *t) { tokenizer_free(t); }

smelt_status smelt_tokenizer_encode(const smelt_tokenizer *t, const char *text, size_t len, int add_special_tokens,
                                    int32_t **ids, size_t *n) {
  return tokenizer_encode_ex(t, text, len, add_special_tokens ? 0 : TOKENIZER_NO_SPECIAL, ids, n);
}
smelt_status smelt_tokenizer_decode(const smelt_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                                    char **text, size_t *len) {
  return tokenizer_decode_ex(t, ids, n, skip_special_tokens ? TOKENIZER_SKIP_SPECIAL : 0, text, len);
}
smelt_status smelt_tokenizer_stream_new(const smelt_tokenizer *t, int skip_special_tokens, smelt_tokenizer_stream **out) {
  return tokenizer_stream_new(t, skip_special_tokens ? TOKENIZER_SKIP_SPECIAL : 0, out);
}
smelt_status smelt_tokenizer_stream_step(smelt_tokenizer_stream *s, int32_t id, const char **text, size_t *len) {
  return tokenizer_stream_step(s, id, text, len);
}
void smelt_tokenizer_stream_free(smelt_tokenizer_stream *s) { tokenizer_stream_free(s); }

smelt_status smelt_tokenizer_token_id(const smelt_tokenizer *t, const char *token, int32_t *id) {
  return tokenizer_token_id(t, token, id);
}
const char *smelt_tokenizer_id_token(const smelt_tokenizer *t, int32_t id) { return tokenizer_id_token(t, id); }
int32_t smelt_tokenizer_vocab_size(const smelt_tokenizer *t) { return tokenizer_vocab_size(t); }
int32_t smelt_tokenizer_bos_id(const smelt_tokenizer *t) { return tokenizer_bos_id(t); }
int32_t smelt_tokenizer_eos_id(const smelt_tokenizer *t) { return tokenizer_eos_id(t); }
void smelt_free(void *p) { free(p); }
