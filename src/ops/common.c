/* Helpers shared by every op family. */
#include <string.h>

#include "ops/op.h"
#include "util/err.h"

int64_t op_attr_int(op_ctx *c, const char *name, int64_t dflt) {
  return ir_attr_int(c->node, name, dflt);
}
float op_attr_float(op_ctx *c, const char *name, float dflt) {
  return ir_attr_float(c->node, name, dflt);
}

smelt_status op_axis(int64_t axis, int rank, const char *what, int *out) {
  if (axis < -(int64_t)rank || axis >= rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s %lld is out of range for rank %d", what,
                   (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return SMELT_OK;
}

smelt_status op_broadcast_shape(int ra, const int64_t *da, int rb, const int64_t *db,
                                int *rout, int64_t *dout) {
  int r = ra > rb ? ra : rb;
  int64_t tmp[SMELT_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int64_t a = i < r - ra ? 1 : da[i - (r - ra)];
    int64_t b = i < r - rb ? 1 : db[i - (r - rb)];
    int64_t o;
    if (a == b) o = a;
    else if (a == 1) o = b;
    else if (b == 1) o = a;
    else if (!dim_known(a) && dim_known(b)) o = b; /* symbolic must be b (or 1) */
    else if (!dim_known(b) && dim_known(a)) o = a;
    else if (!dim_known(a) && !dim_known(b)) o = DIM_UNKNOWN;
    else {
      char sa[160], sb[160];
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "shapes %s and %s cannot be broadcast",
                     shape_str(sa, sizeof sa, ra, da, NULL), shape_str(sb, sizeof sb, rb, db, NULL));
    }
    tmp[i] = o;
  }
  *rout = r;
  memcpy(dout, tmp, sizeof(int64_t) * (size_t)r);
  return SMELT_OK;
}

void op_set_out(op_ctx *c, int i, smelt_dtype dt, int rank, const int64_t *dims) {
  tensor *o = c->out[i];
  o->dtype = dt;
  o->rank = rank;
  if (rank > 0) memcpy(o->dims, dims, sizeof(int64_t) * (size_t)rank);
}

void op_out_like(op_ctx *c, int i, int j) {
  const tensor *t = c->in[j];
  op_set_out(c, i, t->dtype, t->rank, t->dims);
}

smelt_status op_check_dtype(op_ctx *c, int i, const smelt_dtype *allowed) {
  const tensor *t = op_in(c, i);
  if (!t) return SMELT_OK;
  for (const smelt_dtype *a = allowed; *a; a++)
    if (t->dtype == *a) return SMELT_OK;
  return err_set(SMELT_ERR_UNSUPPORTED, "input %d has type %s, which this op does not support", i,
                 dtype_name(t->dtype));
}
