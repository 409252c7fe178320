/* TEMPORARY: stands in for ir_graph_clone and passes_run until the passes
 * branch is merged; deleted then.  Subgraph attributes are not copied (graphs
 * with control flow run eagerly on the original graph). */
#include <stdlib.h>
#include <string.h>

#include "compile/tmp_shim.h"
#include "util/err.h"

static smelt_status view_copy(const tensor *src, tensor **out) {
  *out = NULL;
  if (!src) return SMELT_OK;
  tensor *t = malloc(sizeof *t);
  if (!t) return err_nomem("tensor header", sizeof *t);
  *t = *src;
  t->owns_data = false;
  t->seq = NULL;
  t->seq_len = 0;
  *out = t;
  return SMELT_OK;
}

static smelt_status copy_body(const ir_graph *src, ir_graph *g) {
  for (int i = 0; i < src->n_syms; i++) {
    int64_t d;
    TRY(ir_graph_sym(g, src->syms[i], &d));
  }
  g->opsets = arena_alloc(&g->arena, sizeof(ir_opset) * (size_t)(src->n_opsets + 1));
  if (!g->opsets) return err_nomem("opsets", 0);
  memcpy(g->opsets, src->opsets, sizeof(ir_opset) * (size_t)src->n_opsets);
  g->n_opsets = src->n_opsets;
  for (int v = 0; v < src->n_values; v++) {
    int id;
    const ir_value *sv = &src->values[v];
    if (*sv->name && ir_graph_find_value(g, sv->name) >= 0) return err_set(SMELT_ERR_INTERNAL, "clone: duplicate value");
    TRY(ir_graph_add_value(g, sv->name, &id));
    ir_value *dv = &g->values[id];
    const char *nm = dv->name;
    *dv = *sv;
    dv->name = nm;
    dv->constant = NULL;
    TRY(view_copy(sv->constant, &dv->constant));
  }
  for (int k = 0; k < src->n_inputs; k++) TRY(ir_graph_add_input(g, src->inputs[k]));
  for (int k = 0; k < src->n_outputs; k++) TRY(ir_graph_add_output(g, src->outputs[k]));
  for (int i = 0; i < src->n_nodes; i++) {
    const ir_node *sn = &src->nodes[i];
    int id;
    TRY(ir_graph_add_node(g, sn->name, sn->op_type, sn->domain, sn->n_inputs, sn->n_outputs, sn->n_attrs, &id));
    ir_node *dn = &g->nodes[id];
    memcpy(dn->inputs, sn->inputs, sizeof(int) * (size_t)sn->n_inputs);
    memcpy(dn->outputs, sn->outputs, sizeof(int) * (size_t)sn->n_outputs);
    dn->opset = sn->opset;
    dn->op = sn->op;
    for (int a = 0; a < sn->n_attrs; a++) {
      ir_attr *da = &dn->attrs[a];
      *da = sn->attrs[a];
      da->t = NULL;
      da->g = NULL;
      da->graphs = NULL;
      da->tensors = NULL;
      if (sn->attrs[a].type == IR_ATTR_GRAPHS || sn->attrs[a].type == IR_ATTR_TENSORS) da->n = 0;
      TRY(view_copy(sn->attrs[a].t, &da->t));
    }
  }
  return SMELT_OK;
}

smelt_status ir_graph_clone(const ir_graph *src, ir_graph **out) {
  *out = NULL;
  ir_graph *g = ir_graph_new(NULL);
  if (!g) return err_nomem("graph", sizeof *g);
  g->name = src->name;
  smelt_status s = copy_body(src, g);
  if (s) {
    ir_graph_free(g);
    return s;
  }
  *out = g;
  return SMELT_OK;
}

/* Shape of a value with a concrete shape becomes a constant (what the fold
 * pass does); inference then folds what depends on it. */
static int fold_shapes(ir_graph *g) {
  int changed = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    ir_node *nd = &g->nodes[i];
    if (strcmp(nd->op_type, "Shape") || nd->n_outputs != 1 || nd->outputs[0] < 0) continue;
    ir_value *out = &g->values[nd->outputs[0]], *in = &g->values[nd->inputs[0]];
    if (out->constant || in->rank < 0) continue;
    bool ok = true;
    for (int d = 0; d < in->rank; d++) ok &= dim_known(in->dims[d]);
    if (!ok || ir_attr_find(nd, "start") || ir_attr_find(nd, "end")) continue;
    tensor *t = malloc(sizeof *t);
    int64_t n = in->rank;
    if (!t || tensor_alloc(t, SMELT_I64, 1, &n)) {
      free(t);
      continue;
    }
    for (int d = 0; d < in->rank; d++) ((int64_t *)t->data)[d] = in->dims[d];
    out->constant = t;
    changed++;
  }
  return changed;
}

smelt_status passes_run(ir_graph *g, const pass_options *o, pass_report *r) {
  (void)o;
  (void)r;
  for (int it = 0; it < 8 && fold_shapes(g); it++) TRY(ir_graph_infer(g));
  return SMELT_OK;
}

void pass_report_free(pass_report *r) {
  for (int i = 0; i < r->n_log; i++) free(r->log[i]);
  free(r->log);
  memset(r, 0, sizeof *r);
}
