/* Graph structure: producers, topological order, validation.
 *
 * Complexity: O(n + v + e + subgraph captures) for producers, the
 * topological order (Kahn) and validation. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "util/err.h"
#include "util/quote.h"

/* Adds to deps (a list of value ids of g, length *n, capacity cap) every value of g
 * that the subgraphs hanging off node nd read from the enclosing scope. */
static void subgraph_captures(const ir_graph *g, const ir_node *nd, int *deps, int *n, int cap) {
  for (int a = 0; a < nd->n_attrs; a++) {
    const ir_attr *at = &nd->attrs[a];
    int ng = at->type == IR_ATTR_GRAPH ? 1 : at->type == IR_ATTR_GRAPHS ? at->n : 0;
    for (int k = 0; k < ng; k++) {
      const ir_graph *sg = at->type == IR_ATTR_GRAPH ? at->g : at->graphs[k];
      if (!sg || sg->parent != g) continue;
      for (int v = 0; v < sg->n_values; v++)
        if ((sg->values[v].flags & IR_VALUE_OUTER) && *n < cap) deps[(*n)++] = sg->values[v].outer_id;
    }
  }
}

static int node_capture_count(const ir_node *nd) {
  int c = 0;
  for (int a = 0; a < nd->n_attrs; a++) {
    const ir_attr *at = &nd->attrs[a];
    int ng = at->type == IR_ATTR_GRAPH ? 1 : at->type == IR_ATTR_GRAPHS ? at->n : 0;
    for (int k = 0; k < ng; k++) {
      const ir_graph *sg = at->type == IR_ATTR_GRAPH ? at->g : at->graphs[k];
      if (sg) c += sg->n_values;
    }
  }
  return c;
}

smelt_status ir_node_deps(const ir_graph *g, const ir_node *nd, int **deps, int *n) {
  int cap = nd->n_inputs + node_capture_count(nd) + 1;
  int *d = malloc(sizeof(int) * (size_t)cap);
  if (!d) return err_nomem("dependency list", sizeof(int) * (size_t)cap);
  int k = 0;
  for (int i = 0; i < nd->n_inputs; i++)
    if (nd->inputs[i] >= 0) d[k++] = nd->inputs[i];
  subgraph_captures(g, nd, d, &k, cap);
  *deps = d;
  *n = k;
  return SMELT_OK;
}

/* Fills producer[] (value id -> node id or -1); error on a value produced twice. */
static smelt_status find_producers(const ir_graph *g, int *producer) {
  for (int v = 0; v < g->n_values; v++) producer[v] = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    for (int o = 0; o < nd->n_outputs; o++) {
      int v = nd->outputs[o];
      if (v < 0) continue;
      char a[256], b[256];
      if (v >= g->n_values) return err_set(SMELT_ERR_INTERNAL, "output value id out of range");
      if (producer[v] >= 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "value %s is produced by both %s and %s",
                       q(g->values[v].name), ir_node_label(g, producer[v], a, sizeof a),
                       ir_node_label(g, i, b, sizeof b));
      if (g->values[v].flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER))
        return err_set(SMELT_ERR_INVALID_MODEL, "%s writes %s, which is a graph %s",
                       ir_node_label(g, i, a, sizeof a), q(g->values[v].name),
                       g->values[v].flags & IR_VALUE_INPUT ? "input" : "initializer");
      producer[v] = i;
    }
  }
  return SMELT_OK;
}

