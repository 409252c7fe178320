/* Building an IR graph: values, nodes, names, symbols, attributes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "util/err.h"
#include "util/hash.h"
#include "util/quote.h"

typedef struct ir_name_map {
  const char **keys;
  int *ids;
  size_t cap, count;
} ir_name_map;

static smelt_status map_put(ir_name_map *m, const char *key, int id);

static int map_get(const ir_name_map *m, const char *key) {
  if (!m->cap) return -1;
  size_t mask = m->cap - 1, h = (size_t)hash_str(key) & mask;
  while (m->keys[h]) {
    if (!strcmp(m->keys[h], key)) return m->ids[h];
    h = (h + 1) & mask;
  }
  return -1;
}

static smelt_status map_grow(ir_name_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  ir_name_map n = {calloc(ncap, sizeof(char *)), calloc(ncap, sizeof(int)), ncap, 0};
  if (!n.keys || !n.ids) {
    free(n.keys);
    free(n.ids);
    return err_nomem("name map", ncap * sizeof(char *));
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) map_put(&n, m->keys[i], m->ids[i]);
  free(m->keys);
  free(m->ids);
  *m = n;
  return SMELT_OK;
}

static smelt_status map_put(ir_name_map *m, const char *key, int id) {
  if ((m->count + 1) * 2 > m->cap) TRY(map_grow(m));
  size_t mask = m->cap - 1, h = (size_t)hash_str(key) & mask;
  while (m->keys[h]) h = (h + 1) & mask;
  m->keys[h] = key;
  m->ids[h] = id;
  m->count++;
  return SMELT_OK;
}

ir_graph *ir_graph_new(ir_graph *parent) {
  ir_graph *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->names = calloc(1, sizeof *g->names);
  g->sym_names = calloc(1, sizeof *g->sym_names);
  if (!g->names || !g->sym_names) {
    free(g->names);
    free(g->sym_names);
    free(g);
    return NULL;
  }
  arena_init(&g->arena);
  g->parent = parent;
  g->name = "";
  return g;
}

static void attr_free_owned(ir_attr *a) {
  if (a->t) tensor_free(a->t);
  if (a->g) ir_graph_free(a->g);
  for (int k = 0; k < a->n; k++) {
    if (a->tensors) tensor_free(a->tensors[k]);
    if (a->graphs) ir_graph_free(a->graphs[k]);
  }
}

void ir_graph_free(ir_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i].n_attrs; k++) attr_free_owned(&g->nodes[i].attrs[k]);
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].constant) tensor_free(g->values[i].constant);
  free(g->nodes);
  free(g->values);
  free(g->inputs);
  free(g->outputs);
  free(g->syms);
  ir_name_map *maps[2] = {g->names, g->sym_names};
  for (int i = 0; i < 2; i++)
    if (maps[i]) {
      free(maps[i]->keys);
      free(maps[i]->ids);
      free(maps[i]);
    }
  arena_free(&g->arena);
  free(g);
}

/* Grows *arr (of elem-sized items) so that index n fits. */
static smelt_status grow(void **arr, int *cap, int n, size_t elem, const char *what) {
  if (n < *cap) return SMELT_OK;
  if (n >= (1 << 28)) return err_set(SMELT_ERR_NOMEM, "too many %s (%d)", what, n);
  int ncap = *cap ? *cap * 2 : 16;
  while (ncap <= n) ncap *= 2;
  void *p = realloc(*arr, (size_t)ncap * elem);
  if (!p) return err_nomem(what, (size_t)ncap * elem);
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
  *arr = p;
  *cap = ncap;
  return SMELT_OK;
}

smelt_status ir_graph_add_value(ir_graph *g, const char *name, int *id) {
  if (map_get(g->names, name) >= 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "value %s is defined more than once", q(name));
  TRY(grow((void **)&g->values, &g->cap_values, g->n_values, sizeof(ir_value), "values"));
  ir_value *v = &g->values[g->n_values];
  memset(v, 0, sizeof *v);
  v->name = arena_strdup(&g->arena, name);
  if (!v->name) return err_nomem("value name", strlen(name));
  v->rank = -1;
  v->producer = -1;
  v->outer_id = -1;
  if (*name) TRY(map_put(g->names, v->name, g->n_values));
  *id = g->n_values++;
  return SMELT_OK;
}

int ir_graph_find_value(const ir_graph *g, const char *name) { return map_get(g->names, name); }

