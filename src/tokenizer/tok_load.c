/* Reads a Hugging Face tokenizer.json into a tokenizer: the BPE model
 * (vocab, merges, options), added tokens, normalizer, pre-tokenizer,
 * post-processor and decoder.  Every error names the file, the line and
 * column, and the JSON path of what is wrong; parts that smelt does not
 * implement are SMELT_ERR_UNSUPPORTED naming the type. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/err.h"
#include "util/file.h"
#include "util/json.h"
#include "util/quote.h"
#include "util/utf8.h"

#define TOK_MAX_ID (1 << 24) /* ids above this are taken as a damaged file */
#define TOK_MAX_FILE ((size_t)1 << 30)

typedef struct ctx {
  tokenizer *t;
  const char *where;
} ctx;

__attribute__((format(printf, 5, 6))) static smelt_status bad(const ctx *c, const json_value *v, smelt_status code,
                                                              const char *path, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (v) return err_set(code, "%s:%u:%u: %s: %s", c->where, v->line, v->col, path, msg);
  return err_set(code, "%s: %s: %s", c->where, path, msg);
}

/* A JSON path in a small buffer: "pre_tokenizer.pretokenizers[2]". */
typedef struct jpath {
  char s[160];
} jpath;
static jpath sub(const char *base, const char *key, long index) {
  jpath p;
  int r = index >= 0 ? snprintf(p.s, sizeof p.s, "%s%s%s[%ld]", base, *base && key ? "." : "", key ? key : "", index)
                     : snprintf(p.s, sizeof p.s, "%s%s%s", base, *base ? "." : "", key);
  if (r < 0 || (size_t)r >= sizeof p.s) memcpy(p.s + sizeof p.s - 4, "...", 4); /* cut */
  return p;
}


static smelt_status want(const ctx *c, const json_value *v, json_type type, const char *path) {
  if (!v) return bad(c, NULL, SMELT_ERR_INVALID_MODEL, path, "missing (expected %s)", json_type_name(type));
  if (v->type != type)
    return bad(c, v, SMELT_ERR_INVALID_MODEL, path, "expected %s, found %s", json_type_name(type), json_type_name(v->type));
  return SMELT_OK;
}

static smelt_status opt_bool(const ctx *c, const json_value *o, const char *key, const char *base, bool dflt, bool *out) {
  const json_value *v = json_get(o, key);
  *out = dflt;
  if (!v || v->type == JSON_NULL) return SMELT_OK;
  TRY(want(c, v, JSON_BOOL, sub(base, key, -1).s));
  *out = v->u.boolean;
  return SMELT_OK;
}

static smelt_status as_int(const ctx *c, const json_value *v, const char *path, long lo, long hi, long *out) {
  TRY(want(c, v, JSON_NUMBER, path));
  double d = v->u.number;
  if (!(d >= (double)lo && d <= (double)hi) || d != floor(d))
    return bad(c, v, SMELT_ERR_INVALID_MODEL, path, "expected an integer in %ld..%ld, found %g", lo, hi, d);
  *out = (long)d;
  return SMELT_OK;
}

static smelt_status str_of(const ctx *c, const json_value *v, const char *path, tok_str *out) {
  TRY(want(c, v, JSON_STRING, path));
  *out = (tok_str){v->u.str, v->n};
  return SMELT_OK;
}

/* The "type" of a component object. */
static smelt_status type_of(const ctx *c, const json_value *o, const char *path, const char **type) {
  TRY(want(c, o, JSON_OBJECT, path));
  const json_value *t = json_get(o, "type");
  TRY(want(c, t, JSON_STRING, sub(path, "type", -1).s));
  *type = t->u.str;
  return SMELT_OK;
}

static smelt_status unsupported(const ctx *c, const json_value *o, const char *path, const char *what, const char *type,
                                const char *supported) {
  return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "%s type %s is not supported (smelt reads %s)", what,
             q_n(type, strlen(type)), supported);
}

/* A copy into the tokenizer's arena. */
static smelt_status keep(tokenizer *t, tok_str s, tok_str *out) {
  char *p = arena_strndup(&t->mem, s.s, s.n);
  if (!p) return err_nomem("tokenizer string", s.n + 1);
  *out = (tok_str){p, s.n};
  return SMELT_OK;
}