smelt_status ir_graph_toposort(const ir_graph *g, int **order_out) {
  int nn = g->n_nodes, nv = g->n_values;
  int *producer = malloc(sizeof(int) * (size_t)(nv + 1));
  int *indeg = calloc((size_t)nn + 1, sizeof(int));
  int *order = malloc(sizeof(int) * (size_t)(nn + 1));
  int *users_start = calloc((size_t)nn + 2, sizeof(int));
  int *users = NULL, **deps = calloc((size_t)nn + 1, sizeof(int *)), *ndeps = calloc((size_t)nn + 1, sizeof(int));
  smelt_status s = SMELT_OK;
  if (!producer || !indeg || !order || !users_start || !deps || !ndeps) {
    s = err_nomem("topological sort", sizeof(int) * (size_t)(nn + nv));
    goto done;
  }
  if ((s = find_producers(g, producer))) goto done;
  /* Edges producer(dep) -> node, stored as a CSR list of users per node. */
  long total = 0;
  for (int i = 0; i < nn; i++) {
    if ((s = ir_node_deps(g, &g->nodes[i], &deps[i], &ndeps[i]))) goto done;
    for (int k = 0; k < ndeps[i]; k++) {
      int p = producer[deps[i][k]];
      if (p >= 0) {
        users_start[p + 1]++;
        indeg[i]++;
        total++;
      }
    }
  }
  for (int i = 0; i < nn; i++) users_start[i + 1] += users_start[i];
  users = malloc(sizeof(int) * (size_t)(total + 1));
  int *fill = calloc((size_t)nn + 1, sizeof(int));
  if (!users || !fill) {
    free(fill);
    s = err_nomem("topological sort", sizeof(int) * (size_t)total);
    goto done;
  }
  for (int i = 0; i < nn; i++)
    for (int k = 0; k < ndeps[i]; k++) {
      int p = producer[deps[i][k]];
      if (p >= 0) users[users_start[p] + fill[p]++] = i;
    }
  free(fill);
  /* Kahn's algorithm; ready nodes taken in file order for a stable schedule. */
  int head = 0, tail = 0;
  for (int i = 0; i < nn; i++)
    if (!indeg[i]) order[tail++] = i;
  while (head < tail) {
    int u = order[head++];
    for (int k = users_start[u]; k < users_start[u + 1]; k++)
      if (--indeg[users[k]] == 0) order[tail++] = users[k];
  }
  if (tail < nn) {
    char lb[256];
    int stuck = 0;
    while (stuck < nn && indeg[stuck] == 0) stuck++;
    s = err_set(SMELT_ERR_INVALID_MODEL, "the graph has a cycle through %s",
                ir_node_label(g, stuck < nn ? stuck : 0, lb, sizeof lb));
    goto done;
  }
  *order_out = order;
  order = NULL;
done:
  for (int i = 0; deps && i < nn; i++) free(deps[i]);
  free(deps);
  free(ndeps);
  free(producer);
  free(indeg);
  free(order);
  free(users_start);
  free(users);
  return s;
}

smelt_status ir_graph_validate(const ir_graph *g) {
  int *producer = malloc(sizeof(int) * (size_t)(g->n_values + 1));
  if (!producer) return err_nomem("validation", sizeof(int) * (size_t)g->n_values);
  smelt_status s = find_producers(g, producer);
  char lb[256];
  for (int i = 0; !s && i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    for (int k = 0; !s && k < nd->n_inputs; k++) {
      int v = nd->inputs[k];
      if (v < 0) continue;
      const ir_value *val = &g->values[v];
      if (producer[v] < 0 && !(val->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER)))
        s = err_set(SMELT_ERR_INVALID_MODEL, "%s: input %d %s is not produced by any node, "
                    "nor a graph input or initializer", ir_node_label(g, i, lb, sizeof lb), k, q(val->name));
    }
  }
  for (int k = 0; !s && k < g->n_outputs; k++) {
    int v = g->outputs[k];
    const ir_value *val = &g->values[v];
    if (producer[v] < 0 && !(val->flags & (IR_VALUE_INPUT | IR_VALUE_INITIALIZER | IR_VALUE_OUTER)))
      s = err_set(SMELT_ERR_INVALID_MODEL, "graph output %s is not produced by any node", q(val->name));
  }
  free(producer);
  if (s) return s;
  int *order = NULL;
  TRY(ir_graph_toposort(g, &order));
  free(order);
  return SMELT_OK;
}
