/* Decoding: ids to their token texts, then the decoder chain (ByteLevel,
 * Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence) on the list of
 * strings, as `tokenizers` does, joined at the end.  And the streaming form
 * (tokenizers' DecodeStream): decode a short window of ids again with each
 * new one and hand out what was added once it no longer ends in U+FFFD. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/utf8.h"

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* A list of strings in one buffer. */
typedef struct tlist {
  tok_buf text;
  size_t *off;
  size_t n, cap;
} tlist;

static smelt_status tl_open(tlist *l) { /* starts an empty string at the end */
  if (!l->text.s) TRY(tok_buf_put(&l->text, "", 0)); /* never NULL + offset */
  size_t *o = grow_array(l->off, &l->cap, l->n + 2, sizeof *o, 16, "decoder tokens");
  if (!o) return SMELT_ERR_NOMEM;
  l->off = o;
  l->off[l->n++] = l->text.n;
  l->off[l->n] = l->text.n;
  return SMELT_OK;
}
static smelt_status tl_put(tlist *l, const char *s, size_t n) { /* appends to the last string */
  TRY(tok_buf_put(&l->text, s, n));
  l->off[l->n] = l->text.n;
  return SMELT_OK;
}
static smelt_status tl_add(tlist *l, const char *s, size_t n) {
  TRY(tl_open(l));
  return tl_put(l, s, n);
}
static const char *tl_s(const tlist *l, size_t i) { return l->text.s + l->off[i]; }
static size_t tl_n(const tlist *l, size_t i) { return l->off[i + 1] - l->off[i]; }
static void tl_clear(tlist *l) {
  l->n = 0;
  l->text.n = 0;
  if (l->off) l->off[0] = 0;
}
static void tl_free(tlist *l) {
  free(l->text.s);
  free(l->off);
  memset(l, 0, sizeof *l);
}

/* Bytes to text, each maximal invalid subpart as one U+FFFD (from_utf8_lossy). */
static smelt_status put_lossy(tlist *l, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0;
  while (i < n) {
    uint32_t cp;
    size_t k = u[i] < 0x80 ? 1 : utf8_next(u + i, n - i, &cp);
    if (u[i] >= 0x80 && cp == UTF8_BAD) {
      TRY(tl_put(l, s + run, i - run));
      TRY(tl_put(l, REPLACEMENT, 3));
      run = i + k;
    }
    i += k;
  }
  return tl_put(l, s + run, n - run);
}

static smelt_status replace_in(tlist *out, const char *s, size_t n, tok_str pat, tok_str with) {
  size_t i = 0, last = 0;
  while (i + pat.n <= n) {
    const char *c = memchr(s + i, pat.s[0], n - pat.n + 1 - i); /* the next candidate */
    if (!c) break;
    i = (size_t)(c - s);
    if (!memcmp(s + i, pat.s, pat.n)) {
      TRY(tl_put(out, s + last, i - last));
      TRY(tl_put(out, with.s, with.n));
      i += pat.n;
      last = i;
    } else {
      i++;
    }
  }
  return tl_put(out, s + last, n - last);
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}
/* "<0xNN>": the byte, else -1 (u8::from_str_radix also takes "+N"). */
static int byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
  if (s[3] == '+') return hexval(s[4]);
  int h = hexval(s[3]), l = hexval(s[4]);
  return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static smelt_status flush_bytes(tlist *out, tok_buf *bytes) {
  if (!bytes->n) return SMELT_OK;
  if (utf8_check(bytes->s, bytes->n) == bytes->n) TRY(tl_add(out, bytes->s, bytes->n));
  else
    for (size_t k = 0; k < bytes->n; k++) TRY(tl_add(out, REPLACEMENT, 3));
  bytes->n = 0;
  return SMELT_OK;
}

static smelt_status decode_step(const tok_decoder *d, const tlist *in, tlist *out);

static smelt_status decode_seq(const tok_decoder *d, const tlist *in, tlist *out) {
  tlist a = {0}, b = {0};
  smelt_status st = SMELT_OK;
  for (size_t i = 0; i < in->n && !st; i++) st = tl_add(&a, tl_s(in, i), tl_n(in, i));
  for (size_t k = 0; k < d->n_items && !st; k++) {
    tl_clear(&b);
    st = decode_step(&d->items[k], &a, &b);
    tlist t = a;
    a = b;
    b = t;
  }
  for (size_t i = 0; i < a.n && !st; i++) st = tl_add(out, tl_s(&a, i), tl_n(&a, i));
  tl_free(&a);
  tl_free(&b);
  return st;
}

