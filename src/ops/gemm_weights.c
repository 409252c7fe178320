/* Packed GEMM weights through the op cache and the prep store (see gemm_weights.h). */
#include "ops/gemm_weights.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_kernels.h"
#include "ops/op_cache.h"
#include "util/env.h"
#include "util/err.h"
#include "util/ro_map.h"

/* What a packed operand was made from: the op cache compares it bytewise
 * (with the weight's address); the prep store hashes it with the weight's
 * bytes.  The layout's blocking is in it so that a copy saved by a build
 * with other block sizes is not taken for this one's. */
typedef struct gw_key {
  const void *w; /* NULL in the prep store's description */
  int32_t which, isa, trans, pad_;
  int64_t K, mn, kc, qk_max, chunk;
} gw_key;

/* SMELT_GEMM_PREPACK=0/off/no: nothing is packed ahead (less memory: the
 * packed copy is about the size of the weights). */
static bool prepack_on(void) {
  static atomic_int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    v = env_flag_on("SMELT_GEMM_PREPACK");
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v;
}

/* Packs W (or maps the copy the prep store kept); NULL when there is no
 * packed path or no memory (the GEMM then packs per call). */
typedef struct gw_make { /* what build packs */
  op_cache *cache;
  smelt_pool *pool;
  isa_level isa;
  const gw_key *key;
  const float *W;
} gw_make;

static void *build(void *ctx) {
  const gw_make *m = ctx;
  op_cache *cache = m->cache;
  smelt_pool *pool = m->pool;
  isa_level isa = m->isa;
  const gw_key *key = m->key;
  const float *W = m->W;
  char which = (char)key->which;
  bool trans = key->trans;
  int64_t K = key->K, mn = key->mn;
  int64_t n = which == 'b' ? gemm_pack_b_floats(isa, K, mn) : gemm_pack_a_floats(isa, mn, K);
  if (n <= 0) return NULL; /* no packed path */
  gemm_packed *pk = NULL;
  float *dst;
  smelt_status st = SMELT_OK;
  op_prep_key pkey;
  gw_key desc = *key;
  desc.w = NULL;
  const float *saved = op_prep_get(cache, pool, which == 'b' ? "gemm-b" : "gemm-a", &desc, sizeof desc, W,
                                   sizeof(float) * (size_t)(K * mn), sizeof(float) * (size_t)n, &pkey);
  if (saved) {
    st = which == 'b' ? gemm_pack_b_wrap(isa, trans, K, mn, saved, n, &pk)
                      : gemm_pack_a_wrap(isa, trans, mn, K, saved, n, &pk);
  } else if ((dst = op_prep_reserve(cache, &pkey))) { /* packed straight into the cache's file: one copy */
    st = which == 'b' ? gemm_pack_b_into(pool, isa, trans, K, mn, W, trans ? K : mn, dst, n, &pk)
                      : gemm_pack_a_into(pool, isa, trans, mn, K, W, trans ? mn : K, dst, n, &pk);
    if (!st && pk) op_prep_commit(cache, pool, &pkey, dst);
    else op_prep_abort(cache, dst);
  } else {
    st = which == 'b' ? gemm_pack_b_prepare(pool, isa, trans, K, mn, W, trans ? K : mn, &pk)
                      : gemm_pack_a_prepare(pool, isa, trans, mn, K, W, trans ? mn : K, &pk);
    if (!st && pk && pkey.stored) {
      int64_t got = 0;
      op_prep_put(cache, pool, &pkey, gemm_packed_data(pk, &got));
    }
  }
  if (st || !pk) { /* no memory: the GEMM packs per call instead */
    err_clear();
    return NULL;
  }
  /* the GEMM runs from the packed copy now: W's pages, when they are a view
   * of the model file, go back to the file (read again if anything else
   * reads W: util/ro_map.h) */
  ro_map_release(W, sizeof(float) * (size_t)(K * mn));
  return pk;
}

static const gemm_packed *weights(op_cache *cache, smelt_pool *pool, char which, bool trans, int64_t K,
                                  int64_t mn, const float *W) {
  if (!cache || !W || K <= 0 || mn <= 0 || !prepack_on()) return NULL;
  isa_level isa = isa_active();
  gemm_layout l;
  if (!gemm_layout_for(isa, NULL, K, which == 'b' ? mn : 0, &l)) return NULL; /* no packed path */
  gw_key key;
  memset(&key, 0, sizeof key);
  key.w = W, key.which = which, key.isa = l.isa, key.trans = trans, key.K = K, key.mn = mn;
  key.kc = l.kc, key.qk_max = l.qk_max, key.chunk = l.chunk;
  gw_make m = {cache, pool, isa, &key, W};
  return op_cache_get_or_make(cache, &key, sizeof key, build, &m, gemm_packed_free_v);
}

const gemm_packed *gemm_weights_b(op_cache *cache, smelt_pool *pool, bool trans_b, int64_t K, int64_t N,
                                  const float *B) {
  return weights(cache, pool, 'b', trans_b, K, N, B);
}

const gemm_packed *gemm_weights_a(op_cache *cache, smelt_pool *pool, bool trans_a, int64_t M, int64_t K,
                                  const float *A) {
  return weights(cache, pool, 'a', trans_a, K, M, A);
}

const gemm_packed *gemm_weights_b_input(op_ctx *c, int i, bool trans_b, int64_t K, int64_t N) {
  const tensor *b = op_in(c, i);
  if (!c->cache || !b || b->dtype != SMELT_F32 || b->rank != 2 || !op_input_is_constant(c, i)) return NULL;
  if (b->dims[0] * b->dims[1] != K * N) return NULL;
  return gemm_weights_b(c->cache, c->pool, trans_b, K, N, b->data);
}
