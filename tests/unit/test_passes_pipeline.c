/* The pass manager: statistics, the fixed point of the cleanup group, the log,
 * and the SMELT_DEBUG dumps (NN-before-<pass>.txt / NN-after-<pass>.txt). */
#include <dirent.h>
#include <unistd.h>

#include "check.h"
#include "passes_util.h"

/* x -> Identity -> Div by 2 -> MatMul + bias -> Relu, plus dead code. */
static ir_graph *build(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){6, 8});
  gb_scalar(g, "two", 2.f);
  gb_const(g, "w", 2, (int64_t[]){8, 4}, 1);
  gb_const(g, "b", 1, (int64_t[]){4}, 2);
  gb_node(g, "Identity", "x", "i", 0);
  gb_node(g, "Div", "i,two", "d", 0);
  gb_node(g, "MatMul", "d,w", "m", 0);
  gb_node(g, "Add", "m,b", "a", 0);
  gb_node(g, "Relu", "a", "y", 0);
  gb_node(g, "Exp", "x", "dead", 0);
  gb_output(g, "y");
  return g;
}

static const pass_stat *stat(const pass_report *r, const char *name) {
  for (int i = 0; i < r->n_stats; i++)
    if (!strcmp(r->stats[i].name, name)) return &r->stats[i];
  return NULL;
}

static void test_report_and_fixpoint(void) {
  ir_graph *g = build();
  CHECK_OK(gb_finish(g));
  passes_equiv e;
  CHECK_OK(check_passes(g, NULL, &e));
  CHECK(e.ok);
  const pass_report *r = &e.report;
  const pass_stat *noop = stat(r, "noop"), *simp = stat(r, "simplify"), *dce = stat(r, "dce");
  const pass_stat *epi = stat(r, "fuse_epilogue"), *attn = stat(r, "fuse_attention");
  CHECK(noop && noop->changes == 1 && simp && simp->changes == 1 && dce && dce->changes >= 1);
  CHECK(epi && epi->runs == 1 && epi->changes == 1);
  CHECK(attn && attn->runs == 1 && attn->changes == 0);
  /* the cleanup group reran until a round changed nothing: at least 2 rounds,
   * and again after the epilogue fusion */
  CHECK(noop && noop->runs >= 3 && noop->seconds >= 0);
  CHECK(e.rewritten && e.rewritten->n_nodes == 2);
  CHECK(count_op(e.rewritten, "Mul") == 1 && count_op(e.rewritten, "smelt.Gemm") == 1);
  bool logged = false;
  for (int i = 0; i < r->n_log; i++) logged |= strstr(r->log[i], "smelt.Gemm(bias, relu)") != NULL;
  CHECK(logged);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_debug_dumps(void) {
  char dir[] = "/tmp/smelt_passes_XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(!"mkdtemp");
    return;
  }
  ir_graph *g = build(), *c = NULL;
  CHECK_OK(gb_finish(g));
  CHECK_OK(ir_graph_clone(g, &c));
  pass_options o = {.mode = SMELT_MODE_DEFAULT, .specialized = true, .debug_dir = dir};
  pass_report r = {0};
  CHECK_OK(passes_run(c, &o, &r));
  char p[512];
  snprintf(p, sizeof p, "%s/01-before-noop.txt", dir);
  FILE *f = fopen(p, "r");
  CHECK(f != NULL);
  char text[4096] = "";
  if (f) {
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
  }
  CHECK(strstr(text, "= Identity(%x)") != NULL);
  snprintf(p, sizeof p, "%s/01-after-noop.txt", dir);
  CHECK(access(p, R_OK) == 0);
  /* one pair per pass run that changed something, numbered in order */
  int files = 0;
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (de->d_name[0] != '.') {
      files++;
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  int changed_runs = 0;
  for (int i = 0; i < r.n_stats; i++) changed_runs += r.stats[i].changes > 0;
  CHECK(files >= 2 * changed_runs && files % 2 == 0);
  rmdir(dir);
  /* a directory that cannot be written is an error, not a silent skip */
  ir_graph *c2 = NULL;
  CHECK_OK(ir_graph_clone(g, &c2));
  o.debug_dir = "/nonexistent/smelt";
  CHECK(passes_run(c2, &o, &r) == SMELT_ERR_IO);
  pass_report_free(&r);
  CHECK(r.n_log == 0 && r.log == NULL);
  ir_graph_free(c2);
  ir_graph_free(c);
  ir_graph_free(g);
}

int main(void) {
  test_report_and_fixpoint();
  test_debug_dumps();
  return test_report("test_passes_pipeline");
}
