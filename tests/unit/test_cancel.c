/* Cancellation and deadlines (smelt_run_options, parallel/run_ctl.h), through
 * the C API on models written at test time:
 *   - a Loop whose trip count is an input: with M = 1e18 and a 2 s timeout
 *     the run returns SMELT_TIMEOUT (well under 20 s), fills no output, and
 *     the same session then runs M = 3 correctly;
 *   - a cancel flag set before the run: SMELT_CANCELLED at once, in eager
 *     and every compiled mode, and the session runs normally afterwards;
 *   - a cancel flag set from another thread during a long run (resnet18 from
 *     ../shared/models when present, else a chain of 1024x1024 MatMuls):
 *     the latency from the store to the return is printed and bounded
 *     generously, and later runs give the same results as a fresh session
 *     (a run stopped during its first run's weight preparation leaves no
 *     half-prepared weights behind);
 *   - bad options are refused.
 * `test_cancel --write DIR` only writes the files the CLI test
 * (tests/scripts/cli_timeout.sh) uses: see write_cli_files. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "kernels/gemm_kernels.h"
#include "kernels/isa.h"
#include "onnx_test_util.h"
#include "ops/gemm_weights.h"
#include "parallel/pool.h"
#include "parallel/run_ctl.h"
#include "smelt.h"

static char root[256];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int write_model(const char *path, pb_buf *graph) {
  pb_buf model = {0};
  b_model(&model, 8, 17, graph);
  uint8_t *data;
  size_t len;
  if (pb_buf_finish(&model, &data, &len)) return -1;
  int rc = test_write_file(path, data, len);
  free(data);
  return rc;
}

/* y = Loop(M, , x) with body (i, cond, v) -> (cond, v + v): y = x * 2^M. */
static int write_loop_model(const char *path) {
  pb_buf g = {0}, body = {0}, attrs = {0};
  pb_put_str_field(&body, 2, "body");
  b_input(&body, "i", 7, "");
  b_input(&body, "cond", 9, "");
  b_input(&body, "v", 1, "1");
  b_node(&body, "keep", "Identity", NULL, "cond", "cond_out", NULL);
  b_node(&body, "double", "Add", NULL, "v,v", "v_out", NULL);
  b_output(&body, "cond_out", 9, "");
  b_output(&body, "v_out", 1, "1");
  b_attr_msg(&attrs, "body", 5, 6, &body);
  b_input(&g, "M", 7, "");
  b_input(&g, "x", 1, "1");
  b_node(&g, "loop", "Loop", NULL, "M,,x", "y", &attrs);
  b_output(&g, "y", 1, "1");
  return write_model(path, &g);
}

#define CHAIN_ROWS 512
#define CHAIN_K 1024
#define CHAIN_LAYERS 24

/* x[512,1024] -> (MatMul W[1024,1024], Tanh) x 24 -> y: about 26 GFLOP. */
static int write_chain_model(const char *path) {
  pb_buf g = {0};
  static float w[CHAIN_K * CHAIN_K];
  unsigned seed = 11;
  float scale = 2.f * sqrtf(3.f / CHAIN_K);
  for (size_t i = 0; i < sizeof w / sizeof *w; i++)
    w[i] = ((float)((seed = seed * 1664525u + 1013904223u) >> 9 & 0xffff) / 65536.f - .5f) * scale;
  int64_t wd[2] = {CHAIN_K, CHAIN_K};
  b_input(&g, "x", 1, "512,1024");
  b_init_f32(&g, "W", 2, wd, w, sizeof w / sizeof *w);
  char in[32] = "x", mm[32], out[32];
  for (int k = 0; k < CHAIN_LAYERS; k++) {
    char ins[80];
    snprintf(mm, sizeof mm, "m%d", k);
    snprintf(out, sizeof out, k == CHAIN_LAYERS - 1 ? "y" : "t%d", k);
    snprintf(ins, sizeof ins, "%s,W", in);
    b_node(&g, NULL, "MatMul", NULL, ins, mm, NULL);
    b_node(&g, NULL, "Tanh", NULL, mm, out, NULL);
    snprintf(in, sizeof in, "%s", out);
  }
  b_output(&g, "y", 1, "512,1024");
  return write_model(path, &g);
}

