/* The session memory budget (smelt_session_options.max_memory): sizes read
 * and written, the default, the allocator refusing before it allocates, and
 * sessions that refuse a run over the budget with a message naming the node
 * and then run a small input as before. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "onnx_test_util.h"
#include "session/session.h"
#include "smelt.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/membudget.h"

#define MiB ((size_t)1 << 20)

static void test_sizes(void) {
  size_t v = 0;
  CHECK(membudget_parse("1048576", &v) && v == MiB);
  CHECK(membudget_parse("512K", &v) && v == 512 * 1024);
  CHECK(membudget_parse("512M", &v) && v == 512 * MiB);
  CHECK(membudget_parse("8G", &v) && v == 8 * 1024 * MiB);
  CHECK(membudget_parse("8g", &v) && v == 8 * 1024 * MiB);
  CHECK(membudget_parse("8GiB", &v) && v == 8 * 1024 * MiB);
  CHECK(membudget_parse("2TB", &v) && v == (size_t)2 << 40);
  CHECK(!membudget_parse("", &v) && !membudget_parse("0", &v) && !membudget_parse("-1G", &v));
  CHECK(!membudget_parse("8X", &v) && !membudget_parse("G", &v) && !membudget_parse("1.5G", &v));
  CHECK(!membudget_parse("99999999999999999999", &v) && !membudget_parse("100000000000T", &v));
  char b[32];
  CHECK(!strcmp(membudget_fmt(b, sizeof b, 100), "100 bytes"));
  CHECK(!strcmp(membudget_fmt(b, sizeof b, 64 * MiB), "64.0 MiB"));
  CHECK(!strcmp(membudget_fmt(b, sizeof b, 24000000000ull), "22.4 GiB"));

  /* 80% of the smaller of available memory and the cgroup limit */
  CHECK(membudget_from(10000, 20000, 0) == 8000);
  CHECK(membudget_from(0, 20000, 0) == 16000);
  CHECK(membudget_from(10000, 20000, 5000) == 4000);
  CHECK(membudget_from(10000, 20000, 50000) == 8000);
  CHECK(membudget_from(0, 0, 0) == SIZE_MAX);
  size_t d = membudget_default();
  CHECK(d > 0);
}

/* A pool worker's scratch refused: the worker carries the caller's cache. */
static void *worker_alloc(void *arg) {
  bufcache_enter(arg);
  void *p = bufcache_alloc(3 * MiB);
  bufcache_release(p);
  return p;
}

/* The allocator: tracked bytes, cached blocks dropped to make room, a refusal
 * before anything is allocated and its message. */
static void test_bufcache_budget(void) {
  bufcache *c = NULL;
  CHECK_OK(bufcache_create(&c));
  bufcache_set_budget(c, 4 * MiB);
  bufcache *prev = bufcache_enter(c);
  void *a = bufcache_alloc(2 * MiB);
  CHECK(a && bufcache_in_use(c) >= 2 * MiB);
  void *b = bufcache_alloc(3 * MiB); /* 2 + 3 > 4: refused */
  CHECK(!b);
  smelt_status st = err_nomem("scratch", 3 * MiB);
  CHECK(st == SMELT_ERR_NOMEM);
  CHECK(strstr(err_message(), "scratch needs 3.0 MiB with 2.0 MiB in use, over the memory budget of 4.0 MiB"));
  /* scratch malloc'd outside the cache: checked, not tracked */
  CHECK(!bufcache_admit(3 * MiB));
  err_nomem("f32 working copy", 3 * MiB);
  CHECK(strstr(err_message(), "f32 working copy needs 3.0 MiB with 2.0 MiB in use, over the memory budget"));
  CHECK(bufcache_admit(MiB) && bufcache_in_use(c) < 3 * MiB);
  /* a refusal does not colour a later, unrelated failure */
  void *small = bufcache_alloc(100);
  bufcache_release(small);
  err_nomem("other", 10);
  CHECK(strstr(err_message(), "out of memory allocating 10 bytes for other"));

  /* refused on another thread, reported on this one (sizes must match) */
  pthread_t th;
  void *got = (void *)1;
  CHECK(pthread_create(&th, NULL, worker_alloc, c) == 0 && pthread_join(th, &got) == 0 && !got);
  err_nomem("other", 5 * MiB);
  CHECK(strstr(err_message(), "out of memory allocating"));
  err_nomem("conv scratch", 3 * MiB);
  CHECK(strstr(err_message(), "conv scratch needs 3.0 MiB with 2.0 MiB in use, over the memory budget of 4.0 MiB"));
  err_nomem("conv scratch", 3 * MiB); /* reported once */
  CHECK(strstr(err_message(), "out of memory allocating"));

  bufcache_release(a); /* kept in the cache, no longer in use */
  CHECK(bufcache_in_use(c) == 0 && bufcache_held(c) >= 2 * MiB);
  b = bufcache_alloc(3 * MiB); /* fits only once the cached block is dropped */
  CHECK(b && bufcache_held(c) == 0 && bufcache_in_use(c) >= 3 * MiB);
  bufcache_disown(c, b); /* handed away: no longer counted */
  CHECK(bufcache_in_use(c) == 0);
  bufcache_enter(prev);
  free(b);
  bufcache_free_all(c);
}

