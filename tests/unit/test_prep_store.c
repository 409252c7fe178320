/* Prepared weights on disk (cache/prep_store.h): the store's entries, and a
 * session end to end -- a compiled Conv model with fixed input shapes is
 * compiled and its Winograd/packed weights prepared when the session is
 * made, saved to the cache, mapped back by the next session, and a damaged
 * entry is rebuilt; results always equal eager's.  The same for a model of
 * matrix products (MatMul / Gemm weights packed for the GEMM's packed path,
 * gemm_weights.c). */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/prep_store.h"
#include "check.h"
#include "kernels/gemm.h"
#include "kernels/isa.h"
#include "onnx/model_internal.h"
#include "onnx_test_util.h"
#include "smelt.h"
#include "util/hash_memo.h"

static char root[256];

static void corrupt_first(const char *dir, const char *suffix) {
  char cmd[800];
  /* flip a byte in the middle of the first matching data file.  A process
   * that wrote or checked an entry maps it again unchecked while the file's
   * identity (inode, size, mtime, ctime) is unchanged; the write changes
   * its times, and so does the touch, on file systems whose clock is too
   * coarse to tell two writes within a tick apart. */
  snprintf(cmd, sizeof cmd,
           "f=$(ls %s/*%s | head -1) && printf '\\377' | dd of=\"$f\" bs=1 seek=100 conv=notrunc 2>/dev/null"
           " && touch -d @1 \"$f\"",
           dir, suffix);
  CHECK(system(cmd) == 0);
}

static void test_store(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/store", root);
  smelt_cache c;
  bool warn;
  cache_open(&c, dir, &warn);
  CHECK(c.enabled);
  prep_store *s = NULL;
  CHECK_OK(prep_store_create(&c, NULL, &s));
  float src[300], prep[1000], other[300];
  for (int i = 0; i < 300; i++) src[i] = other[i] = (float)i * 0.5f;
  other[299] += 1;
  for (int i = 0; i < 1000; i++) prep[i] = (float)i * -0.25f;
  int desc = 7, desc2 = 8;
  prep_key k, k_other, k_desc, k_len;
  CHECK(prep_store_key(s, NULL, "test", &desc, sizeof desc, src, sizeof src, sizeof prep, &k));
  CHECK(!prep_store_key(s, NULL, "test", &desc, sizeof desc, src, sizeof src, 0, &k_len)); /* nothing to store */
  CHECK(!prep_store_get(s, NULL, &k));
  prep_store_put(s, NULL, &k, prep);
  const float *got = prep_store_get(s, NULL, &k);
  CHECK(got && !memcmp(got, prep, sizeof prep));
  /* another source, description or size is another entry */
  CHECK(prep_store_key(s, NULL, "test", &desc, sizeof desc, other, sizeof other, sizeof prep, &k_other));
  CHECK(prep_store_key(s, NULL, "test", &desc2, sizeof desc2, src, sizeof src, sizeof prep, &k_desc));
  CHECK(prep_store_key(s, NULL, "test", &desc, sizeof desc, src, sizeof src, sizeof prep - 4, &k_len));
  CHECK(!prep_store_get(s, NULL, &k_other) && !prep_store_get(s, NULL, &k_desc) && !prep_store_get(s, NULL, &k_len));
  /* a damaged entry is a miss; put writes it again */
  corrupt_first(dir, ".test");
  CHECK(!prep_store_get(s, NULL, &k));
  prep_store_put(s, NULL, &k, prep);
  got = prep_store_get(s, NULL, &k);
  CHECK(got && !memcmp(got, prep, sizeof prep));
  int loaded, saved;
  prep_store_counts(s, &loaded, &saved);
  CHECK(loaded == 2 && saved == 2);
  prep_store_free(s); /* unmaps */
}

/* A cache under root/sub and a store over it; sync: SMELT_CACHE_WRITE=sync
 * while the store is made (it reads the variable then). */
static prep_store *open_store(const char *sub, bool sync, smelt_cache *c, char *dir, size_t n) {
  snprintf(dir, n, "%s/%s", root, sub);
  if (sync) setenv("SMELT_CACHE_WRITE", "sync", 1);
  bool warn;
  cache_open(c, dir, &warn);
  CHECK(c->enabled);
  prep_store *s = NULL;
  CHECK_OK(prep_store_create(c, NULL, &s));
  unsetenv("SMELT_CACHE_WRITE");
  return s;
}