static smelt_status run_loop(smelt_session *s, int64_t m, float *y, const smelt_run_options *o,
                             smelt_tensor *out) {
  static float x = 1.f;
  smelt_tensor in[2] = {
      {.name = "M", .dtype = SMELT_I64, .rank = 0, .data = &m, .nbytes = sizeof m},
      {.name = "x", .dtype = SMELT_F32, .rank = 1, .dims = {1}, .data = &x, .nbytes = sizeof x}};
  memset(out, 0, sizeof *out);
  smelt_status st = smelt_session_run_with(s, in, 2, out, 1, o);
  if (!st && y) *y = *(float *)out->data;
  return st;
}

static void test_loop_timeout(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/loop.onnx", root);
  CHECK(write_loop_model(path) == 0);
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return;
  smelt_session_options so = smelt_session_options_default();
  so.threads = 2;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &so, &s));
  if (!s) {
    smelt_model_free(m);
    return;
  }
  smelt_run_options o = smelt_run_options_default();
  o.timeout_s = 2;
  smelt_tensor out;
  double t0 = now_s();
  smelt_status st = run_loop(s, 1000000000000000000LL, NULL, &o, &out);
  double took = now_s() - t0;
  printf("Loop with trip count 1e18, timeout 2 s: %s after %.3f s (%s)\n", smelt_status_name(st), took,
         smelt_last_error());
  CHECK(st == SMELT_TIMEOUT);
  CHECK(took >= 1.9 && took < 20);
  CHECK(strstr(smelt_last_error(), "timeout") && strstr(smelt_last_error(), "loop"));
  CHECK(out.data == NULL); /* nothing handed over */
  /* the same session, a normal input: with and without options */
  float y = 0;
  CHECK_OK(run_loop(s, 3, &y, &o, &out));
  CHECK(y == 8.f);
  smelt_tensor_release(&out);
  CHECK_OK(run_loop(s, 5, &y, NULL, &out));
  CHECK(y == 32.f);
  smelt_tensor_release(&out);
  smelt_session_free(s);
  smelt_model_free(m);
}

static void fill_inputs(const smelt_model *m, smelt_tensor *in, int n) {
  for (int k = 0; k < n; k++) {
    smelt_value_info vi;
    memset(&in[k], 0, sizeof in[k]);
    if (smelt_model_input(m, k, &vi)) continue;
    in[k].name = vi.name;
    in[k].dtype = SMELT_F32;
    in[k].rank = vi.rank;
    size_t count = 1;
    for (int d = 0; d < vi.rank; d++) {
      in[k].dims[d] = vi.dims[d] > 0 ? vi.dims[d] : 1;
      count *= (size_t)in[k].dims[d];
    }
    float *x = malloc(count * sizeof *x);
    for (size_t i = 0; x && i < count; i++) x[i] = sinf((float)i * 0.013f + (float)k);
    in[k].data = x;
    in[k].nbytes = x ? count * sizeof *x : 0;
  }
}

/* True when every input is a float tensor of known rank (what fill_inputs makes). */
static bool float_inputs(const smelt_model *m) {
  for (int k = 0; k < smelt_model_num_inputs(m); k++) {
    smelt_value_info vi;
    if (smelt_model_input(m, k, &vi) || vi.dtype != SMELT_F32 || vi.rank < 0) return false;
  }
  return smelt_model_num_outputs(m) > 0;
}

typedef struct canceller {
  volatile int flag;
  double delay_s, set_at;
} canceller;

static void *cancel_later(void *arg) {
  canceller *c = arg;
  struct timespec d = {(time_t)c->delay_s, (long)((c->delay_s - floor(c->delay_s)) * 1e9)};
  nanosleep(&d, NULL);
  c->set_at = now_s();
  __atomic_store_n((int *)&c->flag, 1, __ATOMIC_RELAXED);
  return NULL;
}

static void release_outputs(smelt_tensor *out, int n) {
  for (int k = 0; k < n; k++) smelt_tensor_release(&out[k]);
}

/* Runs with a flag another thread sets after delay_s; retries with shorter
 * delays while the run ends first.  Returns the latency from the store to
 * the return (s), or -1 if the run never got cancelled. */
