/* Trilu: keeps the upper (or lower) triangle of the last two axes, offset by
 * diagonal k, zeroing the rest.  A byte mover: zero is all-bits-zero in every
 * dtype smelt stores. */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"

static smelt_status trilu_k(op_ctx *c, int64_t *k) {
  tensor *t = op_in(c, 1);
  *k = 0;
  if (!t) return SMELT_OK;
  TRY(su_check_i64(t, "input 1 (k)"));
  if (t->rank > 1 || (t->rank == 1 && t->dims[0] != 1))
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (k) must be a scalar");
  if (t->data) *k = ((const int64_t *)t->data)[0];
  return SMELT_OK;
}

static smelt_status trilu_infer(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t k;
  TRY(su_check_movable(x, 0));
  TRY(trilu_k(c, &k));
  if (x->rank >= 0 && x->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 has rank %d, expected at least 2", x->rank);
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status trilu_run(op_ctx *c) {
  tensor *x = c->in[0], *y = c->out[0];
  int64_t k;
  TRY(trilu_k(c, &k));
  bool upper = op_attr_int(c, "upper", 1) != 0;
  int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  int64_t mats = shape_numel(x->rank - 2, x->dims), es = (int64_t)dtype_size(x->dtype);
  /* Clamp k so i + k cannot overflow; beyond +-(rows + cols) nothing changes. */
  int64_t lim = rows + cols;
  if (k > lim) k = lim;
  if (k < -lim) k = -lim;
  if (x->nbytes) memcpy(y->data, x->data, x->nbytes);
  char *p = y->data;
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < rows; i++, p += cols * es) {
      /* upper keeps j >= i + k; lower keeps j <= i + k */
      int64_t b = upper ? 0 : i + k + 1, e = upper ? i + k : cols;
      if (b < 0) b = 0;
      if (e > cols) e = cols;
      if (e > b) memset(p + b * es, 0, (size_t)((e - b) * es));
    }
  return SMELT_OK;
}

const op_def op_family_trilu[] = {
    {"Trilu", "", 1, 2, 1, 1, trilu_infer, trilu_run, false},
    {0}};
