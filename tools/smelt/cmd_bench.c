/* smelt bench MODEL [--mode M]... [--compare] [--warmup N] [--runs N | --seconds S]
 *                   [--threads N] [--dim NAME=V]... [-i NAME=FILE]... [--seed S] [--json FILE]
 *                   [--timeout S] */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "session/session.h"

#define MAX_KV 256

static int usage(int code) {
  printf(
      "usage: smelt bench MODEL [--mode M]... [--compare] [--warmup N] [--runs N | --seconds S]\n"
      "                   [--threads N] [--dim NAME=V]... [-i NAME=FILE]... [--seed S] [--json FILE]\n"
      "                   [--timeout S] [--max-memory B] [--precision P] [--device NAME]\n\n"
      "Measures the model's latency per execution mode, the way benchmarks are trusted:\n"
      "  --mode M        eager, default, reduce-overhead or max-autotune (repeatable;\n"
      "                  default: the session default mode)\n"
      "  --compare       eager and every compiled mode, with a comparison table\n"
      "  --warmup N      untimed runs before timing (default %d)\n"
      "  --runs N        exactly N timed runs\n"
      "  --seconds S     timed runs until S seconds have passed (at least one run)\n"
      "                  (default: until >= %.0f s and >= %d runs)\n"
      "  --threads N     worker threads (default: the machine's cores)\n"
      "  --dim NAME=V    value of a symbolic dimension for generated inputs (default 1)\n"
      "  -i NAME=FILE    input from a .npy or .pb file instead of a generated one\n"
      "  --seed S        seed of generated inputs (default 0), as `smelt run`\n"
      "  --json FILE     also write the results as JSON\n"
      "  --timeout S     a run taking longer than S seconds fails its mode (reported as\n"
      "                  the mode's error, 'timeout: ...')\n"
      CLI_MAX_MEMORY_HELP
      "  --precision P   run every mode at fp32 (default), bf16, fp16, int8 or int4; the outputs are\n"
      "                  then compared with an eager fp32 run on the same inputs: max abs and\n"
      "                  rel error and cosine similarity per output (JSON: \"accuracy\"); on a\n"
      "                  classifier (one float output [rows, classes]) also the top-1 agreement\n"
      "                  and top-5 overlap with eager fp32 over seeded inputs (JSON: \"agreement\")\n"
      "  --agreement N   seeded inputs for that agreement (default %d; 0: none)\n"
      CLI_DEVICE_HELP "\n"
      "Every mode sees the same inputs.  Per mode, in a child process of its own:\n"
      "  - session creation with an empty cache (a fresh temporary cache_dir: cold)\n"
      "    and again with the cache it filled (warm); compiled modes compile and\n"
      "    prepare weights there, for the inputs' shapes (session option dims);\n"
      "    for eager this is setup time;\n"
      "  - the first run, separately;\n"
      "  - warm-up runs, then timed runs: median, mean, std, min, max, p50/p90/p99;\n"
      "  - throughput (inferences/s; tokens/s when an integer input feeds an\n"
      "    embedding Gather: tokens = its element count, batch x seq);\n"
      "  - peak RSS: VmHWM of the child, which starts fresh at fork, so each\n"
      "    mode's peak is its own (the RSS the child started with is shown);\n"
      "    planned arena bytes from the session's stats;\n"
      "  - parity: max abs/rel error of the first and the last run's outputs\n"
      "    against eager's on the same inputs.\n\n"
      "The 95%% confidence interval of the median is distribution-free: with n runs,\n"
      "the count of runs below the true median is Binomial(n, 1/2), so the sorted\n"
      "runs x(j) and x(n+1-j) bound the median with probability 1 - 2 P(B <= j-1);\n"
      "j is the largest that keeps this >= 95%% (n = 20: x(6)..x(15)).  No\n"
      "normality is assumed.  Below 6 runs no 95%% interval exists: [min, max] is\n"
      "shown with its lower coverage.  A CI wider than 5%% of the median is flagged.\n",
      BENCH_DEFAULT_WARMUP, BENCH_DEFAULT_MIN_SECONDS, BENCH_DEFAULT_MIN_RUNS, BENCH_AGREE_DEFAULT);
  return code;
}

typedef struct bench_args {
  const char *model, *json;
  int modes[BENCH_MAX_MODES], n_modes;
  bool compare;
  cli_kv files[MAX_KV], dims[MAX_KV];
  int n_files, n_dims;
  int64_t seed;
  bench_config cfg;
} bench_args;

static bool add_mode(bench_args *a, int m) {
  for (int i = 0; i < a->n_modes; i++)
    if (a->modes[i] == m) return true;
  if (a->n_modes == BENCH_MAX_MODES) return false;
  a->modes[a->n_modes++] = m;
  return true;
}