/* Reserved entries: prepared in place, committed (by the writer thread, or at
 * once under SMELT_CACHE_WRITE=sync), found by a get of the same store --
 * which waits for the commit -- and by the next store; an aborted one is
 * never found, a reservation never committed leaves no entry. */
static void test_reserve(const char *sub, bool sync) {
  char dir[512];
  smelt_cache c;
  prep_store *s = open_store(sub, sync, &c, dir, sizeof dir);
  static float src[64], want[4096];
  for (int i = 0; i < 64; i++) src[i] = (float)i;
  for (int i = 0; i < 4096; i++) want[i] = (float)i * 0.25f;
  int d1 = 1, d2 = 2, d3 = 3;
  prep_key k1, k2, k3;
  CHECK(prep_store_key(s, NULL, "resv", &d1, sizeof d1, src, sizeof src, sizeof want, &k1));
  CHECK(prep_store_key(s, NULL, "resv", &d2, sizeof d2, src, sizeof src, sizeof want, &k2));
  CHECK(prep_store_key(s, NULL, "resv", &d3, sizeof d3, src, sizeof src, sizeof want, &k3));
  float *b1 = prep_store_reserve(s, &k1), *b2 = prep_store_reserve(s, &k2), *b3 = prep_store_reserve(s, &k3);
  CHECK(b1 && b2 && b3 && !((uintptr_t)b1 % 64));
  if (!b1 || !b2 || !b3) {
    prep_store_free(s);
    return;
  }
  memcpy(b1, want, sizeof want);
  prep_store_commit(s, NULL, &k1, b1);
  prep_store_abort(s, b2);
  /* b3: reserved, never committed */
  const float *got = prep_store_get(s, NULL, &k1);
  CHECK(got && !memcmp(got, want, sizeof want));
  CHECK(!memcmp(b1, want, sizeof want)); /* still mapped */
  CHECK(!prep_store_get(s, NULL, &k2) && !prep_store_get(s, NULL, &k3));
  int loaded, saved;
  prep_store_counts(s, &loaded, &saved);
  CHECK(loaded == 1 && saved == 1);
  prep_store_free(s);
  CHECK_OK(prep_store_create(&c, NULL, &s));
  got = prep_store_get(s, NULL, &k1);
  CHECK(got && !memcmp(got, want, sizeof want));
  CHECK(!prep_store_get(s, NULL, &k2) && !prep_store_get(s, NULL, &k3));
  prep_store_free(s);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "ls -a %s | grep -q tmp", dir); /* no temporaries left */
  CHECK(system(cmd) != 0);
}

/* Puts are written by the store's writer thread: many queued puts all land
 * (freeing the store finishes them), a drained put no longer reads the
 * caller's buffer, counts include queued puts, and SMELT_CACHE_WRITE=sync
 * writes before put returns. */
#define N_ASYNC 24
static void test_async(const char *sub, bool sync) {
  char dir[512];
  smelt_cache c;
  prep_store *s = open_store(sub, sync, &c, dir, sizeof dir);
  static float src[N_ASYNC][64], prep[N_ASYNC][4096];
  prep_key k[N_ASYNC];
  for (int e = 0; e < N_ASYNC; e++) {
    for (int i = 0; i < 64; i++) src[e][i] = (float)(e * 64 + i);
    for (int i = 0; i < 4096; i++) prep[e][i] = (float)(e * 4096 + i) * 0.5f;
    CHECK(prep_store_key(s, NULL, "async", &e, sizeof e, src[e], sizeof src[e], sizeof prep[e], &k[e]));
    prep_store_put(s, NULL, &k[e], prep[e]);
    if (sync) { /* on disk already */
      char path[1200];
      cache_entry_path(&c, &k[e].key, "async", true, path, sizeof path);
      CHECK(access(path, F_OK) == 0);
    }
  }
  prep_store_free(s); /* finishes the queued writes */
  static float want[N_ASYNC][4096];
  memcpy(want, prep, sizeof prep);
  memset(prep, 0, sizeof prep); /* the caller's buffers are its own again */
  CHECK_OK(prep_store_create(&c, NULL, &s));
  for (int e = 0; e < N_ASYNC; e++) {
    const float *got = prep_store_get(s, NULL, &k[e]);
    CHECK(got && !memcmp(got, want[e], sizeof want[e]));
  }
  int extra = N_ASYNC, loaded, saved;
  prep_key kx;
  CHECK(prep_store_key(s, NULL, "async", &extra, sizeof extra, src[0], sizeof src[0], sizeof want[0], &kx));
  prep_store_put(s, NULL, &kx, want[0]);
  prep_store_counts(s, &loaded, &saved); /* waits for the put */
  CHECK(loaded == N_ASYNC && saved == 1);
  prep_store_free(s);
}