static double cancel_during_run(smelt_session *s, smelt_tensor *in, int n_in, int n_out, double delay_s) {
  smelt_tensor out[16];
  for (int attempt = 0; attempt < 6; attempt++, delay_s /= 4) {
    canceller c = {0, delay_s, 0};
    smelt_run_options o = smelt_run_options_default();
    o.cancel = &c.flag;
    memset(out, 0, sizeof out);
    pthread_t t;
    if (pthread_create(&t, NULL, cancel_later, &c)) return -1;
    smelt_status st = smelt_session_run_with(s, in, (size_t)n_in, out, (size_t)n_out, &o);
    double ret = now_s();
    pthread_join(t, NULL);
    if (st == SMELT_OK) { /* finished before the flag was set: try sooner */
      release_outputs(out, n_out);
      continue;
    }
    CHECK(st == SMELT_CANCELLED);
    CHECK(strstr(smelt_last_error(), "cancelled") != NULL);
    for (int k = 0; k < n_out; k++) CHECK(out[k].data == NULL);
    return ret - c.set_at;
  }
  return -1;
}

/* Max |a - b| over the outputs of s and ref on in (1e30 on failure). */
static double outputs_diff(smelt_session *s, smelt_session *ref, smelt_tensor *in, int n_in, int n_out) {
  smelt_tensor a[16], b[16];
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  double m = 0;
  if (smelt_session_run(s, in, (size_t)n_in, a, (size_t)n_out) ||
      smelt_session_run(ref, in, (size_t)n_in, b, (size_t)n_out)) {
    fprintf(stderr, "run failed: %s\n", smelt_last_error());
    m = 1e30;
  }
  for (int k = 0; m < 1e30 && k < n_out; k++) {
    if (a[k].dtype != SMELT_F32 || a[k].nbytes != b[k].nbytes) return 1e30;
    const float *x = a[k].data, *y = b[k].data;
    for (size_t i = 0; i < a[k].nbytes / sizeof(float); i++) m = fmax(m, fabs((double)x[i] - y[i]));
  }
  release_outputs(a, n_out);
  release_outputs(b, n_out);
  return m;
}

/* Cancel during the first run (weights being prepared) and during a later
 * one; the session stays usable and keeps agreeing with a fresh session. */
static void test_cancel_thread(const char *model_path, const char *what, smelt_mode mode, int threads) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(model_path, &m));
  if (!m) return;
  int n_in = smelt_model_num_inputs(m), n_out = smelt_model_num_outputs(m);
  if (n_in > 16 || n_out > 16 || !float_inputs(m)) {
    test_skip(what, "inputs not float or too many values");
    smelt_model_free(m);
    return;
  }
  smelt_tensor in[16];
  fill_inputs(m, in, n_in);
  char cache[600];
  snprintf(cache, sizeof cache, "%s/cache", root);
  smelt_session_options so = smelt_session_options_default();
  so.threads = threads;
  so.mode = mode;
  so.cache_dir = cache;
  smelt_session *s = NULL, *ref = NULL;
  CHECK_OK(smelt_session_create(m, &so, &s));
  CHECK_OK(smelt_session_create(m, &so, &ref));
  if (s && ref) {
    /* the first run of s: eager prepares convolution weights during it */
    double first = cancel_during_run(s, in, n_in, n_out, 0.005);
    CHECK(first >= 0);
    /* how long a run takes, to cancel a later one a third of the way in */
    smelt_tensor out[16];
    memset(out, 0, sizeof out);
    double t0 = now_s();
    CHECK_OK(smelt_session_run(ref, in, (size_t)n_in, out, (size_t)n_out));
    double run_s = now_s() - t0;
    release_outputs(out, n_out);
    double lat = cancel_during_run(s, in, n_in, n_out, run_s / 3);
    printf("%s (%s, %d threads): run %.1f ms; cancel latency %.2f ms during the first run, %.2f ms a third "
           "of the way into a later one\n",
           what, smelt_mode_name(mode), threads, run_s * 1e3, first * 1e3, lat * 1e3);
    CHECK(lat >= 0);
    CHECK(first < 2.0 && lat < 2.0); /* generous: the machine is shared */
    double diff = outputs_diff(s, ref, in, n_in, n_out);
    if (diff > 1e-5) fprintf(stderr, "%s (%s, %d threads): outputs differ by %g after cancellations\n", what,
                             smelt_mode_name(mode), threads, diff);
    CHECK(diff <= 1e-5);
  }
  smelt_session_free(s);
  smelt_session_free(ref);
  for (int k = 0; k < n_in; k++) free(in[k].data);
  smelt_model_free(m);
}