static smelt_status decode_step(const tok_decoder *d, const tlist *in, tlist *out) {
  switch (d->kind) {
  case DEC_BYTELEVEL: {
    tok_buf bytes = {0};
    smelt_status st = SMELT_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
      const unsigned char *s = (const unsigned char *)tl_s(in, i);
      size_t n = tl_n(in, i), start = bytes.n;
      for (size_t k = 0; k < n && !st;) {
        uint32_t cp;
        k += utf8_next(s + k, n - k, &cp);
        int b = cp == UTF8_BAD ? -1 : tok_char_byte(cp);
        if (b < 0) { /* not of the alphabet: the token's own bytes */
          bytes.n = start;
          st = tok_buf_put(&bytes, s, n);
          break;
        }
        unsigned char c = (unsigned char)b;
        st = tok_buf_put(&bytes, &c, 1);
      }
    }
    if (!st) st = tl_open(out);
    if (!st) st = put_lossy(out, bytes.s ? bytes.s : "", bytes.n);
    free(bytes.s);
    return st;
  }
  case DEC_METASPACE:
    for (size_t i = 0; i < in->n; i++) {
      TRY(tl_open(out));
      bool drop = i == 0 && d->prepend != PREPEND_NEVER;
      TRY(replace_in(out, tl_s(in, i), tl_n(in, i), d->a, drop ? (tok_str){"", 0} : (tok_str){" ", 1}));
    }
    return SMELT_OK;
  case DEC_REPLACE:
    for (size_t i = 0; i < in->n; i++) {
      TRY(tl_open(out));
      TRY(replace_in(out, tl_s(in, i), tl_n(in, i), d->a, d->b));
    }
    return SMELT_OK;
  case DEC_BYTEFALLBACK: {
    tok_buf bytes = {0};
    smelt_status st = SMELT_OK;
    for (size_t i = 0; i < in->n && !st; i++) {
      int b = byte_token(tl_s(in, i), tl_n(in, i));
      if (b >= 0) {
        unsigned char c = (unsigned char)b;
        st = tok_buf_put(&bytes, &c, 1);
        continue;
      }
      st = flush_bytes(out, &bytes);
      if (!st) st = tl_add(out, tl_s(in, i), tl_n(in, i));
    }
    if (!st) st = flush_bytes(out, &bytes);
    free(bytes.s);
    return st;
  }
  case DEC_FUSE:
    TRY(tl_open(out));
    for (size_t i = 0; i < in->n; i++) TRY(tl_put(out, tl_s(in, i), tl_n(in, i)));
    return SMELT_OK;
  case DEC_STRIP:
    for (size_t i = 0; i < in->n; i++) {
      const char *s = tl_s(in, i);
      size_t n = tl_n(in, i), a = 0, b = n;
      for (size_t k = 0; k < d->start && a + d->a.n <= b && !memcmp(s + a, d->a.s, d->a.n); k++) a += d->a.n;
      for (size_t k = 0; k < d->stop && b >= a + d->a.n && !memcmp(s + b - d->a.n, d->a.s, d->a.n); k++) b -= d->a.n;
      TRY(tl_add(out, s + a, b - a));
    }
    return SMELT_OK;
  case DEC_SEQUENCE: return decode_seq(d, in, out);
  }
  return err_set(SMELT_ERR_INTERNAL, "tokenizer: decoder kind %d", d->kind);
}