/* x[1,16,20,20] -> x*x -> Conv 3x3 pad 1 (W[24,16,3,3], B) -> Relu -> Conv 1x1 (W2[8,24,1,1]) -> y */
static void write_conv_model(const char *path) {
  pb_buf g = {0}, model = {0}, a1 = {0}, a2 = {0};
  b_input(&g, "x", 1, "1,16,20,20");
  int64_t wd[4] = {24, 16, 3, 3}, bd[1] = {24}, w2d[4] = {8, 24, 1, 1};
  static float w[24 * 16 * 9], b[24], w2[8 * 24];
  unsigned seed = 5;
  for (size_t i = 0; i < sizeof w / sizeof *w; i++) w[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 9 & 0xffff) / 65536.f - .5f;
  for (int i = 0; i < 24; i++) b[i] = (float)i * 0.01f;
  for (int i = 0; i < 8 * 24; i++) w2[i] = (float)((i * 37) % 17) / 17.f - .5f;
  b_init_f32(&g, "W", 4, wd, w, sizeof w / sizeof *w);
  b_init_f32(&g, "B", 1, bd, b, 24);
  b_init_f32(&g, "W2", 4, w2d, w2, 8 * 24);
  b_attr_ints(&a1, "pads", (int64_t[]){1, 1, 1, 1}, 4, 1);
  b_node(&g, "square", "Mul", NULL, "x,x", "x2", NULL); /* a generated kernel reading the input */
  b_node(&g, "conv1", "Conv", NULL, "x2,W,B", "c1", &a1);
  b_node(&g, "relu", "Relu", NULL, "c1", "r", NULL);
  b_node(&g, "conv2", "Conv", NULL, "r,W2", "y", &a2);
  b_output(&g, "y", 1, "1,8,20,20");
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t len;
  CHECK_OK(pb_buf_finish(&model, &data, &len));
  CHECK(test_write_file(path, data, len) == 0);
  free(data);
}

/* Runs s and ref on the input x (n_x floats, sin-filled with step `step`)
 * and returns the largest difference of their n_out-float outputs (1e30 if
 * either run fails). */