/* x f32 [1], s i64 [2] -> Expand (node 'expand') -> a -> Relu ('relu') -> y */
static int write_model(const char *path) {
  pb_buf g = {0}, m = {0};
  b_node(&g, "expand", "Expand", NULL, "x,s", "a", NULL);
  b_node(&g, "relu", "Relu", NULL, "a", "y", NULL);
  pb_put_str_field(&g, 2, "g");
  b_input(&g, "x", 1, "1");
  b_input(&g, "s", 7, "2");
  b_output(&g, "y", 1, NULL);
  b_model(&m, 8, 17, &g);
  int rc = test_write_file(path, m.data, m.len);
  pb_buf_discard(&m);
  return rc;
}

static smelt_status run_expand(smelt_session *s, int64_t rows, int64_t cols, smelt_tensor *y) {
  float x = -2.f;
  int64_t shape[2] = {rows, cols};
  smelt_tensor in[2] = {{.name = "x", .dtype = SMELT_F32, .rank = 1, .dims = {1}, .data = &x, .nbytes = 4},
                        {.name = "s", .dtype = SMELT_I64, .rank = 1, .dims = {2}, .data = shape, .nbytes = 16}};
  memset(y, 0, sizeof *y);
  return smelt_session_run(s, in, 2, y, 1);
}

static void test_session(smelt_model *model, smelt_mode mode) {
  smelt_session_options o = smelt_session_options_default();
  CHECK(o.max_memory == 0);
  o.threads = 2;
  o.mode = mode;
  o.max_memory = 64 * MiB;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  if (!s) return;
  smelt_tensor y;
  /* one value over the budget: the Expand's output, 229 MiB */
  CHECK(run_expand(s, 6000, 10000, &y) == SMELT_ERR_NOMEM);
  const char *msg = smelt_last_error();
  CHECK(strstr(msg, "node 'expand' (Expand)") && strstr(msg, "needs 228.9 MiB") &&
        strstr(msg, "over the memory budget of 64.0 MiB"));
  printf("%s: %s\n", smelt_mode_name(mode), msg);
  CHECK(!y.data);
  if (mode == SMELT_MODE_EAGER) CHECK(bufcache_in_use(s->bufs) == 0); /* the run let go of everything */
  /* 45.8 MiB fits, but not twice: the Relu's output is refused */
  CHECK(run_expand(s, 3000, 4000, &y) == SMELT_ERR_NOMEM);
  msg = smelt_last_error();
  CHECK(strstr(msg, "over the memory budget of 64.0 MiB") && strstr(msg, "in use"));
  printf("%s: %s\n", smelt_mode_name(mode), msg);
  if (mode == SMELT_MODE_EAGER) {
    CHECK(strstr(msg, "node 'relu' (Relu)") && strstr(msg, "needs 45.8 MiB with 4"));
    CHECK(bufcache_in_use(s->bufs) == 0);
  }
  /* the session is still good for what fits, again and again */
  for (int rep = 0; rep < 3; rep++) {
    CHECK_OK(run_expand(s, 2, 3, &y));
    CHECK(y.rank == 2 && y.dims[0] == 2 && y.dims[1] == 3 && y.data && ((float *)y.data)[5] == 0.f);
    smelt_tensor_release(&y);
    CHECK_OK(run_expand(s, 1000, 4000, &y)); /* 15.3 MiB, twice */
    CHECK(y.data && y.nbytes == 16000000);
    smelt_tensor_release(&y);
  }
  if (mode == SMELT_MODE_EAGER) CHECK(bufcache_in_use(s->bufs) == 0);
  smelt_session_free(s);

  /* 0: the default budget, from the machine */
  o.max_memory = 0;
  CHECK_OK(smelt_session_create(model, &o, &s));
  CHECK(s && s->opts.max_memory > 0 && bufcache_budget(s->bufs) > 0);
  smelt_session_free(s);
}