/* A flag already set: nothing runs, in every mode; then a normal run. */
static void test_preset_flag(const char *chain) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(chain, &m));
  if (!m) return;
  smelt_tensor in[1];
  fill_inputs(m, in, 1);
  char cache[600];
  snprintf(cache, sizeof cache, "%s/cache", root);
  smelt_mode modes[] = {SMELT_MODE_EAGER, SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD};
  for (int i = 0; i < 3; i++) {
    smelt_session_options so = smelt_session_options_default();
    so.threads = 2;
    so.mode = modes[i];
    so.cache_dir = cache;
    smelt_session *s = NULL;
    CHECK_OK(smelt_session_create(m, &so, &s));
    if (!s) continue;
    volatile int flag = 1;
    smelt_run_options o = smelt_run_options_default();
    o.cancel = &flag;
    smelt_tensor out = {0};
    double t0 = now_s();
    CHECK(smelt_session_run_with(s, in, 1, &out, 1, &o) == SMELT_CANCELLED);
    CHECK(out.data == NULL);
    CHECK(now_s() - t0 < 5);
    /* a deadline already past: a timeout */
    o.cancel = NULL;
    o.timeout_s = 1e-9;
    CHECK(smelt_session_run_with(s, in, 1, &out, 1, &o) == SMELT_TIMEOUT);
    CHECK(strstr(smelt_last_error(), "timeout") != NULL);
    flag = 0;
    o.cancel = &flag;
    o.timeout_s = 600;
    CHECK_OK(smelt_session_run_with(s, in, 1, &out, 1, &o));
    CHECK(out.data != NULL);
    smelt_tensor_release(&out);
    smelt_session_free(s);
  }
  free(in[0].data);
  smelt_model_free(m);
}

static void test_bad_options(const char *chain) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(chain, &m));
  if (!m) return;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, NULL, &s));
  smelt_tensor in[1];
  fill_inputs(m, in, 1);
  smelt_tensor out = {0};
  smelt_run_options o = smelt_run_options_default();
  CHECK(o.struct_size == sizeof o && o.timeout_s == 0 && o.cancel == NULL);
  o.struct_size = 0;
  CHECK(smelt_session_run_with(s, in, 1, &out, 1, &o) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "struct_size") != NULL);
  o = smelt_run_options_default();
  o.timeout_s = -1;
  CHECK(smelt_session_run_with(s, in, 1, &out, 1, &o) == SMELT_ERR_INVALID_ARGUMENT);
  o.timeout_s = NAN;
  CHECK(smelt_session_run_with(s, in, 1, &out, 1, &o) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(!strcmp(smelt_status_name(SMELT_CANCELLED), "cancelled"));
  CHECK(!strcmp(smelt_status_name(SMELT_TIMEOUT), "timeout"));
  CHECK(SMELT_CANCELLED == SMELT_ERR_INTERNAL + 1 && SMELT_TIMEOUT == SMELT_ERR_INTERNAL + 2);
  free(in[0].data);
  smelt_session_free(s);
  smelt_model_free(m);
}

static int write_pb(const char *path, int dtype, int rank, const int64_t *dims, const void *data, size_t n) {
  pb_buf t = {0};
  b_tensor_raw(&t, NULL, dtype, rank, dims, data, n);
  uint8_t *bytes;
  size_t len;
  if (pb_buf_finish(&t, &bytes, &len)) return -1;
  int rc = test_write_file(path, bytes, len);
  free(bytes);
  return rc;
}

/* An ONNX backend-test folder DIR/NAME: the Loop model, M, x = 1, y = 2^M. */
static int write_test_dir(const char *dir, const char *name, int64_t M, float y) {
  char path[700];
  float x = 1;
  int64_t one = 1;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (mkdir(path, 0700)) return -1;
  snprintf(path, sizeof path, "%s/%s/test_data_set_0", dir, name);
  if (mkdir(path, 0700)) return -1;
  snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
  if (write_loop_model(path)) return -1;
  snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_0.pb", dir, name);
  if (write_pb(path, 7, 0, NULL, &M, sizeof M)) return -1;
  snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_1.pb", dir, name);
  if (write_pb(path, 1, 1, &one, &x, sizeof x)) return -1;
  snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", dir, name);
  return write_pb(path, 1, 1, &one, &y, sizeof y);
}

/* For tests/scripts/cli_timeout.sh: DIR/loop.onnx, DIR/m_huge.npy (M = 1e18),
 * and the test folders DIR/loop_huge (M = 1e18) and DIR/loop_small (M = 3). */
