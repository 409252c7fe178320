/* Weights released once packed (util/ro_map.h): the float32 pages of a
 * weight that is a view of the model file are dropped when its packed form
 * is made, and import copies of misaligned weights drop the file pages they
 * were copied from.  Every later reader must still see the weights: this
 * runs a model whose weights live in the file (external data, page-aligned:
 * viewed in place) and inline (raw_data: viewed or copied) through a
 * compiled session, a new shape (re-plan), the recompile limit (eager
 * fallback), eager, the cpu-ref device and a session made from the cache,
 * checking each output against products computed here from the weights;
 * and a model loaded from bytes (only the sources of import copies are
 * dropped there: a weight viewed in the bytes has no file to come back
 * from). */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "onnx_test_util.h"
#include "smelt.h"
#include "util/ro_map.h"

enum { K = 256, N1 = 256, N2 = 64, CI = 16, CO = 32, HW = 12, PAGE_FLOATS = 65536 };

static char root[256];
static float w1[K * N1];        /* external, offset 0 */
static float wc[CO * CI * 9];   /* external, offset 4 * PAGE_FLOATS */
static float w2[N1 * N2];       /* inline raw_data */

static float val(unsigned i, unsigned salt) {
  unsigned v = (i + 1) * 2654435761u ^ salt * 40503u;
  return (float)(v >> 9 & 0xffff) / 65536.f - .5f;
}

/* ---- the registry on its own ---- */

static void test_registry(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/pages.bin", root);
  size_t n = 16 * 4096;
  uint8_t *want = malloc(n);
  for (size_t i = 0; i < n; i++) want[i] = (uint8_t)(i * 7 + 3);
  CHECK(test_write_file(path, want, n) == 0);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  uint8_t *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  CHECK(map != MAP_FAILED);
  uint8_t *heap = malloc(n);
  memcpy(heap, want, n);
  CHECK(ro_map_release(map, n) == 0); /* not registered */
  CHECK(ro_map_release(heap, n) == 0);
  ro_map_add(map, n);
  uint64_t before = ro_map_released_total();
  CHECK(ro_map_release(map + 100, 50) == 0);            /* no whole page inside */
  CHECK(ro_map_release(map + 100, 3 * 4096) == 2 * 4096); /* whole pages only */
  CHECK(ro_map_release(map, n + 1) == 0);                /* past the mapping */
  CHECK(ro_map_release(heap, n) == 0);                   /* another block */
  CHECK(ro_map_released_total() - before == 2 * 4096);
  CHECK(!memcmp(map, want, n)); /* read back from the file */
  CHECK(!memcmp(heap, want, n));
  ro_map_remove(map);
  CHECK(ro_map_release(map, n) == 0);
  munmap(map, n);
  free(heap);
  free(want);
}

/* ---- sessions ---- */

static void ext_init(pb_buf *g, const char *name, int rank, const int64_t *dims, const char *off,
                     const char *len) {
  pb_buf t = {0}, e = {0};
  for (int i = 0; i < rank; i++) pb_put_varint_field(&t, 1, (uint64_t)dims[i]);
  pb_put_varint_field(&t, 2, SMELT_F32);
  pb_put_str_field(&t, 8, name);
  const char *kv[3][2] = {{"location", "weights.bin"}, {"offset", off}, {"length", len}};
  for (int i = 0; i < 3; i++) {
    pb_put_str_field(&e, 1, kv[i][0]);
    pb_put_str_field(&e, 2, kv[i][1]);
    b_msg(&t, 13, &e);
  }
  pb_put_varint_field(&t, 14, 1);
  b_msg(g, 5, &t);
}

/* x[n,K] -> MatMul W1 -> Relu -> MatMul W2 -> y[n,N2];  xc[1,CI,HW,HW] -> Conv Wc (pad 1) -> yc.
 * external: W1 and Wc in weights.bin; W2 inline unless all_inline (then W1 and Wc too). */
