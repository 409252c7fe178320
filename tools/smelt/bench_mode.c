/* Measuring one mode, in a child process of its own.
 *
 * Why a child per mode: VmHWM (peak RSS) is process-wide and cannot go down, so
 * in one process the second mode would inherit the first one's peak.  A forked
 * child starts with its hiwater mark at its current RSS (Linux resets it on
 * fork), so each mode's peak is its own; the child's RSS at start (the model's
 * pages and the inputs, shared with the parent) is reported beside it.  A crash
 * in a mode also stays in its child and is reported as that mode's error. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "session/session.h"
#include "runtime/tensor_file.h"

/* Records what failed, with the library's message; returns false for the caller to pass on. */
static bool fail(bench_result *r, const char *what) {
  r->ok = false;
  snprintf(r->error, sizeof r->error, "%s%s%s", what, *smelt_last_error() ? ": " : "", smelt_last_error());
  return false;
}

static bool oom(bench_result *r) {
  snprintf(r->error, sizeof r->error, "out of memory for the samples");
  return false;
}

static void release_all(tensor *t, int n) {
  for (int k = 0; k < n; k++) tensor_release(&t[k]);
}

/* One timed run; outputs released. */
static smelt_status timed_run(smelt_session *s, tensor *const *in, tensor *out, int n_out,
                              double timeout_s, double *ms) {
  double t0 = cli_now_s();
  smelt_status st = cli_session_run(s, in, out, NULL, timeout_s);
  *ms = (cli_now_s() - t0) * 1e3;
  release_all(out, n_out);
  return st;
}

static bool save_outputs(bench_result *r, const char *prefix, const tensor *out, int n) {
  for (int k = 0; k < n; k++) {
    char path[1024];
    if (!cli_path(path, sizeof path, "%s/%s_%d.npy", r->out_dir, prefix, k) || tensor_file_save(path, &out[k])) {
      snprintf(r->error, sizeof r->error, "saving output %d for the parity check: %s", k, smelt_last_error());
      return false;
    }
  }
  return true;
}

static bool timed_loop(smelt_session *s, tensor *const *in, tensor *out, int n_out,
                       const bench_config *c, bench_result *r) {
  double ms;
  for (int i = 0; i < c->warmup; i++)
    if (timed_run(s, in, out, n_out, c->timeout_s, &ms)) return fail(r, "warm-up run");
  double min_s = c->runs > 0 ? 0 : c->seconds > 0 ? c->seconds : BENCH_DEFAULT_MIN_SECONDS;
  int64_t min_runs = c->runs > 0 ? c->runs : c->seconds > 0 ? 1 : BENCH_DEFAULT_MIN_RUNS;
  int64_t max_runs = c->runs > 0 ? c->runs : BENCH_MAX_RUNS;
  size_t cap = 64, n = 0;
  double *samples = malloc(cap * sizeof *samples), t0 = cli_now_s();
  if (!samples) return oom(r);
  while ((int64_t)n < max_runs && ((int64_t)n < min_runs || cli_now_s() - t0 < min_s)) {
    if (n == cap) {
      double *g = realloc(samples, 2 * cap * sizeof *g);
      if (!g) {
        free(samples);
        return oom(r);
      }
      samples = g;
      cap *= 2;
    }
    if (timed_run(s, in, out, n_out, c->timeout_s, &samples[n])) {
      free(samples);
      return fail(r, "timed run");
    }
    n++;
  }
  r->timed_s = cli_now_s() - t0;
  smelt_status st = stats_summarize(samples, n, BENCH_CI_LEVEL, &r->lat);
  free(samples);
  return st ? fail(r, "statistics") : true;
}

static void read_session_stats(smelt_session *s, bench_session_stats *b, bench_result *r) {
  smelt_session_stats ss = {.struct_size = sizeof ss};
  if (smelt_session_get_stats(s, &ss)) return;
  *b = (bench_session_stats){ss.compiles, ss.cache_hits, ss.eager_fallback, ss.graph_breaks,
                             ss.kernels_generated, ss.prepared_loaded, ss.prepared_saved,
                             ss.compile_seconds};
  r->arena_mb = (double)ss.arena_bytes / (1024.0 * 1024.0);
  r->eager_peak_mb = (double)ss.eager_peak_bytes / (1024.0 * 1024.0);
}

/* Creates a session and runs it once: the creation and first-run times. */
static smelt_session *create_and_first_run(const smelt_model *m, const smelt_session_options *o,
                                           tensor *const *in, tensor *out, int n_out, double timeout_s,
                                           double *create_s, double *first_ms, bench_result *r) {
  smelt_session *s = NULL;
  double t0 = cli_now_s();
  if (smelt_session_create(m, o, &s)) {
    fail(r, "session create");
    return NULL;
  }
  *create_s = cli_now_s() - t0;
  t0 = cli_now_s();
  if (cli_session_run(s, in, out, NULL, timeout_s)) {
    release_all(out, n_out);
    smelt_session_free(s);
    fail(r, "first run");
    return NULL;
  }
  *first_ms = (cli_now_s() - t0) * 1e3;
  return s;
}

