/* Greedy fusion's cycle check (fuse.c): a merge that would make the graph of
 * steps cyclic is refused, also after earlier merges moved steps' ranks; on
 * random DAGs of elementwise and library nodes the groups stay acyclic,
 * fusion still happens, and the compiled plan matches eager. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

/* Step of node n: its group, else the node itself (as n_groups + n). */
static int step(const fusion *f, int n) { return f->group_of[n] >= 0 ? f->group_of[n] : f->n_groups + n; }

/* True if the graph of steps (groups and ungrouped nodes) has no cycle (Kahn). */
static bool steps_acyclic(const ir_graph *g, const fusion *f) {
  int ns = f->n_groups + g->n_nodes, n_e = 0, done = 0;
  int *indeg = calloc((size_t)ns, sizeof(int)), *src = NULL, *dst = NULL, *queue = malloc(sizeof(int) * (size_t)ns);
  for (int n = 0; n < g->n_nodes; n++) n_e += g->nodes[n].n_inputs;
  src = malloc(sizeof(int) * (size_t)(n_e + 1));
  dst = malloc(sizeof(int) * (size_t)(n_e + 1));
  n_e = 0;
  for (int n = 0; n < g->n_nodes; n++)
    for (int i = 0; i < g->nodes[n].n_inputs; i++) {
      int v = g->nodes[n].inputs[i], p = v >= 0 ? g->values[v].producer : -1;
      if (p < 0 || step(f, p) == step(f, n)) continue;
      src[n_e] = step(f, p);
      dst[n_e++] = step(f, n);
      indeg[step(f, n)]++;
    }
  bool *live = calloc((size_t)ns, sizeof(bool));
  for (int n = 0; n < g->n_nodes; n++) live[step(f, n)] = true;
  int head = 0, tail = 0, n_live = 0;
  for (int s = 0; s < ns; s++) {
    n_live += live[s];
    if (live[s] && !indeg[s]) queue[tail++] = s;
  }
  while (head < tail) { /* O(steps x edges): fine for a test */
    int s = queue[head++];
    done++;
    for (int e = 0; e < n_e; e++)
      if (src[e] == s && --indeg[dst[e]] == 0) queue[tail++] = dst[e];
  }
  free(indeg);
  free(src);
  free(dst);
  free(queue);
  free(live);
  return done == n_live;
}

static bool fuse(ir_graph *g, fusion *f, cgraph *cg) {
  if (cgraph_build(g, false, false, cg) != SMELT_OK) return false;
  return fuse_graph(cg, true, f) == SMELT_OK;
}

/* a = Neg(x); X = MatMul(a, W) (library); b = Relu(a); c = Sigmoid(X); d = Add(c, b).
 * a+b merge first (their edge comes first), which must rank {a,b} before X;
 * then {a,b}+d would close {a,b} -> X -> c -> d: refused; c+d merge. */
static void test_cycle_after_rerank(void) {
  gb b;
  gb_init(&b, 17);
  float w[16];
  for (int i = 0; i < 16; i++) w[i] = (float)(i % 5) * 0.25f - 0.5f;
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(4, 4));
  int W = gb_const(&b, SMELT_F32, 2, I64(4, 4), w);
  int a = gb_node(&b, "Neg", 1, IDS(x), NULL, 0);
  int X = gb_node(&b, "MatMul", 2, IDS(a, W), NULL, 0);
  int bv = gb_node(&b, "Relu", 1, IDS(a), NULL, 0);
  int c = gb_node(&b, "Sigmoid", 1, IDS(X), NULL, 0);
  int d = gb_node(&b, "Add", 2, IDS(c, bv), NULL, 0);
  gb_output(&b, d);
  CHECK_OK(gb_finish(&b));
  cgraph cg;
  fusion f;
  CHECK(fuse(b.g, &f, &cg));
  const ir_graph *g = b.g;
  int na = g->values[a].producer, nb = g->values[bv].producer, nc = g->values[c].producer,
      nd = g->values[d].producer, nx = g->values[X].producer;
  CHECK(f.group_of[na] >= 0 && f.group_of[na] == f.group_of[nb]);
  CHECK(f.group_of[nc] >= 0 && f.group_of[nc] == f.group_of[nd]);
  CHECK(f.group_of[na] != f.group_of[nd]);
  CHECK(f.group_of[nx] < 0);
  CHECK(steps_acyclic(g, &f));
  fusion_free(&f);
  cgraph_free(&cg);
  if (env.have_cc) {
    tensor in = {0}, *pin = &in;
    gb_rand(&in, SMELT_F32, 2, I64(4, 4), 3);
    compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(gb_compare(&env, b.g, &pin, &o, &rep, NULL) <= 1);
    compile_report_free(&rep);
    tensor_release(&in);
  }
  gb_free(&b);
}

