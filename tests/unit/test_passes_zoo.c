/* The pass pipeline on the model zoo (../shared/models beside the checkout,
 * or $SMELT_SHARED_DIR/models): each model is cloned, specialized to its
 * test_data_set_0 inputs, rewritten, and run by eager next to the original on
 * those inputs; outputs must agree within 1e-4 (absolute, plus 1e-4
 * relative).  Per model, the fusions the pipeline is expected to find are
 * checked too.  Prints one line per model.
 *
 * SMELT_PASSES_BENCH=N also times both graphs (N runs each, interleaved, 2
 * threads) and prints the medians.  Skipped (exit 77) when the zoo is absent. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "check.h"
#include "onnx/onnx.h"
#include "ops/infer.h"
#include "passes_util.h"
#include "runtime/tensor_file.h"

typedef struct expect {
  const char *model;
  const char *op; /* count of this op after the passes ("smelt." prefix for ours) */
  int count;
} expect;

static const expect expectations[] = {
    {"resnet18", "Identity", 0},         {"resnet18", "Relu", 0},
    {"resnet18", "smelt.Conv", 17},      {"resnet18", "Conv", 3},
    {"squeezenet", "Relu", 0},           {"squeezenet", "smelt.Conv", 26},
    {"mobilenet_v2", "Clip", 0},         {"mobilenet_v2", "Identity", 0},
    {"mlp", "Erf", 0},                   {"mlp", "smelt.Gemm", 3},
    {"gpt_tiny", "smelt.Attention", 4},  {"gpt_tiny", "Softmax", 0},
    {"gpt_tiny", "Erf", 0},              {"gpt_tiny", "Trilu", 0},
    {"gpt_tiny_kv", "smelt.Attention", 4}, {"gpt_tiny_kv", "Softmax", 0},
    {"bert_tiny", "smelt.Attention", 4}, {"bert_tiny", "Erf", 0},
    {"vit_tiny", "smelt.Attention", 4},  {"vit_tiny", "Softmax", 0},
};

static const char *shared_dir(char *buf, size_t n) {
  const char *env = getenv("SMELT_SHARED_DIR");
  if (env) return env;
  char file[4096];
  snprintf(file, sizeof file, "%s", __FILE__);
  snprintf(buf, n, "%s/../../../shared", dirname(file)); /* tests/unit -> repo -> .. */
  return buf;
}

static int count_in_report(const pass_report *r, const char *name) {
  for (int i = 0; i < r->n_stats; i++)
    if (!strcmp(r->stats[i].name, name)) return r->stats[i].changes;
  return 0;
}

static void check_model(const char *dir, const char *name, int bench_runs) {
  char p[9000];
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  onnx_model *m = NULL;
  CHECK_OK(onnx_model_load(p, &m));
  if (!m) return;
  CHECK_OK(ir_graph_validate(m->graph));
  CHECK_OK(ir_graph_infer(m->graph));
  const ir_graph *g = m->graph;
  tensor ins[16], *in[16];
  int ni = g->n_inputs < 16 ? g->n_inputs : 16;
  memset(ins, 0, sizeof ins);
  smelt_status s = SMELT_OK;
  for (int k = 0; !s && k < ni; k++) {
    snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", dir, k);
    s = tensor_file_load(p, &ins[k]);
    in[k] = &ins[k];
  }
  CHECK_OK(s);
  passes_equiv e = {0};
  check_opts co = {.timing_runs = bench_runs};
  if (!s) {
    s = check_rewrite(g, in, &co, &e);
    CHECK_OK(s);
    CHECK(e.ok);
  }
  const ir_graph *r = e.rewritten;
  printf("%-14s nodes %4d -> %3d  max_abs %.2e  %s", name, e.nodes_before, e.nodes_after, e.max_abs,
         e.ok ? "match" : "MISMATCH");
  if (r)
    printf("  fused: %d epilogue, %d attention, %d norm/gelu, %d conv+bn", count_in_report(&e.report, "fuse_epilogue"),
           count_in_report(&e.report, "fuse_attention"), count_in_report(&e.report, "fuse_norm"),
           count_in_report(&e.report, "conv_bn"));
  if (bench_runs > 0 && !s)
    printf("  eager %.3f ms -> %.3f ms (x%.2f), cpu %.3f ms -> %.3f ms (x%.2f)", e.t_before * 1e3,
           e.t_after * 1e3, e.t_before / e.t_after, e.cpu_before * 1e3, e.cpu_after * 1e3,
           e.cpu_before / e.cpu_after);
  printf("\n");
  for (size_t i = 0; r && i < sizeof expectations / sizeof *expectations; i++) {
    if (strcmp(expectations[i].model, name)) continue;
    int n = count_op(r, expectations[i].op);
    if (n != expectations[i].count)
      fprintf(stderr, "%s: %d %s nodes after the passes, expected %d\n", name, n, expectations[i].op,
              expectations[i].count);
    CHECK(n == expectations[i].count);
  }
  if (getenv("SMELT_PASSES_LOG")) print_report(&e.report);
  passes_equiv_free(&e);
  /* without specializing (symbolic dims kept, as for a dynamic-shape plan) the
   * rewritten graph must still hold for these inputs */
  check_opts generic = {.generic = true};
  if (!s) {
    CHECK_OK(check_rewrite(g, in, &generic, &e));
    CHECK(e.ok);
    printf("%-14s generic: nodes %4d -> %3d  max_abs %.2e  %s  fused: %d epilogue, %d attention, %d norm/gelu\n",
           "", e.nodes_before, e.nodes_after, e.max_abs, e.ok ? "match" : "MISMATCH",
           count_in_report(&e.report, "fuse_epilogue"), count_in_report(&e.report, "fuse_attention"),
           count_in_report(&e.report, "fuse_norm"));
    passes_equiv_free(&e);
  }
  for (int k = 0; k < ni; k++) tensor_release(&ins[k]);
  onnx_model_free(m);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
  char buf[4096], models[4200];
  snprintf(models, sizeof models, "%s/models", shared_dir(buf, sizeof buf));
  DIR *d = opendir(models);
  if (!d) {
    printf("test_passes_zoo: SKIP: no model zoo at %s\n", models);
    return 77;
  }
  char *names[64];
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) && n < 64) {
    char p[8400];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/model.onnx", models, de->d_name);
    if (de->d_name[0] != '.' && !stat(p, &st)) names[n++] = strdup(de->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof *names, cmp_names);
  const char *bench = getenv("SMELT_PASSES_BENCH");
  for (int i = 0; i < n; i++) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", models, names[i]);
    check_model(p, names[i], bench ? atoi(bench) : 0);
    free(names[i]);
  }
  return test_report("test_passes_zoo");
}
