/* The profiler: nested steps, pool chunks on several threads, summary, trace. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "runtime/profile.h"

static void spin_us(int us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

/* Threads that have run a chunk of the current parallel_for.  The pool's
 * caller does not wait for a worker that has not started (it runs the
 * chunks itself), so on a loaded machine one thread could take them all:
 * each chunk waits (up to a second) until a second thread has joined, which
 * makes the two-track check below deterministic. */
static atomic_int joined;
static _Thread_local int joined_gen;
static atomic_int gen;

static void work(void *ctx, int64_t b, int64_t e) {
  (void)ctx;
  int g = atomic_load(&gen);
  if (joined_gen != g) {
    joined_gen = g;
    atomic_fetch_add(&joined, 1);
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while (atomic_load(&joined) < 2 && (t.tv_sec - t0.tv_sec) < 1);
  spin_us((int)(e - b) * 50);
}

static void parallel_work(smelt_pool *pool) {
  atomic_store(&joined, 0);
  atomic_fetch_add(&gen, 1);
  pool_parallel_for(pool, 64, 1, work, NULL);
}

/* One run: "Conv" (with parallel work and a nested subgraph step) then "Re\"lu". */
static void one_run(profiler *p, smelt_pool *pool) {
  const run_hook *h = profiler_hook(p);
  profiler_run_begin(p);
  h->begin(h->ctx, "Conv", "conv_1");
  parallel_work(pool);
  h->begin(h->ctx, "Add", "inner");
  spin_us(100);
  h->end(h->ctx);
  h->end(h->ctx);
  h->begin(h->ctx, "Re\"lu", "relu\n1");
  spin_us(200);
  h->end(h->ctx);
  profiler_run_end(p);
}

int main(void) {
  smelt_pool *pool = NULL;
  profiler *p = NULL;
  CHECK_OK(pool_create(3, &pool));
  CHECK_OK(profiler_create(&p));
  if (!pool || !p) return test_report("test_profile");
  profiler_attach_pool(p, pool);
  one_run(p, pool);
  one_run(p, pool);
  profiler_detach_pool(p);
  parallel_work(pool); /* detached: not recorded */

  size_t n;
  const profile_event *ev = profiler_events(p, &n);
  int runs = 0, steps = 0, nested = 0, chunks = 0;
  int64_t items = 0;
  for (size_t i = 0; i < n; i++) {
    CHECK(ev[i].t1_ns >= ev[i].t0_ns);
    if (ev[i].type == PROFILE_RUN) runs++;
    if (ev[i].type == PROFILE_STEP) steps++, nested += ev[i].depth == 1;
    if (ev[i].type == PROFILE_CHUNK) {
      chunks++;
      items += ev[i].end - ev[i].begin;
      CHECK(!strcmp(ev[i].kind, "Conv"));
    }
  }
  CHECK(runs == 2 && steps == 6 && nested == 2);
  CHECK(items == 2 * 64); /* every item of both runs' parallel_for, no more */
  CHECK(profiler_tracks(p) >= 2 && profiler_tracks(p) <= 3);
  CHECK(profiler_dropped(p) == 0);

  profile_summary s;
  CHECK_OK(profiler_summarize(p, false, &s));
  CHECK(s.runs == 2 && s.n_rows == 2);
  CHECK(s.n_rows == 2 && !strcmp(s.rows[0].label, "Conv") && s.rows[0].calls == 2);
  CHECK(s.n_rows == 2 && !strcmp(s.rows[1].label, "Re\"lu") && s.rows[1].calls == 2);
  CHECK(s.coverage > 0.5 && s.coverage <= 1.0);
  CHECK(s.steps_ns <= s.run_ns);
  profile_summary_free(&s);
  CHECK_OK(profiler_summarize(p, true, &s));
  CHECK(s.n_rows == 2 && (!strcmp(s.rows[0].label, "conv_1") || !strcmp(s.rows[1].label, "conv_1")));
  profile_summary_free(&s);

  json_writer w;
  json_init(&w, false);
  profiler_write_chrome(p, &w, "test \"process\"");
  json_object_end(&w);
  const char *text;
  size_t len;
  CHECK_OK(json_finish(&w, &text, &len));
  if (w.buf) {
    CHECK(strstr(text, "{\"traceEvents\":[") == text);
    CHECK(strstr(text, "\"name\":\"Re\\\"lu\""));
    CHECK(strstr(text, "\"node\":\"relu\\u000a1\""));
    CHECK(strstr(text, "\"ph\":\"X\""));
    CHECK(strstr(text, "\"name\":\"pool worker 1\""));
  }
  json_free(&w);
  profiler_free(p);
  pool_free(pool);
  return test_report("test_profile");
}