int ir_graph_resolve_value(ir_graph *g, const char *name) {
  int id = map_get(g->names, name);
  if (id >= 0 || !g->parent) return id;
  int outer = ir_graph_resolve_value(g->parent, name);
  if (outer < 0) return -1;
  if (ir_graph_add_value(g, name, &id)) return -1;
  ir_value *v = &g->values[id], *o = &g->parent->values[outer];
  v->flags = IR_VALUE_OUTER | (o->flags & IR_VALUE_OPTIONAL);
  v->outer_id = outer;
  v->dtype = o->dtype;
  v->rank = o->rank;
  v->kind = o->kind;
  memcpy(v->dims, o->dims, sizeof v->dims);
  return id;
}

smelt_status ir_graph_add_node(ir_graph *g, const char *name, const char *op_type,
                               const char *domain, int n_inputs, int n_outputs, int n_attrs,
                               int *id) {
  if (n_inputs < 0 || n_outputs < 0 || n_attrs < 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "negative node arity");
  TRY(grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes, sizeof(ir_node), "nodes"));
  ir_node *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->name = arena_strdup(&g->arena, name ? name : "");
  n->op_type = arena_strdup(&g->arena, op_type);
  n->domain = arena_strdup(&g->arena, domain ? domain : "");
  n->inputs = arena_alloc(&g->arena, sizeof(int) * (size_t)(n_inputs + 1));
  n->outputs = arena_alloc(&g->arena, sizeof(int) * (size_t)(n_outputs + 1));
  n->attrs = arena_alloc(&g->arena, sizeof(ir_attr) * (size_t)(n_attrs + 1));
  if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs || !n->attrs)
    return err_nomem("node", sizeof(ir_attr) * (size_t)n_attrs);
  for (int i = 0; i < n_inputs; i++) n->inputs[i] = -1;
  for (int i = 0; i < n_outputs; i++) n->outputs[i] = -1;
  n->n_inputs = n_inputs;
  n->n_outputs = n_outputs;
  n->n_attrs = n_attrs;
  int64_t ops = ir_graph_opset(g, n->domain);
  n->opset = ops > 0 ? (int)ops : 1;
  *id = g->n_nodes++;
  return SMELT_OK;
}

smelt_status ir_graph_add_input(ir_graph *g, int value_id) {
  TRY(grow((void **)&g->inputs, &g->cap_inputs, g->n_inputs, sizeof(int), "graph inputs"));
  g->inputs[g->n_inputs++] = value_id;
  g->values[value_id].flags |= IR_VALUE_INPUT;
  return SMELT_OK;
}

smelt_status ir_graph_add_output(ir_graph *g, int value_id) {
  TRY(grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs, sizeof(int), "graph outputs"));
  g->outputs[g->n_outputs++] = value_id;
  g->values[value_id].flags |= IR_VALUE_OUTPUT;
  return SMELT_OK;
}

smelt_status ir_graph_sym(ir_graph *g, const char *name, int64_t *dim) {
  int found = map_get(g->sym_names, name);
  if (found >= 0) {
    *dim = dim_sym(found);
    return SMELT_OK;
  }
  TRY(grow((void **)&g->syms, &g->cap_syms, g->n_syms, sizeof(char *), "symbols"));
  g->syms[g->n_syms] = arena_strdup(&g->arena, name);
  if (!g->syms[g->n_syms]) return err_nomem("symbol", strlen(name));
  TRY(map_put(g->sym_names, g->syms[g->n_syms], g->n_syms));
  *dim = dim_sym(g->n_syms++);
  return SMELT_OK;
}

int64_t ir_graph_opset(const ir_graph *g, const char *domain) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (; g; g = g->parent)
    for (int i = 0; i < g->n_opsets; i++) {
      const char *d = g->opsets[i].domain;
      if (!strcmp(d, "ai.onnx")) d = "";
      if (!strcmp(d, domain)) return g->opsets[i].version;
    }
  return -1;
}

const char *ir_node_label(const ir_graph *g, int node_id, char *buf, size_t n) {
  const ir_node *nd = &g->nodes[node_id];
  if (nd->name && *nd->name)
    snprintf(buf, n, "node %s (%s)", q(nd->name), q_ident(nd->op_type));
  else
    snprintf(buf, n, "node #%d (%s)", node_id, q_ident(nd->op_type));
  return buf;
}
