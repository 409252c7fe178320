/* src/generate/: token picking (greedy, seeded sampling, top-k, top-p), the
 * generator's argument and signature checks, and a prefill/decode run on the
 * zoo's gpt_tiny_kv (when ../shared is there): reset gives the same tokens,
 * the cache grows by one position per step, max_length is enforced. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "generate/gen_sample.h"
#include "smelt.h"

static void test_sampler(void) {
  float logits[6] = {0.5f, 2.0f, NAN, 2.0f, -1.0f, 1.5f};
  CHECK(gen_argmax(logits, 6) == 1); /* first of equal maxima, NaN never wins */
  gen_sampler s;
  gen_sampler_init(&s, 0, 0, 1, 1);
  CHECK(gen_sample(&s, logits, 6) == 1); /* temperature 0: greedy */
  gen_sampler_free(&s);
  gen_sampler_init(&s, 1, 1, 1, 99);
  for (int i = 0; i < 20; i++) CHECK(gen_sample(&s, logits, 6) == 1); /* top-k 1 */
  gen_sampler_free(&s);
  /* top-p: token 0 holds ~0.9 of the mass, so p = 0.5 keeps it alone */
  float peaked[4] = {5.0f, 2.0f, 1.0f, 0.0f};
  gen_sampler_init(&s, 1, 0, 0.5f, 3);
  for (int i = 0; i < 20; i++) CHECK(gen_sample(&s, peaked, 4) == 0);
  gen_sampler_free(&s);
  /* the same seed draws the same tokens; the draws cover more than one token
   * and only tokens with a finite logit */
  float flat[8] = {0, 0, 0, 0, 0, 0, 0, NAN};
  int64_t a[64], b[64];
  gen_sampler_init(&s, 1, 0, 1, 42);
  for (int i = 0; i < 64; i++) a[i] = gen_sample(&s, flat, 8);
  gen_sampler_free(&s);
  gen_sampler_init(&s, 1, 0, 1, 42);
  for (int i = 0; i < 64; i++) b[i] = gen_sample(&s, flat, 8);
  gen_sampler_free(&s);
  CHECK(!memcmp(a, b, sizeof a));
  int seen[8] = {0}, distinct = 0;
  for (int i = 0; i < 64; i++) {
    CHECK(a[i] >= 0 && a[i] < 7);
    if (a[i] >= 0 && a[i] < 8 && !seen[a[i]]++) distinct++;
  }
  CHECK(distinct > 3);
  /* top-k 2 at a high temperature: only the two best */
  gen_sampler_init(&s, 100, 2, 1, 5);
  for (int i = 0; i < 50; i++) {
    int64_t t = gen_sample(&s, peaked, 4);
    CHECK(t == 0 || t == 1);
  }
  gen_sampler_free(&s);
}

static smelt_session *open_session(const char *path, smelt_model **m) {
  if (smelt_model_load(path, m)) return NULL;
  smelt_session_options so = smelt_session_options_default();
  so.threads = 1;
  smelt_session *s = NULL;
  if (smelt_session_create(*m, &so, &s)) {
    smelt_model_free(*m);
    return NULL;
  }
  return s;
}

