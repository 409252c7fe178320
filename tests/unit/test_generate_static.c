/* The generator's static KV cache (src/generate/gen_static.c,
 * passes/static_kv.c, ops/kv_cache.c) on the zoo's gpt_tiny_kv: logits equal
 * the model as written (presents fed back) at lengths 1, 2, 63, 64, 65 and
 * max_length - 1 (and after a prompt of 60, whose logits the rewritten graph
 * computes for the last position only); the decode graph has no Concat of a
 * cache and nothing that copies one; a decode step allocates no more at length 65 than at length 10;
 * max_length reached is a clear error; the caches are allocated once (or,
 * without max_length, grow by doubling with the same tokens). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "generate/gen_static.h"
#include "smelt.h"

#define MAXLEN 70

static float max_rel_diff(const float *a, const float *b, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++) {
    float d = fabsf(a[i] - b[i]) / (1.f + fabsf(b[i]));
    if (!(d <= m)) m = d; /* NaN counts */
  }
  return m;
}

/* The decode graph: every cache is written by KVAppend, none is read by a
 * Concat, and only attention and Shape read a KVAppend's output. */
static void check_graph(const gen_static *st) {
  const ir_graph *g = st->graph;
  int appends = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (!strcmp(nd->op_type, "KVAppend")) appends++;
    for (int k = 0; k < nd->n_inputs; k++) {
      int v = nd->inputs[k];
      if (v < 0) continue;
      int p = g->values[v].producer;
      bool from_append = p >= 0 && !strcmp(g->nodes[p].op_type, "KVAppend");
      if (from_append) CHECK(!strcmp(nd->op_type, "Attention") || !strcmp(nd->op_type, "Shape"));
      if (!strcmp(nd->op_type, "Concat")) CHECK(g->values[v].dtype != SMELT_F32); /* shape arithmetic only */
    }
  }
  CHECK(appends == st->n_kv);
  CHECK(st->copies == 0);
  /* the LM head runs over the last position only (passes/last_logits.c) */
  CHECK(st->last_logits);
  const ir_value *lv = &g->values[g->outputs[0]];
  CHECK(lv->rank == 3 && lv->dims[1] == 1);
}

static void test_parity(smelt_session *s) {
  smelt_generator_options o = smelt_generator_options_default();
  o.max_length = MAXLEN;
  smelt_generator *gs = NULL, *gc = NULL;
  CHECK_OK(smelt_generator_create(s, &o, &gs));
  o.static_cache = 0;
  CHECK_OK(smelt_generator_create(s, &o, &gc));
  if (!gs || !gc) goto out;
  CHECK(smelt_generator_static_cache(gs) == 1 && smelt_generator_static_cache(gc) == 0);
  const gen_static *st = gen_generator_static(gs);
  CHECK(st != NULL && st->cap == MAXLEN);
  if (st) check_graph(st);
  int64_t tok = 7;
  CHECK_OK(smelt_generator_prefill(gs, &tok, 1));
  CHECK_OK(smelt_generator_prefill(gc, &tok, 1));
  CHECK(smelt_generator_kv_bytes(gs) == 8 * (size_t)4 * 64 * sizeof(float)); /* one position in use */
  double peak10 = 0, peak65 = 0;
  for (int64_t len = 1; len < MAXLEN; len++) {
    int64_t vs, vc;
    const float *ls = smelt_generator_logits(gs, &vs), *lc = smelt_generator_logits(gc, &vc);
    CHECK(ls && lc && vs == vc);
    if (len == 1 || len == 2 || len == 63 || len == 64 || len == 65 || len == MAXLEN - 1) {
      float d = ls && lc ? max_rel_diff(ls, lc, vs) : 1;
      if (d > 1e-4f) fprintf(stderr, "length %lld: logits differ by %g\n", (long long)len, (double)d);
      CHECK(d <= 1e-4f);
    }
    if (len == MAXLEN - 1) break;
    tok = (len * 131 + 17) % 4096; /* the same awkward tokens into both */
    CHECK_OK(smelt_generator_step(gs, &tok));
    CHECK_OK(smelt_generator_step(gc, &tok));
    CHECK(smelt_generator_length(gs) == len + 1);
    if (st && len + 1 == 10) peak10 = (double)st->last.peak_bytes;
    if (st && len + 1 == 65) peak65 = (double)st->last.peak_bytes;
  }
  /* nothing cache-sized per step: what a step allocates grows by less than
   * one cache's growth from length 10 to 65 (the Concat path copies all 8) */
  CHECK(peak10 > 0 && peak65 - peak10 < 55.0 * 4 * 64 * sizeof(float));
  CHECK(st && st->cap == MAXLEN); /* allocated once */
  /* max_length 70: the 70th position fits, the 71st is refused */
  tok = 1;
  CHECK_OK(smelt_generator_step(gs, &tok));
  CHECK(smelt_generator_step(gs, &tok) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "max_length") != NULL);
out:
  smelt_generator_free(gs);
  smelt_generator_free(gc);
}

/* max_length 0: the cache starts at 64 positions and doubles, keeping its prefix. */
static void test_growing(smelt_session *s) {
  smelt_generator_options o = smelt_generator_options_default();
  smelt_generator *gs = NULL, *gc = NULL;
  CHECK_OK(smelt_generator_create(s, &o, &gs));
  o.static_cache = 0;
  CHECK_OK(smelt_generator_create(s, &o, &gc));
  if (!gs || !gc) goto out;
  int64_t prompt[60];
  for (int i = 0; i < 60; i++) prompt[i] = (i * 37) % 4096;
  CHECK_OK(smelt_generator_prefill(gs, prompt, 60));
  CHECK_OK(smelt_generator_prefill(gc, prompt, 60));
  int64_t ts = 0, tc = 0;
  for (int i = 0; i < 10; i++) { /* 60 -> 70: through a doubling */
    CHECK_OK(smelt_generator_next(gs, &ts));
    CHECK_OK(smelt_generator_next(gc, &tc));
    CHECK(ts == tc);
  }
  const gen_static *st = gen_generator_static(gs);
  CHECK(st && st->cap == 128);
  int64_t v;
  const float *ls = smelt_generator_logits(gs, &v), *lc = smelt_generator_logits(gc, &v);
  CHECK(ls && lc && max_rel_diff(ls, lc, v) <= 1e-4f);
out:
  smelt_generator_free(gs);
  smelt_generator_free(gc);
}

int main(void) {
  const char *path = SMELT_SOURCE_DIR "/../shared/models/gpt_tiny_kv/model.onnx";
  smelt_model *m = NULL;
  if (smelt_model_load(path, &m)) {
    test_skip("test_generate_static", "../shared/models/gpt_tiny_kv not found");
    return test_report("test_generate_static");
  }
  smelt_session_options so = smelt_session_options_default();
  so.threads = 1;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &so, &s));
  if (s) {
    test_parity(s);
    test_growing(s);
  }
  smelt_session_free(s);
  smelt_model_free(m);
  return test_report("test_generate_static");
}
