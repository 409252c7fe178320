/* Helpers for the elementwise op tests: tensors of any dtype from double
 * literals, value comparison (NaN-aware, with tolerance), a naive broadcast
 * index for checking the strided walk, static inference and pooled runs. */
#ifndef SMELT_TEST_EW_UTIL_H
#define SMELT_TEST_EW_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

/* A tensor of dtype dt with values vals (numel of them; NULL = zeros). */
static inline tensor ew_mk(smelt_dtype dt, int rank, const int64_t *dims, const double *vals) {
  tensor t;
  if (tensor_alloc(&t, dt, rank, dims)) {
    fprintf(stderr, "ew_mk: %s\n", smelt_last_error());
    memset(&t, 0, sizeof t);
    return t;
  }
  int64_t n = tensor_numel(&t);
  for (int64_t i = 0; vals && i < n; i++) tensor_set_f64(&t, i, vals[i]);
  return t;
}

/* True when two doubles agree: both NaN, equal (inf included, sign of zero
 * ignored), or within abs/rel tolerance tol. */
static inline bool ew_close(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want)) return got == want;
  return fabs(got - want) <= tol * (1 + fabs(want));
}

/* Checks t's dtype, shape and values; prints the first mismatch. */
static inline bool ew_expect(const tensor *t, smelt_dtype dt, int rank, const int64_t *dims,
                             const double *vals, double tol, const char *what) {
  if (t->dtype != dt || t->rank != rank) {
    fprintf(stderr, "%s: got %s rank %d, want %s rank %d\n", what, dtype_name(t->dtype), t->rank,
            dtype_name(dt), rank);
    return false;
  }
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != dims[i]) {
      fprintf(stderr, "%s: dim %d is %lld, want %lld\n", what, i, (long long)t->dims[i],
              (long long)dims[i]);
      return false;
    }
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; vals && i < n; i++) {
    double g = tensor_get_f64(t, i);
    if (!ew_close(g, vals[i], tol)) {
      fprintf(stderr, "%s: element %lld is %.17g, want %.17g\n", what, (long long)i, g, vals[i]);
      return false;
    }
  }
  return true;
}

/* Exact signed-integer check (values beyond 2^53 too). */
static inline bool ew_expect_i64(const tensor *t, const int64_t *vals, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (tensor_get_i64(t, i) != vals[i]) {
      fprintf(stderr, "%s: element %lld is %lld, want %lld\n", what, (long long)i,
              (long long)tensor_get_i64(t, i), (long long)vals[i]);
      return false;
    }
  return true;
}

/* Runs op on in[0..n_in) with one output. */
static inline smelt_status ew_run(const char *op, int opset, const ir_attr *attrs, int n_attrs,
                                  tensor **in, int n_in, tensor *out) {
  static const ir_attr no_attrs[1];
  memset(out, 0, sizeof *out);
  tensor *outs[] = {out};
  /* harness_run memcpys attrs even when there are none: never pass NULL */
  return harness_run(op, opset, attrs ? attrs : no_attrs, n_attrs, in, n_in, outs, 1);
}

/* Flat index into an input of shape (ra, da) for output multi-index idx of
 * rank r, under numpy broadcasting: the oracle for the strided walk. */
static inline int64_t ew_naive_index(int r, const int64_t *idx, int ra, const int64_t *da) {
  int64_t off = 0;
  for (int i = 0; i < ra; i++) {
    int64_t j = da[i] == 1 ? 0 : idx[r - ra + i];
    off = off * da[i] + j;
  }
  return off;
}
/* Advances a multi-index over dims (row-major). */
static inline void ew_next_index(int r, const int64_t *dims, int64_t *idx) {
  for (int i = r - 1; i >= 0; i--) {
    if (++idx[i] < dims[i]) return;
    idx[i] = 0;
  }
}

/* Static inference of op on inputs that may lack data and have symbolic dims.
 * out receives dtype and shape only. */
static inline smelt_status ew_static_infer(const char *op_type, int opset, const ir_attr *attrs,
                                           int n_attrs, tensor **in, int n_in, tensor *out) {
  ir_graph *g = ir_graph_new(NULL);
  if (!g) return err_nomem("graph", 0);
  int id;
  smelt_status s = ir_graph_add_node(g, "test", op_type, "", n_in, 1, n_attrs, &id);
  if (!s) {
    ir_node *n = &g->nodes[id];
    if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
    n->opset = opset;
    n->op = ops_find("", op_type);
    if (!n->op) s = err_set(SMELT_ERR_UNSUPPORTED, "no op %s", op_type);
    memset(out, 0, sizeof *out);
    out->rank = -1;
    tensor *outs[] = {out};
    op_ctx c = {.graph = g, .node = n, .opset = opset, .n_in = n_in, .n_out = 1,
                .in = in, .out = outs, .static_infer = true};
    if (!s) s = n->op->infer(&c);
    n->n_attrs = 0;
  }
  ir_graph_free(g);
  return s;
}

/* Runs op through node_run with a thread pool of `threads`. */
static inline smelt_status ew_run_pool(const char *op_type, int opset, const ir_attr *attrs,
                                       int n_attrs, tensor **in, int n_in, tensor *out,
                                       int threads) {
  smelt_pool *pool = NULL;
  TRY(pool_create(threads, &pool));
  ir_graph *g = ir_graph_new(NULL);
  smelt_status s = g ? SMELT_OK : err_nomem("graph", 0);
  int id;
  if (!s) s = ir_graph_add_node(g, "test", op_type, "", n_in, 1, n_attrs, &id);
  if (!s) {
    ir_node *n = &g->nodes[id];
    if (n_attrs) memcpy(n->attrs, attrs, sizeof(ir_attr) * (size_t)n_attrs);
    n->opset = opset;
    n->op = ops_find("", op_type);
    for (int i = 0; i < n_in; i++) n->inputs[i] = in[i] ? i : -1;
    n->outputs[0] = n_in;
    memset(out, 0, sizeof *out);
    tensor *outs[] = {out};
    s = node_run(g, id, in, outs, pool, NULL, NULL);
    n->n_attrs = 0;
  }
  ir_graph_free(g);
  pool_free(pool);
  return s;
}

static inline ir_attr ew_attr_int(const char *name, int64_t v) {
  ir_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = IR_ATTR_INT;
  a.i = v;
  return a;
}
static inline ir_attr ew_attr_float(const char *name, float v) {
  ir_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = IR_ATTR_FLOAT;
  a.f = v;
  return a;
}
static inline ir_attr ew_attr_str(const char *name, const char *v) {
  ir_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = IR_ATTR_STRING;
  a.s = v;
  a.s_len = strlen(v);
  return a;
}

#endif