/* "sym=size,..." for every symbolic dim of the model's inputs, read off the
 * inputs the runs will use: the session then compiles for them when it is
 * created (smelt_session_options.dims), and session creation is what
 * measures compiling, cold and from the cache. */
static void dims_of_inputs(const ir_graph *g, tensor *const *in, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = 0;
  bool *seen = calloc((size_t)g->n_syms + 1, sizeof *seen);
  for (int k = 0; seen && k < g->n_inputs; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    for (int d = 0; d < v->rank && d < in[k]->rank; d++) {
      if (v->dims[d] > DIM_SYM_BASE || seen[dim_sym_index(v->dims[d])]) continue;
      seen[dim_sym_index(v->dims[d])] = true;
      int w = snprintf(buf + o, o < n ? n - o : 0, "%s%s=%lld", o ? "," : "", g->syms[dim_sym_index(v->dims[d])],
                       (long long)in[k]->dims[d]);
      if (w < 0 || o + (size_t)w >= n) { /* too long to pass: compile on the first run instead */
        buf[0] = 0;
        free(seen);
        return;
      }
      o += (size_t)w;
    }
  }
  free(seen);
}

/* The child's work; fills r.  Outputs go to r->out_dir. */
static void measure(const smelt_model *m, tensor *const *in, const bench_config *c, int mode,
                    bool reference_only, bench_result *r) {
  const ir_graph *g = m->onnx->graph;
  int n_out = g->n_outputs;
  r->rss_start_mb = cli_proc_status_mb("VmRSS:");
  char cache[600];
  snprintf(cache, sizeof cache, "%s/cache", r->out_dir);
  if (mkdir(r->out_dir, 0700) || mkdir(cache, 0700)) {
    snprintf(r->error, sizeof r->error, "cannot create '%s': %s", cache, strerror(errno));
    return;
  }
  smelt_session_options o = cli_session_options();
  o.threads = c->threads;
  o.mode = (smelt_mode)mode;
  o.cache_dir = cache; /* fresh and empty: the first creation is a cold one */
  o.max_memory = c->max_memory;
  o.precision = reference_only ? SMELT_PRECISION_FP32 : c->precision;
  o.device = c->device;
  char dims[2048];
  dims_of_inputs(g, in, dims, sizeof dims);
  o.dims = dims;
  tensor *out = calloc((size_t)n_out + 1, sizeof *out);
  if (!out) return (void)snprintf(r->error, sizeof r->error, "out of memory");
  smelt_session *s = create_and_first_run(m, &o, in, out, n_out, c->timeout_s, &r->create_cold_s, &r->first_run_ms, r);
  if (!s) goto done;
  r->threads = pool_threads(s->pool);
  read_session_stats(s, &r->cold, r);
  if (!save_outputs(r, "first", out, n_out)) goto done;
  r->n_outputs_saved = n_out;
  release_all(out, n_out);
  if (reference_only) {
    r->ok = true;
    goto done;
  }
  smelt_session_free(s); /* the second creation finds the cache filled */
  s = create_and_first_run(m, &o, in, out, n_out, c->timeout_s, &r->create_warm_s, &r->first_run_warm_ms, r);
  if (!s) goto done;
  release_all(out, n_out);
  r->warmup = c->warmup;
  if (!timed_loop(s, in, out, n_out, c, r)) goto done;
  if (cli_session_run(s, in, out, NULL, c->timeout_s)) { /* outputs of the steady state, for parity */
    fail(r, "last run");
    goto done;
  }
  if (!save_outputs(r, "last", out, n_out)) goto done;
  read_session_stats(s, &r->warm, r);
  r->peak_rss_mb = cli_proc_status_mb("VmHWM:");
  r->ok = true;
done:
  if (out) release_all(out, n_out);
  free(out);
  smelt_session_free(s);
}

static bool read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= (size_t)k;
  }
  return true;
}

static void write_full(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    p += k, n -= (size_t)k;
  }
}

void bench_run_mode(const smelt_model *m, tensor *const *inputs, const bench_config *c, int mode,
                    bool reference_only, bench_result *r) {
  memset(r, 0, sizeof *r);
  r->mode = mode;
  snprintf(r->out_dir, sizeof r->out_dir, "%s/%s%s", c->tmp, smelt_mode_name((smelt_mode)mode),
           reference_only ? "-reference" : "");
  int fds[2];
  if (pipe(fds)) {
    snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
    return;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
    close(fds[0]), close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    measure(m, inputs, c, mode, reference_only, r);
    write_full(fds[1], r, sizeof *r);
    close(fds[1]);
    _exit(0); /* no atexit handlers or stdio flushes of the parent's buffers */
  }
  close(fds[1]);
  bench_result got;
  bool complete = read_full(fds[0], &got, sizeof got);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (complete) {
    *r = got;
  } else if (WIFSIGNALED(status)) {
    snprintf(r->error, sizeof r->error, "the measuring process died of signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  } else {
    snprintf(r->error, sizeof r->error, "the measuring process exited with status %d without a result",
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
}
