/* Helpers for the pass tests: building small graphs by name, and the
 * equivalence check every pass test ends with: clone the graph, run passes on
 * the clone, run eager on both on the same inputs, compare.
 *
 *   ir_graph *g = gb_new();
 *   gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4, 8});
 *   gb_const(g, "w", 2, (int64_t[]){8, 3}, 1);        // seeded values
 *   gb_node(g, "MatMul", "x,w", "y", 0);
 *   gb_output(g, "y");
 *   passes_equiv eq; CHECK_OK(check_passes(g, NULL, &eq)); CHECK(eq.ok);
 *   (or check_pass(g, pass_fold, &eq) for one pass alone)
 */
#ifndef SMELT_TEST_PASSES_UTIL_H
#define SMELT_TEST_PASSES_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/infer.h"
#include "ops/op.h"
#include "passes/passes_list.h"
#include "runtime/compare.h"
#include "runtime/eager.h"
#include "runtime/inputs_gen.h"
#include "util/err.h"

/* ---- building ---- */

static inline ir_graph *gb_new(void) {
  ir_graph *g = ir_graph_new(NULL);
  g->name = "test";
  g->opsets = arena_alloc(&g->arena, sizeof(ir_opset));
  g->opsets[0].domain = "";
  g->opsets[0].version = 17;
  g->n_opsets = 1;
  return g;
}

static inline int gb_value(ir_graph *g, const char *name) {
  int id = ir_graph_find_value(g, name);
  if (id < 0 && ir_graph_add_value(g, name, &id)) {
    fprintf(stderr, "gb_value %s: %s\n", name, err_message());
    return -1;
  }
  return id;
}

static inline int gb_input(ir_graph *g, const char *name, smelt_dtype dt, int rank, const int64_t *dims) {
  int v = gb_value(g, name);
  g->values[v].dtype = dt;
  g->values[v].rank = rank;
  if (rank > 0) memcpy(g->values[v].dims, dims, sizeof(int64_t) * (size_t)rank);
  ir_graph_add_input(g, v);
  return v;
}

/* A constant from data (NULL: seeded values in [-1, 1) scaled by 0.5). */
static inline int gb_const_t(ir_graph *g, const char *name, smelt_dtype dt, int rank,
                             const int64_t *dims, const void *data, int seed) {
  int v = gb_value(g, name);
  tensor *t = NULL;
  tensor_new(&t, dt, rank, dims);
  if (data) memcpy(t->data, data, t->nbytes);
  else {
    tensor r = {0};
    inputs_generate(&r, dt, rank, dims, (uint64_t)seed, 0, 0);
    memcpy(t->data, r.data, t->nbytes);
    tensor_release(&r);
    for (int64_t i = 0; dtype_is_float(dt) && i < tensor_numel(t); i++) tensor_set_f64(t, i, 0.5 * tensor_get_f64(t, i));
  }
  ir_value *val = &g->values[v];
  val->constant = t;
  val->flags |= IR_VALUE_INITIALIZER;
  val->dtype = dt;
  val->rank = rank;
  if (rank > 0) memcpy(val->dims, dims, sizeof(int64_t) * (size_t)rank);
  return v;
}

static inline int gb_const(ir_graph *g, const char *name, int rank, const int64_t *dims, int seed) {
  return gb_const_t(g, name, SMELT_F32, rank, dims, NULL, seed);
}
static inline int gb_scalar(ir_graph *g, const char *name, float x) {
  return gb_const_t(g, name, SMELT_F32, 0, NULL, &x, 0);
}
static inline int gb_ints(ir_graph *g, const char *name, int n, const int64_t *vals) {
  int64_t d = n;
  return gb_const_t(g, name, SMELT_I64, 1, &d, vals, 0);
}

/* Splits "a,b,,c" into value ids (an empty name: absent, -1). */
static inline int gb_names(ir_graph *g, const char *list, int *ids) {
  int n = 0;
  if (!*list) return 0;
  for (const char *p = list;; n++) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    ids[n] = len ? gb_value(g, name) : -1;
    if (!e) return n + 1;
    p = e + 1;
  }
}

