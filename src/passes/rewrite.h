/* Graph rewriting toolkit shared by the passes.
 *
 * A rewriter wraps one pass's session with the graph: it knows every value's
 * producer and consumers, marks removed nodes dead (they stay in the arrays
 * until rw_end compacts the graph, so node and value ids are stable during a
 * pass), and adds nodes, values and constants with fresh names.
 *
 * Rules every rewrite keeps (the contract with the back half): the graph stays
 * runnable by the eager executor, a graph output keeps its value and name, and
 * a value's dtype and shape never change under its consumers.
 *
 * Adding nodes may move g->nodes: re-read ir_node pointers after rw_add_node. */
#ifndef SMELT_PASSES_REWRITE_H
#define SMELT_PASSES_REWRITE_H

#include "passes/pass.h"

typedef struct rw_uses {
  int *node; /* consumer node per use; a node appears once per input slot or capture */
  int n, cap;
} rw_uses;

typedef struct rewriter {
  ir_graph *g;
  const pass_options *o;
  pass_report *r;
  bool *dead;     /* per node */
  int cap_nodes;
  rw_uses *uses;  /* per value */
  int cap_values;
  int changes;    /* what the pass reports */
  bool touched;   /* the graph's structure changed: compact at rw_end */
  /* rw_add_value: per name base, the suffix to try next (names are only
   * added while a rewriter is open, so the first free one never goes down) */
  struct rw_name_hint {
    char base[32];
    int next;
  } hints[8];
  int n_hints;
} rewriter;

smelt_status rw_begin(rewriter *w, ir_graph *g, const pass_options *o, pass_report *r);
/* Compacts the graph when it changed and frees the rewriter; adds w->changes
 * to *changes.  Passes s through (the rewriter is freed either way). */
smelt_status rw_end(rewriter *w, smelt_status s, int *changes);

/* ---- queries ---- */
static inline ir_node *rw_node(rewriter *w, int id) { return &w->g->nodes[id]; }
static inline ir_value *rw_val(rewriter *w, int v) { return &w->g->values[v]; }
static inline bool rw_live(const rewriter *w, int id) { return !w->dead[id]; }
/* Producing node of v, -1 for inputs, initializers and outer values. */
int rw_producer(const rewriter *w, int v);
/* Uses of v by live nodes (input slots and subgraph captures). */
int rw_n_uses(const rewriter *w, int v);
bool rw_is_output(const rewriter *w, int v);
/* The one live node reading v, if v has exactly one use and is not a graph
 * output; -1 otherwise. */
int rw_sole_user(const rewriter *w, int v);
/* When v is Transpose(W) of a float32 2-D constant W (perm [1,0]) read only as
 * input B of one float32 MatMul with A of rank >= 2: W's value id, which
 * fuse_epilogue hands to smelt.Gemm with transB = 1 instead of copying W
 * transposed (fold leaves such a Transpose alone); -1 otherwise.  Exporters
 * write nn.Linear so when its weight is a graph input bound to a constant
 * (smelt_model_load_bytes_with). */
int rw_transposed_weight(const rewriter *w, int v);
/* The node's op is op_type in the default domain and it is live. */
bool rw_is_op(const rewriter *w, int node, const char *op_type);
/* v's producer if it is a live `op_type` node, else -1. */
int rw_producer_op(const rewriter *w, int v, const char *op_type);
/* The known value of v (initializer or folded), or NULL. */
const tensor *rw_const(const rewriter *w, int v);
/* v is a known numeric tensor with exactly one element: its value. */
bool rw_scalar(const rewriter *w, int v, double *x);
/* v is a known tensor whose every element equals x (exactly). */
bool rw_all_equal(const rewriter *w, int v, double x);
/* Same rank, and every dim equal and either concrete or the same symbol. */
bool rw_same_shape(const ir_value *a, const ir_value *b);
/* Every dim concrete. */
bool rw_concrete(const ir_value *v);
bool rw_has_subgraph(const ir_node *nd);
/* Per node (g->n_nodes of them, in a malloc'ed array the caller frees): some
 * output is a graph output or read by a live node (an input slot or a
 * subgraph capture) -- what dce keeps.  order is a topological order of
 * every node (ir_graph_toposort).  NULL when out of memory. */
bool *rw_live_nodes(const rewriter *w, const int *order);

/* ---- edits ---- */
smelt_status rw_set_input(rewriter *w, int node, int k, int v);
void rw_set_output(rewriter *w, int node, int k, int v);
/* Marks a node dead and drops its uses.  Its outputs must be unused. */
void rw_kill(rewriter *w, int node);
/* Every use of `from` (input slots and subgraph captures) reads `to` instead.
 * Graph outputs are not touched. */
smelt_status rw_replace_uses(rewriter *w, int from, int to);
/* Removes node, whose output `out` equals its input value `in` (a no-op):
 * consumers of `out` read `in`.  When `out` is a graph output, the producer of
 * `in` writes `out` instead (the output keeps its name); that needs `in` to
 * come from a node and not to be a graph output itself.  *done is false (and
 * nothing changed) when the node cannot be removed. */
smelt_status rw_bypass(rewriter *w, int node, int in, int out, bool *done);

/* Changes a node's operator in place (same domain, same arity: Div -> Mul). */
smelt_status rw_set_op(rewriter *w, int node, const char *op_type);
/* Kills node `old` and adds a node (named like it) that writes the same
 * outputs; the caller fills its inputs and attributes. */
smelt_status rw_replace_node(rewriter *w, int old, const char *op_type, const char *domain,
                             int n_inputs, int n_attrs, int *id);

/* Kills node id and adds the same node again (name, op, inputs, outputs,
 * attributes) with one attribute slot more, *slot, for the caller to fill
 * with rw_attr_*; *nid: the new node.  Up to 16 inputs. */
smelt_status rw_with_attr(rewriter *w, int id, int *nid, int *slot);

/* ---- new things ---- */
/* A node whose arrays are sized as given; op resolved by (domain, op_type).
 * Attribute slots are filled with rw_attr_*. */
smelt_status rw_add_node(rewriter *w, const char *name, const char *op_type, const char *domain,
                         int n_inputs, int n_outputs, int n_attrs, int *id);
/* A value named after base (made unique), with like's dtype and shape (like < 0: unknown). */
smelt_status rw_add_value(rewriter *w, const char *base, int like, int *id);
/* A new initializer holding t (taken over: the graph owns it from now on,
 * freed on failure too). */
smelt_status rw_add_constant(rewriter *w, const char *base, tensor *t, int *id);
/* Turns v into an initializer with value t (taken over); its producer must
 * be dead or rewired. */
void rw_make_constant(rewriter *w, int v, tensor *t);
smelt_status rw_attr_int(rewriter *w, int node, int slot, const char *name, int64_t v);
smelt_status rw_attr_float(rewriter *w, int node, int slot, const char *name, float v);
smelt_status rw_attr_string(rewriter *w, int node, int slot, const char *name, const char *s);
smelt_status rw_attr_ints(rewriter *w, int node, int slot, const char *name, const int64_t *v, int n);
/* Copies attribute `a` of another node into slot. */
smelt_status rw_attr_copy(rewriter *w, int node, int slot, const ir_attr *a);

/* A new owning f32/i64... tensor of the given shape (tensor_new). */
smelt_status rw_tensor(tensor **t, smelt_dtype dt, int rank, const int64_t *dims);

/* A node label for logs ("'Conv_3'" or "#12 Conv"), in buf. */
const char *rw_name(const rewriter *w, int node, char *buf, size_t n);

#endif
