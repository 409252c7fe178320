/* smelt test DIR... — ONNX backend-test folders: model.onnx + test_data_set_N/. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "runtime/compare.h"
#include "session/session.h"
#include "runtime/tensor_file.h"
#include "util/quote.h"

typedef struct test_opts {
  double rtol, atol;
  int threads;
  double timeout_s; /* per data set run; 0 = none */
  cli_mode_opts mode;
} test_opts;

typedef enum { T_PASS, T_FAIL, T_SKIP } test_result;

static int usage(int code) {
  printf("usage: smelt test DIR... [--rtol R] [--atol A] [--threads N] [--timeout S] [--mode M]\n"
         "                [--fullgraph] [--dynamic] [--bucket NAME:AXIS=S1,S2,...] [--max-memory B]\n\n"
         "Runs ONNX backend-test folders (model.onnx + test_data_set_N/{input,output}_K.pb)\n"
         "and compares with the expected outputs: floats pass when |a-e| <= atol + rtol*|e|\n"
         "(defaults rtol 1e-3, atol 1e-4; NaN equals NaN), integers and bools exactly.\n"
         "Prints one line per test and closes with 'N passed, N failed, N skipped';\n"
         "exits 1 if any test failed.\n"
         "  --timeout S   a run of a test that takes longer than S seconds fails it\n"
         "                ('FAIL NAME  timeout: ...') and the next test starts\n\n%s",
         cli_mode_help());
  return code;
}

static bool is_file(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISREG(st.st_mode);
}
static bool is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* Number of consecutive files PREFIX_0.pb, PREFIX_1.pb, ... in dir. */
static int count_pb(const char *dir, const char *prefix) {
  char p[4096];
  int n = 0;
  for (;; n++) {
    if (!cli_path(p, sizeof p, "%s/%s_%d.pb", dir, prefix, n)) return n;
    if (!is_file(p)) return n;
  }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* test_data_set_* folders of dir, sorted; *out malloc'd strings. */
static int list_data_sets(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  int n = 0, cap = 0;
  char **v = NULL;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (strncmp(e->d_name, "test_data_set_", 14)) continue;
    if (n == cap) {
      char **nv = realloc(v, sizeof(char *) * (size_t)(cap = cap ? cap * 2 : 4));
      if (!nv) break;
      v = nv;
    }
    v[n++] = strdup(e->d_name);
  }
  if (d) closedir(d);
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
  *out = v;
  return n;
}

/* Loads value file p for graph value v: sequence and optional values have
 * their own protobuf messages, read as the model declares them. */
static int load_value(const char *p, const ir_value *v, tensor *out) {
  return tensor_file_load_typed(p, v->kind, (v->flags & IR_VALUE_OPTIONAL) != 0, out);
}

/* Runs one data set; on failure writes the reason to why. */
static test_result run_data_set(smelt_session *s, const char *ds, const test_opts *o, char *why,
                                size_t nwhy, double *worst_abs, double *worst_rel) {
  const ir_graph *g = s->model->onnx->graph;
  int ni = count_pb(ds, "input"), no = count_pb(ds, "output");
  if (ni != g->n_inputs || no != g->n_outputs) {
    cli_path(why, nwhy, "%s has %d inputs and %d outputs, the model %d and %d", ds, ni, no, g->n_inputs, g->n_outputs);
    return T_FAIL;
  }
  tensor *in = calloc((size_t)ni + 1, sizeof *in), **inp = calloc((size_t)ni + 1, sizeof *inp);
  tensor *out = calloc((size_t)no + 1, sizeof *out), expect = {0};
  test_result r = T_FAIL;
  char p[4096];
  if (!in || !inp || !out) {
    snprintf(why, nwhy, "out of memory");
    goto done;
  }
  for (int k = 0; k < ni; k++) {
    cli_path(p, sizeof p, "%s/input_%d.pb", ds, k);
    if (load_value(p, &g->values[g->inputs[k]], &in[k])) {
      snprintf(why, nwhy, "%s", smelt_last_error());
      goto done;
    }
    inp[k] = &in[k];
  }
  if (cli_session_run(s, inp, out, NULL, o->timeout_s)) {
    snprintf(why, nwhy, "%s", smelt_last_error());
    goto done;
  }
  r = T_PASS;
  for (int k = 0; k < no && r == T_PASS; k++) {
    cli_path(p, sizeof p, "%s/output_%d.pb", ds, k);
    if (load_value(p, &g->values[g->outputs[k]], &expect)) {
      snprintf(why, nwhy, "%s", smelt_last_error());
      r = T_FAIL;
      break;
    }
    compare_result c;
    tensor_compare(&out[k], &expect, o->rtol, o->atol, &c);
    if (c.max_abs > *worst_abs) *worst_abs = c.max_abs;
    if (c.max_rel > *worst_rel) *worst_rel = c.max_rel;
    if (!c.ok) {
      snprintf(why, nwhy, "output %d %s: %s", k, q(g->values[g->outputs[k]].name), c.message);
      r = T_FAIL;
    }
    tensor_release(&expect);
  }
done:
  for (int k = 0; in && k < ni; k++) tensor_release(&in[k]);
  for (int k = 0; out && k < no; k++) tensor_release(&out[k]);
  free(in);
  free(inp);
  free(out);
  return r;
}

