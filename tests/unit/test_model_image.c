/* Images of a model file's misaligned weights (onnx/image.h,
 * session/model_image.c): the first load copies them and keeps an image in
 * the cache; the next load of the same file views them there, 64-byte
 * aligned, and runs to the same bits; a changed file, a damaged image or
 * SMELT_CACHE_WEIGHTS=off means copies again; a forged image is refused. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/checked.h"
#include "check.h"
#include "onnx/image.h"
#include "onnx/model_internal.h"
#include "util/hash_memo.h"
#include "onnx_test_util.h"
#include "smelt.h"

enum { K = 64, N = 320 }; /* W: 80 KiB, above ONNX_IMAGE_MIN_BYTES */

/* y = x W + b, W misaligned in the file (the pad's length moves it). */
static uint8_t *make_model(int pad, size_t *len) {
  static float w[K * N], b[N];
  for (int i = 0; i < K * N; i++) w[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < N; i++) b[i] = (float)i / N;
  pb_buf g = {0};
  char name[64];
  snprintf(name, sizeof name, "W%.*s", pad, "pppppppppppppppp");
  int64_t wd[2] = {K, N}, bd[1] = {N};
  b_init_f32(&g, name, 2, wd, w, K * N);
  b_init_f32(&g, "b", 1, bd, b, N);
  b_value_info(&g, 11, "x", 1, "2,64");
  char ins[80];
  snprintf(ins, sizeof ins, "x,%s", name);
  b_node(&g, "mm", "MatMul", NULL, ins, "t", NULL);
  b_node(&g, "add", "Add", NULL, "t,b", "y", NULL);
  b_value_info(&g, 12, "y", 1, "2,320");
  pb_buf m = {0};
  b_model(&m, 8, 17, &g);
  *len = m.len;
  return m.data;
}

static void run(smelt_model *m, float *y) {
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(m, NULL, &s));
  if (!s) return;
  static float x[2 * K];
  for (int i = 0; i < 2 * K; i++) x[i] = (float)((i * 13) % 7) / 7.0f;
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 2, .dims = {2, K}, .data = x, .nbytes = sizeof x};
  smelt_tensor o = {0};
  CHECK_OK(smelt_session_run(s, &in, 1, &o, 1));
  CHECK(o.nbytes == sizeof(float) * 2 * N);
  if (o.data) memcpy(y, o.data, sizeof(float) * 2 * N);
  smelt_tensor_release(&o);
  smelt_session_free(s);
}

/* The one file in dir whose name ends with suffix, into out; false if not exactly one. */
static bool find_file(const char *dir, const char *suffix, char *out, size_t n) {
  DIR *d = opendir(dir);
  if (!d) return false;
  int found = 0;
  struct dirent *e;
  size_t ls = strlen(suffix);
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l >= ls && !strcmp(e->d_name + l - ls, suffix)) {
      snprintf(out, n, "%s/%s", dir, e->d_name);
      found++;
    }
  }
  closedir(d);
  return found == 1;
}

static const onnx_model *onnx_of(const smelt_model *m) { return m ? m->onnx : NULL; }

