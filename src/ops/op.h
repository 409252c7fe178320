/* Operators: type/shape inference and reference kernels.
 *
 * One op_def per ONNX op.  Families (elementwise, shape, nn, ...) each live in
 * one file that defines a table `const op_def op_family_NAME[]`, ended by an
 * entry with name NULL, and is listed once in families.def.
 *
 * Both functions get an op_ctx.  infer() fills out[i]->dtype/rank/dims from the
 * inputs and attributes.  It runs twice in different worlds:
 *  - statically (ctx->static_infer): input dims may be symbolic (< 0) and
 *    in[i]->data may be NULL (value unknown); use it when known (shape ops);
 *    leave output dims DIM_UNKNOWN (or rank -1) where they cannot be known;
 *  - at run time: all inputs concrete with data; out dims must be concrete.
 * run() computes the outputs.  The executor allocates each output from the
 * shape infer() produced, unless the op sets alloc_outputs_in_run (data-dependent
 * shapes, sequences), in which case run() calls tensor_alloc itself on out[i].
 *
 * Absent optional inputs are NULL in in[].  Outputs the graph does not use are
 * still passed (never NULL) so kernels need not check.
 * Errors: return err_set(...) with what is wrong; the executor prefixes the
 * node name.  Never abort or assert on anything a model or input controls. */
#ifndef SMELT_OPS_OP_H
#define SMELT_OPS_OP_H

#include "ir/ir.h"
#include "parallel/pool.h"

typedef struct op_ctx op_ctx;
/* Per-node prepared data (packed weights) owned by the session: ops/op_cache.h. */
typedef struct op_cache op_cache;
/* A plan step's memo of what its op worked out on a run: ops/op_memo.h. */
typedef struct op_memo op_memo;

typedef struct op_def {
  const char *name;
  const char *domain;          /* "" for ai.onnx */
  int min_inputs, max_inputs;  /* max -1: variadic */
  int min_outputs, max_outputs;
  smelt_status (*infer)(op_ctx *c);
  smelt_status (*run)(op_ctx *c);
  bool alloc_outputs_in_run;
} op_def;

/* Output 0 holds exactly input 0's bytes in the same order (Reshape,
 * Flatten, Squeeze, Unsqueeze, Identity; ops/shape.c): an executor that owns
 * input 0 and reads it nowhere else may hand its buffer over
 * (node_run_alias). */
bool op_is_view(const op_def *op);

/* Runs a subgraph (control-flow bodies): inputs bound positionally to the
 * subgraph's inputs; outer-scope values resolved by the executor.  outs[i]
 * receive owning tensors the caller releases. */
typedef smelt_status (*op_subgraph_fn)(void *exec, const ir_graph *body, int n_in,
                                       tensor *const *ins, int n_out, tensor *outs);

struct op_ctx {
  const ir_graph *graph;
  const ir_node *node;
  int opset;
  int n_in, n_out;
  tensor **in;    /* n_in entries; NULL for an absent optional input */
  tensor **out;   /* n_out entries */
  bool static_infer;
  smelt_pool *pool;        /* NULL during static inference */
  op_subgraph_fn run_subgraph; /* NULL during static inference */
  void *exec;
  op_cache *cache;         /* this node's cache in the session; NULL outside one */
  op_memo *memo;           /* this plan step's run memo (ops/op_memo.h); NULL outside a plan */
};

/* Finds the op for (domain, op_type); NULL if smelt has none. */
const op_def *ops_find(const char *domain, const char *op_type);

/* The op's prepare function, or NULL: it prepares what run would prepare on
 * its first call (packed or transformed constant weights, into c->cache)
 * from the inputs' shapes and the constant inputs' data alone (non-constant
 * inputs come with data NULL, outputs as shapes only).  A compiled plan calls
 * it for every step when it is made, so the first run is as fast as the rest. */
typedef smelt_status (*op_prepare_fn)(op_ctx *c);
op_prepare_fn ops_prepare_fn(const op_def *op);
/* The op's describe function, or NULL: one line (into buf, n bytes) naming
 * the kernel its run would take for these inputs (a context built as for
 * prepare: shapes, constant data), for `smelt compile --explain`. */
typedef smelt_status (*op_describe_fn)(op_ctx *c, char *buf, size_t n);
op_describe_fn ops_describe_fn(const op_def *op);
/* Calls fn for every registered op (for listings). */
void ops_foreach(void (*fn)(const op_def *op, void *user), void *user);

/* ---- helpers for op files ---- */
static inline tensor *op_in(op_ctx *c, int i) { return i < c->n_in ? c->in[i] : NULL; }
int64_t op_attr_int(op_ctx *c, const char *name, int64_t dflt);
float op_attr_float(op_ctx *c, const char *name, float dflt);
/* Normalizes a possibly negative axis into [0, rank); error naming the attribute if out of range. */
smelt_status op_axis(int64_t axis, int rank, const char *what, int *out);
/* Numpy broadcast of two shapes (symbolic-aware); error if incompatible. */
smelt_status op_broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db,
                                int *rout, int64_t *dout);
/* Sets output i's type and shape. */
void op_set_out(op_ctx *c, int i, smelt_dtype dt, int rank, const int64_t *dims);
/* Copies input j's type and shape to output i. */
void op_out_like(op_ctx *c, int i, int j);
/* True if the input exists and has a known value (always true at run time). */
static inline bool op_value_known(op_ctx *c, int i) {
  tensor *t = op_in(c, i);
  return t && t->data;
}
/* Checks input i's dtype is one of the given list (ends with SMELT_UNDEFINED). */
smelt_status op_check_dtype(op_ctx *c, int i, const smelt_dtype *allowed);

#endif