/* A pattern object {"String": "..."}; {"Regex": ...} is refused unless regex_ok (then *is_regex). */
static smelt_status pattern_of(const ctx *c, const json_value *o, const char *path, tok_str *out, bool *is_regex) {
  TRY(want(c, o, JSON_OBJECT, path));
  const json_value *s = json_get(o, "String");
  if (s) {
    TRY(str_of(c, s, sub(path, "String", -1).s, out));
    if (is_regex) *is_regex = false;
    return SMELT_OK;
  }
  const json_value *r = json_get(o, "Regex");
  if (r && is_regex) {
    TRY(str_of(c, r, sub(path, "Regex", -1).s, out));
    *is_regex = true;
    return SMELT_OK;
  }
  if (r) return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "a Regex pattern is not supported here (only String)");
  return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "expected {\"String\": ...} or {\"Regex\": ...}");
}

/* A single character given as a string (Metaspace replacement, Strip content). */
static smelt_status one_char(const ctx *c, const json_value *v, const char *path, tok_str *out) {
  TRY(str_of(c, v, path, out));
  uint32_t cp;
  if (!out->n || utf8_next((const unsigned char *)out->s, out->n, &cp) != out->n)
    return bad(c, v, SMELT_ERR_INVALID_MODEL, path, "expected a single character");
  return SMELT_OK;
}

/* ---- normalizer ---- */
static smelt_status load_normalizer(ctx *c, const json_value *o, const char *path, tok_normalizer *n, int depth) {
  const char *type;
  TRY(type_of(c, o, path, &type));
  if (depth > 8) return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "Sequence nested too deep");
  if (!strcmp(type, "Prepend")) {
    n->kind = NORM_PREPEND;
    return str_of(c, json_get(o, "prepend"), sub(path, "prepend", -1).s, &n->a);
  }
  if (!strcmp(type, "Replace")) {
    n->kind = NORM_REPLACE;
    TRY(pattern_of(c, json_get(o, "pattern"), sub(path, "pattern", -1).s, &n->a, NULL));
    if (!n->a.n) return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "an empty Replace pattern is not supported");
    return str_of(c, json_get(o, "content"), sub(path, "content", -1).s, &n->b);
  }
  if (!strcmp(type, "Sequence")) {
    const json_value *a = json_get(o, "normalizers");
    jpath p = sub(path, "normalizers", -1);
    TRY(want(c, a, JSON_ARRAY, p.s));
    n->kind = NORM_SEQUENCE;
    n->items = arena_alloc(&c->t->mem, (a->n ? a->n : 1) * sizeof *n->items);
    if (!n->items) return err_nomem("normalizers", a->n * sizeof *n->items);
    n->n_items = a->n;
    for (size_t i = 0; i < a->n; i++)
      TRY(load_normalizer(c, &a->u.items[i], sub(path, "normalizers", (long)i).s, &n->items[i], depth + 1));
    return SMELT_OK;
  }
  return unsupported(c, o, path, "normalizer", type, "Prepend, Replace with a String pattern, Sequence");
}

/* ---- pre-tokenizer ---- */
static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static smelt_status prepend_scheme(const ctx *c, const json_value *o, const char *path, enum tok_prepend *out) {
  const json_value *v = json_get(o, "prepend_scheme");
  *out = PREPEND_ALWAYS;
  if (v && v->type != JSON_NULL) {
    TRY(want(c, v, JSON_STRING, sub(path, "prepend_scheme", -1).s));
    if (!strcmp(v->u.str, "always")) *out = PREPEND_ALWAYS;
    else if (!strcmp(v->u.str, "first")) *out = PREPEND_FIRST;
    else if (!strcmp(v->u.str, "never")) *out = PREPEND_NEVER;
    else return bad(c, v, SMELT_ERR_INVALID_MODEL, sub(path, "prepend_scheme", -1).s, "expected always, first or never");
  }
  bool add_prefix_space;
  TRY(opt_bool(c, o, "add_prefix_space", path, true, &add_prefix_space));
  if (!add_prefix_space) {
    if (*out != PREPEND_NEVER && v && v->type != JSON_NULL)
      return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "add_prefix_space does not match declared prepend_scheme");
    *out = PREPEND_NEVER;
  }
  return SMELT_OK;
}

