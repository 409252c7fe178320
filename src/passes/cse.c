/* Common-subexpression elimination.
 *
 * First, constants with the same dtype, shape and bytes (up to
 * CSE_CONST_MAX_BYTES; larger ones are not compared) become one value.  Then,
 * in topological order, a node with the same op, domain, inputs and
 * attributes as an earlier one is dropped and its consumers read the earlier
 * node's outputs.  Random ops, nodes with subgraphs, unsupported ops and
 * nodes writing a graph output are never merged away.
 *
 * Complexity: O(v + n) expected per run (hash tables of constants and nodes;
 * equality checked only on equal hashes), plus hashing constant bytes. */
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/hash.h"

#define CSE_CONST_MAX_BYTES ((size_t)64 << 10)

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001b3ull + (h >> 29); }


/* An open-addressing table of ids keyed by a 64-bit hash; equality is the
 * caller's business (it walks the chain of same-hash slots). */
typedef struct id_table {
  uint64_t *keys;
  int *ids;
  size_t cap;
} id_table;

static smelt_status table_init(id_table *t, int n) {
  t->cap = 16;
  while (t->cap < (size_t)n * 2 + 2) t->cap *= 2;
  t->keys = calloc(t->cap, sizeof *t->keys);
  t->ids = malloc(t->cap * sizeof *t->ids);
  if (!t->keys || !t->ids) return err_nomem("CSE table", t->cap * 12);
  for (size_t i = 0; i < t->cap; i++) t->ids[i] = -1;
  return SMELT_OK;
}

static void table_free(id_table *t) {
  free(t->keys);
  free(t->ids);
}

/* Returns the first id with key h for which same(id) holds, else inserts id. */
static int table_find_or_add(id_table *t, uint64_t h, int id, bool (*same)(void *, int, int),
                             void *ctx) {
  size_t i = (size_t)h & (t->cap - 1);
  while (t->ids[i] >= 0) {
    if (t->keys[i] == h && same(ctx, t->ids[i], id)) return t->ids[i];
    i = (i + 1) & (t->cap - 1);
  }
  t->keys[i] = h;
  t->ids[i] = id;
  return -1;
}

/* ---- constants ---- */

static const tensor *small_const(rewriter *w, int v) {
  const ir_value *val = rw_val(w, v);
  if (!(val->flags & IR_VALUE_INITIALIZER) || (val->flags & (IR_VALUE_INPUT | IR_VALUE_OUTPUT))) return NULL;
  const tensor *t = rw_const(w, v);
  return t && t->nbytes <= CSE_CONST_MAX_BYTES && dtype_size(t->dtype) ? t : NULL;
}

static bool same_const(void *ctx, int a, int b) {
  rewriter *w = ctx;
  const tensor *x = rw_const(w, a), *y = rw_const(w, b);
  return x->dtype == y->dtype && x->rank == y->rank && x->nbytes == y->nbytes &&
         !memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->rank) &&
         !memcmp(x->data, y->data, x->nbytes);
}

static smelt_status merge_constants(rewriter *w) {
  id_table t;
  smelt_status s = table_init(&t, w->g->n_values);
  for (int v = 0; !s && v < w->g->n_values; v++) {
    const tensor *c = small_const(w, v);
    if (!c || !rw_n_uses(w, v)) continue;
    uint64_t h = mix(hash_fast(c->data, c->nbytes), (uint64_t)c->dtype * 31 + (uint64_t)c->rank);
    for (int d = 0; d < c->rank; d++) h = mix(h, (uint64_t)c->dims[d]);
    int keep = table_find_or_add(&t, h, v, same_const, w);
    if (keep >= 0) {
      s = rw_replace_uses(w, v, keep);
      w->changes++;
    }
  }
  table_free(&t);
  return s;
}

/* ---- nodes ---- */

