/* smelt profile MODEL [--mode M] [--runs N] -o trace.json [--top N] [--timeout S] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/profile.h"
#include "session/session.h"
#include "util/err.h"
#include "util/file.h"
#include "util/quote.h"

#define MAX_KV 256
#define COVERAGE_TOLERANCE 0.10

static int usage(int code) {
  printf("usage: smelt profile MODEL -o TRACE.json [--mode M] [--runs N] [--warmup N] [--top N]\n"
         "                     [--by op|node] [--threads N] [--dim NAME=V]... [-i NAME=FILE]... [--seed S]\n"
         "                     [--timeout S] [--max-memory B]\n\n"
         "Times every kernel of N runs (default 10, after 1 untimed warm-up) and writes a\n"
         "Chrome trace: one track for the thread running the graph (a span per node or\n"
         "kernel, nested for subgraphs) and one per pool worker (a span per chunk of\n"
         "parallel work).  Open it in https://ui.perfetto.dev or chrome://tracing.\n"
         "Prints the top N kernels (default 15) grouped by op type (--by op) or by node\n"
         "(--by node): calls, total ms, ms per run and share of the measured run time,\n"
         "and the coverage: how much of the runs' measured latency the kernels account\n"
         "for; outside 100%% +- %.0f%% it warns that time goes somewhere unmeasured (in\n"
         "runs of a few microseconds, the executor's fixed cost per run: input checks,\n"
         "the value table, frees).\n"
         "Inputs as for `smelt run` (--dim, -i, --seed).  --timeout S: a run taking\n"
         "longer than S seconds stops the profile with an error.\n\n" CLI_MAX_MEMORY_HELP,
         COVERAGE_TOLERANCE * 100);
  return code;
}

typedef struct profile_args {
  const char *model, *trace;
  smelt_mode mode;
  int64_t runs, warmup, top, threads, seed;
  double timeout_s;
  size_t max_memory;
  bool by_name;
  cli_kv files[MAX_KV], dims[MAX_KV];
  int n_files, n_dims;
} profile_args;

static int parse_args(int argc, char **argv, profile_args *a) {
  const char *v;
  bool bad_timeout = false;
  a->mode = smelt_session_options_default().mode;
  a->runs = 10, a->warmup = 1, a->top = 15;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0) - 1;
    if (cli_flag_arg(argc, argv, &i, "-i", &v)) {
      if (!v || a->n_files == MAX_KV || !cli_split_kv("-i", argv[i], &a->files[a->n_files++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--dim", &v)) {
      if (!v || a->n_dims == MAX_KV || !cli_split_kv("--dim", argv[i], &a->dims[a->n_dims++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--mode", &v)) {
      if (!v) return 2;
      if (smelt_mode_parse(v, &a->mode)) return cli_fail("--mode") + 1;
    } else if (cli_flag_arg(argc, argv, &i, "-o", &v)) {
      if (!(a->trace = v)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--runs", &v)) {
      if (!v || !cli_int("--runs", v, 1, 100000, &a->runs)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--warmup", &v)) {
      if (!v || !cli_int("--warmup", v, 0, 100000, &a->warmup)) return 2;
    } else if (cli_timeout_flag(argc, argv, &i, &a->timeout_s, &bad_timeout)) {
      if (bad_timeout) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--top", &v)) {
      if (!v || !cli_int("--top", v, 1, 100000, &a->top)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &a->threads)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--max-memory", &v)) {
      if (!v || !cli_bytes("--max-memory", v, &a->max_memory)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--seed", &v)) {
      if (!v || !cli_int("--seed", v, 0, INT64_MAX, &a->seed)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--by", &v)) {
      if (!v) return 2;
      if (strcmp(v, "op") && strcmp(v, "node")) {
        fprintf(stderr, "smelt profile: --by expects op or node, got '%s'\n", v);
        return 2;
      }
      a->by_name = !strcmp(v, "node");
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt profile: unknown option '%s'\n", argv[i]);
      return usage(2);
    } else if (!a->model) {
      a->model = argv[i];
    } else {
      fprintf(stderr, "smelt profile: more than one model given ('%s', '%s')\n", a->model, argv[i]);
      return 2;
    }
  }
  if (!a->model || !a->trace) {
    if (a->model) fprintf(stderr, "smelt profile: -o TRACE.json is required\n");
    return usage(2);
  }
  return 0;
}

/* Runs: warm-up unobserved, then a.runs under the profiler. */
static smelt_status profile_runs(const profile_args *a, smelt_session *s, tensor *const *in, tensor *out,
                                 int n_out, profiler *p) {
  for (int64_t i = 0; i < a->warmup; i++) {
    smelt_status st = cli_session_run(s, in, out, NULL, a->timeout_s);
    for (int k = 0; k < n_out; k++) tensor_release(&out[k]);
    TRY(st);
  }
  profiler_attach_pool(p, s->pool);
  smelt_status st = SMELT_OK;
  for (int64_t i = 0; !st && i < a->runs; i++) {
    eager_stats es = {0};
    es.hook = profiler_hook(p);
    profiler_run_begin(p);
    st = cli_session_run(s, in, out, &es, a->timeout_s);
    profiler_run_end(p);
    for (int k = 0; k < n_out; k++) tensor_release(&out[k]);
  }
  profiler_detach_pool(p);
  return st;
}

