/* Hand-built graphs for compiler tests, and running them eagerly and
 * compiled on the same inputs.
 *   gb b; gb_init(&b, 17);
 *   int x = gb_input(&b, "x", SMELT_F32, 2, (int64_t[]){3, 4});
 *   int y = gb_node(&b, "Relu", 1, (int[]){x}, NULL, 0);
 *   gb_output(&b, y);  CHECK_OK(gb_finish(&b)); ... gb_free(&b); */
#ifndef SMELT_TEST_GRAPH_BUILDER_H
#define SMELT_TEST_GRAPH_BUILDER_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "runtime/eager.h"
#include "runtime/plan_run.h"
#include "util/err.h"

typedef struct gb {
  ir_graph *g;
  int n_names;
} gb;

static inline void gb_init(gb *b, int opset) {
  b->g = ir_graph_new(NULL);
  b->n_names = 0;
  b->g->opsets = arena_alloc(&b->g->arena, sizeof(ir_opset) * 2);
  b->g->opsets[0] = (ir_opset){"", opset};
  b->g->n_opsets = 1;
}

static inline int gb_value(gb *b, const char *name) {
  char buf[64];
  if (!name) {
    snprintf(buf, sizeof buf, "v%d", b->n_names++);
    name = buf;
  }
  int id = -1;
  ir_graph_add_value(b->g, name, &id);
  return id;
}

static inline int gb_input(gb *b, const char *name, smelt_dtype dt, int rank, const int64_t *dims) {
  int id = gb_value(b, name);
  ir_value *v = &b->g->values[id];
  v->dtype = dt;
  v->rank = rank;
  if (rank > 0) memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  ir_graph_add_input(b->g, id);
  return id;
}

/* A constant value (initializer) with the given contents (copied). */
static inline int gb_const(gb *b, smelt_dtype dt, int rank, const int64_t *dims, const void *data) {
  int id = gb_value(b, NULL);
  ir_value *v = &b->g->values[id];
  tensor *t = NULL;
  tensor_new(&t, dt, rank, dims);
  if (t->nbytes) memcpy(t->data, data, t->nbytes);
  v->dtype = dt;
  v->rank = rank;
  if (rank > 0) memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
  v->constant = t;
  v->flags |= IR_VALUE_INITIALIZER;
  return id;
}

static inline int gb_scalar(gb *b, float x) { return gb_const(b, SMELT_F32, 0, NULL, &x); }

/* A node with one output (or n_out outputs: ids in outs). */
static inline int gb_node_n(gb *b, const char *op, int n_in, const int *ins, const ir_attr *attrs,
                            int n_attrs, int n_out, int *outs) {
  int id;
  ir_graph_add_node(b->g, op, op, "", n_in, n_out, n_attrs, &id);
  ir_node *n = &b->g->nodes[id];
  n->op = ops_find("", op);
  if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
  for (int i = 0; i < n_in; i++) n->inputs[i] = ins[i];
  int first = -1;
  for (int o = 0; o < n_out; o++) {
    int v = gb_value(b, NULL);
    b->g->nodes[id].outputs[o] = v;
    b->g->values[v].producer = id;
    if (outs) outs[o] = v;
    if (!o) first = v;
  }
  return first;
}

static inline int gb_node(gb *b, const char *op, int n_in, const int *ins, const ir_attr *attrs, int n_attrs) {
  return gb_node_n(b, op, n_in, ins, attrs, n_attrs, 1, NULL);
}

static inline void gb_output(gb *b, int v) { ir_graph_add_output(b->g, v); }

static inline smelt_status gb_finish(gb *b) {
  TRY(ir_graph_validate(b->g));
  return ir_graph_infer(b->g);
}

static inline void gb_free(gb *b) {
  ir_graph_free(b->g);
  b->g = NULL;
}

/* Random f32 input of a value's shape. */
static inline void gb_rand(tensor *t, smelt_dtype dt, int rank, const int64_t *dims, unsigned seed) {
  tensor_alloc(t, dt, rank, dims);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    double u = (double)((seed >> 8) & 0xffff) / 65536.0 * 4.0 - 2.0;
    tensor_set_f64(t, i, dt == SMELT_BOOL ? (u > 0) : u);
  }
}

/* Largest |a - e| / (atol + rtol |e|) over two tensors (> 1: out of tolerance);
 * 1e30 if they differ in type or shape. */
