/* The tokenizer's hash maps and growing buffers. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/err.h"
#include "util/grow.h"
#include "util/hash.h"

static uint64_t str_hash(const char *s, size_t n) { return hash_mix64(hash_bytes(HASH_SEED, s, n)); }

static smelt_status strmap_grow(tok_strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  struct tok_strmap_slot *s = calloc(cap, sizeof *s);
  if (!s) return err_nomem("tokenizer vocabulary map", cap * sizeof *s);
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->slots[i].key) continue;
    size_t j = str_hash(m->slots[i].key, m->slots[i].len) & (cap - 1);
    while (s[j].key) j = (j + 1) & (cap - 1);
    s[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = s;
  m->cap = cap;
  return SMELT_OK;
}

smelt_status tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t val) {
  if (len > UINT32_MAX) return err_set(SMELT_ERR_INVALID_MODEL, "token of %zu bytes", len);
  if ((m->count + 1) * 2 > m->cap) TRY(strmap_grow(m));
  size_t mask = m->cap - 1;
  for (size_t i = str_hash(key, len) & mask;; i = (i + 1) & mask) {
    struct tok_strmap_slot *s = &m->slots[i];
    if (!s->key) {
      s->key = key, s->len = (uint32_t)len, s->val = val;
      m->count++;
      return SMELT_OK;
    }
    if (s->len == len && !memcmp(s->key, key, len)) {
      s->val = val;
      return SMELT_OK;
    }
  }
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
  if (!m->cap) return -1;
  size_t mask = m->cap - 1;
  for (size_t i = str_hash(key, len) & mask;; i = (i + 1) & mask) {
    const struct tok_strmap_slot *s = &m->slots[i];
    if (!s->key) return -1;
    if (s->len == len && !memcmp(s->key, key, len)) return s->val;
  }
}

void tok_strmap_free(tok_strmap *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

static smelt_status pairmap_grow(tok_pairmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  struct tok_pair_slot *s = malloc(cap * sizeof *s);
  if (!s) return err_nomem("tokenizer merge map", cap * sizeof *s);
  for (size_t i = 0; i < cap; i++) s[i].key = UINT64_MAX;
  for (size_t i = 0; i < m->cap; i++) {
    if (m->slots[i].key == UINT64_MAX) continue;
    size_t j = tok_pair_hash(m->slots[i].key) & (cap - 1);
    while (s[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
    s[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = s;
  m->cap = cap;
  return SMELT_OK;
}

smelt_status tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
  if ((m->count + 1) * 2 > m->cap) TRY(pairmap_grow(m));
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t mask = m->cap - 1;
  for (size_t i = tok_pair_hash(key) & mask;; i = (i + 1) & mask) {
    struct tok_pair_slot *s = &m->slots[i];
    if (s->key == UINT64_MAX) m->count++;
    if (s->key == UINT64_MAX || s->key == key) { /* a repeated pair: the later merge wins, as in tokenizers */
      s->key = key, s->rank = rank, s->id = id;
      return SMELT_OK;
    }
  }
}

void tok_pairmap_free(tok_pairmap *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

smelt_status tok_buf_put(tok_buf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) return err_nomem("tokenizer text buffer", cap);
    b->s = p;
    b->cap = cap;
  }
  if (n) memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
  return SMELT_OK;
}

smelt_status tok_pieces_add(tok_pieces *p, const char *s, size_t n, bool at_origin) {
  if (!n) return SMELT_OK; /* empty pieces are dropped, as in tokenizers */
  tok_piece *v = grow_array(p->v, &p->cap, p->n + 1, sizeof *v, 64, "tokenizer pieces");
  if (!v) return SMELT_ERR_NOMEM;
  p->v = v;
  size_t off = p->text.n;
  TRY(tok_buf_put(&p->text, s, n));
  p->v[p->n++] = (tok_piece){off, n, at_origin};
  return SMELT_OK;
}

void tok_pieces_free(tok_pieces *p) {
  free(p->text.s);
  free(p->v);
  memset(p, 0, sizeof *p);
}

smelt_status tok_ids_push(tok_ids *ids, int32_t id) {
  int32_t *v = grow_array(ids->v, &ids->cap, ids->n + 1, sizeof *v, 64, "token ids");
  if (!v) return SMELT_ERR_NOMEM;
  ids->v = v;
  ids->v[ids->n++] = id;
  return SMELT_OK;
}