static void print_summary(const profile_args *a, const profile_summary *sum, int threads) {
  double run_ms = (double)sum->run_ns / 1e6, per_run = run_ms / (sum->runs ? sum->runs : 1);
  printf("%s, mode %s, %d threads: %d runs, %.3f ms per run (mean)\n\n", a->model,
         smelt_mode_name(a->mode), threads, sum->runs, per_run);
  printf("| %-30s | %8s | %10s | %9s | %6s |\n", a->by_name ? "node" : "op or kernel", "calls", "total ms",
         "ms/run", "share");
  printf("| %.30s | -------- | ---------- | --------- | ------ |\n", "------------------------------");
  int64_t rest_ns = sum->steps_ns, rest_calls = 0;
  for (int i = 0; i < sum->n_rows && i < a->top; i++) {
    const profile_row *r = &sum->rows[i];
    double ms = (double)r->total_ns / 1e6;
    printf("| %-30.30s | %8lld | %10.3f | %9.4f | %5.1f%% |\n", q_ident(r->label), (long long)r->calls, ms,
           ms / sum->runs, run_ms > 0 ? 100 * ms / run_ms : 0);
    rest_ns -= r->total_ns;
  }
  for (int i = (int)a->top; i < sum->n_rows; i++) rest_calls += sum->rows[i].calls;
  if (sum->n_rows > a->top)
    printf("| %-30s | %8lld | %10.3f | %9.4f | %5.1f%% |\n", "(the rest)", (long long)rest_calls,
           (double)rest_ns / 1e6, (double)rest_ns / 1e6 / sum->runs,
           run_ms > 0 ? 100 * (double)rest_ns / 1e6 / run_ms : 0);
  bool ok = sum->coverage >= 1 - COVERAGE_TOLERANCE && sum->coverage <= 1 + COVERAGE_TOLERANCE;
  printf("\ncoverage: the kernels add up to %.1f%% of the measured run time (%.3f of %.3f ms): %s\n",
         100 * sum->coverage, (double)sum->steps_ns / 1e6, run_ms,
         ok ? "ok, within 10%" : "WARNING: outside 10%, time is spent outside the measured kernels");
  if (sum->steps_ns == 0)
    printf("(mode %s reported no kernel steps: its executor does not call the profiler's hook)\n",
           smelt_mode_name(a->mode));
  printf("busy:");
  for (int t = 0; t < sum->n_tracks; t++)
    printf("%s %.1f%%", t ? ", worker" : " graph thread", run_ms > 0 ? 100 * (double)sum->track_busy_ns[t] / 1e6 / run_ms : 0);
  printf(" of the run time\n");
}

