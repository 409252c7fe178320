/* Text tokenizer for Hugging Face `tokenizer.json` files: byte-level BPE
 * (GPT-2, Llama-3 style) and SentencePiece-style BPE with byte fallback
 * (Llama-2 style).  Encode and decode give the same ids and text as the
 * `tokenizers` library (see README.md in this folder for what is covered).
 *
 * A loaded tokenizer is immutable apart from an internal word cache guarded
 * by a mutex: encode/decode may be called from several threads at once.
 * Every function returns a smelt_status; on failure the message (err_set)
 * names what went wrong and where (file, JSON path, line:column). */
#ifndef SMELT_TOKENIZER_TOKENIZER_H
#define SMELT_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

typedef struct smelt_tokenizer tokenizer; /* smelt.h: smelt_tokenizer */
typedef struct smelt_tokenizer_stream tokenizer_stream;

/* Loads a Hugging Face tokenizer.json.  *out is freed with tokenizer_free. */
smelt_status tokenizer_load(const char *tokenizer_json_path, tokenizer **out);
/* The same from a JSON document in memory (len bytes; need not end in NUL).
 * where names the source in error messages (NULL: "tokenizer.json"). */
smelt_status tokenizer_load_bytes(const char *json, size_t len, const char *where, tokenizer **out);
void tokenizer_free(tokenizer *t);

/* Flags for the _ex forms. */
enum {
  TOKENIZER_NO_SPECIAL = 1u << 0, /* encode: no post-processor tokens (BOS...): add_special_tokens=False */
  TOKENIZER_SKIP_SPECIAL = 1u << 1, /* decode: leave special tokens out: skip_special_tokens=True */
};

/* Encodes len bytes of UTF-8 text (invalid UTF-8 is an error naming the
 * byte offset) as `tokenizers`' encode(text) does with its defaults:
 * added tokens matched first, then normalizer, pre-tokenizer, BPE, and the
 * post-processor's special tokens (add_special_tokens=True).  *ids
 * (malloc'd, freed by the caller with free) holds *n ids. */
smelt_status tokenizer_encode(const tokenizer *t, const char *utf8, size_t len, int32_t **ids, size_t *n);
smelt_status tokenizer_encode_ex(const tokenizer *t, const char *utf8, size_t len, unsigned flags,
                                 int32_t **ids, size_t *n);

/* Decodes n ids to text as `tokenizers`' decode(ids, skip_special_tokens=False):
 * *utf8 (malloc'd, NUL-terminated, freed with free) holds *len bytes.  Bytes
 * that are not valid UTF-8 become U+FFFD, as in the library.  An id outside
 * the vocabulary is an error naming its position. */
smelt_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char **utf8, size_t *len);
smelt_status tokenizer_decode_ex(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                                 char **utf8, size_t *len);

/* Streaming decode, one token at a time (as `tokenizers`' DecodeStream): each
 * step gives the text the new token completes.  A character whose UTF-8 bytes
 * are split across tokens comes out whole with the token that completes it
 * (until then the step gives ""); the concatenated steps equal the decode of
 * all ids.  *text stays valid until the next call on the stream. */
smelt_status tokenizer_stream_new(const tokenizer *t, unsigned flags, tokenizer_stream **out);
smelt_status tokenizer_stream_step(tokenizer_stream *s, int32_t id, const char **text, size_t *len);
void tokenizer_stream_free(tokenizer_stream *s);

/* The id of a token by its text ("<|endoftext|>", "</s>"): added tokens
 * first, then the vocabulary.  SMELT_ERR_INVALID_ARGUMENT if it has none. */
smelt_status tokenizer_token_id(const tokenizer *t, const char *token, int32_t *id);
/* The text of one token id as stored in the vocabulary (byte-level tokens in
 * their mapped form, "Ġthe"); NULL if the id has none.  Owned by t. */
const char *tokenizer_id_token(const tokenizer *t, int32_t id);
/* One more than the largest id (vocabulary and added tokens). */
int32_t tokenizer_vocab_size(const tokenizer *t);
/* BOS / EOS ids: the first of the usual names that is a special token
 * ("<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>", "<|endoftext|>"...
 * see tokenizer.c); -1 when none is.  tokenizer_is_special: an added token
 * marked special. */
int32_t tokenizer_bos_id(const tokenizer *t);
int32_t tokenizer_eos_id(const tokenizer *t);
int tokenizer_is_special(const tokenizer *t, int32_t id);

#endif
