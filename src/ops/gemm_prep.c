/* Reduced-precision GEMM weights through the op cache and the prep store
 * (see gemm_prep.h). */
#include "ops/gemm_prep.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_cache.h"
#include "util/err.h"
#include "util/ro_map.h"

typedef struct prep_key {
  const void *w; /* NULL in the prep store's description */
  int32_t which, trans;
  int64_t K, N;
} prep_key;

typedef struct prep_entry {
  alignas(max_align_t) unsigned char view[GEMM_PREP_VIEW_MAX];
  void *owned; /* the packed block when made here; NULL when mapped from the store */
} prep_entry;

static void prep_entry_free(void *p) {
  prep_entry *e = p;
  if (e) tensor_data_free(e->owned);
  free(e);
}

typedef struct prep_make {
  op_cache *cache;
  smelt_pool *pool;
  const gemm_prep_kind *kind;
  const prep_key *key;
  const float *B;
} prep_make;

static void *build(void *ctx) {
  const prep_make *m = ctx;
  const prep_key *key = m->key;
  size_t len = m->kind->bytes(key->K, key->N);
  prep_entry *e = calloc(1, sizeof *e);
  if (!e || !len) {
    free(e);
    return NULL;
  }
  prep_key desc = *key;
  desc.w = NULL;
  op_prep_key pkey;
  const void *blob = op_prep_get(m->cache, m->pool, m->kind->store_kind, &desc, sizeof desc, m->B,
                                 sizeof(float) * (size_t)(key->K * key->N), len, &pkey);
  if (!blob) {
    e->owned = tensor_data_alloc(len);
    if (!e->owned) { /* over the budget: this node runs in fp32 */
      err_clear();
      free(e);
      return NULL;
    }
    m->kind->pack(m->pool, key->trans, key->K, key->N, m->B, e->owned);
    if (pkey.stored) op_prep_put(m->cache, m->pool, &pkey, e->owned);
    blob = e->owned;
  }
  m->kind->view(key->K, key->N, blob, e->view);
  /* the node runs from the converted block now: B's pages, when they are a
   * view of the model file, go back to the file (util/ro_map.h) */
  ro_map_release(m->B, sizeof(float) * (size_t)(key->K * key->N));
  return e;
}

const void *gemm_prep_weights(op_ctx *c, int i, const gemm_prep_kind *k, bool trans_b, int64_t K, int64_t N) {
  const tensor *b = op_in(c, i);
  if (!c->cache || !b || b->dtype != SMELT_F32 || b->rank != 2 || !op_input_is_constant(c, i)) return NULL;
  if (K <= 0 || N <= 0 || b->dims[0] * b->dims[1] != K * N || k->view_size > GEMM_PREP_VIEW_MAX) return NULL;
  prep_key key;
  memset(&key, 0, sizeof key);
  key.w = b->data, key.which = k->which, key.trans = trans_b, key.K = K, key.N = N;
  prep_make m = {c->cache, c->pool, k, &key, b->data};
  const prep_entry *kept = op_cache_get_or_make(c->cache, &key, sizeof key, build, &m, prep_entry_free);
  return kept ? kept->view : NULL;
}
