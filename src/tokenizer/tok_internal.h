/* The tokenizer's data, shared by its files (not part of the interface). */
#ifndef SMELT_TOKENIZER_TOK_INTERNAL_H
#define SMELT_TOKENIZER_TOK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "util/arena.h"

/* ---- maps (tok_map.c) ---- */
/* Bytes -> int32, open addressing; keys are not copied (they live in the
 * tokenizer's arena).  A later put of the same key replaces the value. */
typedef struct tok_strmap {
  struct tok_strmap_slot {
    const char *key;
    uint32_t len;
    int32_t val;
  } *slots;
  size_t cap, count;
} tok_strmap;
smelt_status tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val);
/* The value, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);
void tok_strmap_free(tok_strmap *m);

/* (left id, right id) -> (rank, merged id), the BPE merges. */
typedef struct tok_pairmap {
  struct tok_pair_slot {
    uint64_t key; /* left << 32 | right, UINT64_MAX = empty */
    uint32_t rank;
    int32_t id;
  } *slots;
  size_t cap, count;
} tok_pairmap;
smelt_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
/* Rank and id of the merge of a and b; false if there is none. */
static inline bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *id);
void tok_pairmap_free(tok_pairmap *m);

static inline uint64_t tok_pair_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}
static inline bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
  if (!m->cap) return false;
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t mask = m->cap - 1;
  for (size_t i = tok_pair_hash(key) & mask;; i = (i + 1) & mask) {
    if (m->slots[i].key == key) {
      *rank = m->slots[i].rank;
      *id = m->slots[i].id;
      return true;
    }
    if (m->slots[i].key == UINT64_MAX) return false;
  }
}

/* ---- configuration ---- */
typedef struct tok_str {
  const char *s;
  size_t n;
} tok_str;

enum tok_norm_kind { NORM_PREPEND, NORM_REPLACE, NORM_SEQUENCE };
typedef struct tok_normalizer {
  enum tok_norm_kind kind;
  tok_str a, b; /* prepend: a; replace: a -> b */
  struct tok_normalizer *items;
  size_t n_items;
} tok_normalizer;

enum tok_regex { REGEX_GPT2, REGEX_LLAMA3 };
enum tok_pre_kind { PRE_BYTELEVEL, PRE_METASPACE, PRE_SPLIT, PRE_SEQUENCE };
enum tok_prepend { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };
typedef struct tok_pretok {
  enum tok_pre_kind kind;
  bool add_prefix_space, use_regex; /* ByteLevel */
  tok_str replacement;              /* Metaspace: the replacement character, UTF-8 */
  enum tok_prepend prepend;         /* Metaspace */
  bool split;                       /* Metaspace */
  enum tok_regex regex;             /* Split (and ByteLevel's use_regex: GPT-2's) */
  int max_digits;                   /* Split: \p{N}{1,max} (0 = unbounded) */
  struct tok_pretok *items;
  size_t n_items;
} tok_pretok;

enum tok_dec_kind { DEC_BYTELEVEL, DEC_METASPACE, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_SEQUENCE };
typedef struct tok_decoder {
  enum tok_dec_kind kind;
  tok_str a, b;             /* replace: a -> b; metaspace: a = replacement; strip: a = content */
  enum tok_prepend prepend; /* metaspace */
  size_t start, stop;       /* strip */
  struct tok_decoder *items;
  size_t n_items;
} tok_decoder;

typedef struct tok_added {
  tok_str content;
  tok_str norm; /* normalized content (== content unless normalized and the normalizer changes it) */
  int32_t id;
  bool special, single_word, lstrip, rstrip, normalized;
} tok_added;

/* Added tokens by first byte, longest first, for matching. */
typedef struct tok_match {
  uint32_t *idx; /* into added */
  uint32_t first[257];
  size_t n;
} tok_match;

/* The ids the post-processor puts around one sequence (add_special_tokens). */
typedef struct tok_template {
  int32_t *before, *after;
  size_t n_before, n_after;
} tok_template;