static smelt_status load_pretok(ctx *c, const json_value *o, const char *path, tok_pretok *p, int depth, bool last) {
  const char *type;
  TRY(type_of(c, o, path, &type));
  if (depth > 8) return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "Sequence nested too deep");
  if (!strcmp(type, "ByteLevel")) {
    p->kind = PRE_BYTELEVEL;
    TRY(opt_bool(c, o, "add_prefix_space", path, true, &p->add_prefix_space));
    TRY(opt_bool(c, o, "use_regex", path, true, &p->use_regex));
    if (!last)
      return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "a ByteLevel pre-tokenizer must be the last of a Sequence");
    c->t->byte_level = true;
    return SMELT_OK;
  }
  if (!strcmp(type, "Metaspace")) {
    p->kind = PRE_METASPACE;
    TRY(one_char(c, json_get(o, "replacement"), sub(path, "replacement", -1).s, &p->replacement));
    TRY(prepend_scheme(c, o, path, &p->prepend));
    return opt_bool(c, o, "split", path, true, &p->split);
  }
  if (!strcmp(type, "Split")) {
    p->kind = PRE_SPLIT;
    tok_str pat;
    bool is_regex;
    jpath pp = sub(path, "pattern", -1);
    TRY(pattern_of(c, json_get(o, "pattern"), pp.s, &pat, &is_regex));
    const json_value *beh = json_get(o, "behavior");
    TRY(want(c, beh, JSON_STRING, sub(path, "behavior", -1).s));
    bool invert;
    TRY(opt_bool(c, o, "invert", path, false, &invert));
    if (strcmp(beh->u.str, "Isolated") || invert)
      return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "Split is supported with behavior Isolated and invert false only");
    if (is_regex && !strcmp(pat.s, GPT2_RE)) p->regex = REGEX_GPT2;
    else if (is_regex && !strcmp(pat.s, LLAMA3_RE)) p->regex = REGEX_LLAMA3, p->max_digits = 3;
    else if (is_regex && !strcmp(pat.s, QWEN2_RE)) p->regex = REGEX_LLAMA3, p->max_digits = 1;
    else {
          return bad(c, json_get(o, "pattern"), SMELT_ERR_UNSUPPORTED, pp.s,
                 "the split pattern %s is not supported (smelt knows the GPT-2, Llama-3 and Qwen2 regexes)",
                 q_n(pat.s, pat.n));
    }
    return SMELT_OK;
  }
  if (!strcmp(type, "Sequence")) {
    const json_value *a = json_get(o, "pretokenizers");
    TRY(want(c, a, JSON_ARRAY, sub(path, "pretokenizers", -1).s));
    p->kind = PRE_SEQUENCE;
    p->items = arena_alloc(&c->t->mem, (a->n ? a->n : 1) * sizeof *p->items);
    if (!p->items) return err_nomem("pre-tokenizers", a->n * sizeof *p->items);
    p->n_items = a->n;
    for (size_t i = 0; i < a->n; i++)
      TRY(load_pretok(c, &a->u.items[i], sub(path, "pretokenizers", (long)i).s, &p->items[i], depth + 1,
                      last && i + 1 == a->n));
    return SMELT_OK;
  }
  return unsupported(c, o, path, "pre-tokenizer", type, "ByteLevel, Metaspace, Split with a known regex, Sequence");
}

/* ---- decoder ---- */
static smelt_status load_decoder(ctx *c, const json_value *o, const char *path, tok_decoder *d, int depth) {
  const char *type;
  TRY(type_of(c, o, path, &type));
  if (depth > 8) return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "Sequence nested too deep");
  if (!strcmp(type, "ByteLevel")) {
    d->kind = DEC_BYTELEVEL;
    return SMELT_OK;
  }
  if (!strcmp(type, "Metaspace")) {
    d->kind = DEC_METASPACE;
    TRY(one_char(c, json_get(o, "replacement"), sub(path, "replacement", -1).s, &d->a));
    return prepend_scheme(c, o, path, &d->prepend);
  }
  if (!strcmp(type, "Replace")) {
    d->kind = DEC_REPLACE;
    TRY(pattern_of(c, json_get(o, "pattern"), sub(path, "pattern", -1).s, &d->a, NULL));
    if (!d->a.n) return bad(c, o, SMELT_ERR_UNSUPPORTED, path, "an empty Replace pattern is not supported");
    return str_of(c, json_get(o, "content"), sub(path, "content", -1).s, &d->b);
  }
  if (!strcmp(type, "ByteFallback")) {
    d->kind = DEC_BYTEFALLBACK;
    return SMELT_OK;
  }
  if (!strcmp(type, "Fuse")) {
    d->kind = DEC_FUSE;
    return SMELT_OK;
  }
  if (!strcmp(type, "Strip")) {
    d->kind = DEC_STRIP;
    long start, stop;
    TRY(one_char(c, json_get(o, "content"), sub(path, "content", -1).s, &d->a));
    TRY(as_int(c, json_get(o, "start"), sub(path, "start", -1).s, 0, 1 << 30, &start));
    TRY(as_int(c, json_get(o, "stop"), sub(path, "stop", -1).s, 0, 1 << 30, &stop));
    d->start = (size_t)start;
    d->stop = (size_t)stop;
    return SMELT_OK;
  }
  if (!strcmp(type, "Sequence")) {
    const json_value *a = json_get(o, "decoders");
    TRY(want(c, a, JSON_ARRAY, sub(path, "decoders", -1).s));
    d->kind = DEC_SEQUENCE;
    d->items = arena_alloc(&c->t->mem, (a->n ? a->n : 1) * sizeof *d->items);
    if (!d->items) return err_nomem("decoders", a->n * sizeof *d->items);
    d->n_items = a->n;
    for (size_t i = 0; i < a->n; i++)
      TRY(load_decoder(c, &a->u.items[i], sub(path, "decoders", (long)i).s, &d->items[i], depth + 1));
    return SMELT_OK;
  }
  return unsupported(c, o, path, "decoder", type, "ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence");
}

