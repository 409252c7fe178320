/* AttributeProto → ir_attr.
 *
 * Lists and strings are copied into the graph's arena; tensors get malloc'd
 * headers and subgraphs are ir_graphs whose parent is the node's graph (both
 * freed by ir_graph_free).  Old models omit `type`: it is inferred from the
 * field that holds the value.
 *
 * TYPE_PROTO(S) attributes (e.g. Optional's `type`) have no slot of their own
 * in ir_attr: i (ints[k] for the list) holds the element dtype and s
 * (strings[k]) the kind: "tensor", "sequence", "optional_tensor" or
 * "optional_sequence". */
#include <string.h>

#include "onnx/import_internal.h"
#include "util/err.h"
#include "util/quote.h"

enum {
  A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_T = 5, A_G = 6, A_FLOATS = 7, A_INTS = 8,
  A_STRINGS = 9, A_TENSORS = 10, A_GRAPHS = 11, A_TP = 14, A_TPS = 15, A_TYPE = 20,
  A_REF = 21, A_SPARSE = 22, A_SPARSES = 23, A_NFIELDS = 24
};

typedef struct ascan {
  pb_str name;
  int32_t type;
  bool has[A_NFIELDS];
  pb_field last[A_NFIELDS]; /* last occurrence of each singular field */
  size_t count[A_NFIELDS];  /* occurrences of repeated message/bytes fields */
} ascan;

static smelt_status scan_attr(const pb_msg *am, ascan *s) {
  pb_msg m = *am;
  pb_field f;
  bool more;
  memset(s, 0, sizeof *s);
  s->name.s = "";
  for (;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num >= A_NFIELDS) continue;
    switch (f.num) {
      case A_NAME: TRY(imp_name(&m, &f, "name", &s->name)); break;
      case A_TYPE: TRY(pb_get_i32(&m, &f, "type", &s->type)); break;
      case A_F: TRY(pb_want(&m, &f, PB_I32, "f")); break;
      case A_I: TRY(pb_want(&m, &f, PB_VARINT, "i")); break;
      case A_S: case A_T: case A_G: case A_TP: case A_SPARSE: case A_REF:
      case A_STRINGS: case A_TENSORS: case A_GRAPHS: case A_TPS: case A_SPARSES:
        TRY(pb_want(&m, &f, PB_LEN, "attribute value"));
        break;
      default: break; /* floats/ints may be packed or not: checked when read */
    }
    s->has[f.num] = true;
    s->last[f.num] = f;
    s->count[f.num]++;
  }
}

/* The type old models leave out, from the field that carries the value. */
static ir_attr_type infer_type(const ascan *s) {
  static const struct { int field; ir_attr_type type; } by_field[] = {
      {A_F, IR_ATTR_FLOAT},          {A_I, IR_ATTR_INT},          {A_S, IR_ATTR_STRING},
      {A_T, IR_ATTR_TENSOR},         {A_G, IR_ATTR_GRAPH},        {A_SPARSE, IR_ATTR_SPARSE_TENSOR},
      {A_TP, IR_ATTR_TYPE_PROTO},    {A_FLOATS, IR_ATTR_FLOATS},  {A_INTS, IR_ATTR_INTS},
      {A_STRINGS, IR_ATTR_STRINGS},  {A_TENSORS, IR_ATTR_TENSORS}, {A_GRAPHS, IR_ATTR_GRAPHS},
      {A_SPARSES, IR_ATTR_SPARSE_TENSORS}, {A_TPS, IR_ATTR_TYPE_PROTOS}};
  for (size_t i = 0; i < sizeof by_field / sizeof *by_field; i++)
    if (s->has[by_field[i].field]) return by_field[i].type;
  return IR_ATTR_UNDEFINED;
}

static smelt_status check_list_len(size_t count, int *n) {
  if (count > (size_t)(1 << 28))
    return err_set(SMELT_ERR_UNSUPPORTED, "attribute list has %zu entries", count);
  *n = (int)count;
  return SMELT_OK;
}

static void *list_alloc(ir_graph *g, int n, size_t elem) {
  return arena_alloc(&g->arena, elem * (size_t)(n ? n : 1));
}