/* Random DAGs: each node reads one or two of the last few values; a fifth
 * are library MatMuls, which break groups and make long detours. */
static void build_random(gb *b, unsigned seed, int n_nodes) {
  gb_init(b, 17);
  float w[16];
  for (int i = 0; i < 16; i++) w[i] = (float)((i * 7 + (int)seed) % 9) * 0.1f - 0.4f;
  int *vals = malloc(sizeof(int) * (size_t)(n_nodes + 2));
  int nv = 0;
  vals[nv++] = gb_input(b, "x", SMELT_F32, 2, I64(4, 4));
  vals[nv++] = gb_input(b, "y", SMELT_F32, 2, I64(4, 4));
  int W = gb_const(b, SMELT_F32, 2, I64(4, 4), w);
  bool *used = calloc((size_t)(n_nodes + 2), sizeof(bool));
  srand(seed);
  for (int i = 0; i < n_nodes; i++) {
    int win = nv < 12 ? nv : 12;
    int p = nv - 1 - rand() % win, q = nv - 1 - rand() % win;
    used[p] = used[q] = true;
    int r = rand() % 10, v;
    if (r < 2) v = gb_node(b, "MatMul", 2, IDS(vals[p], W), NULL, 0);
    else if (r < 4) v = gb_node(b, "Neg", 1, IDS(vals[p]), NULL, 0);
    else if (r < 6) v = gb_node(b, "Tanh", 1, IDS(vals[p]), NULL, 0);
    else v = gb_node(b, "Add", 2, IDS(vals[p], vals[q]), NULL, 0);
    if (r >= 6) used[q] = true;
    vals[nv++] = v;
  }
  for (int i = 2; i < nv; i++)
    if (!used[i] || i == nv - 1) gb_output(b, vals[i]);
  free(vals);
  free(used);
}

static void test_random_dags(void) {
  for (unsigned seed = 1; seed <= 40; seed++) {
    gb b;
    build_random(&b, seed, 300);
    CHECK_OK(gb_finish(&b));
    cgraph cg;
    fusion f;
    bool ok = fuse(b.g, &f, &cg);
    CHECK(ok);
    if (!ok) {
      gb_free(&b);
      continue;
    }
    int fusable = 0, big = 0;
    for (int n = 0; n < b.g->n_nodes; n++) fusable += cg.info[n].kind == CN_PW;
    for (int i = 0; i < f.n_groups; i++) big += f.groups[i].n > 1;
    CHECK(f.n_groups < fusable && big > 0); /* fusion happened */
    bool acyclic = steps_acyclic(b.g, &f);
    CHECK(acyclic);
    if (!acyclic) fprintf(stderr, "seed %u: the groups make a cycle\n", seed);
    fusion_free(&f);
    cgraph_free(&cg);
    if (env.have_cc && seed <= 2) { /* and it runs, matching eager */
      tensor in[2] = {{0}}, *pin[2] = {&in[0], &in[1]};
      gb_rand(&in[0], SMELT_F32, 2, I64(4, 4), seed);
      gb_rand(&in[1], SMELT_F32, 2, I64(4, 4), seed + 100);
      compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
      compile_report rep;
      memset(&rep, 0, sizeof rep);
      CHECK(gb_compare(&env, b.g, pin, &o, &rep, NULL) <= 1);
      compile_report_free(&rep);
      tensor_release(&in[0]);
      tensor_release(&in[1]);
    }
    gb_free(&b);
  }
}

int main(void) {
  gb_env_init(&env);
  test_cycle_after_rerank();
  test_random_dags();
  pool_free(env.pool);
  return test_report("test_fuse");
}
