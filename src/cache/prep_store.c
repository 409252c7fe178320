/* Prepared weights on disk (see prep_store.h). */
#include "cache/prep_store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/err.h"

typedef struct mapping {
  const void *p;
  size_t len;
} mapping;

struct prep_store {
  const smelt_cache *cache;
  const smelt_logger *log;
  pthread_mutex_t mu;
  mapping *maps;
  int n_maps, cap_maps;
  int loaded, saved;
  bool warned;
};

smelt_status prep_store_create(const smelt_cache *c, const smelt_logger *log, prep_store **out) {
  prep_store *s = calloc(1, sizeof *s);
  if (!s) return err_nomem("prepared-weight store", sizeof *s);
  s->cache = c;
  s->log = log;
  pthread_mutex_init(&s->mu, NULL);
  *out = s;
  return SMELT_OK;
}

void prep_store_free(prep_store *s) {
  if (!s) return;
  for (int i = 0; i < s->n_maps; i++) cache_unmap(s->maps[i].p, s->maps[i].len);
  free(s->maps);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

bool prep_store_key(prep_store *s, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                    const void *src, size_t src_len, size_t len, prep_key *out) {
  if (!s || !s->cache->enabled || len == 0) return false;
  key_hasher h;
  key_init(&h);
  key_add_str(&h, "prepared");
  key_add_str(&h, smelt_version());
  key_add_str(&h, kind);
  key_add_i64(&h, (int64_t)desc_len);
  key_add(&h, desc, desc_len);
  key_add_i64(&h, (int64_t)src_len);
  key_add_i64(&h, (int64_t)cache_checksum_pool(pool, src, src_len));
  key_add_i64(&h, (int64_t)len);
  *out = (prep_key){key_final(&h), kind, len};
  return true;
}

const void *prep_store_get(prep_store *s, smelt_pool *pool, const prep_key *k) {
  size_t len = k->len;
  const void *data;
  size_t got;
  bool hit;
  char why[1400];
  cache_map(s->cache, pool, &k->key, k->kind, &data, &got, &hit, why, sizeof why);
  if (!hit) return NULL;
  if (got != len) {
    cache_unmap(data, got);
    return NULL;
  }
  pthread_mutex_lock(&s->mu);
  if (s->n_maps == s->cap_maps) {
    int cap = s->cap_maps ? 2 * s->cap_maps : 16;
    mapping *m = realloc(s->maps, sizeof *m * (size_t)cap);
    if (!m) {
      pthread_mutex_unlock(&s->mu);
      cache_unmap(data, got);
      return NULL;
    }
    s->maps = m;
    s->cap_maps = cap;
  }
  s->maps[s->n_maps++] = (mapping){data, got};
  s->loaded++;
  pthread_mutex_unlock(&s->mu);
  return data;
}

void prep_store_put(prep_store *s, smelt_pool *pool, const prep_key *k, const void *data) {
  smelt_status st = cache_put_pool(s->cache, pool, &k->key, k->kind, data, k->len);
  pthread_mutex_lock(&s->mu);
  if (!st) s->saved++;
  bool warn = st && !s->warned;
  if (warn) s->warned = true;
  pthread_mutex_unlock(&s->mu);
  if (warn)
    log_msg(s->log, SMELT_LOG_WARNING, "prepared weights not cached (%s); later sessions prepare them again",
            smelt_last_error());
}

void prep_store_counts(prep_store *s, int *loaded, int *saved) {
  pthread_mutex_lock(&s->mu);
  *loaded = s->loaded;
  *saved = s->saved;
  pthread_mutex_unlock(&s->mu);
}
