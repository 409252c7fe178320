/* Dead-code elimination: nodes none of whose outputs reach a graph output
 * (through any chain of consumers, subgraph captures included), and
 * initializers nothing reads.  Graph inputs always stay: they are the
 * model's interface, used or not.
 *
 * Complexity: O(n + v) per run. */
#include <stdlib.h>

#include "passes/rewrite.h"
#include "util/err.h"

static bool node_needed(const rewriter *w, const ir_node *nd) {
  for (int k = 0; k < nd->n_outputs; k++) {
    int v = nd->outputs[k];
    if (v >= 0 && (rw_n_uses(w, v) > 0 || rw_is_output(w, v))) return true;
  }
  return false;
}

smelt_status pass_dce(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  int *order = NULL;
  smelt_status s = ir_graph_toposort(g, &order);
  /* consumers before producers: killing a node frees its inputs' producers */
  for (int k = g->n_nodes - 1; !s && k >= 0; k--) {
    int id = order[k];
    if (!node_needed(&w, rw_node(&w, id))) {
      rw_kill(&w, id);
      w.changes++;
    }
  }
  free(order);
  for (int v = 0; !s && v < g->n_values; v++) {
    const ir_value *val = rw_val(&w, v);
    if ((val->flags & IR_VALUE_INITIALIZER) && !(val->flags & (IR_VALUE_INPUT | IR_VALUE_OUTPUT)) &&
        rw_n_uses(&w, v) == 0) {
      w.changes++;
      w.touched = true; /* compaction drops unreferenced values */
    }
  }
  return rw_end(&w, s, changes);
}
