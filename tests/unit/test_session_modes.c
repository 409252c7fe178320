/* Compiled modes through the public session API, on the repo's mlp (and the
 * zoo's vit_tiny, skipped when the zoo is not beside the checkout): results equal eager's, the
 * recompile limit sends new shapes to eager with one warning, concurrent
 * runs on one session, bucketing, reduce-overhead replays. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "smelt.h"

#ifndef SMELT_SOURCE_DIR
#define SMELT_SOURCE_DIR "."
#endif

static char model_path[1024];

static void fill(float *x, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 9) & 0xffff) / 32768.f - 1.f;
  }
}

/* Runs session s on batch rows of seeded input; out receives 10*batch floats. */
static smelt_status run_batch(smelt_session *s, int batch, unsigned seed, float *out) {
  float *x = malloc(sizeof(float) * 64 * (size_t)batch);
  fill(x, 64 * (size_t)batch, seed);
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 2, .dims = {batch, 64}, .data = x,
                     .nbytes = sizeof(float) * 64 * (size_t)batch};
  smelt_tensor o = {.dtype = SMELT_F32, .data = out, .nbytes = sizeof(float) * 10 * (size_t)batch};
  smelt_status st = smelt_session_run(s, &in, 1, &o, 1);
  free(x);
  return st;
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
    if (d > m) m = d;
  }
  return m;
}

static smelt_model *model;
static smelt_session *eager;

static smelt_session *make(smelt_mode mode, int limit, const char *buckets) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = mode;
  o.threads = 2;
  o.recompile_limit = limit;
  o.buckets = buckets;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  return s;
}

static bool same_as_eager(smelt_session *s, int batch, unsigned seed) {
  float a[10 * 16], b[10 * 16];
  if (run_batch(s, batch, seed, a) || run_batch(eager, batch, seed, b)) {
    fprintf(stderr, "run failed: %s\n", smelt_last_error());
    return false;
  }
  return max_diff(a, b, 10 * (size_t)batch) < 1e-4;
}

/* Warnings that reached the session's log callback. */
static int warnings;
static char last_warning[1024];

static void count_warnings(smelt_log_level level, const char *msg, void *user) {
  if (level != SMELT_LOG_WARNING || user != &warnings) return;
  warnings++;
  snprintf(last_warning, sizeof last_warning, "%s", msg);
}

static void test_recompile_limit(void) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = SMELT_MODE_DEFAULT;
  o.threads = 2;
  o.recompile_limit = 2;
  o.log = count_warnings;
  o.log_user = &warnings;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  if (!s) return;
  warnings = 0;
  for (int b = 1; b <= 4; b++) CHECK(same_as_eager(s, b, (unsigned)b));
  CHECK(same_as_eager(s, 1, 99)); /* an old shape still runs its plan */
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 2 && st.eager_fallback == 1);
  /* one warning, through the log callback */
  CHECK(warnings == 1 && strstr(last_warning, "recompile limit reached (2 compiles)"));
  smelt_session_free(s);
}

static void test_buckets(void) {
  smelt_session *s = make(SMELT_MODE_DEFAULT, 8, "x:0=4,8");
  if (!s) return;
  for (int b = 1; b <= 8; b++) CHECK(same_as_eager(s, b, 7u * (unsigned)b));
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 2); /* batches 1-4 share size 4, 5-8 size 8 */
  smelt_session_free(s);
  smelt_session_options o = smelt_session_options_default();
  o.mode = SMELT_MODE_DEFAULT;
  o.buckets = "nosuch:0=4";
  s = NULL;
  CHECK(smelt_session_create(model, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
  CHECK(strstr(smelt_last_error(), "nosuch") != NULL);
  o.buckets = "x:0=4,zero";
  CHECK(smelt_session_create(model, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
}

/* dims fixes symbolic sizes: the session compiles at creation for them. */
static void test_dims(void) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = SMELT_MODE_DEFAULT;
  o.threads = 2;
  o.dims = "batch=3";
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 1); /* before any run */
  CHECK(same_as_eager(s, 3, 11));
  CHECK(same_as_eager(s, 2, 12)); /* another batch compiles on its first run */
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 2);
  smelt_session_free(s);
  o.dims = NULL; /* batch unknown: nothing compiled yet */
  s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 0);
  smelt_session_free(s);
  const char *bad[] = {"nosuch=1", "batch", "batch=", "batch=-1", "batch=2x", "=4"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    o.dims = bad[i];
    s = NULL;
    CHECK(smelt_session_create(model, &o, &s) == SMELT_ERR_INVALID_ARGUMENT && !s);
    CHECK(strstr(smelt_last_error(), "dims: ") != NULL);
  }
}