static void test_checks(void) {
  smelt_model *m = NULL;
  smelt_session *s = open_session(SMELT_SOURCE_DIR "/models/mlp/model.onnx", &m);
  CHECK(s != NULL);
  if (!s) return;
  smelt_generator *g = (smelt_generator *)1;
  CHECK(smelt_generator_create(s, NULL, &g) == SMELT_ERR_UNSUPPORTED);
  CHECK(g == NULL);
  CHECK(strstr(smelt_last_error(), "generate: input") != NULL);
  smelt_generator_options o = smelt_generator_options_default();
  o.batch = 0;
  CHECK(smelt_generator_create(s, &o, &g) == SMELT_ERR_INVALID_ARGUMENT);
  o = smelt_generator_options_default();
  o.top_p = 0;
  CHECK(smelt_generator_create(s, &o, &g) == SMELT_ERR_INVALID_ARGUMENT);
  o = smelt_generator_options_default();
  o.struct_size = 3;
  CHECK(smelt_generator_create(s, &o, &g) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(smelt_generator_create(NULL, NULL, &g) == SMELT_ERR_INVALID_ARGUMENT);
  smelt_session_free(s);
  smelt_model_free(m);
}

static void test_tiny_kv(void) {
  const char *path = SMELT_SOURCE_DIR "/../shared/models/gpt_tiny_kv/model.onnx";
  smelt_model *m = NULL;
  smelt_session *s = open_session(path, &m);
  if (!s) {
    test_skip("test_generate", "../shared/models/gpt_tiny_kv not found");
    return;
  }
  smelt_generator_options o = smelt_generator_options_default();
  o.batch = 2;
  o.max_length = 8;
  o.static_cache = 0; /* the model as written: presents fed back (test_generate_static: the static cache) */
  smelt_generator *g = NULL;
  CHECK_OK(smelt_generator_create(s, &o, &g));
  if (!g) goto out;
  int64_t tok[2], first[3][2], prompt[6] = {5, 17, 42, 9, 1, 300};
  CHECK(smelt_generator_step(g, tok) == SMELT_ERR_INVALID_ARGUMENT);   /* no prompt yet */
  CHECK(smelt_generator_sample(g, tok) == SMELT_ERR_INVALID_ARGUMENT); /* no logits yet */
  CHECK_OK(smelt_generator_prefill(g, prompt, 3));
  CHECK(smelt_generator_length(g) == 3);
  size_t kv3 = smelt_generator_kv_bytes(g);
  CHECK(kv3 == 8 * (size_t)2 * 4 * 3 * 64 * 4); /* 4 layers x key/value, batch 2, 4 heads, 64 dims */
  int64_t vocab = 0;
  CHECK(smelt_generator_logits(g, &vocab) != NULL && vocab == 4096);
  for (int i = 0; i < 3; i++) CHECK_OK(smelt_generator_next(g, first[i]));
  CHECK(smelt_generator_length(g) == 5);
  CHECK(smelt_generator_kv_bytes(g) == kv3 / 3 * 5);
  smelt_generator_reset(g);
  CHECK(smelt_generator_length(g) == 0 && smelt_generator_kv_bytes(g) == 0);
  CHECK_OK(smelt_generator_prefill(g, prompt, 3));
  for (int i = 0; i < 3; i++) {
    CHECK_OK(smelt_generator_next(g, tok));
    CHECK(tok[0] == first[i][0] && tok[1] == first[i][1]);
  }
  /* max_length 8: 3 + 4 steps fit, then the generator is done and a step past it is refused */
  CHECK_OK(smelt_generator_next(g, tok));
  CHECK_OK(smelt_generator_next(g, tok));
  CHECK(smelt_generator_done(g));
  CHECK_OK(smelt_generator_step(g, tok));
  CHECK(smelt_generator_step(g, tok) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "max_length") != NULL);
  /* a prompt longer than max_length is refused and the generator stays usable */
  int64_t long_prompt[18] = {0};
  CHECK(smelt_generator_prefill(g, long_prompt, 9) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK_OK(smelt_generator_prefill(g, prompt, 3));
  CHECK_OK(smelt_generator_next(g, tok));
  CHECK(tok[0] == first[0][0]);
  smelt_generator_free(g);
  /* EOS: a sequence stops at it; done once all have */
  o = smelt_generator_options_default();
  o.eos_token_id = first[1][0];
  CHECK_OK(smelt_generator_create(s, &o, &g));
  if (g) {
    CHECK_OK(smelt_generator_prefill(g, prompt, 3));
    CHECK_OK(smelt_generator_next(g, tok));
    CHECK(!smelt_generator_done(g) || tok[0] == o.eos_token_id);
    CHECK_OK(smelt_generator_next(g, tok));
    CHECK(tok[0] == o.eos_token_id && smelt_generator_done(g));
    smelt_generator_free(g);
  }
  /* sampling: prefill restarts the draws from the seed */
  o = smelt_generator_options_default();
  o.temperature = 50;
  o.seed = 11;
  CHECK_OK(smelt_generator_create(s, &o, &g));
  if (g) {
    int64_t run[2][6];
    for (int r = 0; r < 2; r++) {
      CHECK_OK(smelt_generator_prefill(g, prompt, 3));
      for (int i = 0; i < 6; i++) CHECK_OK(smelt_generator_next(g, &run[r][i]));
    }
    CHECK(!memcmp(run[0], run[1], sizeof run[0]));
    smelt_generator_free(g);
  }
out:
  smelt_session_free(s);
  smelt_model_free(m);
}

int main(void) {
  test_sampler();
  test_checks();
  test_tiny_kv();
  return test_report("test_generate");
}
