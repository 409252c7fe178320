/* See weight_store.h: op_prep_store over cache/prep_store.h. */
#include "runtime/weight_store.h"

#include <string.h>

_Static_assert(sizeof(((op_prep_key *)0)->hex) == sizeof(((cache_key *)0)->hex), "op_prep_key.hex holds a cache key");

static const void *ws_get(void *self, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                          const void *src, size_t src_len, size_t len, op_prep_key *k) {
  prep_key pk;
  memset(k, 0, sizeof *k);
  if (!prep_store_key(self, pool, kind, desc, desc_len, src, src_len, len, &pk)) return NULL;
  k->stored = true;
  memcpy(k->hex, pk.key.hex, sizeof k->hex);
  k->kind = pk.kind;
  k->len = pk.len;
  return prep_store_get(self, pool, &pk);
}

static prep_key key_of(const op_prep_key *k);

static void ws_put(void *self, smelt_pool *pool, const op_prep_key *k, const void *data) {
  prep_key pk = key_of(k);
  prep_store_put(self, pool, &pk, data);
}

static void ws_drain(void *self) { prep_store_drain(self); }

static prep_key key_of(const op_prep_key *k) {
  prep_key pk = {.kind = k->kind, .len = k->len};
  memcpy(pk.key.hex, k->hex, sizeof pk.key.hex);
  return pk;
}

static void *ws_reserve(void *self, const op_prep_key *k) {
  prep_key pk = key_of(k);
  return prep_store_reserve(self, &pk);
}

static void ws_commit(void *self, smelt_pool *pool, const op_prep_key *k, void *buf) {
  prep_key pk = key_of(k);
  prep_store_commit(self, pool, &pk, buf);
}

static void ws_abort(void *self, void *buf) { prep_store_abort(self, buf); }

op_prep_store weight_store_over(prep_store *ps) {
  return (op_prep_store){.self = ps, .get = ws_get, .put = ws_put, .drain = ws_drain,
                         .reserve = ws_reserve, .commit = ws_commit, .abort = ws_abort};
}