static void test_image(const char *tmp) {
  char path[512], cdir[512], img[1200];
  snprintf(path, sizeof path, "%s/model.onnx", tmp);
  snprintf(cdir, sizeof cdir, "%s/cache", tmp);
  setenv("SMELT_CACHE_DIR", cdir, 1);
  /* a pad that leaves W misaligned (the exporters' usual case) */
  size_t len = 0;
  uint8_t *bytes = NULL;
  int pad;
  for (pad = 0; pad < 8; pad++) {
    free(bytes);
    bytes = make_model(pad, &len);
    onnx_model *probe = NULL;
    CHECK_OK(onnx_model_load_buffer(bytes, len, NULL, &probe));
    bool copied = probe && probe->n_copied == 2; /* W and b */
    onnx_model_free(probe);
    if (copied) break;
  }
  CHECK(pad < 8);
  CHECK(test_write_file(path, bytes, len) == 0);

  /* 1: copies, and an image kept (written by the time the model is freed) */
  float y1[2 * N] = {0}, y2[2 * N] = {1};
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && !onnx_of(m)->image && onnx_of(m)->n_copies == 1 && onnx_of(m)->file_id);
  run(m, y1);
  smelt_model_free(m);
  CHECK(find_file(cdir, ".weight-image", img, sizeof img));

  /* 2: viewed in the image, aligned, same result */
  CHECK_OK(smelt_model_load(path, &m));
  const onnx_model *o = onnx_of(m);
  CHECK(o && o->image && o->n_imaged == 1 && o->n_copies == 0);
  if (o) { /* the hashes of W and b are known before any session reads them */
    for (int v = 0; v < o->graph->n_values; v++) {
      const tensor *t = o->graph->values[v].constant;
      uint64_t h;
      if (model_hash_listed(t) && (o->graph->values[v].flags & IR_VALUE_INITIALIZER))
        CHECK(hash_memo_get(m->weight_hashes, t->data, t->nbytes, HASH_MEMO_CONTENT, &h) &&
              h == cache_checksum(t->data, t->nbytes));
    }
  }
  if (o) {
    int wid = -1;
    for (int v = 0; v < o->graph->n_values; v++)
      if (o->graph->values[v].name && o->graph->values[v].name[0] == 'W') wid = v;
    const tensor *w = wid >= 0 ? o->graph->values[wid].constant : NULL;
    CHECK(w && !w->owns_data && (uintptr_t)w->data % 64 == 0);
    CHECK(w && (const uint8_t *)w->data > (const uint8_t *)o->image &&
          (const uint8_t *)w->data < (const uint8_t *)o->image + o->image_len);
    CHECK(w && ((const float *)w->data)[1] == (float)(37 % 101) / 50.0f - 1.0f);
  }
  run(m, y2);
  CHECK(!memcmp(y1, y2, sizeof y1));
  smelt_model_free(m);

  /* 3: the image damaged in place: refused (a checksum pass), weights copied */
  FILE *f = fopen(img, "r+b");
  CHECK(f != NULL);
  if (f) {
    fseek(f, -100, SEEK_END);
    int c = fgetc(f);
    fseek(f, -100, SEEK_END);
    fputc(c ^ 1, f);
    fclose(f);
  }
  checked_forget(); /* as a new process */
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && !onnx_of(m)->image && onnx_of(m)->n_copies == 1);
  memset(y2, 0, sizeof y2);
  run(m, y2);
  CHECK(!memcmp(y1, y2, sizeof y1));
  smelt_model_free(m); /* writes a good image again */
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && onnx_of(m)->image && onnx_of(m)->n_imaged == 1);
  smelt_model_free(m);

  /* 4: the file rewritten (same bytes, another change time): another
   * identity, so no image of the old one is used */
  usleep(20000);
  CHECK(test_write_file(path, bytes, len) == 0);
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && !onnx_of(m)->image && onnx_of(m)->n_copies == 1);
  smelt_model_free(m);

  /* 5: SMELT_CACHE_WEIGHTS=off: no image used or kept */
  usleep(20000);
  CHECK(test_write_file(path, bytes, len) == 0);
  setenv("SMELT_CACHE_WEIGHTS", "off", 1);
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && !onnx_of(m)->image && onnx_of(m)->n_copies == 1);
  smelt_model_free(m);
  unsetenv("SMELT_CACHE_WEIGHTS");
  CHECK_OK(smelt_model_load(path, &m));
  CHECK(onnx_of(m) && !onnx_of(m)->image); /* nothing was kept under off */
  smelt_model_free(m);
  free(bytes);
  unsetenv("SMELT_CACHE_DIR");
}

