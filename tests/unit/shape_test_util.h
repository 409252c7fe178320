/* Helpers for the shape/data-movement op tests: tensors of any dtype from a
 * list of doubles, static (symbolic) inference of one node, comparisons. */
#ifndef SMELT_TEST_SHAPE_TEST_UTIL_H
#define SMELT_TEST_SHAPE_TEST_UTIL_H

#include <stdarg.h>

#include "check.h"
#include "op_harness.h"
#include "ops/shape_util.h"

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})

/* A tensor of dtype dt and the given shape, filled with vals (or i % 101 if
 * NULL, small enough for every dtype). */
static inline tensor mk(smelt_dtype dt, int rank, const int64_t *dims, const double *vals) {
  tensor t;
  if (tensor_alloc(&t, dt, rank, dims)) {
    fprintf(stderr, "mk: %s\n", smelt_last_error());
    memset(&t, 0, sizeof t);
    return t;
  }
  int64_t n = tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) tensor_set_f64(&t, i, vals ? vals[i] : (double)(i % 101));
  return t;
}

/* A shape-only tensor (no value) for static inference; dims may be symbolic. */
static inline tensor mk_shape(smelt_dtype dt, int rank, const int64_t *dims) {
  tensor t = {0};
  t.dtype = dt;
  t.rank = rank;
  if (rank > 0) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
  return t;
}

/* True if t has the given shape and values (compared as doubles). */
static inline bool same(const tensor *t, int rank, const int64_t *dims, const double *vals) {
  if (t->rank != rank) {
    fprintf(stderr, "  rank %d, expected %d\n", t->rank, rank);
    return false;
  }
  for (int i = 0; i < rank; i++)
    if (t->dims[i] != dims[i]) {
      fprintf(stderr, "  dim %d is %lld, expected %lld\n", i, (long long)t->dims[i],
              (long long)dims[i]);
      return false;
    }
  if (!vals) return true;
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++)
    if (tensor_get_f64(t, i) != vals[i]) {
      fprintf(stderr, "  element %lld is %g, expected %g\n", (long long)i, tensor_get_f64(t, i),
              vals[i]);
      return false;
    }
  return true;
}

/* True if a and b have the same dtype, shape and bytes. */
static inline bool same_bytes(const tensor *a, const tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->nbytes != b->nbytes) {
    fprintf(stderr, "  dtype/rank/bytes differ: %s/%d/%zu vs %s/%d/%zu\n", dtype_name(a->dtype),
            a->rank, a->nbytes, dtype_name(b->dtype), b->rank, b->nbytes);
    return false;
  }
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return !a->nbytes || !memcmp(a->data, b->data, a->nbytes);
}

/* Runs op_type's static inference on shape-only (or valued) inputs. */
static inline smelt_status infer_static(const char *op_type, int opset, const ir_attr *attrs,
                                        int n_attrs, tensor **in, int n_in, tensor **out,
                                        int n_out) {
  return harness_infer(op_type, opset, attrs, n_attrs, in, n_in, out, n_out);
}

/* Attribute constructors. */
static inline ir_attr attr_i(const char *name, int64_t v) {
  return (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v};
}
static inline ir_attr attr_f(const char *name, float v) {
  return (ir_attr){.name = name, .type = IR_ATTR_FLOAT, .f = v};
}
static inline ir_attr attr_s(const char *name, const char *v) {
  return (ir_attr){.name = name, .type = IR_ATTR_STRING, .s = v, .s_len = strlen(v)};
}
static inline ir_attr attr_ints(const char *name, int n, const int64_t *v) {
  return (ir_attr){.name = name, .type = IR_ATTR_INTS, .n = n, .ints = (int64_t *)v};
}
static inline ir_attr attr_floats(const char *name, int n, const float *v) {
  return (ir_attr){.name = name, .type = IR_ATTR_FLOATS, .n = n, .floats = (float *)v};
}
static inline ir_attr attr_t(const char *name, tensor *t) {
  return (ir_attr){.name = name, .type = IR_ATTR_TENSOR, .t = t};
}

/* Runs an op with n_out outputs into outs[] (released again on failure). */
static inline smelt_status runn(const char *op, int opset, const ir_attr *attrs, int na,
                                tensor **in, int n_in, tensor *outs, int n_out) {
  tensor *o[16];
  for (int i = 0; i < n_out; i++) {
    memset(&outs[i], 0, sizeof outs[i]);
    o[i] = &outs[i];
  }
  smelt_status s = harness_run(op, opset, attrs, na, in, n_in, o, n_out);
  if (s)
    for (int i = 0; i < n_out; i++) tensor_release(&outs[i]);
  return s;
}

/* Runs a one-output op (out zeroed on failure). */
static inline smelt_status run1(const char *op, int opset, const ir_attr *attrs, int na,
                                tensor **in, int n_in, tensor *out) {
  return runn(op, opset, attrs, na, in, n_in, out, 1);
}

/* Every dtype class the byte movers must handle: 1, 2, 4, 8 bytes. */
static const smelt_dtype all_sizes[] = {SMELT_U8, SMELT_BOOL, SMELT_I8, SMELT_F16, SMELT_BF16,
                                        SMELT_I16, SMELT_F32, SMELT_I32, SMELT_U32, SMELT_F64,
                                        SMELT_I64, SMELT_U64};
#define N_ALL_SIZES ((int)(sizeof all_sizes / sizeof *all_sizes))

#endif