static void write_model(const char *path, bool all_inline, const char *w1_name) {
  pb_buf g = {0}, model = {0}, a = {0};
  b_input(&g, "x", 1, "n,256");
  b_input(&g, "xc", 1, "1,16,12,12");
  static const int64_t d1[2] = {K, N1}, d2[2] = {N1, N2}, dc[4] = {CO, CI, 3, 3};
  if (all_inline) {
    b_init_f32(&g, w1_name, 2, d1, w1, K * N1);
    b_init_f32(&g, "Wc", 4, dc, wc, CO * CI * 9);
  } else {
    char off[32], len1[32], lenc[32];
    snprintf(off, sizeof off, "%zu", 4 * PAGE_FLOATS * sizeof(float));
    snprintf(len1, sizeof len1, "%zu", sizeof w1);
    snprintf(lenc, sizeof lenc, "%zu", sizeof wc);
    ext_init(&g, w1_name, 2, d1, "0", len1);
    ext_init(&g, "Wc", 4, dc, off, lenc);
  }
  b_init_f32(&g, "W2", 2, d2, w2, N1 * N2);
  b_attr_ints(&a, "pads", (int64_t[]){1, 1, 1, 1}, 4, 1);
  char mm1_in[64];
  snprintf(mm1_in, sizeof mm1_in, "x,%s", w1_name);
  b_node(&g, "mm1", "MatMul", NULL, mm1_in, "h", NULL);
  b_node(&g, "relu", "Relu", NULL, "h", "r", NULL);
  b_node(&g, "mm2", "MatMul", NULL, "r,W2", "y", NULL);
  b_node(&g, "conv", "Conv", NULL, "xc,Wc", "yc", &a);
  b_output(&g, "y", 1, "n,64");
  b_output(&g, "yc", 1, "1,32,12,12");
  b_model(&model, 8, 17, &g);
  uint8_t *data;
  size_t len;
  CHECK_OK(pb_buf_finish(&model, &data, &len));
  CHECK(test_write_file(path, data, len) == 0);
  free(data);
}

static void write_weights(const char *path) {
  size_t n = 4 * PAGE_FLOATS + sizeof wc / sizeof *wc;
  float *f = calloc(n, sizeof *f);
  memcpy(f, w1, sizeof w1);
  memcpy(f + 4 * PAGE_FLOATS, wc, sizeof wc);
  CHECK(test_write_file(path, f, n * sizeof *f) == 0);
  free(f);
}

/* The largest difference of one run's outputs from the products computed
 * here in double (1e30 if the run fails). */
static double run_check(smelt_session *s, int n) {
  float *x = malloc(sizeof(float) * (size_t)n * K), *y = malloc(sizeof(float) * (size_t)n * N2);
  static float xc[CI * HW * HW], yc[CO * HW * HW];
  for (int i = 0; i < n * K; i++) x[i] = val((unsigned)i, 9);
  for (int i = 0; i < CI * HW * HW; i++) xc[i] = val((unsigned)i, 11);
  smelt_tensor in[2] = {{.dtype = SMELT_F32, .rank = 2, .dims = {n, K}, .data = x,
                         .nbytes = sizeof(float) * (size_t)n * K},
                        {.dtype = SMELT_F32, .rank = 4, .dims = {1, CI, HW, HW}, .data = xc, .nbytes = sizeof xc}};
  smelt_tensor out[2] = {{.dtype = SMELT_F32, .data = y, .nbytes = sizeof(float) * (size_t)n * N2},
                         {.dtype = SMELT_F32, .data = yc, .nbytes = sizeof yc}};
  double worst = 0;
  if (smelt_session_run(s, in, 2, out, 2)) {
    fprintf(stderr, "  run n=%d: %s\n", n, smelt_last_error());
    worst = 1e30;
  } else {
    double *h = malloc(sizeof(double) * N1);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < N1; j++) {
        double a = 0;
        for (int k = 0; k < K; k++) a += (double)x[i * K + k] * w1[k * N1 + j];
        h[j] = a > 0 ? a : 0;
      }
      for (int j = 0; j < N2; j++) {
        double a = 0;
        for (int k = 0; k < N1; k++) a += h[k] * w2[k * N2 + j];
        worst = fmax(worst, fabs(a - y[i * N2 + j]));
      }
    }
    free(h);
    for (int m = 0; m < CO; m++)
      for (int oy = 0; oy < HW; oy++)
        for (int ox = 0; ox < HW; ox++) {
          double a = 0;
          for (int c = 0; c < CI; c++)
            for (int ky = 0; ky < 3; ky++)
              for (int kx = 0; kx < 3; kx++) {
                int iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy < 0 || ix < 0 || iy >= HW || ix >= HW) continue;
                a += (double)xc[(c * HW + iy) * HW + ix] * wc[((m * CI + c) * 3 + ky) * 3 + kx];
              }
          worst = fmax(worst, fabs(a - yc[(m * HW + oy) * HW + ox]));
        }
  }
  free(x);
  free(y);
  return worst;
}

#define TOL 2e-3

