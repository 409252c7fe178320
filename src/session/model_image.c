/* smelt_model_load: a model file, its misaligned weights viewed in an image
 * from the cache and its initializers' hashes taken from it when one was
 * kept, else copied (and hashed by the first session) -- and then an image
 * kept for the next load (onnx/image.h).
 *
 * Where: the default cache (SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt,
 * else ~/.cache/smelt), an entry of kind "weight-image" keyed by the file's
 * identity; none with SMELT_CACHE=off or SMELT_CACHE_WEIGHTS=off, or when
 * the cache is unusable (a load never fails for want of an image).
 *
 * The image is written after the load, on a thread of its own at idle
 * priority (SCHED_IDLE: it takes only time no other thread wants, so the
 * session created next is not slowed), with write() from where the copies
 * are (cache_put_parts: nothing mapped, so the process's resident memory
 * does not grow by it), into a temporary file renamed into place when
 * complete.  It hashes what no session has hashed yet and
 * reads the model's copies, so
 * smelt_model_free waits for it; a process that exits first leaves a
 * temporary file, which the cache removes after an hour. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "onnx/image.h"
#include "onnx/model_internal.h"
#include "util/env.h"
#include "util/err.h"
#include "util/hash_memo.h"

#define IMAGE_KIND "weight-image"

static cache_key image_key(uint64_t file_id) {
  key_hasher h;
  key_init(&h);
  key_add_str(&h, IMAGE_KIND);
  key_add_str(&h, smelt_version());
  key_add_i64(&h, (int64_t)file_id);
  return key_final(&h);
}

static bool find_image(void *self, uint64_t file_id, const void **img, size_t *len) {
  const smelt_cache *c = self;
  cache_key k = image_key(file_id);
  bool hit;
  char why[1400];
  cache_map(c, NULL, &k, IMAGE_KIND, img, len, &hit, why, sizeof why);
  return hit;
}

static void release_image(const void *img, size_t len) { cache_unmap(img, len); }

typedef struct image_writer {
  smelt_cache cache;
  const smelt_model *model;
  pid_t pid; /* a forked child has no writer thread to wait for */
  pthread_t thread;
} image_writer;

/* The initializers' hashes (computed here when no session has yet), into
 * a malloc'd array; *n its length (0: none or no memory). */
static onnx_image_hash_rec *initializer_hashes(const smelt_model *m, size_t *n) {
  const ir_graph *g = m->onnx->graph;
  *n = 0;
  onnx_image_hash_rec *r = malloc(sizeof *r * (size_t)(g->n_values ? g->n_values : 1));
  for (int v = 0; r && v < g->n_values; v++) {
    const ir_value *val = &g->values[v];
    const tensor *t = val->constant;
    if (!model_image_hashes(val)) continue;
    uint64_t h;
    if (!hash_memo_get(m->weight_hashes, t->data, t->nbytes, HASH_MEMO_CONTENT, &h)) {
      h = cache_checksum_pool(NULL, t->data, t->nbytes);
      hash_memo_set(m->weight_hashes, t->data, t->nbytes, HASH_MEMO_CONTENT, h);
    }
    onnx_image_hash_rec_set(&r[(*n)++], val->name, t->nbytes, h);
  }
  return r;
}

static void *write_image(void *arg) {
  image_writer *w = arg;
#ifdef SCHED_IDLE
  struct sched_param none = {0};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &none); /* advice: fine if refused */
#endif
  const onnx_model *o = w->model->onnx;
  size_t n_hashes;
  onnx_image_hash_rec *hashes = initializer_hashes(w->model, &n_hashes);
  int n_parts = 0;
  onnx_image_part *parts = hashes && (n_hashes || o->n_copies > 0) /* else nothing a load would be spared */
                               ? onnx_image_parts(o, hashes, n_hashes, &n_parts)
                               : NULL;
  cache_part *cp = parts ? malloc(sizeof *cp * (size_t)n_parts) : NULL;
  if (cp) {
    for (int i = 0; i < n_parts; i++) cp[i] = (cache_part){parts[i].data, parts[i].len};
    cache_key k = image_key(o->file_id);
    /* written, not mapped: the process's resident memory does not grow by
     * the image; a failure (disk full) only costs the next load its copies */
    if (cache_put_parts(&w->cache, &k, IMAGE_KIND, cp, n_parts)) err_clear();
  }
  free(cp);
  onnx_image_parts_free(parts);
  free(hashes);
  return NULL;
}

static void end_writer(void *ctx) {
  image_writer *w = ctx;
  if (w->pid == getpid()) pthread_join(w->thread, NULL);
  free(w);
}

/* Starts keeping m's image (any failure: none is kept). */
static void start_writer(smelt_model *m, const smelt_cache *c) {
  image_writer *w = calloc(1, sizeof *w);
  if (!w) return;
  w->cache = *c;
  w->model = m;
  w->pid = getpid();
  if (pthread_create(&w->thread, NULL, write_image, w)) {
    free(w);
    return;
  }
  m->on_free = end_writer;
  m->on_free_ctx = w;
}

smelt_status smelt_model_load(const char *path, smelt_model **out) {
  smelt_cache c;
  bool warn = false;
  cache_open(&c, NULL, &warn); /* a cache that is off is simply not used */
  if (!c.enabled || !env_flag_on("SMELT_CACHE_WEIGHTS")) return model_load_path(path, NULL, out);
  onnx_image_source src = {&c, find_image, release_image};
  smelt_status s = model_load_path(path, &src, out);
  if (!s && !(*out)->onnx->image && (*out)->onnx->file_id) start_writer(*out, &c);
  return s;
}
