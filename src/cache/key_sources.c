/* What goes into cache keys besides generated code: the machine (CPU
 * identification and features), the C compiler's identity and flags, the
 * smelt version, and a structural hash of a graph.
 *
 * Complexity: the graph hash is O(n + v + e + attribute and constant bytes
 * hashed). */
#include <string.h>

#include "cache/keys.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

void key_add_machine(key_hasher *h) {
  key_add_str(h, "machine");
#if defined(__x86_64__) || defined(__i386__)
  static const unsigned leaves[][2] = {{0, 0}, {1, 0}, {7, 0}, {7, 1}, {0xd, 0}, {0x80000001, 0}};
  for (size_t i = 0; i < sizeof leaves / sizeof *leaves; i++) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(leaves[i][0], leaves[i][1], &a, &b, &c, &d)) continue;
    if (leaves[i][0] == 1) b &= 0x0000ffff; /* drop the APIC id and logical count: per core */
    unsigned r[4] = {a, b, c, d};
    key_add(h, r, sizeof r);
  }
#else
  key_add_str(h, "non-x86");
#endif
}

void key_add_toolchain(key_hasher *h, const char *cc_cmd, const char *cc_identity, const char *flags) {
  key_add_str(h, "toolchain");
  key_add_str(h, cc_cmd);
  key_add_str(h, cc_identity);
  key_add_str(h, flags);
  key_add_str(h, smelt_version());
}

static void add_tensor(key_hasher *h, const tensor *t, bool shapes) {
  if (!t) {
    key_add_i64(h, -1);
    return;
  }
  key_add_i64(h, t->dtype);
  key_add_i64(h, t->rank);
  if (!shapes) return;
  if (t->rank > 0) key_add(h, t->dims, sizeof(int64_t) * (size_t)t->rank);
  key_add_i64(h, (int64_t)t->nbytes);
  /* small constants may be printed into generated code; large ones are only
   * read through pointers, so their shape is what matters */
  if (t->data && t->nbytes <= KEY_CONST_BYTES) key_add(h, t->data, t->nbytes);
}

static void add_attr(key_hasher *h, const ir_attr *a, bool shapes) {
  key_add_str(h, a->name);
  key_add_i64(h, a->type);
  key_add_i64(h, a->i);
  key_add(h, &a->f, sizeof a->f);
  if (a->s) key_add(h, a->s, a->s_len);
  key_add_i64(h, a->n);
  if (a->ints && a->n) key_add(h, a->ints, sizeof(int64_t) * (size_t)a->n);
  if (a->floats && a->n) key_add(h, a->floats, sizeof(float) * (size_t)a->n);
  for (int k = 0; a->strings && k < a->n; k++) key_add_str(h, a->strings[k]);
  add_tensor(h, a->t, shapes);
  if (a->g) key_add_graph(h, a->g, shapes);
  for (int k = 0; a->graphs && k < a->n; k++) key_add_graph(h, a->graphs[k], shapes);
}

void key_add_graph(key_hasher *h, const ir_graph *g, bool shapes) {
  key_add_str(h, "graph");
  key_add_i64(h, g->n_values);
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *val = &g->values[v];
    key_add_i64(h, val->dtype);
    key_add_i64(h, val->rank);
    if (shapes && val->rank > 0) key_add(h, val->dims, sizeof(int64_t) * (size_t)val->rank);
    key_add_i64(h, val->kind);
    key_add_i64(h, val->flags);
    add_tensor(h, val->constant, shapes);
  }
  key_add_i64(h, g->n_nodes);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    key_add_str(h, nd->op_type);
    key_add_str(h, nd->domain);
    key_add_i64(h, nd->opset);
    key_add_i64(h, nd->n_inputs);
    key_add(h, nd->inputs, sizeof(int) * (size_t)nd->n_inputs);
    key_add_i64(h, nd->n_outputs);
    key_add(h, nd->outputs, sizeof(int) * (size_t)nd->n_outputs);
    key_add_i64(h, nd->n_attrs);
    for (int a = 0; a < nd->n_attrs; a++) add_attr(h, &nd->attrs[a], shapes);
  }
  key_add_i64(h, g->n_inputs);
  key_add(h, g->inputs, sizeof(int) * (size_t)g->n_inputs);
  key_add_i64(h, g->n_outputs);
  key_add(h, g->outputs, sizeof(int) * (size_t)g->n_outputs);
}
