/* The BPE model on one piece of text: characters (bytes, for byte-level) to
 * vocabulary ids, unknown characters to byte-fallback <0xNN> tokens or the
 * unknown token, then merges applied lowest rank first (ties: leftmost) with a
 * binary heap, O(n log n) per piece, as `tokenizers`' Word::merge_all.
 * Pieces of up to TOK_CACHE_MAX_PIECE bytes are cached (piece -> ids). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/err.h"
#include "util/hash.h"
#include "util/utf8.h"

#define TOK_CACHE_MAX_PIECE 256
#define TOK_CACHE_MAX_ENTRIES 65536 /* then the cache starts again empty */

typedef struct sym {
  int32_t id;
  int32_t prev, next;
  bool gone;
} sym;

typedef struct merge {
  uint32_t rank;
  uint32_t pos;
  int32_t id;
} merge;

typedef struct heap {
  merge *v;
  size_t n, cap;
} heap;

static bool before(const merge *a, const merge *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static smelt_status heap_push(heap *h, merge m) {
  if (h->n == h->cap) {
    size_t cap = h->cap * 2;
    merge *v = h->v;
    merge *nv = malloc(cap * sizeof *nv);
    if (!nv) return err_nomem("BPE merge queue", cap * sizeof *nv);
    memcpy(nv, v, h->n * sizeof *nv);
    if (h->cap > 64) free(v); /* the first 64 live on the caller's stack */
    h->v = nv;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i && before(&m, &h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = m;
  return SMELT_OK;
}

static merge heap_pop(heap *h) {
  merge top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const merge *best = &last;
    if (l < h->n && before(&h->v[l], best)) m = l, best = &h->v[l];
    if (r < h->n && before(&h->v[r], best)) m = r;
    if (m == i) break;
    h->v[i] = h->v[m];
    i = m;
  }
  if (h->n) h->v[i] = last;
  return top;
}

typedef struct word {
  sym *s;
  size_t n, cap;
} word;

static smelt_status word_add(word *w, int32_t id) {
  if (w->n == w->cap) {
    size_t cap = w->cap * 2;
    sym *nv = malloc(cap * sizeof *nv);
    if (!nv) return err_nomem("BPE symbols", cap * sizeof *nv);
    memcpy(nv, w->s, w->n * sizeof *nv);
    if (w->cap > 64) free(w->s);
    w->s = nv;
    w->cap = cap;
  }
  w->s[w->n] = (sym){id, (int32_t)w->n - 1, (int32_t)w->n + 1, false};
  w->n++;
  return SMELT_OK;
}

static smelt_status merge_all(const tok_pairmap *merges, word *w, heap *h) {
  uint32_t rank;
  int32_t id;
  for (size_t i = 0; i + 1 < w->n; i++)
    if (tok_pairmap_get(merges, w->s[i].id, w->s[i + 1].id, &rank, &id)) TRY(heap_push(h, (merge){rank, (uint32_t)i, id}));
  if (w->n) w->s[w->n - 1].next = -1;
  while (h->n) {
    merge top = heap_pop(h);
    sym *cur = &w->s[top.pos];
    if (cur->gone || cur->next < 0) continue;
    sym *right = &w->s[cur->next];
    /* an entry made stale by an earlier merge */
    if (!tok_pairmap_get(merges, cur->id, right->id, &rank, &id) || id != top.id) continue;
    cur->id = top.id;
    right->gone = true;
    cur->next = right->next;
    if (cur->next >= 0) w->s[cur->next].prev = (int32_t)top.pos;
    if (cur->prev >= 0 && tok_pairmap_get(merges, w->s[cur->prev].id, cur->id, &rank, &id))
      TRY(heap_push(h, (merge){rank, (uint32_t)cur->prev, id}));
    if (cur->next >= 0 && tok_pairmap_get(merges, cur->id, w->s[cur->next].id, &rank, &id))
      TRY(heap_push(h, (merge){rank, top.pos, id}));
  }
  return SMELT_OK;
}

/* The unknown token: fused runs (fuse_unk) or one per character. */
static smelt_status flush_unk(word *w, int *pending, int32_t unk) {
  smelt_status st = SMELT_OK;
  if (*pending) st = word_add(w, unk);
  *pending = 0;
  return st;
}

static smelt_status build_word(const tokenizer *t, const unsigned char *s, size_t n, word *w) {
  int unk_pending = 0;
  for (size_t i = 0; i < n;) {
    const char *sym_s;
    size_t sym_n, adv;
    int32_t id;
    if (t->byte_level) {
      sym_n = t->byte_utf8_len[s[i]];
      sym_s = t->byte_utf8[s[i]];
      id = t->byte_level_ids[s[i]];
      adv = 1;
    } else {
      uint32_t cp;
      adv = s[i] < 0x80 ? 1 : utf8_next(s + i, n - i, &cp);
      sym_s = (const char *)s + i;
      sym_n = adv;
      id = tok_strmap_get(&t->vocab, sym_s, sym_n);
    }
    i += adv;
    if (id >= 0) {
      TRY(flush_unk(w, &unk_pending, t->unk_id));
      TRY(word_add(w, id));
      continue;
    }
    if (t->byte_fallback) {
      bool all = true;
      for (size_t k = 0; k < sym_n; k++) all = all && t->byte_ids[(unsigned char)sym_s[k]] >= 0;
      if (all) {
        /* tokenizers adds these without closing a pending unknown run first */
        for (size_t k = 0; k < sym_n; k++) TRY(word_add(w, t->byte_ids[(unsigned char)sym_s[k]]));
        continue;
      }
    }
    if (t->unk_id == -2)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s: model.unk_token is not in model.vocab (needed for a character not in it)",
                     t->where);
    if (t->unk_id >= 0) {
      if (unk_pending && !t->fuse_unk) TRY(word_add(w, t->unk_id));
      unk_pending = 1;
    }
    /* no unknown token: the character is dropped, as in tokenizers */
  }
  return flush_unk(w, &unk_pending, t->unk_id);
}

/* ---- the cache ---- */
typedef struct cache_entry {
  const char *key;
  uint32_t len, n_ids;
  const int32_t *ids;
} cache_entry;

struct tok_cache {
  arena mem;
  cache_entry *slots;
  size_t cap, count;
};

static uint64_t piece_hash(const char *s, size_t n) { return hash_mix64(hash_bytes(HASH_SEED, s, n)); }

static bool cache_get(const struct tok_cache *c, const char *s, size_t n, tok_ids *out, smelt_status *st) {
  if (!c) return false;
  size_t mask = c->cap - 1;
  for (size_t i = piece_hash(s, n) & mask;; i = (i + 1) & mask) {
    const cache_entry *e = &c->slots[i];
    if (!e->key) return false;
    if (e->len == n && !memcmp(e->key, s, n)) {
      for (uint32_t k = 0; k < e->n_ids && !*st; k++) *st = tok_ids_push(out, e->ids[k]);
      return true;
    }
  }
}

static void cache_put(tokenizer *t, const char *s, size_t n, const int32_t *ids, size_t n_ids) {
  struct tok_cache *c = t->cache;
  if (!c) {
    c = calloc(1, sizeof *c);
    if (!c) return;
    c->cap = 2 * TOK_CACHE_MAX_ENTRIES;
    c->slots = calloc(c->cap, sizeof *c->slots);
    if (!c->slots) {
      free(c);
      return;
    }
    arena_init(&c->mem);
    t->cache = c;
  }
  if (c->count >= TOK_CACHE_MAX_ENTRIES) { /* full: start again */
    memset(c->slots, 0, c->cap * sizeof *c->slots);
    arena_free(&c->mem);
    arena_init(&c->mem);
    c->count = 0;
  }
  char *key = arena_strndup(&c->mem, s, n);
  int32_t *v = arena_alloc(&c->mem, (n_ids ? n_ids : 1) * sizeof *v);
  if (!key || !v) return; /* a cache that cannot grow is only slower */
  if (n_ids) memcpy(v, ids, n_ids * sizeof *v);
  size_t mask = c->cap - 1;
  size_t i = piece_hash(s, n) & mask;
  while (c->slots[i].key) {
    if (c->slots[i].len == n && !memcmp(c->slots[i].key, s, n)) return;
    i = (i + 1) & mask;
  }
  c->slots[i] = (cache_entry){key, (uint32_t)n, (uint32_t)n_ids, v};
  c->count++;
}

void tok_cache_free(struct tok_cache *c) {
  if (!c) return;
  arena_free(&c->mem);
  free(c->slots);
  free(c);
}

smelt_status tok_bpe_piece(const tokenizer *tc, const char *s, size_t n, tok_ids *out) {
  tokenizer *t = (tokenizer *)tc; /* only the cache changes, under its lock */
  if (!n) return SMELT_OK;
  if (t->ignore_merges) { /* the whole piece when it is a token */
    int32_t id;
    if (t->byte_level) {
      char stack[512], *m = 2 * n <= sizeof stack ? stack : malloc(2 * n);
      if (!m) return err_nomem("BPE piece", 2 * n);
      size_t k = 0;
      for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        m[k] = t->byte_utf8[b][0];
        m[k + 1] = t->byte_utf8[b][1];
        k += t->byte_utf8_len[b];
      }
      id = tok_strmap_get(&t->vocab, m, k);
      if (m != stack) free(m);
    } else {
      id = tok_strmap_get(&t->vocab, s, n);
    }
    if (id >= 0) return tok_ids_push(out, id);
  }
  bool cacheable = n <= TOK_CACHE_MAX_PIECE;
  if (cacheable) {
    smelt_status st = SMELT_OK;
    pthread_mutex_lock(&t->cache_lock);
    bool hit = cache_get(t->cache, s, n, out, &st);
    pthread_mutex_unlock(&t->cache_lock);
    if (hit) return st;
  }
  sym sbuf[64];
  merge mbuf[64];
  word w = {sbuf, 0, 64};
  heap h = {mbuf, 0, 64};
  size_t first = out->n;
  smelt_status st = build_word(t, (const unsigned char *)s, n, &w);
  if (!st) st = merge_all(&t->merges, &w, &h);
  for (size_t i = 0; i < w.n && !st; i++)
    if (!w.s[i].gone) st = tok_ids_push(out, w.s[i].id);
  if (w.cap > 64) free(w.s);
  if (h.cap > 64) free(h.v);
  if (!st && cacheable) {
    pthread_mutex_lock(&t->cache_lock);
    cache_put(t, s, n, out->n > first ? out->v + first : NULL, out->n - first);
    pthread_mutex_unlock(&t->cache_lock);
  }
  return st;
}