static double max_diff_on(smelt_session *s, smelt_session *ref, smelt_tensor in, float *x, int n_x,
                          float step, float *a, float *b, int n_out) {
  for (int i = 0; i < n_x; i++) x[i] = sinf((float)i * step);
  in.data = x;
  in.nbytes = (size_t)n_x * sizeof(float);
  smelt_tensor oa = {.dtype = SMELT_F32, .data = a, .nbytes = (size_t)n_out * sizeof(float)}, ob = oa;
  ob.data = b;
  if (smelt_session_run(s, &in, 1, &oa, 1) || smelt_session_run(ref, &in, 1, &ob, 1)) return 1e30;
  double m = 0;
  for (int i = 0; i < n_out; i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

static double run_diff(smelt_session *s, smelt_session *ref) {
  static float x[16 * 400], a[8 * 400], b[8 * 400];
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 4, .dims = {1, 16, 20, 20}};
  return max_diff_on(s, ref, in, x, 16 * 400, 0.37f, a, b, 8 * 400);
}

static void test_session(void) {
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/cache", root);
  snprintf(path, sizeof path, "%s/conv.onnx", root);
  write_conv_model(path);
  setenv("SMELT_CONV", "winograd", 1); /* prepared weights whatever the cost model says */
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return;
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  smelt_session *ref = NULL, *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &ref));
  o.mode = SMELT_MODE_DEFAULT;
  o.cache_dir = dir;
  smelt_session_stats st = {.struct_size = sizeof st};
  /* cold: compiled and prepared at creation, before any run */
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 1 && st.cache_hits == 0 && st.prepared_saved >= 1 && st.prepared_loaded == 0);
  int saved = st.prepared_saved;
  CHECK(run_diff(s, ref) < 1e-4);
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 1 && st.prepared_saved == saved); /* the run prepared nothing more */
  smelt_session_free(s);
  /* warm: everything from the cache */
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 1 && st.prepared_loaded == saved && st.prepared_saved == 0);
  CHECK(run_diff(s, ref) < 1e-4);
  smelt_session_free(s);
  /* a damaged entry is prepared again, saved again, and the results hold */
  corrupt_first(dir, ".conv");
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.prepared_loaded == saved - 1 && st.prepared_saved == 1);
  CHECK(run_diff(s, ref) < 1e-4);
  smelt_session_free(s);
  /* SMELT_CACHE_WEIGHTS=off: compiled from the cache, weights in memory only */
  setenv("SMELT_CACHE_WEIGHTS", "off", 1);
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.compiles == 1 && st.prepared_loaded == 0 && st.prepared_saved == 0);
  CHECK(run_diff(s, ref) < 1e-4);
  smelt_session_free(s);
  unsetenv("SMELT_CACHE_WEIGHTS");
  /* the other compiled modes compile at creation too (max-autotune times
   * its variants there, on buffers of the declared shapes) */
  const smelt_mode modes[] = {SMELT_MODE_REDUCE_OVERHEAD, SMELT_MODE_MAX_AUTOTUNE};
  for (int i = 0; i < 2; i++) {
    o.mode = modes[i];
    CHECK_OK(smelt_session_create(m, &o, &s));
    CHECK_OK(smelt_session_get_stats(s, &st));
    CHECK(st.compiles == 1);
    CHECK(run_diff(s, ref) < 1e-4);
    smelt_session_free(s);
  }
  unsetenv("SMELT_CONV");
  smelt_session_free(ref);
  smelt_model_free(m);
}

/* x[18,40] -> MatMul W[40,70] -> Add b -> Relu -> MatMul W2[70,33] -> Gemm (transB) W3[12,33] -> y[18,12] */
static void write_gemm_model_w(const char *path, float w_bump) {
  pb_buf g = {0}, model = {0}, at = {0};
  b_input(&g, "x", 1, "18,40");
  static float w[40 * 70], b[70], w2[70 * 33], w3[12 * 33];
  static const int64_t wd[2] = {40, 70}, bd[1] = {70}, w2d[2] = {70, 33}, w3d[2] = {12, 33};
  for (int i = 0; i < 40 * 70; i++) w[i] = (float)((i * 29) % 23) / 23.f - .5f;
  w[40 * 70 / 2] += w_bump; /* one weight changed: another model */
  for (int i = 0; i < 70; i++) b[i] = (float)i * 0.01f - .3f;
  for (int i = 0; i < 70 * 33; i++) w2[i] = (float)((i * 31) % 19) / 19.f - .5f;
  for (int i = 0; i < 12 * 33; i++) w3[i] = (float)((i * 7) % 13) / 13.f - .5f;
  b_init_f32(&g, "W", 2, wd, w, 40 * 70);
  b_init_f32(&g, "b", 1, bd, b, 70);
  b_init_f32(&g, "W2", 2, w2d, w2, 70 * 33);
  b_init_f32(&g, "W3", 2, w3d, w3, 12 * 33);
  b_attr_int(&at, "transB", 1, 1);
  b_node(&g, "mm1", "MatMul", NULL, "x,W", "h", NULL);
  b_node(&g, "add", "Add", NULL, "h,b", "hb", NULL);
  b_node(&g, "relu", "Relu", NULL, "hb", "r", NULL);
  b_node(&g, "mm2", "MatMul", NULL, "r,W2", "z", NULL);
  b_node(&g, "gemm", "Gemm", NULL, "z,W3", "y", &at);
  b_output(&g, "y", 1, "18,12");
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t len;
  CHECK_OK(pb_buf_finish(&model, &data, &len));
  CHECK(test_write_file(path, data, len) == 0);
  free(data);
}

static void write_gemm_model(const char *path) { write_gemm_model_w(path, 0); }

static double run_gemm_diff(smelt_session *s, smelt_session *ref) {
  static float x[2 * 9 * 40], a[18 * 12], b[18 * 12];
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 2, .dims = {18, 40}};
  return max_diff_on(s, ref, in, x, 2 * 9 * 40, 0.53f, a, b, 18 * 12);
}

