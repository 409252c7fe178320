/* Normalizers (Prepend, Replace, Sequence) and pre-tokenizers (ByteLevel,
 * Metaspace, Split with the GPT-2 or Llama-3 regex, Sequence).  The regexes
 * are written out by hand over Unicode classes (unicode_class.h); each
 * matcher below follows the regex's alternatives in order, with the same
 * backtracking outcome as Oniguruma's leftmost-first search. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_class.h"
#include "util/err.h"
#include "util/utf8.h"

/* ---- normalizers ---- */

static smelt_status replace_all(const char *s, size_t n, tok_str pat, tok_str with, tok_buf *out) {
  size_t i = 0, last = 0;
  while (pat.n && i + pat.n <= n) {
    const char *c = memchr(s + i, pat.s[0], n - pat.n + 1 - i); /* the next candidate */
    if (!c) break;
    i = (size_t)(c - s);
    if (!memcmp(s + i, pat.s, pat.n)) {
      TRY(tok_buf_put(out, s + last, i - last));
      TRY(tok_buf_put(out, with.s, with.n));
      i += pat.n;
      last = i;
    } else {
      i++;
    }
  }
  return tok_buf_put(out, s + last, n - last);
}

smelt_status tok_normalize(const tok_normalizer *nm, const char *s, size_t n, tok_buf *out) {
  out->n = 0;
  switch (nm->kind) {
  case NORM_PREPEND:
    if (n) TRY(tok_buf_put(out, nm->a.s, nm->a.n));
    return tok_buf_put(out, s, n);
  case NORM_REPLACE: return replace_all(s, n, nm->a, nm->b, out);
  case NORM_SEQUENCE: {
    tok_buf tmp = {0};
    smelt_status st = tok_buf_put(out, s, n);
    for (size_t i = 0; !st && i < nm->n_items; i++) {
      tmp.n = 0;
      st = tok_buf_put(&tmp, out->s, out->n);
      if (!st) st = tok_normalize(&nm->items[i], tmp.s, tmp.n, out);
    }
    free(tmp.s);
    return st;
  }
  }
  return err_set(SMELT_ERR_INTERNAL, "tokenizer: normalizer kind %d", nm->kind);
}

/* ---- regex splitting ---- */

typedef struct uchar {
  uint32_t cp;
  uint32_t off; /* byte offset */
  uint8_t cls;
} uchar;

static bool is_l(const uchar *c) { return c->cls == UC_L; }
static bool is_n(const uchar *c) { return uc_is_number(c->cls); }
static bool is_s(const uchar *c) { return c->cls == UC_SPACE; }
static bool is_other(const uchar *c) { return !is_l(c) && !is_n(c) && !is_s(c); } /* [^\s\p{L}\p{N}] */
static bool is_crlf(const uchar *c) { return c->cp == '\r' || c->cp == '\n'; }

static uint32_t lower_ascii(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitive in ASCII when icase): the end, or 0. */
static size_t contraction(const uchar *c, size_t n, size_t i, bool icase) {
  if (c[i].cp != '\'' || i + 1 >= n) return 0;
  uint32_t a = icase ? lower_ascii(c[i + 1].cp) : c[i + 1].cp;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= n) return 0;
  uint32_t b = icase ? lower_ascii(c[i + 2].cp) : c[i + 2].cp;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return 0;
}

/* \s+(?!\S) then \s+, at a whitespace character i. */
static size_t space_run(const uchar *c, size_t n, size_t i) {
  size_t j = i;
  while (j < n && is_s(&c[j])) j++;
  if (j == n || j - 1 == i) return j; /* to the end; or one space before a non-space (the plain \s+) */
  return j - 1;                        /* leave the last space to the next word */
}

/* GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const uchar *c, size_t n, size_t i) {
  size_t j = contraction(c, n, i, false);
  if (j) return j;
  size_t k = i + (c[i].cp == ' ' && i + 1 < n);
  if (is_l(&c[k])) {
    for (j = k; j < n && is_l(&c[j]);) j++;
    return j;
  }
  if (is_n(&c[k])) {
    for (j = k; j < n && is_n(&c[j]);) j++;
    return j;
  }
  if (is_other(&c[k])) {
    for (j = k; j < n && is_other(&c[j]);) j++;
    return j;
  }
  return space_run(c, n, i); /* c[i] is whitespace: nothing else is left */
}

/* Llama-3 (max_digits 3) and Qwen2 (1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const uchar *c, size_t n, size_t i, int max_digits) {
  size_t j = contraction(c, n, i, true);
  if (j) return j;
  size_t k = i;
  if (!is_l(&c[i]) && !is_n(&c[i]) && !is_crlf(&c[i]) && i + 1 < n && is_l(&c[i + 1])) k = i + 1;
  if (is_l(&c[k])) {
    for (j = k; j < n && is_l(&c[j]);) j++;
    return j;
  }
  if (is_n(&c[i])) {
    for (j = i; j < n && is_n(&c[j]) && (max_digits <= 0 || j - i < (size_t)max_digits);) j++;
    return j;
  }
  k = i + (c[i].cp == ' ' && i + 1 < n);
  if (is_other(&c[k])) {
    for (j = k; j < n && is_other(&c[j]);) j++;
    while (j < n && is_crlf(&c[j])) j++;
    return j;
  }
  /* c[i] is whitespace: \s*[\r\n]+ ends after the run's last CR or LF */
  size_t end = i;
  while (end < n && is_s(&c[end])) end++;
  for (size_t p = end; p > i; p--)
    if (is_crlf(&c[p - 1])) return p;
  return space_run(c, n, i);
}

