/* The front half of a compile: a private copy of the model graph with the
 * concrete input shapes, every other shape inferred again from them, then
 * the graph passes. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "compile/compile.h"
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
  pass_options po = {.mode = o->mode, .specialized = true, .debug_dir = o->debug_dir};
  if (!s) s = passes_run(g, &po, &pr);
  if (!s) s = ir_graph_infer(g);
  double t2 = now_s();
  if (rep) {
    rep->t_front += t1 - t0;
    rep->t_passes += t2 - t1;
    for (int i = 0; i < pr.n_stats; i++)
      sb_printf(&rep->explain, "  pass %-20s runs %d  changes %4d  %.2f ms\n", pr.stats[i].name,
                pr.stats[i].runs, pr.stats[i].changes, pr.stats[i].seconds * 1e3);
    for (int i = 0; i < pr.n_log; i++) sb_printf(&rep->explain, "  pass: %s\n", pr.log[i]);
  }
  pass_report_free(&pr);
  if (s) {
    ir_graph_free(g);
    return s;
  }
  *out = g;
  return SMELT_OK;
}