static bool attr_equal(const ir_attr *a, const ir_attr *b) {
  if (a->type != b->type || strcmp(a->name, b->name)) return false;
  switch (a->type) {
    case IR_ATTR_INT: return a->i == b->i;
    case IR_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
    case IR_ATTR_STRING: return a->s_len == b->s_len && !memcmp(a->s, b->s, a->s_len);
    case IR_ATTR_INTS: return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
    case IR_ATTR_FLOATS: return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n));
    case IR_ATTR_STRINGS:
      if (a->n != b->n) return false;
      for (int k = 0; k < a->n; k++)
        if (strcmp(a->strings[k] ? a->strings[k] : "", b->strings[k] ? b->strings[k] : "")) return false;
      return true;
    case IR_ATTR_TENSOR:
      return a->t && b->t && a->t->dtype == b->t->dtype && a->t->rank == b->t->rank &&
             a->t->nbytes == b->t->nbytes && a->t->kind == TENSOR_KIND_TENSOR &&
             !memcmp(a->t->dims, b->t->dims, sizeof(int64_t) * (size_t)a->t->rank) &&
             (!a->t->nbytes || !memcmp(a->t->data, b->t->data, a->t->nbytes));
    default: return false; /* graphs and the rest: never considered equal */
  }
}

static bool same_node(void *ctx, int a, int b) {
  rewriter *w = ctx;
  const ir_node *x = rw_node(w, a), *y = rw_node(w, b);
  if (strcmp(x->op_type, y->op_type) || strcmp(x->domain, y->domain) || x->opset != y->opset ||
      x->n_inputs != y->n_inputs || x->n_outputs != y->n_outputs || x->n_attrs != y->n_attrs)
    return false;
  for (int k = 0; k < x->n_inputs; k++)
    if (x->inputs[k] != y->inputs[k]) return false;
  for (int k = 0; k < x->n_attrs; k++) {
    const ir_attr *ya = ir_attr_find(y, x->attrs[k].name);
    if (!ya || !attr_equal(&x->attrs[k], ya)) return false;
  }
  return true;
}

static uint64_t node_hash(const ir_node *nd) {
  uint64_t h = mix(hash_str(nd->op_type), hash_str(nd->domain));
  for (int k = 0; k < nd->n_inputs; k++) h = mix(h, (uint64_t)(nd->inputs[k] + 2));
  for (int k = 0; k < nd->n_attrs; k++) h = mix(h, hash_str(nd->attrs[k].name));
  return h;
}

static bool mergeable(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  if (!nd->op || rw_has_subgraph(nd) || !strncmp(nd->op_type, "Random", 6) ||
      !strcmp(nd->op_type, "Bernoulli") || !strcmp(nd->op_type, "Multinomial"))
    return false;
  return nd->n_outputs > 0;
}

/* Consumers of dup's outputs read keep's; false if that cannot be done. */
static smelt_status redirect(rewriter *w, int keep, int dup, bool *done) {
  const ir_node *k = rw_node(w, keep), *d = rw_node(w, dup);
  *done = false;
  for (int o = 0; o < d->n_outputs; o++) {
    int dv = d->outputs[o], kv = k->outputs[o];
    if (dv < 0) continue;
    if (rw_is_output(w, dv) || (kv < 0 && rw_n_uses(w, dv) > 0)) return SMELT_OK;
  }
  for (int o = 0; o < d->n_outputs; o++)
    if (d->outputs[o] >= 0 && k->outputs[o] >= 0) TRY(rw_replace_uses(w, d->outputs[o], k->outputs[o]));
  rw_kill(w, dup);
  *done = true;
  return SMELT_OK;
}

static smelt_status merge_nodes(rewriter *w) {
  int *order = NULL;
  TRY(ir_graph_toposort(w->g, &order));
  id_table t;
  smelt_status s = table_init(&t, w->g->n_nodes);
  for (int k = 0; !s && k < w->g->n_nodes; k++) {
    int id = order[k];
    if (!rw_live(w, id) || !mergeable(w, id)) continue;
    int keep = table_find_or_add(&t, node_hash(rw_node(w, id)), id, same_node, w);
    bool done = false;
    if (keep >= 0) s = redirect(w, keep, id, &done);
    w->changes += done;
  }
  table_free(&t);
  free(order);
  return s;
}

smelt_status pass_cse(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = merge_constants(&w);
  if (!s) s = merge_nodes(&w);
  return rw_end(&w, s, changes);
}
