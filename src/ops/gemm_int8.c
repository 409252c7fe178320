/* int8 GEMM nodes: quantized weights through the op cache and the prep
 * store, and the run (see gemm_int8.h). */
#include "ops/gemm_int8.h"

#include <stdlib.h>
#include <string.h>

#include "ops/op_cache.h"
#include "util/err.h"

bool gemm_int8_marked(const ir_node *nd) { return !strcmp(ir_attr_string(nd, "precision", "fp32"), "int8"); }

typedef struct q8_key {
  const void *w; /* NULL in the prep store's description */
  int32_t which, trans;
  int64_t K, N;
} q8_key;

typedef struct q8_entry {
  qgemm_weights w;
  void *owned; /* the packed block when made here; NULL when mapped from the store */
} q8_entry;

static void q8_entry_free(void *p) {
  q8_entry *e = p;
  if (e) tensor_data_free(e->owned);
  free(e);
}

typedef struct q8_make { /* what build quantizes */
  op_cache *cache;
  smelt_pool *pool;
  const q8_key *key;
  const float *B;
} q8_make;

static void *build(void *ctx) {
  const q8_make *m = ctx;
  op_cache *cache = m->cache;
  smelt_pool *pool = m->pool;
  const q8_key *key = m->key;
  const float *B = m->B;
  size_t len = qgemm_weights_bytes(key->K, key->N);
  q8_entry *e = calloc(1, sizeof *e);
  if (!e || !len) {
    free(e);
    return NULL;
  }
  q8_key desc = *key;
  desc.w = NULL;
  op_prep_key pkey;
  const void *blob = op_prep_get(cache, pool, "gemm-u8s8", &desc, sizeof desc, B,
                                 sizeof(float) * (size_t)(key->K * key->N), len, &pkey);
  if (!blob) {
    e->owned = tensor_data_alloc(len);
    if (!e->owned) { /* over the budget: this node runs in fp32 */
      err_clear();
      free(e);
      return NULL;
    }
    qgemm_quantize_b(pool, key->trans, key->K, key->N, B, e->owned);
    if (pkey.stored) op_prep_put(cache, pool, &pkey, e->owned);
    blob = e->owned;
  }
  qgemm_weights_view(key->K, key->N, blob, &e->w);
  return e;
}

const qgemm_weights *gemm_int8_weights(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  const tensor *b = op_in(c, i);
  if (!c->cache || !b || b->dtype != SMELT_F32 || b->rank != 2 || !op_input_is_constant(c, i)) return NULL;
  if (K <= 0 || N <= 0 || K > QGEMM_MAX_K || b->dims[0] * b->dims[1] != K * N) return NULL;
  q8_key key;
  memset(&key, 0, sizeof key);
  key.w = b->data, key.which = 'q', key.trans = trans_b, key.K = K, key.N = N;
  q8_make m = {c->cache, c->pool, &key, b->data};
  const q8_entry *kept = op_cache_get_or_make(c->cache, &key, sizeof key, build, &m, q8_entry_free);
  return kept ? &kept->w : NULL;
}

smelt_status gemm_int8_run(op_ctx *c, const qgemm_weights *w, int64_t M, const float *A, int64_t lda,
                           float alpha, const float *bias, bool accumulate, float *C) {
  if (M <= 0) return SMELT_OK;
  size_t qa_bytes = (size_t)(M * w->Kp), bytes = qa_bytes + (sizeof(float) + sizeof(int32_t)) * (size_t)M;
  uint8_t *qa = tensor_data_alloc(bytes); /* Kp is a multiple of 4: sa and za are aligned */
  if (!qa) return err_nomem("int8 GEMM: quantized activations", bytes);
  float *sa = (float *)(qa + qa_bytes);
  int32_t *za = (int32_t *)(sa + M);
  qgemm_quantize_a(c->pool, isa_active(), M, w->K, A, lda, qa, sa, za);
  qgemm_args a = {.M = M, .qa = qa, .sa = sa, .za = za, .w = w, .alpha = alpha, .bias = bias, .accumulate = accumulate,
                  .C = C, .ldc = w->N};
  qgemm_run(c->pool, isa_active(), &a);
  tensor_data_free(qa);
  return SMELT_OK;
}
