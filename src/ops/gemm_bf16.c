/* bf16 GEMM nodes: bf16 weights through the op cache and the prep store,
 * and the run (see gemm_bf16.h). */
#include "ops/gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

#include "ops/op_cache.h"
#include "util/err.h"

bool gemm_bf16_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "bf16"); }

typedef struct wb_key {
  const void *w; /* NULL in the prep store's description */
  int32_t which, trans;
  int64_t K, N;
} wb_key;

typedef struct wb_entry {
  wbf16_weights w;
  void *owned; /* the packed block when made here; NULL when mapped from the store */
} wb_entry;

static void wb_entry_free(void *p) {
  wb_entry *e = p;
  if (e) tensor_data_free(e->owned);
  free(e);
}

typedef struct wb_make {
  op_cache *cache;
  smelt_pool *pool;
  const wb_key *key;
  const float *B;
} wb_make;

static void *build(void *ctx) {
  const wb_make *m = ctx;
  const wb_key *key = m->key;
  size_t len = wbf16_weights_bytes(key->K, key->N);
  wb_entry *e = calloc(1, sizeof *e);
  if (!e || !len) {
    free(e);
    return NULL;
  }
  wb_key desc = *key;
  desc.w = NULL;
  op_prep_key pkey;
  const void *blob = op_prep_get(m->cache, m->pool, "gemm-wbf16", &desc, sizeof desc, m->B,
                                 sizeof(float) * (size_t)(key->K * key->N), len, &pkey);
  if (!blob) {
    e->owned = tensor_data_alloc(len);
    if (!e->owned) { /* over the budget: this node runs in fp32 */
      err_clear();
      free(e);
      return NULL;
    }
    wbf16_pack_b(m->pool, key->trans, key->K, key->N, m->B, e->owned);
    if (pkey.stored) op_prep_put(m->cache, m->pool, &pkey, e->owned);
    blob = e->owned;
  }
  wbf16_weights_view(key->K, key->N, blob, &e->w);
  return e;
}

const wbf16_weights *gemm_bf16_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  const tensor *b = op_in(c, i);
  if (!c->cache || !b || b->dtype != SMELT_F32 || b->rank != 2 || !op_input_is_constant(c, i)) return NULL;
  if (K <= 0 || N <= 0 || b->dims[0] * b->dims[1] != K * N || !wbf16_weights_bytes(K, N)) return NULL;
  wb_key key;
  memset(&key, 0, sizeof key);
  key.w = b->data, key.which = 'h', key.trans = trans_b, key.K = K, key.N = N;
  wb_make m = {c->cache, c->pool, &key, b->data};
  const wb_entry *kept = op_cache_get_or_make(c->cache, &key, sizeof key, build, &m, wb_entry_free);
  return kept ? &kept->w : NULL;
}

smelt_status gemm_bf16_run(op_ctx *c, const wbf16_weights *w, int64_t M, const float *A, int64_t lda, float alpha,
                           const float *bias, bool accumulate, float *C) {
  wbf16_args a = {.M = M, .A = A, .lda = lda, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                  .C = C, .ldc = w->N};
  return wbf16_run(c->pool, isa_active(), &a);
}