static smelt_status read_numbers(const pb_msg *am, const ascan *s, ir_graph *g, ir_attr *a,
                                 bool floats) {
  int field = floats ? A_FLOATS : A_INTS;
  pb_scalar kind = floats ? PB_S_FIXED32 : PB_S_VARINT;
  int n = 0;
  size_t count;
  TRY(pb_rep_count(am, (uint32_t)field, kind, floats ? "floats" : "ints", &count));
  TRY(check_list_len(count, &n));
  void *arr = list_alloc(g, n, floats ? sizeof(float) : sizeof(int64_t));
  if (!arr) return err_nomem("attribute list", (size_t)n * 8);
  pb_rep r;
  pb_rep_init(&r, am, (uint32_t)field, kind, floats ? "floats" : "ints");
  uint64_t v;
  bool more;
  for (int i = 0; i < n; i++) {
    TRY(pb_rep_next(&r, &v, &more));
    if (floats) {
      uint32_t bits = (uint32_t)v;
      memcpy((float *)arr + i, &bits, sizeof(float));
    } else {
      ((int64_t *)arr)[i] = (int64_t)v;
    }
  }
  a->n = n;
  if (floats)
    a->floats = arr;
  else
    a->ints = arr;
  return SMELT_OK;
}

/* Calls fn on each occurrence of repeated message/bytes field `field`. */
typedef smelt_status (*item_fn)(onnx_imp *c, ir_graph *g, const pb_msg *am, const pb_field *f,
                                ir_attr *a, int k);
static smelt_status each_item(onnx_imp *c, ir_graph *g, const pb_msg *am, int field, ir_attr *a,
                              item_fn fn) {
  pb_msg m = *am;
  pb_field f;
  bool more;
  for (int k = 0;;) {
    TRY(pb_next(&m, &f, &more));
    if (!more) return SMELT_OK;
    if (f.num == (uint32_t)field) TRY(fn(c, g, &m, &f, a, k++));
  }
}

static smelt_status item_string(onnx_imp *c, ir_graph *g, const pb_msg *m, const pb_field *f,
                                ir_attr *a, int k) {
  pb_str s;
  TRY(imp_bytes(m, f, "strings", &s));
  return imp_strdup(g, s, &a->strings[k]);
}

static smelt_status item_tensor(onnx_imp *c, ir_graph *g, const pb_msg *m, const pb_field *f,
                                ir_attr *a, int k) {
  pb_msg tm = pb_msg_sub(m, f, "TensorProto");
  bool viewed;
  smelt_status s = imp_tensor_new(c, &tm, &a->tensors[k], NULL, &viewed);
  return s ? imp_prefix(s, "tensors[%d]: ", k) : SMELT_OK;
}

static smelt_status item_graph(onnx_imp *c, ir_graph *g, const pb_msg *m, const pb_field *f,
                               ir_attr *a, int k) {
  pb_msg gm = pb_msg_sub(m, f, "GraphProto");
  smelt_status s = imp_subgraph(c, &gm, g, &a->graphs[k]);
  return s ? imp_prefix(s, "graphs[%d]: ", k) : SMELT_OK;
}

static const char *kind_name(const imp_type *t) {
  if (t->kind == TENSOR_KIND_SEQUENCE) return t->optional ? "optional_sequence" : "sequence";
  return t->optional ? "optional_tensor" : "tensor";
}

static smelt_status item_type(onnx_imp *c, ir_graph *g, const pb_msg *m, const pb_field *f,
                              ir_attr *a, int k) {
  pb_msg tm = pb_msg_sub(m, f, "TypeProto");
  imp_type t;
  TRY(imp_type_proto(c, &tm, g, 0, &t));
  a->ints[k] = t.dtype;
  a->strings[k] = kind_name(&t);
  return SMELT_OK;
}

/* Allocates the n-entry arrays of a message/bytes list and fills them. */
static smelt_status read_items(onnx_imp *c, ir_graph *g, const pb_msg *am, const ascan *s,
                               ir_attr *a) {
  int field = a->type == IR_ATTR_STRINGS ? A_STRINGS
              : a->type == IR_ATTR_TENSORS ? A_TENSORS
              : a->type == IR_ATTR_GRAPHS  ? A_GRAPHS
                                           : A_TPS;
  int n = 0;
  TRY(check_list_len(s->count[field], &n));
  item_fn fn = item_string;
  if (a->type == IR_ATTR_STRINGS) {
    if (!(a->strings = list_alloc(g, n, sizeof(char *)))) return err_nomem("strings", 0);
  } else if (a->type == IR_ATTR_TENSORS) {
    if (!(a->tensors = list_alloc(g, n, sizeof(tensor *)))) return err_nomem("tensors", 0);
    fn = item_tensor;
  } else if (a->type == IR_ATTR_GRAPHS) {
    if (!(a->graphs = list_alloc(g, n, sizeof(ir_graph *)))) return err_nomem("graphs", 0);
    fn = item_graph;
  } else {
    a->strings = list_alloc(g, n, sizeof(char *));
    a->ints = list_alloc(g, n, sizeof(int64_t));
    if (!a->strings || !a->ints) return err_nomem("types", 0);
    fn = item_type;
  }
  a->n = n; /* entries still NULL after a failure are skipped by ir_graph_free */
  return each_item(c, g, am, field, a, fn);
}

