/* Encoding: added tokens are matched first (leftmost-longest, before the
 * normalizer for tokens with normalized=false, after it for the others), the
 * text between them goes through the normalizer, the pre-tokenizer and the
 * BPE model, and the post-processor's special tokens go around the result. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_class.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/utf8.h"

typedef struct seg {
  size_t off, len;
  int32_t id; /* an added token, or -1 for text */
} seg;
typedef struct segs {
  seg *v;
  size_t n, cap;
} segs;

static smelt_status seg_add(segs *s, size_t off, size_t len, int32_t id) {
  if (!len && id < 0) return SMELT_OK;
  seg *v = grow_array(s->v, &s->cap, s->n + 1, sizeof *v, 16, "tokenizer segments");
  if (!v) return SMELT_ERR_NOMEM;
  s->v = v;
  s->v[s->n++] = (seg){off, len, id};
  return SMELT_OK;
}

/* The class of the character that ends at s[end) / starts at s[start]. */
static int class_before(const char *s, size_t end) {
  size_t b = end - 1;
  while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
  uint32_t cp;
  utf8_next((const unsigned char *)s + b, end - b, &cp);
  return cp == UTF8_BAD ? UC_OTHER : unicode_class(cp);
}
static int class_at(const char *s, size_t n, size_t i) {
  uint32_t cp;
  utf8_next((const unsigned char *)s + i, n - i, &cp);
  return cp == UTF8_BAD ? UC_OTHER : unicode_class(cp);
}
static size_t char_len_before(const char *s, size_t end) {
  size_t b = end - 1;
  while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
  return end - b;
}

/* Splits s at the added tokens whose normalized flag is `normalized`, as
 * tokenizers' AddedVocabulary::find_matches. */
static smelt_status split_added(const tokenizer *t, bool normalized, const char *s, size_t n, segs *out) {
  size_t start_offset = 0;
  size_t i = 0;
  const tok_match *m = &t->match[normalized];
  while (i < n && m->n) {
    unsigned char c0 = (unsigned char)s[i];
    size_t best = SIZE_MAX;
    for (uint32_t k = m->first[c0]; k < m->first[c0 + 1]; k++) {
      const tok_added *a = &t->added[m->idx[k]];
      const tok_str *p = normalized ? &a->norm : &a->content;
      if (p->n <= n - i && !memcmp(s + i, p->s, p->n)) {
        best = m->idx[k];
        break; /* sorted longest first */
      }
    }
    if (best == SIZE_MAX) {
      i++;
      continue;
    }
    const tok_added *a = &t->added[best];
    size_t start = i, stop = i + (normalized ? a->norm.n : a->content.n);
    i = stop;
    if (start < start_offset) continue; /* inside whitespace an earlier token took */
    if (a->single_word) {
      bool start_space = start == 0 || !uc_is_word(class_before(s, start));
      bool stop_space = stop == n || !uc_is_word(class_at(s, n, stop));
      if (!start_space || !stop_space) continue;
    }
    if (a->lstrip)
      while (start > start_offset && uc_is_space(class_before(s, start))) start -= char_len_before(s, start);
    if (a->rstrip) {
      while (stop < n && uc_is_space(class_at(s, n, stop))) {
        uint32_t cp;
        stop += utf8_next((const unsigned char *)s + stop, n - stop, &cp);
      }
    }
    if (start_offset < start) TRY(seg_add(out, start_offset, start - start_offset, -1));
    TRY(seg_add(out, start, stop - start, a->id));
    start_offset = stop;
  }
  return seg_add(out, start_offset, n - start_offset, -1);
}

static smelt_status encode_text(const tokenizer *t, const char *s, size_t n, bool at_origin, tok_ids *ids) {
  tok_pieces pieces = {0};
  smelt_status st = tok_pre_tokenize(t->pretok, s, n, at_origin, &pieces);
  for (size_t i = 0; i < pieces.n && !st; i++) st = tok_bpe_piece(t, pieces.text.s + pieces.v[i].off, pieces.v[i].len, ids);
  tok_pieces_free(&pieces);
  return st;
}

static smelt_status encode(const tokenizer *t, const char *s, size_t n, unsigned flags, tok_ids *ids) {
  bool special = !(flags & TOKENIZER_NO_SPECIAL);
  if (special)
    for (size_t i = 0; i < t->post.n_before; i++) TRY(tok_ids_push(ids, t->post.before[i]));
  segs outer = {0}, inner = {0};
  tok_buf norm = {0};
  smelt_status st = split_added(t, false, s, n, &outer);
  for (size_t k = 0; k < outer.n && !st; k++) {
    const seg *g = &outer.v[k];
    if (g->id >= 0) {
      st = tok_ids_push(ids, g->id);
      continue;
    }
    const char *text = s + g->off;
    size_t len = g->len;
    if (t->normalizer) {
      if ((st = tok_normalize(t->normalizer, text, len, &norm))) break;
      text = norm.s;
      len = norm.n;
    }
    inner.n = 0;
    if ((st = split_added(t, true, text, len, &inner))) break;
    for (size_t j = 0; j < inner.n && !st; j++) {
      const seg *h = &inner.v[j];
      if (h->id >= 0) st = tok_ids_push(ids, h->id);
      else st = encode_text(t, text + h->off, h->len, g->off == 0 && h->off == 0, ids);
    }
  }
  free(outer.v);
  free(inner.v);
  free(norm.s);
  if (!st && special)
    for (size_t i = 0; i < t->post.n_after && !st; i++) st = tok_ids_push(ids, t->post.after[i]);
  return st;
}

smelt_status tokenizer_encode_ex(const tokenizer *t, const char *utf8, size_t len, unsigned flags, int32_t **ids,
                                 size_t *n) {
  if (!t || (!utf8 && len) || !ids || !n) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_encode: NULL argument");
  *ids = NULL;
  *n = 0;
  if (len >= UINT32_MAX)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_encode: a text of %zu bytes (at most 4 GiB at once)", len);
  size_t bad = utf8_check(utf8, len);
  if (bad < len)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_encode: the text is not valid UTF-8 (byte 0x%02x at offset %zu)",
                   (unsigned char)utf8[bad], bad);
  tok_ids out = {0};
  smelt_status st = encode(t, utf8 ? utf8 : "", len, flags, &out);
  if (st) {
    free(out.v);
    return st;
  }
  if (!out.v) {
    out.v = malloc(sizeof *out.v); /* never NULL on success */
    if (!out.v) return err_nomem("token ids", sizeof *out.v);
  }
  *ids = out.v;
  *n = out.n;
  return SMELT_OK;
}

smelt_status tokenizer_encode(const tokenizer *t, const char *utf8, size_t len, int32_t **ids, size_t *n) {
  return tokenizer_encode_ex(t, utf8, len, 0, ids, n);
}