/* ---- post-processor: the ids put before and after the sequence ---- */
static smelt_status ids_put(tokenizer *t, int32_t **v, size_t *n, const int32_t *ids, size_t k) {
  int32_t *p = arena_alloc(&t->mem, (*n + k + 1) * sizeof *p);
  if (!p) return err_nomem("post-processor ids", (*n + k) * sizeof *p);
  if (*n) memcpy(p, *v, *n * sizeof *p);
  memcpy(p + *n, ids, k * sizeof *p);
  *v = p;
  *n += k;
  return SMELT_OK;
}

/* ["<s>", 0]: the id of a Bert/Roberta cls or sep token. */
static smelt_status pair_id(const ctx *c, const json_value *o, const char *key, const char *path, int32_t *id) {
  const json_value *v = json_get(o, key);
  jpath p = sub(path, key, -1);
  TRY(want(c, v, JSON_ARRAY, p.s));
  if (v->n != 2) return bad(c, v, SMELT_ERR_INVALID_MODEL, p.s, "expected [token, id]");
  long x = 0;
  TRY(as_int(c, &v->u.items[1], sub(path, key, 1).s, 0, TOK_MAX_ID, &x));
  *id = (int32_t)x;
  return SMELT_OK;
}

static smelt_status load_post(ctx *c, const json_value *o, const char *path, int depth) {
  const char *type;
  tokenizer *t = c->t;
  TRY(type_of(c, o, path, &type));
  if (depth > 8) return bad(c, o, SMELT_ERR_INVALID_MODEL, path, "Sequence nested too deep");
  if (!strcmp(type, "ByteLevel")) return SMELT_OK; /* offsets only */
  if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
    int32_t cls, sep;
    TRY(pair_id(c, o, "cls", path, &cls));
    TRY(pair_id(c, o, "sep", path, &sep));
    TRY(ids_put(t, &t->post.before, &t->post.n_before, &cls, 1));
    return ids_put(t, &t->post.after, &t->post.n_after, &sep, 1);
  }
  if (!strcmp(type, "TemplateProcessing")) {
    const json_value *single = json_get(o, "single"), *specials = json_get(o, "special_tokens");
    jpath ps = sub(path, "single", -1), pt = sub(path, "special_tokens", -1);
    TRY(want(c, single, JSON_ARRAY, ps.s));
    TRY(want(c, specials, JSON_OBJECT, pt.s));
    bool seen_seq = false;
    for (size_t i = 0; i < single->n; i++) {
      const json_value *piece = &single->u.items[i];
      jpath pi = sub(path, "single", (long)i);
      TRY(want(c, piece, JSON_OBJECT, pi.s));
      const json_value *sp = json_get(piece, "SpecialToken"), *seq = json_get(piece, "Sequence");
      if (seq) {
        if (seen_seq) return bad(c, piece, SMELT_ERR_UNSUPPORTED, pi.s, "a template with the sequence twice");
        seen_seq = true;
        continue;
      }
      if (!sp) return bad(c, piece, SMELT_ERR_INVALID_MODEL, pi.s, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      jpath pid = sub(pi.s, "SpecialToken.id", -1);
      const json_value *name = json_get(sp, "id");
      TRY(want(c, name, JSON_STRING, pid.s));
      const json_value *tok = json_get(specials, name->u.str);
          if (!tok)
        return bad(c, piece, SMELT_ERR_INVALID_MODEL, pid.s, "special token %s is not in special_tokens",
                   q_n(name->u.str, name->n));
      jpath pids = sub(sub(pt.s, name->u.str, -1).s, "ids", -1);
      const json_value *ids = json_get(tok, "ids");
      TRY(want(c, ids, JSON_ARRAY, pids.s));
      for (size_t k = 0; k < ids->n; k++) {
        long x = 0;
        TRY(as_int(c, &ids->u.items[k], pids.s, 0, TOK_MAX_ID, &x));
        int32_t id = (int32_t)x;
        if (seen_seq) TRY(ids_put(t, &t->post.after, &t->post.n_after, &id, 1));
        else TRY(ids_put(t, &t->post.before, &t->post.n_before, &id, 1));
      }
    }
    if (!seen_seq) return bad(c, single, SMELT_ERR_UNSUPPORTED, ps.s, "a template without the sequence ($A)");
    return SMELT_OK;
  }
  if (!strcmp(type, "Sequence")) {
    const json_value *a = json_get(o, "processors");
    TRY(want(c, a, JSON_ARRAY, sub(path, "processors", -1).s));
    for (size_t i = 0; i < a->n; i++) TRY(load_post(c, &a->u.items[i], sub(path, "processors", (long)i).s, depth + 1));
    return SMELT_OK;
  }
  return unsupported(c, o, path, "post-processor", type,
                     "TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence");
}