static smelt_status read_single(onnx_imp *c, ir_graph *g, const pb_msg *am, const ascan *s,
                                ir_attr *a) {
  const pb_field *f;
  switch (a->type) {
    case IR_ATTR_FLOAT:
      if (s->has[A_F]) TRY(pb_get_f32(am, &s->last[A_F], "f", &a->f));
      return SMELT_OK;
    case IR_ATTR_INT:
      if (s->has[A_I]) TRY(pb_get_i64(am, &s->last[A_I], "i", &a->i));
      return SMELT_OK;
    case IR_ATTR_STRING: {
      pb_str v = {"", 0};
      if (s->has[A_S]) TRY(imp_bytes(am, &s->last[A_S], "s", &v));
      a->s_len = v.n;
      return imp_strdup(g, v, &a->s);
    }
    case IR_ATTR_TENSOR: {
      if (!s->has[A_T]) return err_set(SMELT_ERR_INVALID_MODEL, "TENSOR attribute has no tensor");
      pb_msg tm = pb_msg_sub(am, &s->last[A_T], "TensorProto");
      bool viewed;
      return imp_tensor_new(c, &tm, &a->t, NULL, &viewed);
    }
    case IR_ATTR_GRAPH: {
      if (!s->has[A_G]) return err_set(SMELT_ERR_INVALID_MODEL, "GRAPH attribute has no graph");
      pb_msg gm = pb_msg_sub(am, &s->last[A_G], "GraphProto");
      return imp_subgraph(c, &gm, g, &a->g);
    }
    case IR_ATTR_TYPE_PROTO: {
      if (!s->has[A_TP])
        return err_set(SMELT_ERR_INVALID_MODEL, "TYPE_PROTO attribute has no type");
      f = &s->last[A_TP];
      pb_msg tm = pb_msg_sub(am, f, "TypeProto");
      imp_type t;
      TRY(imp_type_proto(c, &tm, g, 0, &t));
      a->i = t.dtype;
      const char *k = kind_name(&t);
      a->s_len = strlen(k);
      a->s = k;
      return SMELT_OK;
    }
    default:
      return err_set(SMELT_ERR_UNSUPPORTED, "sparse tensor attributes are not supported");
  }
}

static smelt_status attr_body(onnx_imp *c, const pb_msg *am, ir_graph *g, const ascan *s,
                              ir_attr *a) {
  if (s->has[A_REF])
    return err_set(SMELT_ERR_INVALID_MODEL,
                   "ref_attr_name refers to a function attribute, which is only valid inside a "
                   "function body");
  a->type = s->type ? (ir_attr_type)s->type : infer_type(s);
  if (a->type == IR_ATTR_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute has no type and no value");
  switch (a->type) {
    case IR_ATTR_FLOATS: return read_numbers(am, s, g, a, true);
    case IR_ATTR_INTS: return read_numbers(am, s, g, a, false);
    case IR_ATTR_STRINGS: case IR_ATTR_TENSORS: case IR_ATTR_GRAPHS: case IR_ATTR_TYPE_PROTOS:
      return read_items(c, g, am, s, a);
    case IR_ATTR_FLOAT: case IR_ATTR_INT: case IR_ATTR_STRING: case IR_ATTR_TENSOR:
    case IR_ATTR_GRAPH: case IR_ATTR_TYPE_PROTO: case IR_ATTR_SPARSE_TENSOR:
    case IR_ATTR_SPARSE_TENSORS:
      return read_single(c, g, am, s, a);
    default:
      return err_set(SMELT_ERR_UNSUPPORTED, "attribute type %d is not supported", (int)s->type);
  }
}

smelt_status imp_attr(onnx_imp *c, const pb_msg *am, ir_graph *g, int node_id, ir_attr *a) {
  ascan s;
  smelt_status st = scan_attr(am, &s);
  if (!st && !s.name.n) st = err_set(SMELT_ERR_INVALID_MODEL, "attribute has no name");
  if (!st) st = imp_strdup(g, s.name, &a->name);
  if (!st) st = attr_body(c, am, g, &s, a);
  if (st) return imp_prefix(st, "attribute %s: ", q_n(s.name.s, s.name.n));
  return SMELT_OK;
}
