/* Graph inputs given values by the caller (smelt_model_load_bytes_with):
 * such an input is imported as an initializer that views the caller's
 * memory, checked against the input's declared type, and is no longer an
 * input of the model.  Only the main graph's inputs can be bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/import_internal.h"
#include "util/err.h"
#include "util/quote.h"

static smelt_status check_against(const smelt_tensor *b, const ir_value *decl, const char *name) {
  if (decl->dtype != SMELT_UNDEFINED && decl->dtype != b->dtype)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s is %s, the graph input is declared %s", q(name),
                   dtype_name(b->dtype), dtype_name(decl->dtype));
  if (decl->rank >= 0 && decl->rank != b->rank)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s has rank %d, the graph input is declared rank %d",
                   q(name), b->rank, decl->rank);
  for (int d = 0; decl->rank >= 0 && d < decl->rank; d++)
    if (dim_known(decl->dims[d]) && decl->dims[d] != b->dims[d])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: dim %d is %lld, the graph input declares %lld",
                     q(name), d, (long long)b->dims[d], (long long)decl->dims[d]);
  return SMELT_OK;
}

static smelt_status check_bound(const smelt_tensor *b, size_t i) {
  if (!b->name || !*b->name) return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %zu has no name", i);
  if (b->rank < 0 || b->rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: rank %d is out of range", q(b->name), b->rank);
  size_t es = dtype_size(b->dtype);
  if (!es || b->dtype == SMELT_STRING)
    return err_set(SMELT_ERR_UNSUPPORTED, "bound constant %s: dtype %s cannot be bound", q(b->name),
                   dtype_name(b->dtype));
  int64_t n = shape_numel(b->rank, b->dims);
  size_t nb;
  if (n < 0 || !dtype_nbytes(b->dtype, n, &nb))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: bad dims", q(b->name));
  if (b->nbytes != nb)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: nbytes %zu, its dims and dtype need %zu",
                   q(b->name), b->nbytes, nb);
  if (nb && !b->data) return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: data is NULL", q(b->name));
  size_t align = es > 8 ? 8 : es;
  if ((uintptr_t)b->data % align)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s: data is not aligned to %zu bytes", q(b->name),
                   align);
  return SMELT_OK;
}

smelt_status imp_bound_check(const onnx_imp *c) {
  for (size_t i = 0; i < c->n_bound; i++) {
    TRY(check_bound(&c->bound[i], i));
    for (size_t j = 0; j < i; j++)
      if (!strcmp(c->bound[i].name, c->bound[j].name))
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s is given twice", q(c->bound[i].name));
  }
  return SMELT_OK;
}

smelt_status imp_bound_input(onnx_imp *c, ir_graph *g, const char *name, const imp_type *t, bool *bound) {
  *bound = false;
  if (g->parent || !c->n_bound) return SMELT_OK;
  size_t i = 0;
  while (i < c->n_bound && strcmp(c->bound[i].name, name)) i++;
  if (i == c->n_bound) return SMELT_OK;
  const smelt_tensor *b = &c->bound[i];
  ir_value decl;
  memset(&decl, 0, sizeof decl);
  decl.rank = -1;
  imp_apply_type(&decl, t, false);
  TRY(check_against(b, &decl, name));
  static char empty[1]; /* a value is never NULL data, even an empty one */
  tensor *v = malloc(sizeof *v);
  if (!v) return err_nomem("tensor header", sizeof *v);
  tensor_view(v, b->dtype, b->rank, b->dims, b->data ? b->data : empty);
  smelt_status s = imp_constant_value(g, name, v);
  if (s) {
    tensor_free(v);
    return s;
  }
  c->bound_used[i] = 1;
  if (c->m) {
    c->m->weight_bytes += v->nbytes;
    c->m->weight_count += tensor_numel(v);
    c->m->n_viewed++;
  }
  *bound = true;
  return SMELT_OK;
}

smelt_status imp_bound_all_used(const onnx_imp *c) {
  for (size_t i = 0; i < c->n_bound; i++)
    if (!c->bound_used[i])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "bound constant %s names no input of the main graph",
                     q(c->bound[i].name));
  return SMELT_OK;
}
