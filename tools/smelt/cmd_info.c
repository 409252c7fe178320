/* smelt info MODEL */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util/quote.h"

typedef struct op_count {
  const char *op;
  int n;
} op_count;

static int by_count(const void *a, const void *b) {
  const op_count *x = a, *y = b;
  return x->n != y->n ? y->n - x->n : strcmp(x->op, y->op);
}

static void print_values(const ir_graph *g, const int *ids, int n) {
  for (int k = 0; k < n; k++) {
    const ir_value *v = &g->values[ids[k]];
    char sh[256];
    const char *kind = v->kind == TENSOR_KIND_SEQUENCE ? "sequence of " : "";
    printf("  %-24s %s%s %s\n", q_ident(v->name), kind, dtype_name(v->dtype), shape_str(sh, sizeof sh, v->rank, v->dims, g->syms));
  }
}

static void print_histogram(const ir_graph *g) {
  op_count *c = calloc((size_t)g->n_nodes + 1, sizeof *c);
  int n = 0, unsupported = 0;
  if (!c) return;
  for (int i = 0; i < g->n_nodes; i++) {
    int j = 0;
    while (j < n && strcmp(c[j].op, g->nodes[i].op_type)) j++;
    if (j == n) c[n++].op = g->nodes[i].op_type;
    c[j].n++;
    unsupported += !g->nodes[i].op;
  }
  qsort(c, (size_t)n, sizeof *c, by_count);
  printf("nodes: %d (%d op types)\n", g->n_nodes, n);
  for (int j = 0; j < n; j++) printf("  %-24s %d\n", q_ident(c[j].op), c[j].n);
  if (unsupported) {
    printf("unsupported by smelt:");
    for (int i = 0; i < g->n_nodes; i++)
      if (!g->nodes[i].op) {
        bool seen = false;
        for (int k = 0; k < i; k++) seen |= !g->nodes[k].op && !strcmp(g->nodes[k].op_type, g->nodes[i].op_type);
        if (!seen) printf(" %s", q_ident(g->nodes[i].op_type));
      }
    printf("\n");
  }
  free(c);
}

int cmd_info(int argc, char **argv) {
  if (argc != 2 || !strcmp(argv[1], "--help")) {
    printf("usage: smelt info MODEL\n\n"
           "Prints the model's inputs and outputs (dtype and shape, symbolic dims by name),\n"
           "opsets, an op histogram and the parameter count and bytes.\n");
    return argc == 2 ? 0 : 2;
  }
  smelt_model *m;
  if (smelt_model_load(argv[1], &m)) return cli_fail(NULL);
  const onnx_model *om = m->onnx;
  const ir_graph *g = om->graph;
  printf("model: %s\n", argv[1]);
  printf("ir_version: %lld   producer: %s %s\n", (long long)om->ir_version, q_ident(om->producer_name), q_ident(om->producer_version));
  printf("opsets:");
  for (int i = 0; i < g->n_opsets; i++)
    printf(" %s=%lld", *g->opsets[i].domain ? q_ident(g->opsets[i].domain) : "ai.onnx", (long long)g->opsets[i].version);
  printf("\ninputs:\n");
  print_values(g, g->inputs, g->n_inputs);
  printf("outputs:\n");
  print_values(g, g->outputs, g->n_outputs);
  print_histogram(g);
  printf("parameters: %lld (%.2f MB), initializers viewed in place: %d, copied: %d\n",
         (long long)om->weight_count, om->weight_bytes / 1e6, om->n_viewed, om->n_copied);
  smelt_model_free(m);
  return 0;
}
