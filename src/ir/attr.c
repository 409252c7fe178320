/* Attribute lookup on nodes. */
#include <string.h>

#include "ir/ir.h"

const ir_attr *ir_attr_find(const ir_node *n, const char *name) {
  /* run paths ask a node's attributes on every run: the first two bytes
   * settle most mismatches without a call to strcmp */
  char c0 = name[0], c1 = c0 ? name[1] : 0;
  for (int i = 0; i < n->n_attrs; i++) {
    const char *a = n->attrs[i].name;
    if (a && a[0] == c0 && (!c0 || (a[1] == c1 && (!c1 || !strcmp(a + 2, name + 2))))) return &n->attrs[i];
  }
  return NULL;
}

int64_t ir_attr_int(const ir_node *n, const char *name, int64_t dflt) {
  const ir_attr *a = ir_attr_find(n, name);
  if (!a) return dflt;
  if (a->type == IR_ATTR_INT) return a->i;
  if (a->type == IR_ATTR_FLOAT) return (int64_t)a->f;
  return dflt;
}

float ir_attr_float(const ir_node *n, const char *name, float dflt) {
  const ir_attr *a = ir_attr_find(n, name);
  if (!a) return dflt;
  if (a->type == IR_ATTR_FLOAT) return a->f;
  if (a->type == IR_ATTR_INT) return (float)a->i;
  return dflt;
}

const char *ir_attr_string(const ir_node *n, const char *name, const char *dflt) {
  const ir_attr *a = ir_attr_find(n, name);
  return a && a->type == IR_ATTR_STRING ? a->s : dflt;
}

const int64_t *ir_attr_ints(const ir_node *n, const char *name, int *count) {
  const ir_attr *a = ir_attr_find(n, name);
  if (!a || a->type != IR_ATTR_INTS) {
    *count = 0;
    return NULL;
  }
  *count = a->n;
  return a->ints;
}

const float *ir_attr_floats(const ir_node *n, const char *name, int *count) {
  const ir_attr *a = ir_attr_find(n, name);
  if (!a || a->type != IR_ATTR_FLOATS) {
    *count = 0;
    return NULL;
  }
  *count = a->n;
  return a->floats;
}