/* ---- the BPE model ---- */
static smelt_status load_model(ctx *c, const json_value *m, int32_t *max_id) {
  tokenizer *t = c->t;
  TRY(want(c, m, JSON_OBJECT, "model"));
  const json_value *type = json_get(m, "type");
  if (type && type->type == JSON_STRING && strcmp(type->u.str, "BPE"))
    return unsupported(c, m, "model", "model", type->u.str, "BPE");
  const json_value *dropout = json_get(m, "dropout");
  if (dropout && dropout->type != JSON_NULL) {
    TRY(want(c, dropout, JSON_NUMBER, "model.dropout"));
    if (dropout->u.number != 0)
      return bad(c, dropout, SMELT_ERR_UNSUPPORTED, "model.dropout", "BPE dropout (random merges) is not supported");
  }
  static const char *affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const json_value *v = json_get(m, affixes[i]);
    if (v && v->type != JSON_NULL && !(v->type == JSON_STRING && v->n == 0))
      return bad(c, v, SMELT_ERR_UNSUPPORTED, sub("model", affixes[i], -1).s, "not supported (only null)");
  }
  TRY(opt_bool(c, m, "fuse_unk", "model", false, &t->fuse_unk));
  TRY(opt_bool(c, m, "byte_fallback", "model", false, &t->byte_fallback));
  TRY(opt_bool(c, m, "ignore_merges", "model", false, &t->ignore_merges));

  const json_value *vocab = json_get(m, "vocab");
  TRY(want(c, vocab, JSON_OBJECT, "model.vocab"));
  for (size_t i = 0; i < vocab->n; i++) {
    const json_value *e = &vocab->u.items[i];
    long id = 0;
    if (e->type != JSON_NUMBER)
      return bad(c, e, SMELT_ERR_INVALID_MODEL, "model.vocab", "the id of %s is %s, not a number",
                 q_n(e->key, e->key_len), json_type_name(e->type));
    TRY(as_int(c, e, "model.vocab", 0, TOK_MAX_ID, &id));
    TRY(tok_strmap_put(&t->vocab, e->key, e->key_len, (int32_t)id));
    if (id > *max_id) *max_id = (int32_t)id;
  }
  const json_value *unk = json_get(m, "unk_token");
  t->unk_id = -1;
  if (unk && unk->type != JSON_NULL) {
    tok_str u;
    TRY(str_of(c, unk, "model.unk_token", &u));
    t->unk_id = tok_strmap_get(&t->vocab, u.s, u.n);
    if (t->unk_id < 0) t->unk_id = -2; /* an error only when needed, as in tokenizers */
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_ids[b] = tok_strmap_get(&t->vocab, name, 6);
    char mc[4];
    size_t k = utf8_encode(tok_byte_char((unsigned)b), mc);
    memcpy(t->byte_utf8[b], mc, k);
    t->byte_utf8_len[b] = (uint8_t)k;
    t->byte_level_ids[b] = tok_strmap_get(&t->vocab, mc, k);
  }

  const json_value *merges = json_get(m, "merges");
  TRY(want(c, merges, JSON_ARRAY, "model.merges"));
  char *buf = NULL;
  size_t cap = 0;
  smelt_status st = SMELT_OK;
  uint32_t rank = 0;
  for (size_t i = 0; i < merges->n && !st; i++) {
    const json_value *e = &merges->u.items[i];
    jpath p = sub("model", "merges", (long)i);
    tok_str a, b;
    if (e->type == JSON_STRING) {
      if (!strncmp(e->u.str, "#version", 8)) continue;
      const char *sp = memchr(e->u.str, ' ', e->n);
      if (!sp || memchr(sp + 1, ' ', e->n - (size_t)(sp + 1 - e->u.str))) {
        st = bad(c, e, SMELT_ERR_INVALID_MODEL, p.s, "expected two tokens separated by one space");
        break;
      }
      a = (tok_str){e->u.str, (size_t)(sp - e->u.str)};
      b = (tok_str){sp + 1, e->n - a.n - 1};
    } else if (e->type == JSON_ARRAY && e->n == 2 && e->u.items[0].type == JSON_STRING &&
               e->u.items[1].type == JSON_STRING) {
      a = (tok_str){e->u.items[0].u.str, e->u.items[0].n};
      b = (tok_str){e->u.items[1].u.str, e->u.items[1].n};
    } else {
      st = bad(c, e, SMELT_ERR_INVALID_MODEL, p.s, "expected \"a b\" or [\"a\", \"b\"]");
      break;
    }
    int32_t ia = tok_strmap_get(&t->vocab, a.s, a.n), ib = tok_strmap_get(&t->vocab, b.s, b.n);
    if (a.n + b.n + 1 > cap) {
      cap = 2 * (a.n + b.n + 1);
      char *nb = realloc(buf, cap);
      if (!nb) {
        st = err_nomem("merge", cap);
        break;
      }
      buf = nb;
    }
    memcpy(buf, a.s, a.n);
    memcpy(buf + a.n, b.s, b.n);
    int32_t im = tok_strmap_get(&t->vocab, buf, a.n + b.n);
    if (ia < 0 || ib < 0 || im < 0) {
          tok_str miss = ia < 0 ? a : ib < 0 ? b : (tok_str){buf, a.n + b.n};
      st = bad(c, e, SMELT_ERR_INVALID_MODEL, p.s, "token %s of this merge is not in model.vocab",
               q_n(miss.s, miss.n));
      break;
    }
    st = tok_pairmap_put(&t->merges, ia, ib, rank++, im);
  }
  free(buf);
  return st;
}