/* A node reading/writing values by name; attributes are set with gb_attr_*. */
static inline int gb_node_d(ir_graph *g, const char *domain, const char *op, const char *ins,
                            const char *outs, int n_attrs) {
  int in[64], out[64], ni = gb_names(g, ins, in), no = gb_names(g, outs, out), id;
  static int counter;
  char name[64];
  snprintf(name, sizeof name, "%s_%d", op, counter++);
  ir_graph_add_node(g, name, op, domain, ni, no, n_attrs, &id);
  ir_node *nd = &g->nodes[id];
  nd->op = ops_find(domain, op);
  memcpy(nd->inputs, in, sizeof(int) * (size_t)ni);
  memcpy(nd->outputs, out, sizeof(int) * (size_t)no);
  for (int k = 0; k < no; k++) g->values[out[k]].producer = id;
  return id;
}
static inline int gb_node(ir_graph *g, const char *op, const char *ins, const char *outs, int n_attrs) {
  return gb_node_d(g, "", op, ins, outs, n_attrs);
}

static inline void gb_attr_int(ir_graph *g, int node, int slot, const char *name, int64_t v) {
  ir_attr *a = &g->nodes[node].attrs[slot];
  a->name = arena_strdup(&g->arena, name);
  a->type = IR_ATTR_INT;
  a->i = v;
}
static inline void gb_attr_float(ir_graph *g, int node, int slot, const char *name, float v) {
  ir_attr *a = &g->nodes[node].attrs[slot];
  a->name = arena_strdup(&g->arena, name);
  a->type = IR_ATTR_FLOAT;
  a->f = v;
}
static inline void gb_attr_string(ir_graph *g, int node, int slot, const char *name, const char *v) {
  ir_attr *a = &g->nodes[node].attrs[slot];
  a->name = arena_strdup(&g->arena, name);
  a->type = IR_ATTR_STRING;
  a->s = arena_strdup(&g->arena, v);
  a->s_len = strlen(v);
}
static inline void gb_attr_ints(ir_graph *g, int node, int slot, const char *name, int n, const int64_t *v) {
  ir_attr *a = &g->nodes[node].attrs[slot];
  a->name = arena_strdup(&g->arena, name);
  a->type = IR_ATTR_INTS;
  a->ints = arena_alloc(&g->arena, sizeof(int64_t) * (size_t)(n + 1));
  memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
  a->n = n;
}

/* t: a tensor_new'ed one the graph owns from here on (freed with it). */
static inline void gb_attr_tensor(ir_graph *g, int node, int slot, const char *name, tensor *t) {
  ir_attr *a = &g->nodes[node].attrs[slot];
  a->name = arena_strdup(&g->arena, name);
  a->type = IR_ATTR_TENSOR;
  a->t = t;
}

static inline void gb_output(ir_graph *g, const char *name) { ir_graph_add_output(g, gb_value(g, name)); }

/* Validates and infers a built graph (what model loading does). */
static inline smelt_status gb_finish(ir_graph *g) {
  TRY(ir_graph_validate(g));
  return ir_graph_infer(g);
}

/* Counts live nodes with op_type (domain "" or "smelt" by the prefix "smelt."). */
static inline int count_op(const ir_graph *g, const char *op) {
  int n = 0;
  bool smelt = !strncmp(op, "smelt.", 6);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (!strcmp(nd->op_type, smelt ? op + 6 : op) && !strcmp(nd->domain, smelt ? "smelt" : "")) n++;
  }
  return n;
}

/* ---- running and comparing ---- */

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads): the work done, which a
 * busy machine disturbs far less than the wall clock. */
static inline double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs g's eager plan on inputs; outputs[] (g->n_outputs zeroed tensors) receive owning results.
 * runs > 1: repeats and stores the median time of one run in *median_s. */