/* x f32 [n] -> Relu ('relu') -> Neg ('neg') -> y: compiled, the arena (or,
 * outside reduce-overhead, y's own output buffer) holds the result; a shape
 * whose buffers are over the budget is refused when the run would take
 * them, and smaller shapes still compile and run. */
static void test_compiled_arena(const char *path, smelt_mode mode) {
  pb_buf g = {0}, m = {0};
  b_node(&g, "relu", "Relu", NULL, "x", "a", NULL);
  b_node(&g, "neg", "Neg", NULL, "a", "y", NULL);
  pb_put_str_field(&g, 2, "g");
  b_input(&g, "x", 1, "n");
  b_output(&g, "y", 1, "n");
  b_model(&m, 8, 17, &g);
  CHECK(test_write_file(path, m.data, m.len) == 0);
  pb_buf_discard(&m);
  smelt_model *model = NULL;
  CHECK_OK(smelt_model_load(path, &model));
  if (!model) return;
  smelt_session_options o = smelt_session_options_default();
  o.threads = 2;
  o.mode = mode;
  o.max_memory = 64 * MiB;
  smelt_session *s = NULL;
  CHECK_OK(smelt_session_create(model, &o, &s));
  int64_t big = 20 << 20; /* 80 MiB a value: the caller's input is not counted, the arena is */
  float *x = calloc((size_t)big, sizeof(float));
  smelt_tensor in = {.dtype = SMELT_F32, .rank = 1, .dims = {big}, .data = x, .nbytes = sizeof(float) * (size_t)big};
  smelt_tensor y = {0};
  CHECK(s && x && smelt_session_run(s, &in, 1, &y, 1) == SMELT_ERR_NOMEM && !y.data);
  const char *msg = smelt_last_error();
  printf("%s: %s\n", smelt_mode_name(mode), msg);
  /* default/max-autotune write y into its own output buffer, reduce-overhead
   * into the arena: either is refused, naming the node */
  CHECK((strstr(msg, "arena needs") || strstr(msg, "output 'y': output needs")) &&
        strstr(msg, "over the memory budget of 64.0 MiB") && strstr(msg, "node '"));
  for (int rep = 0; s && rep < 2; rep++) {
    in.dims[0] = 1000;
    in.nbytes = 4000;
    x[999] = 3.f;
    CHECK_OK(smelt_session_run(s, &in, 1, &y, 1));
    CHECK(y.data && y.dims[0] == 1000 && ((float *)y.data)[999] == -3.f);
    smelt_tensor_release(&y);
  }
  free(x);
  smelt_session_free(s);
  smelt_model_free(model);
}

int main(void) {
  setenv("SMELT_CACHE", "off", 1);
  test_sizes();
  test_bufcache_budget();
  char path[] = "/tmp/smelt_membudget_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  smelt_model *model = NULL;
  CHECK(write_model(path) == 0);
  CHECK_OK(smelt_model_load(path, &model));
  if (model) {
    test_session(model, SMELT_MODE_EAGER);
    test_session(model, SMELT_MODE_DEFAULT);
    smelt_model_free(model);
  }
  test_compiled_arena(path, SMELT_MODE_DEFAULT);
  test_compiled_arena(path, SMELT_MODE_REDUCE_OVERHEAD);
  unlink(path);
  return test_report("test_membudget");
}
