/* Checks shared by smelt.Gemm and smelt.Conv (see fused_util.h). */
#include "ops/fused_util.h"

#include "util/err.h"

smelt_status fused_check_inputs(op_ctx *c) {
  static const smelt_dtype f32_only[] = {SMELT_F32, SMELT_UNDEFINED};
  for (int i = 0; i < c->n_in; i++)
    if (op_in(c, i) && !(c->static_infer && op_in(c, i)->dtype == SMELT_UNDEFINED))
      TRY(op_check_dtype(c, i, f32_only));
  const char *names[2] = {"has_bias", "has_residual"};
  for (int i = 0; i < 2; i++) {
    int64_t f = op_attr_int(c, names[i], -1);
    bool present = op_in(c, 2 + i) != NULL;
    if (f >= 0 && (f != 0) != present)
      return err_set(SMELT_ERR_INVALID_MODEL, "%s is %lld but input %d is %s", names[i], (long long)f,
                     2 + i, present ? "given" : "absent");
  }
  return SMELT_OK;
}

smelt_status fused_check_residual(op_ctx *c, int rank, const int64_t *dims) {
  const tensor *res = op_in(c, 3);
  if (!res || res->rank < 0 || rank < 0) return SMELT_OK;
  bool ok = res->rank == rank;
  for (int d = 0; ok && d < rank; d++)
    ok = !dim_known(res->dims[d]) || !dim_known(dims[d]) || res->dims[d] == dims[d];
  if (ok) return SMELT_OK;
  char a[128], b[128];
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "residual shape %s is not the output shape %s",
                 shape_str(a, sizeof a, res->rank, res->dims, NULL),
                 shape_str(b, sizeof b, rank, dims, NULL));
}
