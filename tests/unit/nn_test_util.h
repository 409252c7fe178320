/* Helpers for the neural-network op tests: deterministic random tensors,
 * attribute builders, a tolerance compare, and running a node on a thread
 * pool (the plain harness runs without one). */
#ifndef SMELT_TEST_NN_TEST_UTIL_H
#define SMELT_TEST_NN_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "op_harness.h"

static uint64_t nt_rng_state = 0x9e3779b97f4a7c15ull;
static inline double nt_uniform(void) { /* [-1, 1) */
  nt_rng_state = nt_rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(nt_rng_state >> 11) / (double)(1ull << 52) - 1.0;
}

static inline void nt_rand(tensor *t, smelt_dtype dt, int rank, const int64_t *dims) {
  tensor_alloc(t, dt, rank, dims);
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) tensor_set_f64(t, i, nt_uniform());
}

static inline ir_attr nt_int(const char *name, int64_t v) {
  ir_attr a = {.name = name, .type = IR_ATTR_INT, .i = v};
  return a;
}
static inline ir_attr nt_float(const char *name, float v) {
  ir_attr a = {.name = name, .type = IR_ATTR_FLOAT, .f = v};
  return a;
}
static inline ir_attr nt_ints(const char *name, int n, int64_t *v) {
  ir_attr a = {.name = name, .type = IR_ATTR_INTS, .n = n, .ints = v};
  return a;
}
static inline ir_attr nt_str(const char *name, const char *s) {
  ir_attr a = {.name = name, .type = IR_ATTR_STRING, .s = s, .s_len = strlen(s)};
  return a;
}

/* Max |got - want| / (atol + rtol |want|) over all elements; > 1 fails.
 * Prints the first offending element. */
static inline int nt_close(const tensor *got, const double *want, int64_t n, double atol,
                           double rtol, const char *what) {
  if (tensor_numel(got) != n) {
    fprintf(stderr, "%s: %lld elements, expected %lld\n", what, (long long)tensor_numel(got),
            (long long)n);
    return 0;
  }
  for (int64_t i = 0; i < n; i++) {
    double g = tensor_get_f64(got, i), w = want[i];
    bool ok = (isnan(w) && isnan(g)) || (isinf(w) && g == w) || fabs(g - w) <= atol + rtol * fabs(w);
    if (!ok) {
      fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i, g, w);
      return 0;
    }
  }
  return 1;
}

/* harness_run on a thread pool (pool may be NULL). */
static inline smelt_status nt_run_pool(smelt_pool *pool, const char *op_type, int opset,
                                       const ir_attr *attrs, int n_attrs, tensor **in, int n_in,
                                       tensor **out, int n_out) {
  return harness_run_pool(pool, op_type, opset, attrs, n_attrs, in, n_in, out, n_out);
}

/* harness_run without a pool (and without passing NULL to memcpy). */
static inline smelt_status nt_run(const char *op_type, int opset, const ir_attr *attrs, int n_attrs,
                                  tensor **in, int n_in, tensor **out, int n_out) {
  return nt_run_pool(NULL, op_type, opset, attrs, n_attrs, in, n_in, out, n_out);
}

/* Static inference of one node on shape-only inputs (data NULL, dims may be
 * symbolic).  Outputs receive dtype and shape. */
static inline smelt_status nt_infer(const char *op_type, int opset, const ir_attr *attrs,
                                    int n_attrs, tensor **in, int n_in, tensor **out, int n_out) {
  return harness_infer(op_type, opset, attrs, n_attrs, in, n_in, out, n_out);
}

/* A shape-only tensor for nt_infer. */
static inline tensor nt_shape(smelt_dtype dt, int rank, const int64_t *dims) {
  tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  if (rank > 0) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* True if the last error message contains s. */
static inline int nt_err_has(const char *s) { return strstr(smelt_last_error(), s) != NULL; }

static inline double *nt_f64(const tensor *t) {
  int64_t n = tensor_numel(t);
  double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; i++) d[i] = tensor_get_f64(t, i);
  return d;
}

#endif