static inline smelt_status run_eager(const ir_graph *g, smelt_pool *pool, tensor *const *inputs,
                                     tensor *outputs, int runs, double *median_s) {
  eager_plan p;
  TRY(eager_plan_build(g, &p));
  smelt_status s = SMELT_OK;
  double times[64];
  if (runs < 1) runs = 1;
  if (runs > 64) runs = 64;
  for (int r = 0; !s && r < runs; r++) {
    if (r) for (int k = 0; k < g->n_outputs; k++) tensor_release(&outputs[k]);
    double t0 = now_s();
    s = eager_run(&p, pool, NULL, inputs, outputs, NULL);
    times[r] = now_s() - t0;
  }
  eager_plan_free(&p);
  if (median_s && !s) {
    for (int i = 1; i < runs; i++)
      for (int j = i; j > 0 && times[j] < times[j - 1]; j--) {
        double t = times[j];
        times[j] = times[j - 1];
        times[j - 1] = t;
      }
    *median_s = times[runs / 2];
  }
  return s;
}

typedef struct passes_equiv {
  bool ok;              /* every output within tolerance */
  double max_abs;       /* largest |rewritten - original| over all outputs */
  int nodes_before, nodes_after;
  int changes;          /* a single pass: what it reported */
  double t_before, t_after; /* median wall seconds per run (when timed) */
  double cpu_before, cpu_after; /* median process CPU seconds per run (when timed) */
  pass_report report;   /* freed by passes_equiv_free */
  ir_graph *rewritten;  /* the clone after the passes, for inspection */
} passes_equiv;

static inline void passes_equiv_free(passes_equiv *e) {
  pass_report_free(&e->report);
  ir_graph_free(e->rewritten);
  e->rewritten = NULL;
}

/* Sets the clone's input shapes to the given tensors' and re-infers. */
static inline smelt_status specialize(ir_graph *g, tensor *const *inputs) {
  for (int k = 0; k < g->n_inputs; k++) {
    ir_value *v = &g->values[g->inputs[k]];
    v->rank = inputs[k]->rank;
    memcpy(v->dims, inputs[k]->dims, sizeof v->dims);
  }
  return ir_graph_infer(g);
}

typedef smelt_status (*pass_fn)(ir_graph *, const pass_options *, pass_report *, int *);

typedef struct check_opts {
  pass_fn pass;      /* NULL: the whole pipeline (passes_run) */
  int threads;       /* default 2 */
  int timing_runs;   /* > 0: also time both graphs, runs interleaved, medians */
  double atol, rtol; /* default 1e-4 and 1e-4 */
  uint64_t seed;     /* for generated inputs */
  bool generic;      /* rewrite without specializing to the inputs' shapes */
} check_opts;