/* Packed GEMM weights: saved when the session is made, mapped by the next,
 * a damaged one packed again; eager (no store) gives the same results. */
static void test_gemm_session(void) {
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/gcache", root);
  snprintf(path, sizeof path, "%s/gemm.onnx", root);
  write_gemm_model(path);
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return;
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  smelt_session *ref = NULL, *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &ref));
  o.mode = SMELT_MODE_DEFAULT;
  o.cache_dir = dir;
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  /* three weights: W, W2, W3 (none on the scalar ISA: no packed path) */
  bool packs = gemm_pack_b_floats(isa_active(), 40, 70) > 0;
  CHECK(st.prepared_loaded == 0 && st.prepared_saved == (packs ? 3 : 0));
  int saved = st.prepared_saved;
  CHECK(run_gemm_diff(s, ref) < 1e-4);
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.prepared_saved == saved);
  smelt_session_free(s);
  uint64_t hits = hash_memo_hits(m->weight_hashes);
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.prepared_loaded == saved && st.prepared_saved == 0);
  /* the second session of the model keys W and W2 (4 KiB or more) by the
   * hashes the first computed */
  if (packs) CHECK(hash_memo_hits(m->weight_hashes) >= hits + 2);
  CHECK(run_gemm_diff(s, ref) < 1e-4);
  smelt_session_free(s);
  if (packs) {
    corrupt_first(dir, ".gemm-b");
    CHECK_OK(smelt_session_create(m, &o, &s));
    CHECK_OK(smelt_session_get_stats(s, &st));
    CHECK(st.prepared_loaded == saved - 1 && st.prepared_saved == 1);
    CHECK(run_gemm_diff(s, ref) < 1e-4);
    smelt_session_free(s);
  }
  /* weights are packed while the C compiler runs (compile_options
   * prepare_while_cc); a compiler that starts but fails leaves a plan on
   * reference kernels, with every weight prepared and the same results */
  char cc[700], fresh[600];
  snprintf(cc, sizeof cc, "%s/failing-cc.sh", root);
  FILE *f = fopen(cc, "w");
  CHECK(f != NULL);
  if (f) {
    fprintf(f, "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'failing-cc 1.0'; exit 0; }\nexit 1\n");
    fclose(f);
    chmod(cc, 0700);
    const char *old_cc = getenv("CC");
    char saved_cc[512] = "";
    if (old_cc) snprintf(saved_cc, sizeof saved_cc, "%s", old_cc);
    setenv("CC", cc, 1);
    snprintf(fresh, sizeof fresh, "%s/gcache-failcc", root);
    o.cache_dir = fresh;
    CHECK_OK(smelt_session_create(m, &o, &s));
    CHECK_OK(smelt_session_get_stats(s, &st));
    CHECK(st.prepared_loaded == 0 && st.prepared_saved == saved);
    CHECK(run_gemm_diff(s, ref) < 1e-4);
    smelt_session_free(s);
    o.cache_dir = dir;
    if (old_cc) setenv("CC", saved_cc, 1);
    else unsetenv("CC");
  }
  smelt_session_free(ref);
  smelt_model_free(m);
  if (!packs) return;
  /* one weight of W changed, the same path, shapes and names: a new model,
   * whose W misses (no stale entry, whatever was remembered for the old
   * model) while W2 and W3 are found; results equal eager on the new one */
  write_gemm_model_w(path, 0.75f);
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return;
  o.mode = SMELT_MODE_EAGER;
  o.cache_dir = NULL;
  CHECK_OK(smelt_session_create(m, &o, &ref));
  o.mode = SMELT_MODE_DEFAULT;
  o.cache_dir = dir;
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.prepared_loaded == saved - 1 && st.prepared_saved == 1);
  CHECK(run_gemm_diff(s, ref) < 1e-4);
  smelt_session_free(s);
  smelt_session_free(ref);
  smelt_model_free(m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/smelt_prep_XXXXXX");
  if (!mkdtemp(root)) return 1;
  unsetenv("SMELT_CACHE");
  test_store();
  test_async("async", false);
  test_async("sync", true);
  test_reserve("resv-async", false);
  test_reserve("resv-sync", true);
  test_session();
  test_gemm_session();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
  return test_report("test_prep_store");
}
