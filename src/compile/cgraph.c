/* Facts about a specialized graph for the fusion and planning stages.
 *
 * Complexity: O(n + v + e): a topological order, consumer lists (CSR) and
 * one classification per node (bounded work: ranks are at most SMELT_MAX_RANK). */
#include "compile/cgraph.h"
#include "compile/lower.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

bool value_concrete(const ir_value *v) {
  if (v->rank < 0 || v->kind != TENSOR_KIND_TENSOR || v->dtype == SMELT_UNDEFINED) return false;
  for (int d = 0; d < v->rank; d++)
    if (!dim_known(v->dims[d])) return false;
  return shape_numel(v->rank, v->dims) >= 0;
}

void shape_strides(int rank, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= dims[d];
  }
}

static bool node_has_subgraph(const ir_node *nd) {
  for (int a = 0; a < nd->n_attrs; a++)
    if (nd->attrs[a].type == IR_ATTR_GRAPH || nd->attrs[a].type == IR_ATTR_GRAPHS) return true;
  return false;
}

/* Graphs with control flow or sequence values run eagerly as a whole: the
 * compiled plan's buffers hold dense tensors only. */
static void check_whole_eager(cgraph *cg) {
  const ir_graph *g = cg->g;
  for (int i = 0; i < g->n_nodes && !cg->whole_eager; i++) {
    if (node_has_subgraph(&g->nodes[i])) {
      cg->whole_eager = true;
      cg->whole_eager_why = "has a subgraph (control flow)";
      cg->whole_eager_node = i;
    }
    for (int o = 0; o < g->nodes[i].n_outputs && !cg->whole_eager; o++) {
      int v = g->nodes[i].outputs[o];
      if (v >= 0 && (g->values[v].kind != TENSOR_KIND_TENSOR || (g->values[v].flags & IR_VALUE_OPTIONAL))) {
        cg->whole_eager = true;
        cg->whole_eager_why = "produces a sequence or optional value";
        cg->whole_eager_node = i;
      }
    }
  }
  for (int k = 0; k < g->n_inputs && !cg->whole_eager; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    if (v->kind != TENSOR_KIND_TENSOR || (v->flags & IR_VALUE_OPTIONAL)) {
      cg->whole_eager = true;
      cg->whole_eager_why = "takes a sequence or optional input";
      cg->whole_eager_node = -1;
    }
  }
}

smelt_status cgraph_build(ir_graph *g, bool dynamic, bool tune, cgraph *cg) {
  memset(cg, 0, sizeof *cg);
  cg->g = g;
  cg->dynamic = dynamic;
  cg->tune = tune;
  size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1;
  TRY(ir_graph_toposort(g, &cg->order));
  cg->pos = malloc(sizeof(int) * nn);
  cg->use_start = calloc(nv + 1, sizeof(int));
  cg->is_output = calloc(nv, sizeof(bool));
  cg->info = calloc(nn, sizeof(cn_info));
  cg->vexpr = malloc(sizeof(int) * nv);
  int n_uses = 0;
  for (int i = 0; i < g->n_nodes; i++) n_uses += g->nodes[i].n_inputs;
  cg->use_node = malloc(sizeof(int) * ((size_t)n_uses + 1));
  if (!cg->pos || !cg->use_start || !cg->is_output || !cg->info || !cg->use_node || !cg->vexpr) {
    cgraph_free(cg);
    return err_nomem("compile graph tables", sizeof(int) * (nn + nv));
  }
  for (int s = 0; s < g->n_nodes; s++) cg->pos[cg->order[s]] = s;
  for (int v = 0; v < g->n_values; v++) cg->vexpr[v] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_inputs; k++)
      if (g->nodes[i].inputs[k] >= 0) cg->use_start[g->nodes[i].inputs[k] + 1]++;
  for (int v = 0; v < g->n_values; v++) cg->use_start[v + 1] += cg->use_start[v];
  int *fill = calloc(nv, sizeof(int));
  if (!fill) {
    cgraph_free(cg);
    return err_nomem("compile graph tables", sizeof(int) * nv);
  }
  for (int s = 0; s < g->n_nodes; s++) { /* consumers listed in execution order */
    int i = cg->order[s];
    for (int k = 0; k < g->nodes[i].n_inputs; k++) {
      int v = g->nodes[i].inputs[k];
      if (v >= 0) cg->use_node[cg->use_start[v] + fill[v]++] = i;
    }
  }
  free(fill);
  for (int k = 0; k < g->n_outputs; k++) cg->is_output[g->outputs[k]] = true;
  check_whole_eager(cg);
  if (!cg->whole_eager)
    for (int i = 0; i < g->n_nodes; i++) lower_classify(cg, i, &cg->info[i]);
  return SMELT_OK;
}

void cgraph_free(cgraph *cg) {
  free(cg->order);
  free(cg->pos);
  free(cg->use_start);
  free(cg->use_node);
  free(cg->is_output);
  free(cg->info);
  free(cg->vexpr);
  memset(cg, 0, sizeof *cg);
}