/* ---- added tokens ---- */
static smelt_status load_added(ctx *c, const json_value *a, int32_t *max_id) {
  tokenizer *t = c->t;
  if (!a || a->type == JSON_NULL) return SMELT_OK;
  TRY(want(c, a, JSON_ARRAY, "added_tokens"));
  t->added = arena_alloc(&t->mem, (a->n ? a->n : 1) * sizeof *t->added);
  if (!t->added) return err_nomem("added tokens", a->n * sizeof *t->added);
  /* ids as tokenizers gives them: the vocabulary's id, else the id of an
   * earlier added token with the same content, else the next free id */
  int32_t next_id = (int32_t)t->vocab.count;
  for (size_t i = 0; i < a->n; i++) {
    const json_value *o = &a->u.items[i];
    jpath p = sub("", "added_tokens", (long)i);
    TRY(want(c, o, JSON_OBJECT, p.s));
    tok_added x = {0};
    TRY(str_of(c, json_get(o, "content"), sub(p.s, "content", -1).s, &x.content));
    TRY(opt_bool(c, o, "special", p.s, false, &x.special));
    TRY(opt_bool(c, o, "single_word", p.s, false, &x.single_word));
    TRY(opt_bool(c, o, "lstrip", p.s, false, &x.lstrip));
    TRY(opt_bool(c, o, "rstrip", p.s, false, &x.rstrip));
    TRY(opt_bool(c, o, "normalized", p.s, !x.special, &x.normalized));
    long file_id;
    TRY(as_int(c, json_get(o, "id"), sub(p.s, "id", -1).s, 0, TOK_MAX_ID, &file_id));
    if (!x.content.n) continue; /* ignored by tokenizers */
    if (utf8_check(x.content.s, x.content.n) != x.content.n)
      return bad(c, o, SMELT_ERR_INVALID_MODEL, p.s, "content is not valid UTF-8");
    int32_t id = -1;
    size_t k;
    for (k = 0; k < t->n_added; k++)
      if (t->added[k].content.n == x.content.n && !memcmp(t->added[k].content.s, x.content.s, x.content.n)) break;
    if (k < t->n_added) id = t->added[k].id;
    else id = tok_strmap_get(&t->vocab, x.content.s, x.content.n);
    if (id < 0) {
      if (next_id >= TOK_MAX_ID) return bad(c, o, SMELT_ERR_INVALID_MODEL, p.s, "too many added tokens");
      id = next_id++;
    }
    x.id = id;
    x.norm = x.content;
    if (id > *max_id) *max_id = id;
    t->added[k] = x; /* a repeated content replaces the earlier entry */
    if (k == t->n_added) t->n_added++;
  }
  return SMELT_OK;
}

