/* A readable listing of a graph, for SMELT_DEBUG dumps, tests and humans:
 *
 *   graph 'main'  opsets: ai.onnx=17
 *     input  %x:f32[batch,64]
 *     const  %w:f32[64,10]
 *     const  %k:i64[2] = [0, -1]
 *     #3  %y:f32[batch,10] = Gemm(%x, %w, %b) {transB=1}  'fc'
 *     output %y
 *
 * Nodes come in topological order with their index; values are %name:type[shape]
 * (a value whose content is known is tagged "=const").  Small constants show
 * their elements. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "util/quote.h"

#define PRINT_MAX_ELEMS 8

static const char *short_dtype(smelt_dtype t) {
  switch (t) {
    case SMELT_F32: return "f32";
    case SMELT_F16: return "f16";
    case SMELT_BF16: return "bf16";
    case SMELT_F64: return "f64";
    case SMELT_I8: return "i8";
    case SMELT_I16: return "i16";
    case SMELT_I32: return "i32";
    case SMELT_I64: return "i64";
    case SMELT_U8: return "u8";
    case SMELT_U16: return "u16";
    case SMELT_U32: return "u32";
    case SMELT_U64: return "u64";
    case SMELT_BOOL: return "bool";
    case SMELT_UNDEFINED: return "?";
    default: return dtype_name(t);
  }
}

static void indent(FILE *f, int depth) {
  for (int i = 0; i < depth; i++) fputs("  ", f);
}

static void print_elems(FILE *f, const tensor *t) {
  int64_t n = tensor_numel(t);
  if (n < 0 || !t->data || t->kind != TENSOR_KIND_TENSOR || !dtype_size(t->dtype) ||
      t->dtype == SMELT_C64 || t->dtype == SMELT_C128)
    return;
  fputs(" = [", f);
  for (int64_t i = 0; i < n && i < PRINT_MAX_ELEMS; i++) {
    if (i) fputs(", ", f);
    if (dtype_is_float(t->dtype)) fprintf(f, "%.8g", tensor_get_f64(t, i));
    else fprintf(f, "%lld", (long long)tensor_get_i64(t, i));
  }
  fputs(n > PRINT_MAX_ELEMS ? ", ...]" : "]", f);
}

static void print_type(FILE *f, const ir_graph *g, smelt_dtype dt, int rank, const int64_t *dims,
                       tensor_kind kind) {
  char sh[512];
  const ir_graph *root = g; /* symbols are interned per graph */
  if (kind == TENSOR_KIND_SEQUENCE) fputs("seq<", f);
  fputs(short_dtype(dt), f);
  if (rank >= 0) fputs(shape_str(sh, sizeof sh, rank, dims, root->syms), f);
  else fputs("[*]", f);
  if (kind == TENSOR_KIND_SEQUENCE) fputc('>', f);
}

static void print_value(FILE *f, const ir_graph *g, int v) {
  if (v < 0) {
    fputs("_", f);
    return;
  }
  const ir_value *val = &g->values[v];
  fprintf(f, "%%%s:", val->name);
  print_type(f, g, val->dtype, val->rank, val->dims, val->kind);
}

static void print_string(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n && i < 200; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (isprint(c)) fputc(c, f);
    else fprintf(f, "\\x%02x", c);
  }
  fputs(n > 200 ? "...\"" : "\"", f);
}

static void print_attr(FILE *f, const ir_graph *g, const ir_attr *a) {
  fprintf(f, "%s=", a->name ? a->name : "?");
  switch (a->type) {
    case IR_ATTR_FLOAT: fprintf(f, "%.8g", a->f); break;
    case IR_ATTR_INT: fprintf(f, "%lld", (long long)a->i); break;
    case IR_ATTR_STRING: print_string(f, a->s ? a->s : "", a->s ? a->s_len : 0); break;
    case IR_ATTR_FLOATS:
    case IR_ATTR_INTS:
      fputc('[', f);
      for (int k = 0; k < a->n; k++) {
        if (k) fputs(", ", f);
        if (k == 32) {
          fputs("...", f);
          break;
        }
        if (a->type == IR_ATTR_FLOATS) fprintf(f, "%.8g", a->floats[k]);
        else fprintf(f, "%lld", (long long)a->ints[k]);
      }
      fputc(']', f);
      break;
    case IR_ATTR_STRINGS:
      fputc('[', f);
      for (int k = 0; k < a->n; k++) {
        if (k) fputs(", ", f);
        const char *s = a->strings && a->strings[k] ? a->strings[k] : "";
        print_string(f, s, strlen(s));
      }
      fputc(']', f);
      break;
    case IR_ATTR_TENSOR:
      if (a->t) {
        print_type(f, g, a->t->dtype, a->t->rank, a->t->dims, a->t->kind);
        print_elems(f, a->t);
      }
      break;
    case IR_ATTR_GRAPH: fprintf(f, "<graph %s>", q(a->g ? a->g->name : "")); break;
    case IR_ATTR_GRAPHS: fprintf(f, "<%d graphs>", a->n); break;
    case IR_ATTR_TENSORS: fprintf(f, "<%d tensors>", a->n); break;
    default: fprintf(f, "<attribute type %d>", (int)a->type); break;
  }
}

