/* The IR: a graph of nodes and values.
 *
 * Values and nodes live in growable arrays and are referred to by index (ids
 * stay valid as the graph grows).  Every string and array hanging off the graph
 * is allocated from graph->arena and freed with the graph.  Constant tensors
 * (initializers) are owned by the graph unless they view the model file.
 *
 * Subgraphs (If/Loop/Scan bodies) are ir_graph objects with parent set; a value
 * captured from an enclosing scope appears in the subgraph with IR_VALUE_OUTER
 * and outer_id naming the value in graph->parent. */
#ifndef SMELT_IR_IR_H
#define SMELT_IR_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/quant.h"
#include "ir/tensor.h"
#include "util/arena.h"

enum {
  IR_VALUE_INPUT = 1u << 0,       /* a graph input */
  IR_VALUE_OUTPUT = 1u << 1,      /* a graph output */
  IR_VALUE_INITIALIZER = 1u << 2, /* constant from the model file */
  IR_VALUE_OUTER = 1u << 3,       /* captured from the enclosing graph */
  IR_VALUE_OPTIONAL = 1u << 4     /* optional type: may hold no value; kind/dtype/dims
                                     describe the element when there is one */
};

typedef struct ir_value {
  const char *name;
  smelt_dtype dtype;      /* SMELT_UNDEFINED if not known yet */
  int rank;               /* -1 if not known */
  int64_t dims[SMELT_MAX_RANK]; /* see DIM_* in tensor.h */
  tensor_kind kind;       /* tensor, sequence or optional */
  tensor *constant;       /* known value (initializer or folded), else NULL */
  int producer;           /* node index, -1 for inputs/initializers/outer */
  int outer_id;           /* with IR_VALUE_OUTER: the value id in graph->parent */
  uint32_t flags;
  ir_quant quant;         /* the element type a reader computes with (ir/quant.h); scheme NONE: dtype's */
} ir_value;

typedef enum ir_attr_type {
  IR_ATTR_UNDEFINED = 0,
  IR_ATTR_FLOAT = 1,
  IR_ATTR_INT = 2,
  IR_ATTR_STRING = 3,
  IR_ATTR_TENSOR = 4,
  IR_ATTR_GRAPH = 5,
  IR_ATTR_FLOATS = 6,
  IR_ATTR_INTS = 7,
  IR_ATTR_STRINGS = 8,
  IR_ATTR_TENSORS = 9,
  IR_ATTR_GRAPHS = 10,
  IR_ATTR_SPARSE_TENSOR = 11,
  IR_ATTR_SPARSE_TENSORS = 12,
  IR_ATTR_TYPE_PROTO = 13,
  IR_ATTR_TYPE_PROTOS = 14
} ir_attr_type;

struct ir_graph;

/* TYPE_PROTO(S) attributes (e.g. Optional's `type`) reuse the fields: i (or
 * ints[k]) holds the element dtype and s (or strings[k]) the kind, one of
 * "tensor", "sequence", "optional_tensor", "optional_sequence". */
typedef struct ir_attr {
  const char *name;
  ir_attr_type type;
  float f;
  int64_t i;
  const char *s;        /* STRING: bytes (NUL-terminated copy), length s_len */
  size_t s_len;
  tensor *t;            /* TENSOR */
  struct ir_graph *g;   /* GRAPH */
  int n;                /* element count of the list kinds below */
  float *floats;
  int64_t *ints;
  const char **strings;
  tensor **tensors;
  struct ir_graph **graphs;
} ir_attr;

struct op_def;

typedef struct ir_node {
  const char *name;     /* never NULL; "" if the model gave none */
  const char *op_type;
  const char *domain;   /* "" for the default ONNX domain */
  int opset;            /* opset version imported for domain */
  int n_inputs, n_outputs;
  int *inputs;          /* value ids; -1 = optional input not given */
  int *outputs;         /* value ids; -1 = optional output not wanted */
  int n_attrs;
  ir_attr *attrs;
  const struct op_def *op; /* resolved kernel/inference, NULL if unsupported */
} ir_node;

typedef struct ir_opset {
  const char *domain;
  int64_t version;
} ir_opset;

typedef struct ir_graph {
  arena arena;
  struct ir_graph *parent;
  const char *name;
  ir_node *nodes;
  int n_nodes, cap_nodes;
  ir_value *values;
  int n_values, cap_values;
  int *inputs, n_inputs, cap_inputs;   /* value ids */
  int *outputs, n_outputs, cap_outputs;
  const char **syms;                   /* symbolic dimension names */
  int n_syms, cap_syms;
  ir_opset *opsets;
  int n_opsets;
  struct ir_name_map *names;           /* value name -> id */
  struct ir_name_map *sym_names;       /* symbol name -> index in syms */
} ir_graph;

