/* smelt bench: shared types of the measuring (bench_mode.c), the environment
 * (bench_env.c), the reports (bench_report.c) and the verb (cmd_bench.c). */
#ifndef SMELT_CLI_BENCH_H
#define SMELT_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "util/json.h"
#include "util/stats.h"

#define BENCH_MAX_MODES 8
#define BENCH_AGREE_DEFAULT 64 /* seeded inputs of the top-1/top-5 agreement (--agreement) */
#define BENCH_MAX_ACC 32 /* outputs whose accuracy is reported one by one */
#define BENCH_CI_LEVEL 0.95
#define BENCH_CI_WARN 0.05      /* warn when the CI is wider than 5% of the median */
#define BENCH_DEFAULT_WARMUP 10
#define BENCH_DEFAULT_MIN_RUNS 20
#define BENCH_DEFAULT_MIN_SECONDS 1.0
#define BENCH_MAX_RUNS 1000000
/* tolerance for the parity verdict, as `smelt test` */
#define BENCH_RTOL 1e-3
#define BENCH_ATOL 1e-4

typedef struct bench_env {
  char version[64];
  char cc[256];      /* first line of `$CC --version` (or cc): the compiler generated code uses */
  char cc_cmd[128];  /* $CC or "cc" */
  char cflags[512];  /* flags smelt was built with */
  char build[160];   /* compiler and build type that built smelt */
  char cpu[256];
  char isa[64];
  char os[256];
  int cores;
} bench_env;

void bench_env_collect(bench_env *e);
void bench_env_print(const bench_env *e, int threads);
void bench_env_json(const bench_env *e, json_writer *w);

typedef struct bench_config {
  int threads;       /* 0 = the machine's cores */
  int warmup;
  int64_t runs;      /* > 0: exactly this many timed runs */
  double seconds;    /* > 0: time runs until this long has passed */
  double timeout_s;  /* > 0: a run taking longer fails the mode (--timeout) */
  const char *tmp;   /* this bench's private temporary folder */
  size_t max_memory; /* session memory budget (0: the default) */
  smelt_precision precision; /* every measured mode runs at it; the reference is eager fp32 */
  const char *device; /* session option device (NULL: cpu) */
  int agreement;      /* seeded inputs for the top-1/top-5 agreement (0: none) */
} bench_config;

/* What smelt_session_get_stats said about one session. */
typedef struct bench_session_stats {
  int compiles, cache_hits, eager_fallback, graph_breaks, kernels_generated;
  int prepared_loaded, prepared_saved;
  double compile_seconds;
} bench_session_stats;

/* One mode's measurements.  Plain data: a child process sends it to the parent
 * through a pipe as raw bytes. */
typedef struct bench_result {
  int mode;             /* smelt_mode */
  bool ok;
  char error[1024];     /* when !ok: what failed */
  int threads;
  double create_cold_s, create_warm_s;
  double first_run_ms, first_run_warm_ms;
  int warmup;
  stats_summary lat;    /* milliseconds */
  double timed_s;       /* wall time of the timed runs */
  double rss_start_mb, peak_rss_mb; /* the child's RSS when it began, and its VmHWM at the end */
  double arena_mb, eager_peak_mb;
  bench_session_stats cold, warm; /* after the cold session's first run; after the timed runs */
  char out_dir[512];    /* where the child wrote its outputs (first_K.npy, last_K.npy) */
  int n_outputs_saved;
  /* filled in by the parent */
  bool has_parity, parity_within_tol;
  double max_abs, max_rel;
  char parity_error[512];
  /* per output (the first BENCH_MAX_ACC), against the reference's first
   * run: max abs and rel error (as parity) and cosine similarity */
  int n_acc;
  struct bench_acc {
    double max_abs, max_rel, cosine;
  } acc[BENCH_MAX_ACC];
  bool has_speedup;
  double speedup;
} bench_result;

/* Measures one mode in a forked child process (so peak RSS is its own) and
 * fills *r; failures of the mode land in r->error, never as a number.
 * inputs: one per graph input.  reference_only: create and run once, to
 * produce reference outputs, nothing timed. */
void bench_run_mode(const smelt_model *m, tensor *const *inputs, const bench_config *c,
                    int mode, bool reference_only, bench_result *r);

/* Compares r's saved outputs (first and last run) with the reference's first
 * run; fills the parity fields of r. */
void bench_parity(const ir_graph *g, const bench_result *ref, bench_result *r);

/* Tokens per inference when the model takes token ids (an integer input that
 * indexes an embedding through Gather): its element count; 0 otherwise. */
int64_t bench_tokens(const ir_graph *g, const tensor *inputs);

/* Top-1 / top-5 agreement of the precision with eager fp32 (bench_agree.c):
 * on a model with one float output [rows, classes >= 5], c->agreement
 * seeded generated inputs (seed + 1, + 2, ...) through an eager fp32
 * session and a `mode` session at c->precision, in this process.  top1: rows
 * whose largest class is the same; top5: the mean share of fp32's five
 * largest classes among P's five largest. */
typedef struct bench_inputs_spec {
  const cli_kv *files, *dims;
  int n_files, n_dims;
  uint64_t seed;
} bench_inputs_spec;
typedef struct bench_agree {
  bool done;     /* measured */
  char why[256]; /* when not done: why (empty: the model is no classifier, or fp32) */
  int mode, inputs, rows, top1;
  double top5;
} bench_agree;
void bench_agreement(const smelt_model *m, const bench_config *c, int mode, const bench_inputs_spec *in,
                     bench_agree *a);
void bench_agreement_print(const bench_agree *a, smelt_precision p);

/* Reports. */
typedef struct bench_report {
  const char *model;
  const ir_graph *graph;
  const tensor *inputs;
  const char *const *input_files; /* per input: the -i file, or NULL if generated */
  const cli_kv *dims;
  int n_dims;
  uint64_t seed;
  const bench_config *cfg;
  const bench_env *env;
  bench_result *results;
  int n_results;
  int64_t tokens;
  const bench_agree *agree; /* NULL: not measured */
} bench_report;

void bench_print_result(const bench_report *rep, const bench_result *r);
void bench_print_compare(const bench_report *rep);
/* Prints a warning for each mode whose CI is wider than BENCH_CI_WARN of its median. */
void bench_print_warnings(const bench_report *rep);
/* Writes the JSON report to path atomically; 0 on success, else prints an error. */
int bench_write_json(const bench_report *rep, const char *path);

#endif