static inline double gb_err(const tensor *a, const tensor *e, double rtol, double atol) {
  if (a->dtype != e->dtype || a->rank != e->rank) return 1e30;
  if (a->rank && memcmp(a->dims, e->dims, sizeof(int64_t) * (size_t)a->rank)) return 1e30;
  double worst = 0;
  int64_t n = tensor_numel(a);
  for (int64_t i = 0; i < n; i++) {
    double x = tensor_get_f64(a, i), y = tensor_get_f64(e, i);
    if (isnan(x) && isnan(y)) continue;
    if (isnan(x) != isnan(y)) return 1e30;
    if (isinf(x) || isinf(y)) {
      if (x != y) return 1e30;
      continue;
    }
    double r = fabs(x - y) / (atol + rtol * fabs(y));
    if (r > worst) worst = r;
  }
  return worst;
}

/* Options for compiling in tests: no cache, the system compiler, 2 threads. */
typedef struct gb_env {
  smelt_pool *pool;
  smelt_cache cache;
  cc_toolchain tc;
  bool have_cc;
  char tc_error[512];
} gb_env;

static inline void gb_env_init(gb_env *e) {
  memset(e, 0, sizeof *e);
  pool_create(2, &e->pool);
  e->have_cc = cc_probe(&e->tc) == SMELT_OK;
  if (!e->have_cc) snprintf(e->tc_error, sizeof e->tc_error, "%s", smelt_last_error());
}

static inline compile_options gb_opts(gb_env *e, smelt_mode mode) {
  compile_options o = {.mode = mode, .pool = e->pool, .cache = &e->cache, .jobs = 2,
                       .tc = e->have_cc ? &e->tc : NULL, .tc_error = e->tc_error};
  return o;
}

/* Runs g eagerly once and plan p `runs` times on the same inputs (p NULL:
 * the eager run only); returns the worst error over outputs and runs (see
 * gb_err), or 1e30 on any failure.  For plans whose arena is reused run
 * after run. */
static inline double gb_rerun_tol(gb_env *env, const ir_graph *g, tensor *const *in, compiled_plan *p, int runs,
                                  double rtol, double atol) {
  int no = g->n_outputs;
  tensor *ref = calloc((size_t)no, sizeof(tensor)), *got = calloc((size_t)no, sizeof(tensor));
  eager_plan ep;
  double worst = 1e30;
  if (ref && got && eager_plan_build(g, &ep) == SMELT_OK) {
    if (eager_run(&ep, env->pool, NULL, in, ref, NULL) == SMELT_OK) {
      worst = 0;
      for (int r = 0; p && r < runs && worst < 1e30; r++) {
        if (plan_run(p, in, got) != SMELT_OK) {
          fprintf(stderr, "gb_rerun: %s\n", smelt_last_error());
          worst = 1e30;
          break;
        }
        for (int k = 0; k < no; k++) {
          double w = gb_err(&got[k], &ref[k], rtol, atol);
          if (w > worst) worst = w;
          tensor_release(&got[k]);
        }
      }
    }
    eager_plan_free(&ep);
  }
  for (int k = 0; ref && k < no; k++) tensor_release(&ref[k]);
  free(ref);
  free(got);
  return worst;
}
static inline double gb_rerun(gb_env *env, const ir_graph *g, tensor *const *in, compiled_plan *p, int runs) {
  return gb_rerun_tol(env, g, in, p, runs, 1e-4, 1e-5);
}

/* Runs g eagerly and compiled (options o) on the same inputs; returns the
 * worst error over outputs (see gb_err), or 1e30 on any failure. */
static inline double gb_compare(gb_env *env, const ir_graph *g, tensor *const *in, const compile_options *o,
                                compile_report *rep, compiled_plan **keep) {
  int no = g->n_outputs;
  tensor *ref = calloc((size_t)no, sizeof(tensor)), *got = calloc((size_t)no, sizeof(tensor));
  eager_plan ep;
  double worst = 1e30;
  compiled_plan *p = NULL;
  if (eager_plan_build(g, &ep) == SMELT_OK) {
    if (eager_run(&ep, env->pool, NULL, in, ref, NULL) == SMELT_OK &&
        compile_model(g, in, o, &p, rep) == SMELT_OK && plan_run(p, in, got) == SMELT_OK) {
      worst = 0;
      for (int k = 0; k < no; k++) {
        double w = gb_err(&got[k], &ref[k], 1e-4, 1e-5);
        if (w > worst) worst = w;
      }
    } else {
      fprintf(stderr, "gb_compare: %s\n", smelt_last_error());
    }
    eager_plan_free(&ep);
  }
  for (int k = 0; k < no; k++) {
    tensor_release(&ref[k]);
    tensor_release(&got[k]);
  }
  free(ref);
  free(got);
  if (keep) *keep = p;
  else compiled_plan_free(p);
  return worst;
}

#endif