typedef struct worker {
  smelt_session *s;
  int id, bad;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int i = 0; i < 12; i++) {
    int batch = 1 + (w->id + i) % 4;
    float a[40], b[40];
    unsigned seed = (unsigned)(w->id * 100 + i);
    if (run_batch(w->s, batch, seed, a) || run_batch(eager, batch, seed, b) || max_diff(a, b, 10 * (size_t)batch) > 1e-4)
      w->bad++;
  }
  return NULL;
}

static void test_concurrent(smelt_mode mode) {
  smelt_session *s = make(mode, 8, NULL);
  if (!s) return;
  pthread_t t[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){s, i, 0};
    pthread_create(&t[i], NULL, work, &w[i]);
  }
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    bad += w[i].bad;
  }
  CHECK(bad == 0);
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 4); /* each batch size compiled once, whatever the races */
  smelt_session_free(s);
}

static void test_replay(void) {
  smelt_session *s = make(SMELT_MODE_REDUCE_OVERHEAD, 8, NULL);
  if (!s) return;
  for (unsigned seed = 0; seed < 5; seed++) CHECK(same_as_eager(s, 3, seed));
  smelt_session_free(s);
}

/* Concurrent runs where the plan has generated kernels (vit_tiny: layer
 * norms, softmax, GELU), against eager. */
typedef struct vworker {
  smelt_session *s, *e;
  int id, bad;
} vworker;

static void *vwork(void *arg) {
  vworker *w = arg;
  enum { IMG = 3 * 64 * 64 };
  float *x = malloc(sizeof(float) * IMG * 2), a[200], b[200];
  for (int i = 0; i < 6; i++) {
    int batch = 1 + (w->id + i) % 2;
    fill(x, (size_t)IMG * (size_t)batch, (unsigned)(w->id * 31 + i));
    smelt_tensor in = {.dtype = SMELT_F32, .rank = 4, .dims = {batch, 3, 64, 64}, .data = x,
                       .nbytes = sizeof(float) * IMG * (size_t)batch};
    smelt_tensor oa = {.dtype = SMELT_F32, .data = a, .nbytes = sizeof a}, ob = oa;
    ob.data = b;
    smelt_status sa = smelt_session_run(w->s, &in, 1, &oa, 1);
    if (sa) fprintf(stderr, "compiled run: %s\n", smelt_last_error());
    smelt_status sb = smelt_session_run(w->e, &in, 1, &ob, 1);
    if (sb) fprintf(stderr, "eager run: %s\n", smelt_last_error());
    double d = sa || sb ? 1e30 : max_diff(a, b, 100 * (size_t)batch);
    if (d > 1e-4) {
      fprintf(stderr, "thread %d run %d batch %d: differs by %g\n", w->id, i, batch, d);
      w->bad++;
    }
  }
  free(x);
  return NULL;
}

static void test_concurrent_kernels(const char *path) {
  smelt_model *m = NULL;
  if (smelt_model_load(path, &m)) return;
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  smelt_session *e = NULL, *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &e));
  o.mode = SMELT_MODE_DEFAULT;
  CHECK_OK(smelt_session_create(m, &o, &s));
  pthread_t t[4];
  vworker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (vworker){s, e, i, 0};
    pthread_create(&t[i], NULL, vwork, &w[i]);
  }
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    bad += w[i].bad;
  }
  CHECK(bad == 0);
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 2 && st.kernels_generated > 0);
  smelt_session_free(s);
  smelt_session_free(e);
  smelt_model_free(m);
}

int main(void) {
  /* the repo's own MLP (the zoo's mlp is the same file): always there */
  snprintf(model_path, sizeof model_path, "%s/models/mlp/model.onnx", SMELT_SOURCE_DIR);
  setenv("SMELT_CACHE", "off", 1); /* every compile here is a real one */
  CHECK_OK(smelt_model_load(model_path, &model));
  if (!model) return test_report("test_session_modes");
  eager = make(SMELT_MODE_EAGER, 8, NULL);
  test_recompile_limit();
  test_buckets();
  test_dims();
  test_concurrent(SMELT_MODE_DEFAULT);
  test_concurrent(SMELT_MODE_REDUCE_OVERHEAD);
  test_replay();
  char vit[1100];
  snprintf(vit, sizeof vit, "%s", __FILE__);
  char *cut = strstr(vit, "/tests/unit/");
  if (cut) snprintf(cut, sizeof vit - (size_t)(cut - vit), "/../shared/models/vit_tiny/model.onnx");
  if (cut && !access(vit, R_OK)) test_concurrent_kernels(vit);
  else test_skip("test_session_modes", "../shared/models/vit_tiny not found: concurrent generated kernels not run");
  smelt_session_free(eager);
  smelt_model_free(model);
  return test_report("test_session_modes");
}