static smelt_status index_added(tokenizer *t);

static smelt_status build(ctx *c, const json_value *root) {
  tokenizer *t = c->t;
  TRY(want(c, root, JSON_OBJECT, "(document)"));
  const json_value *version = json_get(root, "version");
  if (version && version->type == JSON_STRING && strcmp(version->u.str, "1.0"))
    return bad(c, version, SMELT_ERR_UNSUPPORTED, "version", "unknown tokenizer version (smelt reads 1.0)");
  int32_t max_id = -1;
  TRY(load_model(c, json_get(root, "model"), &max_id));
  TRY(load_added(c, json_get(root, "added_tokens"), &max_id));
  const json_value *v;
  if ((v = json_get(root, "normalizer")) && v->type != JSON_NULL) {
    t->normalizer = arena_alloc(&t->mem, sizeof *t->normalizer);
    if (!t->normalizer) return err_nomem("normalizer", sizeof *t->normalizer);
    TRY(load_normalizer(c, v, "normalizer", t->normalizer, 0));
  }
  if ((v = json_get(root, "pre_tokenizer")) && v->type != JSON_NULL) {
    t->pretok = arena_alloc(&t->mem, sizeof *t->pretok);
    if (!t->pretok) return err_nomem("pre-tokenizer", sizeof *t->pretok);
    TRY(load_pretok(c, v, "pre_tokenizer", t->pretok, 0, true));
  }
  if ((v = json_get(root, "decoder")) && v->type != JSON_NULL) {
    t->decoder = arena_alloc(&t->mem, sizeof *t->decoder);
    if (!t->decoder) return err_nomem("decoder", sizeof *t->decoder);
    TRY(load_decoder(c, v, "decoder", t->decoder, 0));
  }
  if ((v = json_get(root, "post_processor")) && v->type != JSON_NULL) TRY(load_post(c, v, "post_processor", 0));

  /* id -> text (decode: added tokens first, in their normalized form) */
  t->n_ids = max_id + 1;
  size_t n = (size_t)(t->n_ids ? t->n_ids : 1);
  t->id_text = arena_alloc(&t->mem, n * sizeof *t->id_text);
  t->dec_text = arena_alloc(&t->mem, n * sizeof *t->dec_text);
  t->is_special = arena_alloc(&t->mem, n * sizeof *t->is_special);
  if (!t->id_text || !t->dec_text || !t->is_special) return err_nomem("tokenizer id table", n * 40);
  for (size_t i = 0; i < t->vocab.cap; i++) {
    const struct tok_strmap_slot *s = &t->vocab.slots[i];
    if (s->key) t->id_text[s->val] = (tok_str){s->key, s->len};
  }
  memcpy(t->dec_text, t->id_text, n * sizeof *t->dec_text);
  tok_buf nb = {0};
  smelt_status st = SMELT_OK;
  for (size_t k = 0; k < t->n_added && !st; k++) {
    tok_added *x = &t->added[k];
    if (x->normalized && t->normalizer) {
      st = tok_normalize(t->normalizer, x->content.s, x->content.n, &nb);
      if (!st) st = keep(t, (tok_str){nb.s, nb.n}, &x->norm);
    }
    t->dec_text[x->id] = x->norm;
    if (!t->id_text[x->id].s) t->id_text[x->id] = x->content;
    if (x->special) t->is_special[x->id] = true;
  }
  free(nb.s);
  if (!st) st = index_added(t);
  for (size_t i = 0; i < t->post.n_before; i++)
    if (t->post.before[i] >= t->n_ids || !t->dec_text[t->post.before[i]].s)
      return bad(c, NULL, SMELT_ERR_INVALID_MODEL, "post_processor", "special token id %d is not in the vocabulary",
                 t->post.before[i]);
  for (size_t i = 0; i < t->post.n_after; i++)
    if (t->post.after[i] >= t->n_ids || !t->dec_text[t->post.after[i]].s)
      return bad(c, NULL, SMELT_ERR_INVALID_MODEL, "post_processor", "special token id %d is not in the vocabulary",
                 t->post.after[i]);
  return st;
}

