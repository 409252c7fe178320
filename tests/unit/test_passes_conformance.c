/* The pass pipeline over the ONNX backend node tests (../shared/conformance/
 * onnx-node): every model that eager runs is cloned, specialized to its
 * test_data_set_0 inputs, rewritten and run again (models with random ops
 * excluded: they differ from run to run); the outputs must be the
 * same (within 1e-4 absolute and relative: folding and fusing may round
 * differently).  Exercises the passes on every op, dtype, sequence and
 * optional the suite has.  Skipped (exit 77) when the suite is absent. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "check.h"
#include "onnx/onnx.h"
#include "ops/infer.h"
#include "passes_util.h"
#include "runtime/tensor_file.h"

static const char *suite_dir(char *buf, size_t n) {
  const char *env = getenv("SMELT_SHARED_DIR");
  char file[4096];
  snprintf(file, sizeof file, "%s", __FILE__);
  snprintf(buf, n, "%s/conformance/onnx-node", env ? env : strcat(dirname(file), "/../../../shared"));
  return buf;
}

/* Random ops give new values on every run, rewritten or not. */
static bool has_random_op(const ir_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const char *op = g->nodes[i].op_type;
    if (!strncmp(op, "Random", 6) || !strcmp(op, "Bernoulli") || !strcmp(op, "Multinomial")) return true;
  }
  return false;
}

/* 1: checked, 0: not applicable (eager cannot run it, random), -1: mismatch or error */
static int check_one(const char *dir) {
  char p[4700];
  snprintf(p, sizeof p, "%s/model.onnx", dir);
  onnx_model *m = NULL;
  if (onnx_model_load(p, &m)) return 0;
  const ir_graph *g = m->graph;
  int result = 0;
  tensor ins[16], *in[16];
  memset(ins, 0, sizeof ins);
  int ni = g->n_inputs;
  bool loaded = ni <= 16 && !has_random_op(g) && !ir_graph_validate(g) && !ir_graph_infer(m->graph);
  for (int k = 0; loaded && k < ni; k++) {
    snprintf(p, sizeof p, "%s/test_data_set_0/input_%d.pb", dir, k);
    loaded = !tensor_file_load(p, &ins[k]) && ins[k].kind == TENSOR_KIND_TENSOR;
    in[k] = &ins[k];
  }
  if (loaded && g->n_outputs <= 16) {
    /* is it a model eager runs at all? */
    smelt_pool *pool = NULL;
    tensor out[16];
    memset(out, 0, sizeof out);
    bool runs = !pool_create(1, &pool) && !run_eager(g, pool, in, out, 1, NULL);
    for (int k = 0; k < g->n_outputs; k++) tensor_release(&out[k]);
    pool_free(pool);
    if (runs) {
      passes_equiv e;
      check_opts co = {.threads = 1};
      smelt_status s = check_rewrite(g, in, &co, &e);
      result = !s && e.ok ? 1 : -1;
      if (result < 0) fprintf(stderr, "%s: %s\n", dir, s ? err_message() : "outputs differ");
      passes_equiv_free(&e);
    }
  }
  err_clear();
  for (int k = 0; k < ni && k < 16; k++) tensor_release(&ins[k]);
  onnx_model_free(m);
  return result;
}

int main(void) {
  char buf[4200];
  const char *suite = suite_dir(buf, sizeof buf);
  DIR *d = opendir(suite);
  if (!d) {
    printf("test_passes_conformance: SKIP: no suite at %s\n", suite);
    return 77;
  }
  int checked = 0, failed = 0, skipped = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "test_", 5)) continue;
    char dir[4600];
    snprintf(dir, sizeof dir, "%s/%s", suite, de->d_name);
    int r = check_one(dir);
    checked += r == 1;
    failed += r < 0;
    skipped += r == 0;
  }
  closedir(d);
  printf("test_passes_conformance: %d models rewritten and matching, %d differing, %d not run by eager or random\n",
         checked, failed, skipped);
  CHECK(failed == 0);
  CHECK(checked > 0);
  return test_report("test_passes_conformance");
}