static void print_graph(FILE *f, const ir_graph *g, int depth);

static void print_node(FILE *f, const ir_graph *g, int id, int depth) {
  const ir_node *nd = &g->nodes[id];
  indent(f, depth);
  fprintf(f, "#%-4d ", id);
  for (int k = 0; k < nd->n_outputs; k++) {
    if (k) fputs(", ", f);
    print_value(f, g, nd->outputs[k]);
    if (nd->outputs[k] >= 0 && g->values[nd->outputs[k]].constant) fputs("=const", f);
  }
  fprintf(f, " = %s%s%s(", *nd->domain ? q_ident(nd->domain) : "", *nd->domain ? "." : "", q_ident(nd->op_type));
  for (int k = 0; k < nd->n_inputs; k++) {
    if (k) fputs(", ", f);
    if (nd->inputs[k] < 0) fputs("_", f);
    else fprintf(f, "%%%s", g->values[nd->inputs[k]].name);
  }
  fputc(')', f);
  if (nd->n_attrs) {
    fputs(" {", f);
    for (int k = 0; k < nd->n_attrs; k++) {
      if (k) fputs(", ", f);
      print_attr(f, g, &nd->attrs[k]);
    }
    fputc('}', f);
  }
  if (*nd->name) fprintf(f, "  %s", q(nd->name));
  if (!nd->op) fputs("  (unsupported)", f);
  fputc('\n', f);
  for (int k = 0; k < nd->n_attrs; k++) {
    const ir_attr *a = &nd->attrs[k];
    if (a->type == IR_ATTR_GRAPH && a->g) print_graph(f, a->g, depth + 2);
    for (int m = 0; a->type == IR_ATTR_GRAPHS && a->graphs && m < a->n; m++)
      if (a->graphs[m]) print_graph(f, a->graphs[m], depth + 2);
  }
}

static void print_graph(FILE *f, const ir_graph *g, int depth) {
  indent(f, depth);
  fprintf(f, "graph %s", q(g->name));
  for (int i = 0; i < g->n_opsets; i++)
    fprintf(f, "%s%s=%lld", i ? ", " : "  opsets: ", *g->opsets[i].domain ? g->opsets[i].domain : "ai.onnx",
            (long long)g->opsets[i].version);
  fprintf(f, "  (%d nodes, %d values)\n", g->n_nodes, g->n_values);
  for (int k = 0; k < g->n_inputs; k++) {
    indent(f, depth + 1);
    fputs("input  ", f);
    print_value(f, g, g->inputs[k]);
    fputc('\n', f);
  }
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *val = &g->values[v];
    if (!(val->flags & (IR_VALUE_INITIALIZER | IR_VALUE_OUTER)) || (val->flags & IR_VALUE_INPUT)) continue;
    indent(f, depth + 1);
    fputs(val->flags & IR_VALUE_OUTER ? "outer  " : "const  ", f);
    print_value(f, g, v);
    if (val->constant) print_elems(f, val->constant);
    fputc('\n', f);
  }
  int *order = NULL;
  if (ir_graph_toposort(g, &order)) {
    indent(f, depth + 1);
    fputs("(no topological order; nodes in file order)\n", f);
  }
  for (int k = 0; k < g->n_nodes; k++) print_node(f, g, order ? order[k] : k, depth + 1);
  free(order);
  for (int k = 0; k < g->n_outputs; k++) {
    indent(f, depth + 1);
    fputs("output ", f);
    print_value(f, g, g->outputs[k]);
    fputc('\n', f);
  }
}

void ir_graph_print(FILE *f, const ir_graph *g) { print_graph(f, g, 0); }