static smelt_status regex_split(enum tok_regex re, int max_digits, const char *s, size_t n, bool at_origin,
                                tok_pieces *out) {
  if (!n) return SMELT_OK;
  uchar stack[256], *c = n <= 256 ? stack : malloc(n * sizeof *c);
  if (!c) return err_nomem("tokenizer character buffer", n * sizeof *c);
  size_t m = 0;
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t k = u[i] < 0x80 ? (cp = u[i], 1) : utf8_next(u + i, n - i, &cp);
    c[m].cp = cp;
    c[m].off = (uint32_t)i;
    c[m].cls = cp == UTF8_BAD ? UC_OTHER : (uint8_t)unicode_class(cp);
    m++;
    i += k;
  }
  smelt_status st = SMELT_OK;
  for (size_t i = 0; i < m && !st;) {
    size_t j = re == REGEX_GPT2 ? match_gpt2(c, m, i) : match_llama3(c, m, i, max_digits);
    if (j <= i) j = i + 1; /* cannot happen: every character matches an alternative */
    size_t b0 = c[i].off, b1 = j < m ? c[j].off : n;
    st = tok_pieces_add(out, s + b0, b1 - b0, at_origin && i == 0);
    i = j;
  }
  if (c != stack) free(c);
  return st;
}

/* ---- pre-tokenizers ---- */

static smelt_status metaspace(const tok_pretok *pt, const char *s, size_t n, bool at_origin, tok_pieces *out) {
  tok_buf b = {0};
  smelt_status st = SMELT_OK;
  const tok_str rep = pt->replacement;
  bool starts = false;
  /* does the text (after replacing spaces) start with the replacement? */
  if (n && s[0] == ' ') starts = true;
  else if (n >= rep.n && !memcmp(s, rep.s, rep.n)) starts = true;
  bool prepend = !starts && (pt->prepend == PREPEND_ALWAYS || (pt->prepend == PREPEND_FIRST && at_origin));
  if (prepend) st = tok_buf_put(&b, rep.s, rep.n);
  if (!st) st = replace_all(s, n, (tok_str){" ", 1}, rep, &b);
  if (!st) {
    if (!pt->split) {
      st = tok_pieces_add(out, b.s, b.n, at_origin);
    } else {
      /* split before every replacement character (SplitDelimiterBehavior::MergedWithNext) */
      size_t start = 0;
      for (size_t i = 1; i + rep.n <= b.n && !st; i++)
        if (!memcmp(b.s + i, rep.s, rep.n)) {
          st = tok_pieces_add(out, b.s + start, i - start, at_origin && start == 0);
          start = i;
          i += rep.n - 1;
        }
      if (!st) st = tok_pieces_add(out, b.s + start, b.n - start, at_origin && start == 0);
    }
  }
  free(b.s);
  return st;
}

static smelt_status pre_one(const tok_pretok *pt, const char *s, size_t n, bool at_origin, tok_pieces *out) {
  switch (pt->kind) {
  case PRE_BYTELEVEL:
    if (pt->add_prefix_space && (!n || s[0] != ' ')) {
      tok_buf b = {0};
      smelt_status st = tok_buf_put(&b, " ", 1);
      if (!st) st = tok_buf_put(&b, s, n);
      if (!st) st = pt->use_regex ? regex_split(REGEX_GPT2, 0, b.s, b.n, at_origin, out)
                                  : tok_pieces_add(out, b.s, b.n, at_origin);
      free(b.s);
      return st;
    }
    return pt->use_regex ? regex_split(REGEX_GPT2, 0, s, n, at_origin, out) : tok_pieces_add(out, s, n, at_origin);
  case PRE_METASPACE: return metaspace(pt, s, n, at_origin, out);
  case PRE_SPLIT: return regex_split(pt->regex, pt->max_digits, s, n, at_origin, out);
  case PRE_SEQUENCE: {
    tok_pieces a = {0}, b = {0};
    smelt_status st = tok_pieces_add(&a, s, n, at_origin);
    for (size_t k = 0; k < pt->n_items && !st; k++) {
      b.n = 0;
      b.text.n = 0;
      for (size_t i = 0; i < a.n && !st; i++)
        st = pre_one(&pt->items[k], a.text.s + a.v[i].off, a.v[i].len, a.v[i].at_origin, &b);
      tok_pieces t = a;
      a = b;
      b = t;
    }
    for (size_t i = 0; i < a.n && !st; i++) st = tok_pieces_add(out, a.text.s + a.v[i].off, a.v[i].len, a.v[i].at_origin);
    tok_pieces_free(&a);
    tok_pieces_free(&b);
    return st;
  }
  }
  return err_set(SMELT_ERR_INTERNAL, "tokenizer: pre-tokenizer kind %d", pt->kind);
}

smelt_status tok_pre_tokenize(const tok_pretok *pt, const char *s, size_t n, bool at_origin, tok_pieces *out) {
  if (!pt) return tok_pieces_add(out, s, n, at_origin);
  return pre_one(pt, s, n, at_origin, out);
}
