/* The front half of a compile: a private copy of the model graph with the
 * concrete input shapes, every other shape inferred again from them, then
 * the graph passes.
 *
 * Complexity: O(n + v) for the clone and each inference; the passes as
 * src/passes/ states per pass. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "compile/compile.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "parallel/pool.h"
#include "passes/pass.h"
#include "util/err.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Input shapes become concrete; shapes inferred from the declared symbolic
 * ones are forgotten so inference recomputes them from the real sizes. */
static void set_shapes(ir_graph *g, tensor *const *inputs) {
  for (int v = 0; v < g->n_values; v++) {
    ir_value *val = &g->values[v];
    if (val->constant || (val->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER))) continue;
    val->rank = -1;
  }
  for (int k = 0; k < g->n_inputs; k++) {
    ir_value *val = &g->values[g->inputs[k]];
    const tensor *t = inputs[k];
    if (t->kind != TENSOR_KIND_TENSOR) continue;
    val->dtype = t->dtype;
    val->rank = t->rank;
    memcpy(val->dims, t->dims, sizeof val->dims);
  }
}

/* smelt.Gemm / smelt.Conv apply relu and clip inside the GEMM tile; the
 * other activations run after it, one scalar call per element.  In a
 * compiled plan those are better as their own node: the code generator
 * makes them a vectorized kernel, fused with whatever elementwise work
 * follows.  Returns the number of nodes split. */
static smelt_status split_activations(ir_graph *g, int *n_split) {
  static const struct {
    const char *act, *op, *approximate; /* Gelu's attribute, NULL: none */
  } split[] = {{"gelu", "Gelu", NULL}, {"gelu_tanh", "Gelu", "tanh"}, {"sigmoid", "Sigmoid", NULL}, {"tanh", "Tanh", NULL}};
  *n_split = 0;
  int n_nodes = g->n_nodes; /* nodes added below are not visited */
  for (int i = 0; i < n_nodes; i++) {
    ir_node *nd = &g->nodes[i];
    if (strcmp(nd->domain, "smelt") || (strcmp(nd->op_type, "Gemm") && strcmp(nd->op_type, "Conv"))) continue;
    ir_attr *act = NULL;
    for (int a = 0; a < nd->n_attrs; a++)
      if (!strcmp(nd->attrs[a].name, "activation") && nd->attrs[a].type == IR_ATTR_STRING) act = &nd->attrs[a];
    const char *op = NULL, *approximate = NULL;
    for (size_t k = 0; act && k < sizeof split / sizeof *split; k++)
      if (!strcmp(act->s, split[k].act)) op = split[k].op, approximate = split[k].approximate;
    const op_def *def = op ? ops_find("", op) : NULL;
    if (!def || nd->n_outputs != 1 || nd->outputs[0] < 0) continue;
    char name[64];
    snprintf(name, sizeof name, "smelt.split_act.%d", i); /* our own names: no model string */
    int mid, id, out = nd->outputs[0];
    TRY(ir_graph_add_value(g, name, &mid));
    ir_value *mv = &g->values[mid], *ov = &g->values[out];
    mv->dtype = ov->dtype;
    mv->rank = ov->rank;
    memcpy(mv->dims, ov->dims, sizeof mv->dims);
    TRY(ir_graph_add_node(g, name, op, "", 1, 1, approximate ? 1 : 0, &id));
    if (approximate) { /* static strings: the graph frees its attributes with its arena */
      ir_attr *ap = &g->nodes[id].attrs[0];
      ap->name = "approximate";
      ap->type = IR_ATTR_STRING;
      ap->s = approximate;
      ap->s_len = strlen(approximate);
    }
    nd = &g->nodes[i]; /* the node array may have moved */
    act->s = "none";
    act->s_len = 4;
    nd->outputs[0] = mid;
    mv->producer = i;
    g->nodes[id].inputs[0] = mid;
    g->nodes[id].outputs[0] = out;
    g->nodes[id].op = def;
    g->values[out].producer = id;
    (*n_split)++;
  }
  return SMELT_OK;
}

smelt_status specialize_graph(const ir_graph *mg, tensor *const *inputs, const compile_options *o,
                              ir_graph **out, compile_report *rep) {
  double t0 = now_s();
  ir_graph *g = NULL;
  TRY(ir_graph_clone(mg, &g));
  set_shapes(g, inputs);
  smelt_status s = ir_graph_infer(g);
  double t1 = now_s();
  pass_report pr;
  memset(&pr, 0, sizeof pr);
  pass_options po = {.mode = o->mode, .specialized = true, .debug_dir = o->debug_dir, .precision = o->precision,
                     .threads = pool_threads(o->pool)};
  if (!s) s = passes_run(g, &po, &pr);
  int n_split = 0;
  if (!s) s = split_activations(g, &n_split);
  if (!s) s = ir_graph_infer(g);
  double t2 = now_s();
  if (rep) {
    rep->t_front += t1 - t0;
    rep->t_passes += t2 - t1;
    for (int i = 0; i < pr.n_stats; i++)
      sb_printf(&rep->explain, "  pass %-20s runs %d  changes %4d  %.2f ms\n", pr.stats[i].name,
                pr.stats[i].runs, pr.stats[i].changes, pr.stats[i].seconds * 1e3);
    for (int i = 0; i < pr.n_log; i++) sb_printf(&rep->explain, "  pass: %s\n", pr.log[i]);
    if (n_split)
      sb_printf(&rep->explain, "  %d fused GEMM/conv activations left to generated kernels (vectorized)\n", n_split);
  }
  pass_report_free(&pr);
  if (s) {
    ir_graph_free(g);
    return s;
  }
  *out = g;
  return SMELT_OK;
}