static smelt_status decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tok_buf *out) {
  tlist toks = {0}, res = {0};
  smelt_status st = SMELT_OK;
  out->n = 0;
  for (size_t i = 0; i < n && !st; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= t->n_ids || !t->dec_text[id].s) {
      st = err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_decode: id %d (at position %zu) is not in the vocabulary (ids 0..%d)",
                   id, i, t->n_ids - 1);
      break;
    }
    if ((flags & TOKENIZER_SKIP_SPECIAL) && t->is_special[id]) continue;
    st = tl_add(&toks, t->dec_text[id].s, t->dec_text[id].n);
  }
  if (!st && t->decoder) {
    st = decode_step(t->decoder, &toks, &res);
    for (size_t i = 0; i < res.n && !st; i++) st = tok_buf_put(out, tl_s(&res, i), tl_n(&res, i));
  } else if (!st) { /* no decoder: the tokens joined by spaces */
    for (size_t i = 0; i < toks.n && !st; i++) {
      if (i) st = tok_buf_put(out, " ", 1);
      if (!st) st = tok_buf_put(out, tl_s(&toks, i), tl_n(&toks, i));
    }
  }
  if (!st && !out->s) st = tok_buf_put(out, "", 0);
  tl_free(&toks);
  tl_free(&res);
  return st;
}

smelt_status tokenizer_decode_ex(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **utf8,
                                 size_t *len) {
  if (!t || (!ids && n) || !utf8 || !len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_decode: NULL argument");
  *utf8 = NULL;
  *len = 0;
  tok_buf out = {0};
  smelt_status st = decode(t, ids, n, flags, &out);
  if (st) {
    free(out.s);
    return st;
  }
  *utf8 = out.s;
  *len = out.n;
  return SMELT_OK;
}

smelt_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char **utf8, size_t *len) {
  return tokenizer_decode_ex(t, ids, n, 0, utf8, len);
}

/* ---- streaming ---- */
struct smelt_tokenizer_stream {
  const tokenizer *t;
  unsigned flags;
  tok_ids ids;        /* the window: ids since the last text handed out, and a few before */
  tok_buf prefix;     /* the decode of the window's first prefix_index ids */
  size_t prefix_index;
  tok_buf cur, out;
};

smelt_status tokenizer_stream_new(const tokenizer *t, unsigned flags, tokenizer_stream **out) {
  if (!t || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_stream_new: NULL argument");
  *out = calloc(1, sizeof **out);
  if (!*out) return err_nomem("decode stream", sizeof **out);
  (*out)->t = t;
  (*out)->flags = flags;
  return tok_buf_put(&(*out)->prefix, "", 0);
}

static bool ends_in_replacement(const tok_buf *b) { return b->n >= 3 && !memcmp(b->s + b->n - 3, REPLACEMENT, 3); }

smelt_status tokenizer_stream_step(tokenizer_stream *s, int32_t id, const char **text, size_t *len) {
  if (!s || !text || !len) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_stream_step: NULL argument");
  *text = "";
  *len = 0;
  const tokenizer *t = s->t;
  if (id < 0 || id >= t->n_ids || !t->dec_text[id].s)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_stream_step: id %d is not in the vocabulary (ids 0..%d)", id,
                   t->n_ids - 1);
  if (!s->prefix.n && s->ids.n) {
    TRY(decode(t, s->ids.v, s->ids.n, s->flags, &s->cur));
    if (!ends_in_replacement(&s->cur)) {
      s->prefix.n = 0;
      TRY(tok_buf_put(&s->prefix, s->cur.s, s->cur.n));
      s->prefix_index = s->ids.n;
    }
  }
  TRY(tok_ids_push(&s->ids, id));
  TRY(decode(t, s->ids.v, s->ids.n, s->flags, &s->cur));
  if (s->cur.n <= s->prefix.n || ends_in_replacement(&s->cur)) return SMELT_OK;
  if (memcmp(s->cur.s, s->prefix.s, s->prefix.n))
    return err_set(SMELT_ERR_RUNTIME, "tokenizer_stream_step: the decode of the window no longer starts with the text "
                                      "already handed out (token %d)", id);
  s->out.n = 0;
  TRY(tok_buf_put(&s->out, s->cur.s + s->prefix.n, s->cur.n - s->prefix.n));
  size_t new_index = s->ids.n - s->prefix_index;
  memmove(s->ids.v, s->ids.v + s->prefix_index, new_index * sizeof *s->ids.v);
  s->ids.n = new_index;
  TRY(decode(t, s->ids.v, s->ids.n, s->flags, &s->prefix));
  s->prefix_index = new_index;
  *text = s->out.s;
  *len = s->out.n;
  return SMELT_OK;
}

void tokenizer_stream_free(tokenizer_stream *s) {
  if (!s) return;
  free(s->ids.v);
  free(s->prefix.s);
  free(s->cur.s);
  free(s->out.s);
  free(s);
}