static test_result run_test_dir(const char *dir, const test_opts *o, char *why, size_t nwhy,
                                double *worst_abs, double *worst_rel) {
  char p[4096];
  cli_path(p, sizeof p, "%s/model.onnx", dir);
  if (!is_dir(dir) || !is_file(p)) {
    snprintf(why, nwhy, "no model.onnx in %s", dir);
    return T_SKIP;
  }
  char **sets;
  int n_sets = list_data_sets(dir, &sets);
  if (!n_sets) {
    snprintf(why, nwhy, "no test_data_set_N folder in %s", dir);
    free(sets);
    return T_SKIP;
  }
  smelt_model *m = NULL;
  smelt_session *s = NULL;
  smelt_session_options so = o->mode.opts;
  so.threads = o->threads;
  test_result r = T_PASS;
  if (smelt_model_load(p, &m) || smelt_session_create(m, &so, &s)) {
    snprintf(why, nwhy, "%s", smelt_last_error());
    r = T_FAIL;
  }
  for (int i = 0; i < n_sets && r == T_PASS; i++) {
    cli_path(p, sizeof p, "%s/%s", dir, sets[i]);
    r = run_data_set(s, p, o, why, nwhy, worst_abs, worst_rel);
  }
  for (int i = 0; i < n_sets; i++) free(sets[i]);
  free(sets);
  smelt_session_free(s);
  smelt_model_free(m);
  return r;
}

static const char *test_name(const char *dir, char *buf, size_t n) {
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') len--;
  size_t start = len;
  while (start > 0 && dir[start - 1] != '/') start--;
  snprintf(buf, n, "%.*s", (int)(len - start), dir + start);
  return buf;
}

int cmd_test(int argc, char **argv) {
  test_opts o = {.rtol = 1e-3, .atol = 1e-4};
  cli_mode_init(&o.mode);
  const char *v;
  bool bad_mode = false, bad_timeout = false;
  int64_t threads;
  char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
  int n_dirs = 0;
  if (!dirs) return 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      free(dirs);
      return usage(0);
    }
    if (cli_mode_flag(argc, argv, &i, &o.mode, &bad_mode)) {
      if (bad_mode) goto bad;
    } else if (cli_timeout_flag(argc, argv, &i, &o.timeout_s, &bad_timeout)) {
      if (bad_timeout) goto bad;
    } else if (cli_flag_arg(argc, argv, &i, "--rtol", &v)) {
      if (!v || !cli_double("--rtol", v, &o.rtol)) goto bad;
    } else if (cli_flag_arg(argc, argv, &i, "--atol", &v)) {
      if (!v || !cli_double("--atol", v, &o.atol)) goto bad;
    } else if (cli_flag_arg(argc, argv, &i, "--threads", &v)) {
      if (!v || !cli_int("--threads", v, 0, 1024, &threads)) goto bad;
      o.threads = (int)threads;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "smelt test: unknown option '%s'\n", argv[i]);
      goto bad;
    } else {
      dirs[n_dirs++] = argv[i];
    }
  }
  if (!n_dirs) {
    free(dirs);
    return usage(2);
  }
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < n_dirs; i++) {
    char why[2048] = "", name[512];
    double worst_abs = 0, worst_rel = 0;
    test_result r = run_test_dir(dirs[i], &o, why, sizeof why, &worst_abs, &worst_rel);
    test_name(dirs[i], name, sizeof name);
    if (r == T_PASS) {
      passed++;
      printf("PASS %s  max_abs %.3g  max_rel %.3g\n", name, worst_abs, worst_rel);
    } else if (r == T_FAIL) {
      failed++;
      printf("FAIL %s  %s\n", name, why);
    } else {
      skipped++;
      printf("SKIP %s  %s\n", name, why);
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  free(dirs);
  return failed ? 1 : 0;
bad:
  free(dirs);
  return 2;
}
