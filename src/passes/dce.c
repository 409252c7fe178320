/* Dead-code elimination: nodes none of whose outputs reach a graph output
 * (through any chain of consumers, subgraph captures included), and
 * initializers nothing reads.  Graph inputs always stay: they are the
 * model's interface, used or not.
 *
 * Complexity: O(n + v) per run. */
#include <stdlib.h>

#include "passes/rewrite.h"
#include "util/err.h"

smelt_status pass_dce(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  int *order = NULL;
  smelt_status s = ir_graph_toposort(g, &order);
  bool *live = s ? NULL : rw_live_nodes(&w, order);
  if (!s && !live) s = err_nomem("dce liveness", sizeof(bool) * (size_t)g->n_nodes);
  /* consumers before producers: a node's uses are gone when it is killed */
  for (int k = g->n_nodes - 1; !s && k >= 0; k--)
    if (!live[order[k]]) {
      rw_kill(&w, order[k]);
      w.changes++;
    }
  free(live);
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