static void test_sessions(const char *path, const char *cache) {
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return;
  uint64_t before = ro_map_released_total();
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  o.mode = SMELT_MODE_DEFAULT;
  o.cache_dir = cache;
  o.dims = "n=8";
  o.recompile_limit = 2;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK(run_check(s, 8) < TOL);
  CHECK(ro_map_released_total() > before); /* something was dropped: the rest of this test reads after it */
  CHECK(run_check(s, 8) < TOL);
  CHECK(run_check(s, 16) < TOL); /* a new shape: compiled again */
  CHECK(run_check(s, 3) < TOL);  /* past the recompile limit: eager from here on */
  smelt_session_stats st = {.struct_size = sizeof st};
  CHECK_OK(smelt_session_get_stats(s, &st));
  CHECK(st.eager_fallback == 1);
  CHECK(run_check(s, 8) < TOL);
  smelt_session_free(s);
  /* from the cache: prepared weights mapped, the model's read for the key */
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK(run_check(s, 8) < TOL);
  CHECK(run_check(s, 5) < TOL);
  smelt_session_free(s);
  /* eager, and the reference device */
  smelt_session_options e = smelt_session_options_default();
  e.threads = 2;
  CHECK_OK(smelt_session_create(m, &e, &s));
  CHECK(run_check(s, 4) < TOL);
  CHECK(run_check(s, 4) < TOL);
  smelt_session_free(s);
  e.device = "cpu-ref";
  CHECK_OK(smelt_session_create(m, &e, &s));
  CHECK(run_check(s, 2) < TOL);
  smelt_session_free(s);
  smelt_model_free(m);
}

/* From bytes the weights are views of (or copies from) heap memory, which is never dropped. */
static void test_bytes(const char *path) {
  size_t len;
  uint8_t *data = test_read_file(path, &len);
  CHECK(data != NULL);
  if (!data) return;
  /* weights whose raw_data is not 4-byte aligned are copied at import, and
   * the pages they were copied from, in the model's copy of the bytes, are
   * discarded: the outputs below show the copies and the weights viewed in
   * place are intact */
  int misaligned = 0;
  const float *ws[3] = {w1, w2, wc};
  for (int k = 0; k < 3; k++) {
    const uint8_t *at = memmem(data, len, ws[k], 64);
    CHECK(at != NULL);
    if (at && (at - data) % 4) misaligned++;
  }
  CHECK(misaligned > 0 && misaligned < 3); /* main picked W1's name for both kinds */
  uint64_t before = ro_map_released_total();
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load_bytes(data, len, &m));
  free(data);
  if (!m) return;
  CHECK(misaligned == 0 || ro_map_released_total() > before);
  if (!misaligned) fprintf(stderr, "  note: every weight is aligned in the bytes: no discard to check\n");
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  o.mode = SMELT_MODE_DEFAULT;
  o.dims = "n=8";
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, &o, &s));
  CHECK(run_check(s, 8) < TOL);
  CHECK(run_check(s, 8) < TOL);
  CHECK(run_check(s, 2) < TOL); /* a new shape: a product of 2 rows reads W1 and W2 themselves */
  smelt_session_free(s);
  smelt_session_options e = smelt_session_options_default();
  e.threads = 2;
  CHECK_OK(smelt_session_create(m, &e, &s));
  CHECK(run_check(s, 3) < TOL);
  smelt_session_free(s);
  smelt_model_free(m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/smelt_wrel_XXXXXX");
  if (!mkdtemp(root)) return 1;
  unsetenv("SMELT_CACHE");
  unsetenv("SMELT_WEIGHT_RELEASE");
  for (unsigned i = 0; i < K * N1; i++) w1[i] = val(i, 1) * 0.2f;
  for (unsigned i = 0; i < N1 * N2; i++) w2[i] = val(i, 2) * 0.2f;
  for (unsigned i = 0; i < CO * CI * 9; i++) wc[i] = val(i, 3);
  test_registry();
  char model[400], weights[400], inl[400], cache[400];
  snprintf(model, sizeof model, "%s/model.onnx", root);
  snprintf(weights, sizeof weights, "%s/weights.bin", root);
  snprintf(inl, sizeof inl, "%s/inline.onnx", root);
  snprintf(cache, sizeof cache, "%s/cache", root);
  write_weights(weights);
  write_model(model, false, "W1");
  /* the inline model: W1's name padded until its bytes are aligned and W2's
   * are not, or the reverse (the bytes test needs a weight of each kind) */
  static const char *names[] = {"W1", "W1a", "W1ab", "W1abc"};
  for (int i = 0; i < 4; i++) {
    write_model(inl, true, names[i]);
    size_t len;
    uint8_t *data = test_read_file(inl, &len);
    const uint8_t *a1 = data ? memmem(data, len, w1, 64) : NULL, *a2 = data ? memmem(data, len, w2, 64) : NULL;
    bool mixed = a1 && a2 && ((a1 - data) % 4 == 0) != ((a2 - data) % 4 == 0);
    free(data);
    if (mixed) break;
  }
  test_sessions(model, cache);
  test_sessions(inl, cache);
  test_bytes(inl);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
  return test_report("test_weight_release");
}