/* 0: parsed; else the exit code. */
static int parse_args(int argc, char **argv, bench_args *a) {
  const char *v;
  bool bad_timeout = false;
  int64_t n;
  a->cfg.warmup = BENCH_DEFAULT_WARMUP;
  a->cfg.agreement = BENCH_AGREE_DEFAULT;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(0) - 1; /* -1: exit 0 */
    if (cli_flag_arg(argc, argv, &i, "-i", &v)) {
      if (!v || a->n_files == MAX_KV || !cli_split_kv("-i", argv[i], &a->files[a->n_files++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--dim", &v)) {
      if (!v || a->n_dims == MAX_KV || !cli_split_kv("--dim", argv[i], &a->dims[a->n_dims++])) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--mode", &v)) {
      smelt_mode m;
      if (!v) return 2;
      if (smelt_mode_parse(v, &m)) return cli_fail("--mode") + 1;
      add_mode(a, (int)m);
    } else if (!strcmp(argv[i], "--compare")) {
      a->compare = true;
    } else if (cli_flag_arg(argc, argv, &i, "--warmup", &v)) {
      if (!v || !cli_int("--warmup", v, 0, 1000000, &n)) return 2;
      a->cfg.warmup = (int)n;
    } else if (cli_flag_arg(argc, argv, &i, "--runs", &v)) {
      if (!v || !cli_int("--runs", v, 1, BENCH_MAX_RUNS, &a->cfg.runs)) return 2;
    } else if (cli_timeout_flag(argc, argv, &i, &a->cfg.timeout_s, &bad_timeout)) {
      if (bad_timeout) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--seconds", &v)) {
      if (!v || !cli_double("--seconds", v, &a->cfg.seconds)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &n)) return 2;
      a->cfg.threads = (int)n;
    } else if (cli_flag_arg(argc, argv, &i, "--max-memory", &v)) {
      if (!v || !cli_bytes("--max-memory", v, &a->cfg.max_memory)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--precision", &v)) {
      if (!v) return 2;
      if (smelt_precision_parse(v, &a->cfg.precision)) return cli_fail("--precision") + 1;
    } else if (cli_flag_arg(argc, argv, &i, "--device", &v)) {
      if (!v || !cli_device("--device", v)) return 2;
      a->cfg.device = v;
    } else if (cli_flag_arg(argc, argv, &i, "--agreement", &v)) {
      if (!v || !cli_int("--agreement", v, 0, 100000, &n)) return 2;
      a->cfg.agreement = (int)n;
    } else if (cli_flag_arg(argc, argv, &i, "--seed", &v)) {
      if (!v || !cli_int("--seed", v, 0, INT64_MAX, &a->seed)) return 2;
    } else if (cli_flag_arg(argc, argv, &i, "--json", &v)) {
      if (!(a->json = v)) return 2;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt bench: unknown option '%s'\n", argv[i]);
      return usage(2);
    } else if (!a->model) {
      a->model = argv[i];
    } else {
      fprintf(stderr, "smelt bench: more than one model given ('%s', '%s')\n", a->model, argv[i]);
      return 2;
    }
  }
  if (!a->model) return usage(2);
  if (a->cfg.runs > 0 && a->cfg.seconds > 0) {
    fprintf(stderr, "smelt bench: give --runs or --seconds, not both\n");
    return 2;
  }
  return 0;
}

/* Eager first (it is the reference), then the rest in the order asked. */
static void settle_modes(bench_args *a) {
  if (a->compare) {
    int asked[BENCH_MAX_MODES], n = a->n_modes;
    memcpy(asked, a->modes, sizeof asked);
    a->n_modes = 0;
    for (int m = SMELT_MODE_EAGER; m <= SMELT_MODE_MAX_AUTOTUNE; m++) add_mode(a, m);
    for (int i = 0; i < n; i++) add_mode(a, asked[i]);
  } else if (a->n_modes == 0) {
    add_mode(a, (int)smelt_session_options_default().mode);
  }
  for (int i = 1; i < a->n_modes; i++)
    if (a->modes[i] == SMELT_MODE_EAGER) {
      memmove(&a->modes[1], &a->modes[0], sizeof(int) * (size_t)i);
      a->modes[0] = SMELT_MODE_EAGER;
    }
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void run_all(const bench_args *a, const smelt_model *m, tensor *const *in, bench_result *res,
                    bench_result *ref_storage, const bench_result **ref) {
  const ir_graph *g = m->onnx->graph;
  *ref = NULL;
  bool fp32 = a->cfg.precision == SMELT_PRECISION_FP32; /* else eager at P is no reference: eager fp32 is */
  if (a->modes[0] != SMELT_MODE_EAGER || !fp32) {
    printf("running eager%s once for reference outputs...\n", fp32 ? "" : " fp32");
    bench_run_mode(m, in, &a->cfg, SMELT_MODE_EAGER, true, ref_storage);
    *ref = ref_storage;
  }
  for (int i = 0; i < a->n_modes; i++) {
    printf("measuring %s...\n", smelt_mode_name((smelt_mode)a->modes[i]));
    bench_run_mode(m, in, &a->cfg, a->modes[i], false, &res[i]);
    if (a->modes[i] == SMELT_MODE_EAGER && fp32) *ref = &res[i];
  }
  const bench_result *e = NULL; /* speedups are against eager at the same precision */
  for (int i = 0; i < a->n_modes; i++)
    if (a->modes[i] == SMELT_MODE_EAGER) e = &res[i];
  for (int i = 0; i < a->n_modes; i++) {
    bench_parity(g, *ref, &res[i]);
    res[i].has_speedup = e && e->ok && res[i].ok && res[i].lat.median > 0;
    if (res[i].has_speedup) res[i].speedup = e->lat.median / res[i].lat.median;
  }
}

static int bench_model(bench_args *a, const smelt_model *m, tensor *inputs, tensor **ptrs) {
  const ir_graph *g = m->onnx->graph;
  const char **files = calloc((size_t)g->n_inputs + 1, sizeof *files);
  bench_result *res = calloc(BENCH_MAX_MODES, sizeof *res), *ref_storage = calloc(1, sizeof *ref_storage);
  if (!files || !res || !ref_storage) {
    free(files), free(res), free(ref_storage);
    fprintf(stderr, "smelt: out of memory\n");
    return 1;
  }
  for (int k = 0; k < g->n_inputs; k++)
    for (int f = 0; f < a->n_files; f++)
      if (!strcmp(a->files[f].key, g->values[g->inputs[k]].name)) files[k] = a->files[f].val;
  bench_env env;
  bench_env_collect(&env);
  const bench_result *ref;
  run_all(a, m, ptrs, res, ref_storage, &ref);
  bench_agree agree = {0};
  if (a->cfg.precision != SMELT_PRECISION_FP32 && a->cfg.agreement > 0) {
    int mode = a->modes[a->n_modes - 1]; /* the last mode asked: a compiled one when there is one */
    printf("agreement: %d seeded inputs through eager fp32 and %s %s...\n", a->cfg.agreement,
           smelt_mode_name((smelt_mode)mode), smelt_precision_name(a->cfg.precision));
    bench_inputs_spec spec = {a->files, a->dims, a->n_files, a->n_dims, (uint64_t)a->seed};
    bench_agreement(m, &a->cfg, mode, &spec, &agree);
  }
  bench_report rep = {a->model, g, inputs, files, a->dims, a->n_dims, (uint64_t)a->seed, &a->cfg, &env,
                      res, a->n_modes, bench_tokens(g, inputs), &agree};
  int threads = a->cfg.threads ? a->cfg.threads : env.cores;
  printf("\nsmelt bench %s\n", a->model);
  bench_env_print(&env, threads);
  for (int k = 0; k < g->n_inputs; k++) {
    char sh[256];
    printf("input %s: %s %s, %s\n", g->values[g->inputs[k]].name, dtype_name(inputs[k].dtype),
           shape_str(sh, sizeof sh, inputs[k].rank, inputs[k].dims, NULL), files[k] ? files[k] : "generated");
  }
  if (ref == ref_storage && !ref->ok) printf("eager reference run failed: %s\n", ref->error);
  for (int i = 0; i < a->n_modes; i++) bench_print_result(&rep, &res[i]);
  bench_agreement_print(&agree, a->cfg.precision);
  if (a->compare || a->n_modes > 1) bench_print_compare(&rep);
  bench_print_warnings(&rep);
  int rc = a->json ? bench_write_json(&rep, a->json) : 0;
  int n_ok = 0;
  for (int i = 0; i < a->n_modes; i++) n_ok += res[i].ok;
  if (!n_ok) rc = 1;
  free(files), free(res), free(ref_storage);
  return rc;
}

int cmd_bench(int argc, char **argv) {
  bench_args *a = calloc(1, sizeof *a);
  if (!a) return 1;
  int rc = parse_args(argc, argv, a);
  if (rc) {
    free(a);
    return rc < 0 ? 0 : rc;
  }
  settle_modes(a);
  smelt_model *m = NULL;
  if (smelt_model_load(a->model, &m)) {
    free(a);
    return cli_fail(NULL);
  }
  const ir_graph *g = m->onnx->graph;
  tensor *inputs = calloc((size_t)g->n_inputs + 1, sizeof *inputs);
  tensor **ptrs = calloc((size_t)g->n_inputs + 1, sizeof *ptrs);
  const char *tmpdir = getenv("TMPDIR");
  char tmp[512];
  snprintf(tmp, sizeof tmp, "%s/smelt-bench-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  rc = 1;
  if (!inputs || !ptrs) fprintf(stderr, "smelt: out of memory\n");
  else if (!mkdtemp(tmp)) perror("smelt: cannot create a temporary folder");
  else {
    a->cfg.tmp = tmp;
    if (!cli_make_inputs(g, a->files, a->n_files, a->dims, a->n_dims, false, (uint64_t)a->seed, inputs)) {
      for (int k = 0; k < g->n_inputs; k++) ptrs[k] = &inputs[k];
      rc = bench_model(a, m, inputs, ptrs);
    }
    nftw(tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  for (int k = 0; inputs && k < g->n_inputs; k++) tensor_release(&inputs[k]);
  free(inputs);
  free(ptrs);
  smelt_model_free(m);
  free(a);
  return rc;
}