static int write_cli_files(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/loop.onnx", dir);
  if (write_loop_model(path)) return 1;
  int64_t huge = 1000000000000000000LL;
  smelt_tensor t = {.dtype = SMELT_I64, .rank = 0, .data = &huge, .nbytes = sizeof huge};
  snprintf(path, sizeof path, "%s/m_huge.npy", dir);
  if (smelt_tensor_save_npy(path, &t)) return 1;
  return write_test_dir(dir, "loop_huge", huge, 1) || write_test_dir(dir, "loop_small", 3, 8) ? 1 : 0;
}

/* Weights packed while the current run has already stopped (a cancel seen
 * in the middle of a first run) are packed whole: the op cache keeps them
 * for every later run, so the pool must not skip their chunks. */
static void test_prepare_in_stopped_run(void) {
  smelt_pool *pool = NULL;
  CHECK_OK(pool_create(2, &pool));
  const int64_t M = 8, K = 700, N = 900;
  float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
  float *c1 = calloc((size_t)(M * N), sizeof(float)), *c2 = calloc((size_t)(M * N), sizeof(float));
  if (!pool || !a || !b || !c1 || !c2) {
    CHECK(!"no memory for the stopped-run packing test");
  } else {
    for (int64_t i = 0; i < M * K; i++) a[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int64_t i = 0; i < K * N; i++) b[i] = (float)((i * 53 % 97) - 48) / 48.0f;
    volatile int flag = 1;
    smelt_run_options o = smelt_run_options_default();
    o.cancel = &flag;
    run_ctl ctl;
    bool active = false;
    CHECK_OK(run_ctl_init(&ctl, &o, &active));
    op_cache cache = {0};
    run_ctl *prev = run_ctl_enter(&ctl);
    CHECK(pool_stopping()); /* the run has stopped: ordinary parallel work is skipped */
    const gemm_packed *pk = gemm_weights_b(&cache, pool, false, K, N, b);
    run_ctl_enter(prev);
    gemm_params p = gemm_params_default();
    p.M = M, p.N = N, p.K = K, p.A = a, p.lda = K, p.B = b, p.ldb = N, p.C = c1, p.ldc = N;
    gemm_f32_scalar(NULL, &p);
    p.C = c2, p.packed_b = pk;
    CHECK_OK(gemm_f32_run(pool, &p, isa_active(), GEMM_PATH_AUTO, NULL));
    double m = 0;
    for (int64_t i = 0; i < M * N; i++) m = fmax(m, fabs((double)c1[i] - c2[i]));
    if (m > 1e-3) fprintf(stderr, "weights packed in a stopped run: off by %g\n", m);
    CHECK(m <= 1e-3);
    printf("weights packed during a stopped run: %s, max diff %.2g\n", pk ? "packed" : "no packed path", m);
    op_cache_free_all(&cache, 1);
  }
  free(a), free(b), free(c1), free(c2);
  pool_free(pool);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write")) return write_cli_files(argv[2]);
  snprintf(root, sizeof root, "/tmp/smelt_cancel_XXXXXX");
  if (!mkdtemp(root)) return 1;
  test_loop_timeout();
  test_prepare_in_stopped_run();
  char chain[600], shared[1024], resnet[1200];
  snprintf(chain, sizeof chain, "%s/chain.onnx", root);
  CHECK(write_chain_model(chain) == 0);
  test_bad_options(chain);
  test_preset_flag(chain);
  test_cancel_thread(chain, "MatMul chain", SMELT_MODE_EAGER, 2);
  test_cancel_thread(chain, "MatMul chain", SMELT_MODE_EAGER, 1);
  test_cancel_thread(chain, "MatMul chain", SMELT_MODE_DEFAULT, 2);
  test_cancel_thread(chain, "MatMul chain", SMELT_MODE_REDUCE_OVERHEAD, 2);
  const char *sh = test_shared_dir(1, argv, shared, sizeof shared); /* $SMELT_SHARED or ../shared */
  snprintf(resnet, sizeof resnet, "%s/models/resnet18/model.onnx", sh ? sh : "/nonexistent");
  if (sh && access(resnet, R_OK) == 0) test_cancel_thread(resnet, "resnet18", SMELT_MODE_EAGER, 2);
  else test_skip("test_cancel", "resnet18 not found under ../shared/models (the MatMul chain ran)");
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd)) return 1;
  return test_report("test_cancel");
}
