/* The seam between ops and the store of prepared weights: ops reach it only
 * through op_cache.store (an op_prep_store, ops/op_cache.h), never through
 * cache/.  A MatMul with a constant weight, run with a node cache whose store
 * is a fake that counts calls and keeps copies in memory: the first run asks
 * the store (miss), packs and saves once; a fresh node cache over the same
 * store maps the saved copy back (no second save) and gives the same result;
 * a store that declines (stored false) is never written; no store, no calls.
 * Also the runtime's adapter over the on-disk store (runtime/weight_store.h)
 * round-trips an array. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/prep_store.h"
#include "check.h"
#include "graph_builder.h"
#include "kernels/gemm_kernels.h"
#include "kernels/isa.h"
#include "ops/node_run.h"
#include "ops/op_cache.h"
#include "runtime/weight_store.h"

typedef struct fake_store {
  int gets, puts;
  bool decline;
  char kind[32];
  size_t len;
  void *saved;
} fake_store;

static const void *fake_get(void *self, smelt_pool *pool, const char *kind, const void *desc, size_t desc_len,
                            const void *src, size_t src_len, size_t len, op_prep_key *k) {
  fake_store *f = self;
  f->gets++;
  if (f->decline) return NULL; /* k->stored stays false */
  k->stored = true;
  snprintf(k->hex, sizeof k->hex, "%zx", len);
  k->kind = kind;
  k->len = len;
  return f->saved && f->len == len && !strcmp(f->kind, kind) ? f->saved : NULL;
}

static void fake_put(void *self, smelt_pool *pool, const op_prep_key *k, const void *data) {
  fake_store *f = self;
  f->puts++;
  free(f->saved);
  f->saved = malloc(k->len);
  if (f->saved) memcpy(f->saved, data, k->len);
  f->len = k->len;
  snprintf(f->kind, sizeof f->kind, "%s", k->kind);
}

enum { M = 8, K = 256, N = 256 };

/* Runs the MatMul node with the given store behind a fresh node cache; *y
 * receives the result. */
static void run_with(const gb *b, int node, tensor *x, const op_prep_store *store, tensor *y) {
  op_cache cache;
  memset(&cache, 0, sizeof cache);
  cache.store = store;
  const ir_node *nd = &b->g->nodes[node];
  tensor *in[2] = {x, b->g->values[nd->inputs[1]].constant}, *out[1] = {y};
  memset(y, 0, sizeof *y);
  CHECK_OK(node_run_cached(b->g, node, in, out, NULL, NULL, NULL, &cache));
  op_cache_free_all(&cache, 1);
}

static bool same(const tensor *a, const tensor *b) {
  return a->nbytes == b->nbytes && a->nbytes && !memcmp(a->data, b->data, a->nbytes);
}

static void test_ops_side(void) {
  gemm_layout l;
  if (!gemm_layout_for(isa_active(), NULL, K, N, &l)) {
    printf("test_weight_store: no packed GEMM path on this ISA; the op side is not exercised\n");
    return;
  }
  static float w[K * N];
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  gb b;
  gb_init(&b, 17);
  int xv = gb_input(&b, "x", SMELT_F32, 2, (int64_t[]){M, K});
  int wv = gb_const(&b, SMELT_F32, 2, (int64_t[]){K, N}, w);
  int yv = gb_node(&b, "MatMul", 2, (int[]){xv, wv}, NULL, 0);
  gb_output(&b, yv);
  CHECK_OK(gb_finish(&b));
  int node = b.g->values[yv].producer;
  tensor x;
  gb_rand(&x, SMELT_F32, 2, (int64_t[]){M, K}, 3);

  fake_store f = {0};
  op_prep_store store = {.self = &f, .get = fake_get, .put = fake_put};
  tensor y0, y1, y2, y3;
  run_with(&b, node, &x, NULL, &y0); /* memory only */
  run_with(&b, node, &x, &store, &y1);
  CHECK(f.gets == 1 && f.puts == 1 && !strcmp(f.kind, "gemm-b") && f.len > 0 && f.saved);
  run_with(&b, node, &x, &store, &y2); /* a later session: mapped back, not saved again */
  CHECK(f.gets == 2 && f.puts == 1);
  CHECK(same(&y0, &y1) && same(&y0, &y2));
  fake_store off = {.decline = true};
  op_prep_store declining = {.self = &off, .get = fake_get, .put = fake_put};
  run_with(&b, node, &x, &declining, &y3);
  CHECK(off.gets == 1 && off.puts == 0 && same(&y0, &y3));
  tensor_release(&y0), tensor_release(&y1), tensor_release(&y2), tensor_release(&y3), tensor_release(&x);
  free(f.saved);
  gb_free(&b);
}

static void test_runtime_side(void) {
  char dir[] = "/tmp/smelt-weight-store-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  smelt_cache c;
  bool warn;
  cache_open(&c, dir, &warn);
  CHECK(c.enabled);
  prep_store *ps = NULL;
  CHECK_OK(prep_store_create(&c, NULL, &ps));
  op_prep_store iface = weight_store_over(ps);
  op_cache cache;
  memset(&cache, 0, sizeof cache);
  cache.store = &iface;
  float src[64], prep[128];
  for (int i = 0; i < 64; i++) src[i] = (float)i;
  for (int i = 0; i < 128; i++) prep[i] = (float)-i;
  int desc = 5;
  op_prep_key k;
  CHECK(!op_prep_get(&cache, NULL, "seam", &desc, sizeof desc, src, sizeof src, sizeof prep, &k) && k.stored);
  op_prep_put(&cache, NULL, &k, prep);
  const float *got = op_prep_get(&cache, NULL, "seam", &desc, sizeof desc, src, sizeof src, sizeof prep, &k);
  CHECK(got && !memcmp(got, prep, sizeof prep));
  CHECK(!op_prep_get(&cache, NULL, "seam", &desc, sizeof desc, src, sizeof src, 0, &k) && !k.stored);
  prep_store_free(ps);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
}

int main(void) {
  test_ops_side();
  test_runtime_side();
  return test_report("test_weight_store");
}