/* ---- building ---- */
ir_graph *ir_graph_new(ir_graph *parent);      /* NULL on allocation failure */
void ir_graph_free(ir_graph *g);               /* frees subgraphs and owned constants */
/* Adds a value named name (copied); fails if the name exists in this graph. */
smelt_status ir_graph_add_value(ir_graph *g, const char *name, int *id);
/* Finds a value by name in this graph only; -1 if absent. */
int ir_graph_find_value(const ir_graph *g, const char *name);
/* Finds name in g, then its enclosing graphs; when found in an ancestor, adds an
 * IR_VALUE_OUTER value to g (and to the graphs in between).  -1 if absent. */
int ir_graph_resolve_value(ir_graph *g, const char *name);
/* Appends a node; arrays are allocated from the arena and zeroed (inputs and
 * outputs set to -1).  *id receives its index. */
smelt_status ir_graph_add_node(ir_graph *g, const char *name, const char *op_type,
                               const char *domain, int n_inputs, int n_outputs, int n_attrs,
                               int *id);
smelt_status ir_graph_add_input(ir_graph *g, int value_id);
smelt_status ir_graph_add_output(ir_graph *g, int value_id);
/* Interns a symbolic dimension name; returns its DIM_SYM encoding. */
smelt_status ir_graph_sym(ir_graph *g, const char *name, int64_t *dim);
/* Opset version of domain ("" and "ai.onnx" are the same), searching parents; -1 if none. */
int64_t ir_graph_opset(const ir_graph *g, const char *domain);

/* ---- attributes ---- */
const ir_attr *ir_attr_find(const ir_node *n, const char *name);
int64_t ir_attr_int(const ir_node *n, const char *name, int64_t dflt);
float ir_attr_float(const ir_node *n, const char *name, float dflt);
/* String attribute or dflt. */
const char *ir_attr_string(const ir_node *n, const char *name, const char *dflt);
/* INTS attribute: sets *count and returns the array; NULL (count 0) if absent. */
const int64_t *ir_attr_ints(const ir_node *n, const char *name, int *count);
const float *ir_attr_floats(const ir_node *n, const char *name, int *count);

/* ---- analysis ---- */
/* Node indices in an order where producers come first.  Fails on a cycle,
 * naming a node on it.  *order is malloc'd: the caller frees it. */
smelt_status ir_graph_toposort(const ir_graph *g, int **order);
/* Every value of g a node reads: its inputs and what its subgraphs capture from
 * g.  *deps is malloc'd (the caller frees it); may repeat ids. */
smelt_status ir_node_deps(const ir_graph *g, const ir_node *nd, int **deps, int *n);
/* Checks structure: inputs defined, single producer per value, outputs produced,
 * ops known.  Messages name the node. */
smelt_status ir_graph_validate(const ir_graph *g);
/* Type and shape inference over a graph: ir_graph_infer in ops/infer.h (it
 * calls the ops' infer functions, so it lives above them). */

/* "node 'name' (OpType)" or "node #i (OpType)" for messages. */
const char *ir_node_label(const ir_graph *g, int node_id, char *buf, size_t n);

/* ---- copies and listings (clone.c, print.c) ---- */
/* Deep copy of src: nodes, values, attributes, symbols, opsets, the name map
 * and subgraphs (their parent links point into the copy).  Constants and
 * attribute tensors of the copy are non-owning VIEWS of src's data: src (and
 * what src views, e.g. the mapped model file) must outlive the copy.
 * Constants a pass later puts on the copy are owned by the copy.
 * *out is the caller's (ir_graph_free). */
smelt_status ir_graph_clone(const ir_graph *src, ir_graph **out);
/* Removes the nodes with dead[i] set (dead may be NULL: none) and every value
 * that no remaining node, subgraph capture, graph input or graph output refers
 * to (unused initializers included).  In place: g keeps its address, but node
 * and value ids are renumbered (order preserved).  Heap objects (constants,
 * attribute tensors, subgraphs) of what remains are kept, not copied. */
smelt_status ir_graph_compact(ir_graph *g, const bool *dead);
/* A readable listing: inputs, constants, then one line per node in
 * topological order, "%y:f32[2,3] = Op(%a, %b) {attr=...}", subgraphs
 * indented under their node. */
void ir_graph_print(FILE *f, const ir_graph *g);

#endif