static inline void sort_doubles(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

/* Runs both plans `runs` times, alternating, so that the machine's noise hits
 * both alike; medians in *ta / *tb. */
static inline smelt_status time_pair(const ir_graph *ga, const ir_graph *gb, smelt_pool *pool,
                                     tensor *const *in, int runs, double *ta, double *tb,
                                     double *ca, double *cb) {
  eager_plan pa, pb;
  TRY(eager_plan_build(ga, &pa));
  smelt_status s = eager_plan_build(gb, &pb);
  if (s) {
    eager_plan_free(&pa);
    return s;
  }
  double a[64], b[64], cpa[64], cpb[64];
  if (runs > 64) runs = 64;
  tensor out[64];
  for (int r = 0; !s && r < runs; r++) {
    for (int side = 0; !s && side < 2; side++) {
      const ir_graph *g = side ? gb : ga;
      memset(out, 0, sizeof out);
      double t0 = now_s(), c0 = cpu_s();
      s = eager_run(side ? &pb : &pa, pool, NULL, in, out, NULL);
      (side ? b : a)[r] = now_s() - t0;
      (side ? cpb : cpa)[r] = cpu_s() - c0;
      for (int k = 0; k < g->n_outputs && k < 64; k++) tensor_release(&out[k]);
    }
  }
  eager_plan_free(&pa);
  eager_plan_free(&pb);
  if (s) return s;
  sort_doubles(a, runs);
  sort_doubles(b, runs);
  sort_doubles(cpa, runs);
  sort_doubles(cpb, runs);
  *ta = a[runs / 2];
  *tb = b[runs / 2];
  *ca = cpa[runs / 2];
  *cb = cpb[runs / 2];
  return SMELT_OK;
}

static inline smelt_status rewrite_clone(const ir_graph *g, tensor *const *in, const check_opts *co,
                                         passes_equiv *e) {
  TRY(ir_graph_clone(g, &e->rewritten));
  if (!co->generic) TRY(specialize(e->rewritten, in));
  pass_options o = {.mode = SMELT_MODE_DEFAULT, .specialized = !co->generic,
                    .debug_dir = getenv("SMELT_TEST_DEBUG_DIR")};
  if (!co->pass) return passes_run(e->rewritten, &o, &e->report);
  TRY(co->pass(e->rewritten, &o, &e->report, &e->changes));
  return ir_graph_validate(e->rewritten);
}

/* The reusable check: g (validated, inferred) is cloned, specialized to the
 * inputs' shapes, rewritten (by one pass or the pipeline) and run by eager
 * next to the original on the same inputs.  inputs NULL: seeded ones from
 * g's input types (dims must be concrete).  co NULL: defaults. */
static inline smelt_status check_rewrite(const ir_graph *g, tensor *const *inputs,
                                         const check_opts *co_in, passes_equiv *e) {
  check_opts co = co_in ? *co_in : (check_opts){0};
  if (!co.threads) co.threads = 2;
  if (!co.atol) co.atol = 1e-4;
  if (!co.rtol) co.rtol = 1e-4;
  memset(e, 0, sizeof *e);
  tensor gen[16], *in[16];
  int ni = g->n_inputs < 16 ? g->n_inputs : 16, no = g->n_outputs < 16 ? g->n_outputs : 16;
  smelt_status s = SMELT_OK;
  memset(gen, 0, sizeof gen);
  for (int k = 0; !s && k < ni; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    if (!inputs) s = inputs_generate(&gen[k], v->dtype, v->rank, v->dims, co.seed + 7, k, 0);
    in[k] = inputs ? inputs[k] : &gen[k];
  }
  smelt_pool *pool = NULL;
  if (!s) s = pool_create(co.threads, &pool);
  if (!s) s = rewrite_clone(g, in, &co, e);
  tensor a[16], b[16];
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  if (!s) s = run_eager(g, pool, in, a, 1, NULL);
  if (!s) s = run_eager(e->rewritten, pool, in, b, 1, NULL);
  if (!s && co.timing_runs > 0) s = time_pair(g, e->rewritten, pool, in, co.timing_runs, &e->t_before, &e->t_after,
                                              &e->cpu_before, &e->cpu_after);
  e->ok = !s;
  for (int k = 0; !s && k < no; k++) {
    compare_result cr;
    s = tensor_compare(&b[k], &a[k], co.rtol, co.atol, &cr);
    if (!cr.ok) fprintf(stderr, "output %d: %s\n", k, cr.message);
    e->ok &= cr.ok;
    if (cr.max_abs > e->max_abs) e->max_abs = cr.max_abs;
  }
  e->nodes_before = g->n_nodes;
  e->nodes_after = e->rewritten ? e->rewritten->n_nodes : 0;
  for (int k = 0; k < no; k++) tensor_release(&a[k]), tensor_release(&b[k]);
  for (int k = 0; k < ni; k++) tensor_release(&gen[k]);
  pool_free(pool);
  return s;
}

/* The whole pipeline with default options. */
static inline smelt_status check_passes(const ir_graph *g, tensor *const *inputs, passes_equiv *e) {
  return check_rewrite(g, inputs, NULL, e);
}

/* One pass alone. */
static inline smelt_status check_pass(const ir_graph *g, pass_fn fn, passes_equiv *e) {
  check_opts co = {.pass = fn};
  return check_rewrite(g, NULL, &co, e);
}

static inline void print_report(const pass_report *r) {
  for (int i = 0; i < r->n_log; i++) printf("    %s\n", r->log[i]);
}

#endif