static int write_trace(const profile_args *a, const profiler *p, const profile_summary *sum, int threads) {
  json_writer w;
  json_init(&w, false);
  char label[600];
  snprintf(label, sizeof label, "smelt %s (%s)", a->model, smelt_mode_name(a->mode));
  profiler_write_chrome(p, &w, label);
  json_key(&w, "otherData");
  json_object_begin(&w);
  json_kv_string(&w, "smelt_version", smelt_version());
  json_kv_string(&w, "model", a->model);
  json_kv_string(&w, "mode", smelt_mode_name(a->mode));
  json_kv_int(&w, "threads", threads);
  json_kv_int(&w, "runs", sum->runs);
  json_kv_number(&w, "run_ms", (double)sum->run_ns / 1e6);
  json_kv_number(&w, "kernel_ms", (double)sum->steps_ns / 1e6);
  json_kv_number(&w, "coverage", sum->coverage);
  json_kv_int(&w, "dropped_events", profiler_dropped(p));
  json_object_end(&w);
  json_object_end(&w);
  const char *text;
  size_t len;
  smelt_status st = json_finish(&w, &text, &len);
  if (!st) st = file_write_atomic(a->trace, text, len);
  json_free(&w);
  if (st) return cli_fail("writing the trace");
  size_t n;
  profiler_events(p, &n);
  printf("trace: %s (%zu events, %d threads) - open in https://ui.perfetto.dev or chrome://tracing\n",
         a->trace, n, profiler_tracks(p));
  return 0;
}

static int profile_model(const profile_args *a, const smelt_model *m, tensor *in, tensor **ptrs,
                         tensor *out) {
  const ir_graph *g = m->onnx->graph;
  smelt_session_options o = cli_session_options();
  o.threads = (int)a->threads;
  o.mode = a->mode;
  o.max_memory = a->max_memory;
  smelt_session *s = NULL;
  profiler *p = NULL;
  profile_summary sum = {0};
  int rc = 1;
  if (smelt_session_create(m, &o, &s)) return cli_fail("session create");
  if (cli_make_inputs(g, a->files, a->n_files, a->dims, a->n_dims, false, (uint64_t)a->seed, in)) goto done;
  for (int k = 0; k < g->n_inputs; k++) ptrs[k] = &in[k];
  if (profiler_create(&p) || profile_runs(a, s, ptrs, out, g->n_outputs, p) ||
      profiler_summarize(p, a->by_name, &sum)) {
    rc = cli_fail("profile");
    goto done;
  }
  print_summary(a, &sum, pool_threads(s->pool));
  rc = write_trace(a, p, &sum, pool_threads(s->pool));
done:
  profile_summary_free(&sum);
  profiler_free(p);
  smelt_session_free(s);
  return rc;
}

int cmd_profile(int argc, char **argv) {
  profile_args *a = calloc(1, sizeof *a);
  if (!a) return 1;
  int rc = parse_args(argc, argv, a);
  if (rc) {
    free(a);
    return rc < 0 ? 0 : rc;
  }
  smelt_model *m = NULL;
  if (smelt_model_load(a->model, &m)) {
    free(a);
    return cli_fail(NULL);
  }
  const ir_graph *g = m->onnx->graph;
  tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), *out = calloc((size_t)g->n_outputs + 1, sizeof *out);
  tensor **ptrs = calloc((size_t)g->n_inputs + 1, sizeof *ptrs);
  rc = in && out && ptrs ? profile_model(a, m, in, ptrs, out) : (fprintf(stderr, "smelt: out of memory\n"), 1);
  for (int k = 0; in && k < g->n_inputs; k++) tensor_release(&in[k]);
  free(in), free(out), free(ptrs);
  smelt_model_free(m);
  free(a);
  return rc;
}