/* Added tokens by first byte and longest first, per set (normalized or not). */
typedef struct sort_key {
  unsigned first;
  size_t len;
  uint32_t idx;
} sort_key;
static int by_first_then_longest(const void *x, const void *y) {
  const sort_key *a = x, *b = y;
  if (a->first != b->first) return a->first < b->first ? -1 : 1;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return a->idx < b->idx ? -1 : 1;
}

static smelt_status index_added(tokenizer *t) {
  sort_key *keys = malloc((t->n_added ? t->n_added : 1) * sizeof *keys);
  if (!keys) return err_nomem("added token index", t->n_added * sizeof *keys);
  for (int set = 0; set < 2; set++) {
    tok_match *m = &t->match[set];
    m->idx = arena_alloc(&t->mem, (t->n_added ? t->n_added : 1) * sizeof *m->idx);
    if (!m->idx) {
      free(keys);
      return err_nomem("added token index", t->n_added * sizeof *m->idx);
    }
    size_t n = 0;
    for (size_t k = 0; k < t->n_added; k++) {
      const tok_added *a = &t->added[k];
      const tok_str *p = set ? &a->norm : &a->content;
      if (a->normalized == (set == 1) && p->n) keys[n++] = (sort_key){(unsigned char)p->s[0], p->n, (uint32_t)k};
    }
    qsort(keys, n, sizeof *keys, by_first_then_longest);
    m->n = n;
    size_t k = 0;
    for (unsigned c = 0; c <= 256; c++) {
      while (k < n && keys[k].first < c) k++;
      m->first[c] = (uint32_t)k;
    }
    for (k = 0; k < n; k++) m->idx[k] = keys[k].idx;
  }
  free(keys);
  return SMELT_OK;
}

static void pick_special_ids(tokenizer *t) {
  static const char *bos[] = {"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>", "[BOS]", "<|endoftext|>"};
  static const char *eos[] = {"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>", "[EOS]", "<|im_end|>"};
  t->bos_id = t->eos_id = -1;
  for (size_t i = 0; i < sizeof bos / sizeof *bos && t->bos_id < 0; i++)
    if (tokenizer_token_id(t, bos[i], &t->bos_id)) t->bos_id = -1;
  for (size_t i = 0; i < sizeof eos / sizeof *eos && t->eos_id < 0; i++)
    if (tokenizer_token_id(t, eos[i], &t->eos_id)) t->eos_id = -1;
  err_clear();
}

smelt_status tokenizer_load_bytes(const char *json, size_t len, const char *where, tokenizer **out) {
  if (!json || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_load_bytes: NULL argument");
  *out = NULL;
  tokenizer *t = calloc(1, sizeof *t);
  if (!t) return err_nomem("tokenizer", sizeof *t);
  arena_init(&t->mem);
  pthread_mutex_init(&t->cache_lock, NULL);
  t->where = strdup(where ? where : "tokenizer.json");
  if (!t->where) {
    tokenizer_free(t);
    return err_nomem("tokenizer", 64);
  }
  json_doc doc;
  smelt_status st = json_parse(json, len, t->where, &doc);
  if (!st) {
    ctx c = {t, t->where};
    /* the tree's strings live in the document's arena: adopt it */
    st = build(&c, &doc.root);
    t->doc_mem = doc.mem;
    doc.mem = NULL;
  }
  if (st) {
    tokenizer_free(t);
    return st;
  }
  pick_special_ids(t);
  *out = t;
  return SMELT_OK;
}

smelt_status tokenizer_load(const char *path, tokenizer **out) {
  if (!path || !out) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tokenizer_load: NULL argument");
  *out = NULL;
  uint8_t *buf;
  size_t len;
  TRY(file_read_all(path, &buf, &len, TOK_MAX_FILE));
  smelt_status st = tokenizer_load_bytes((const char *)buf, len, q_path(path), out);
  free(buf);
  return st;
}

void tokenizer_free(tokenizer *t) {
  if (!t) return;
  tok_strmap_free(&t->vocab);
  tok_pairmap_free(&t->merges);
  tok_cache_free(t->cache);
  pthread_mutex_destroy(&t->cache_lock);
  if (t->doc_mem) {
    arena_free(t->doc_mem);
    free(t->doc_mem);
  }
  arena_free(&t->mem);
  free(t->where);
  free(t);
}