struct smelt_tokenizer {
  arena mem;
  struct arena *doc_mem; /* the parsed file's strings (vocabulary keys...) */
  char *where; /* the file, for messages */
  /* BPE model */
  tok_strmap vocab;
  tok_pairmap merges;
  tok_str *id_text;  /* id -> text in the vocabulary (else the added token's), n_ids entries; s NULL: none */
  tok_str *dec_text; /* id -> text decode starts from: an added token's (normalized) content first */
  int32_t n_ids;
  int32_t unk_id; /* -1: none */
  bool fuse_unk, byte_fallback, ignore_merges;
  int32_t byte_ids[256]; /* <0xNN> tokens for byte fallback, -1 if missing */
  /* pipeline */
  tok_normalizer *normalizer; /* NULL: none */
  tok_pretok *pretok;         /* NULL: none */
  tok_decoder *decoder;       /* NULL: none (tokens joined by spaces) */
  bool byte_level;            /* a ByteLevel pre-tokenizer maps bytes to the GPT-2 alphabet */
  int32_t byte_level_ids[256]; /* byte_level: id of each byte's mapped character, -1 if missing */
  char byte_utf8[256][2];       /* each byte's mapped character in UTF-8 (1 or 2 bytes) */
  uint8_t byte_utf8_len[256];
  tok_template post;
  tok_added *added;
  size_t n_added;
  tok_match match[2]; /* [0]: normalized=false tokens (matched in the raw text), [1]: the others */
  bool *is_special; /* n_ids entries */
  int32_t bos_id, eos_id;
  /* word cache: piece bytes -> ids */
  pthread_mutex_t cache_lock;
  struct tok_cache *cache;
};

/* The GPT-2 byte <-> character mapping (ByteLevel): printable Latin-1 bytes
 * stand for themselves, the other 68 for U+0100.. in byte order. */
static inline bool tok_byte_printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }
static inline uint32_t tok_byte_char(unsigned b) {
  if (tok_byte_printable(b)) return b;
  unsigned k = b <= 32 ? b : b <= 160 ? b - 94 : 67; /* 0..32 -> 0..32, 127..160 -> 33..66, 173 -> 67 */
  return 256 + k;
}
/* The byte a character of the alphabet stands for, or -1. */
static inline int tok_char_byte(uint32_t cp) {
  if (cp < 256) return tok_byte_printable(cp) ? (int)cp : -1;
  if (cp < 256 + 33) return (int)(cp - 256);
  if (cp < 256 + 67) return (int)(cp - 256 - 33 + 127);
  return cp == 256 + 67 ? 173 : -1;
}

/* A growing array of pieces over a byte buffer. */
typedef struct tok_buf {
  char *s;
  size_t n, cap;
} tok_buf;
smelt_status tok_buf_put(tok_buf *b, const void *s, size_t n);

typedef struct tok_piece {
  size_t off, len;
  bool at_origin; /* starts at offset 0 of the input (Metaspace prepend_scheme "first") */
} tok_piece;
typedef struct tok_pieces {
  tok_buf text;
  tok_piece *v;
  size_t n, cap;
} tok_pieces;
smelt_status tok_pieces_add(tok_pieces *p, const char *s, size_t n, bool at_origin);
void tok_pieces_free(tok_pieces *p);

typedef struct tok_ids {
  int32_t *v;
  size_t n, cap;
} tok_ids;
smelt_status tok_ids_push(tok_ids *ids, int32_t id);

/* tok_split.c: normalizer and pre-tokenizer. */
smelt_status tok_normalize(const tok_normalizer *nm, const char *s, size_t n, tok_buf *out);
smelt_status tok_pre_tokenize(const tok_pretok *pt, const char *s, size_t n, bool at_origin, tok_pieces *out);
/* tok_bpe.c: one piece through the BPE model (appends its ids). */
smelt_status tok_bpe_piece(const tokenizer *t, const char *s, size_t n, tok_ids *out);
void tok_cache_free(struct tok_cache *c);

#endif