/* onnx_image_valid refuses what is not an image of this file. */
static void test_valid(void) {
  uint64_t img[32] = {0};
  CHECK(!onnx_image_valid(img, sizeof img, 7));
  CHECK(!onnx_image_valid(NULL, 0, 7));
  img[0] = 0x3267616d69746c6dull; /* the magic */
  img[1] = 7;
  img[2] = 1;                         /* one copy, no hashes */
  img[4] = 100, img[5] = 64, img[6] = 64; /* file_off, nbytes, image_off */
  CHECK(onnx_image_valid(img, 128, 7));
  CHECK(onnx_image_lookup(img, 100, 64) == (const uint8_t *)img + 64);
  CHECK(onnx_image_lookup(img, 100, 32) == NULL && onnx_image_lookup(img, 99, 64) == NULL);
  CHECK(!onnx_image_valid(img, 128, 8));   /* another file */
  CHECK(!onnx_image_valid(img, 127, 7));   /* data past the end */
  img[6] = 60;
  CHECK(!onnx_image_valid(img, 128, 7));   /* misaligned data */
  img[6] = 0;
  CHECK(!onnx_image_valid(img, 128, 7));   /* data over the records */
  img[6] = 64;
  img[2] = (uint64_t)1 << 60;
  CHECK(!onnx_image_valid(img, 128, 7));   /* more records than bytes */
}

/* onnx_image_parts: copies listed out of file order, or twice, still make
 * a valid image in file order, each range once, with its hashes. */
static void test_parts(void) {
  static float a[32], b[16], c[8];
  for (int i = 0; i < 32; i++) a[i] = (float)i;
  for (int i = 0; i < 16; i++) b[i] = 100.0f + (float)i;
  for (int i = 0; i < 8; i++) c[i] = 200.0f + (float)i;
  onnx_copy copies[4] = {{500, sizeof b, b}, {100, sizeof a, a}, {900, sizeof c, c}, {100, sizeof a, a}};
  onnx_model m = {0};
  m.file_id = 42;
  m.copies = copies;
  m.n_copies = 4;
  onnx_image_hash_rec h[2];
  onnx_image_hash_rec_set(&h[0], "zeta", 64, 7);
  onnx_image_hash_rec_set(&h[1], "alpha", 128, 9);
  int n = 0;
  onnx_image_part *parts = onnx_image_parts(&m, h, 2, &n);
  CHECK(parts && n >= 4);
  if (!parts) return;
  size_t len = 0;
  for (int i = 0; i < n; i++) len += parts[i].len;
  uint8_t *img = aligned_alloc(64, (len + 63) / 64 * 64);
  size_t at = 0;
  for (int i = 0; img && i < n; i++) {
    memcpy(img + at, parts[i].data, parts[i].len);
    at += parts[i].len;
  }
  onnx_image_parts_free(parts);
  CHECK(img && onnx_image_valid(img, len, 42) && !onnx_image_valid(img, len, 43));
  if (img) {
    const float *pa = onnx_image_lookup(img, 100, sizeof a), *pb = onnx_image_lookup(img, 500, sizeof b),
                *pc = onnx_image_lookup(img, 900, sizeof c);
    CHECK(pa && pb && pc && !memcmp(pa, a, sizeof a) && !memcmp(pb, b, sizeof b) && !memcmp(pc, c, sizeof c));
    CHECK(pa && (uintptr_t)pa % 64 == 0 && pb && (uintptr_t)pb % 64 == 0);
    uint64_t v = 0;
    CHECK(onnx_image_hash(img, "alpha", 128, &v) && v == 9);
    CHECK(onnx_image_hash(img, "zeta", 64, &v) && v == 7);
    CHECK(!onnx_image_hash(img, "zeta", 65, &v) && !onnx_image_hash(img, "beta", 64, &v));
  }
  free(img);
}

int main(void) {
  char tmp[] = "/tmp/smelt_image_XXXXXX";
  CHECK(mkdtemp(tmp) != NULL);
  test_valid();
  test_parts();
  test_image(tmp);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  CHECK(system(cmd) == 0);
  return test_report("test_model_image");
}
