/* Transpose family: axis permutations (Transpose) and the block rearrangements
 * that are a reshape, a transpose and a reshape (DepthToSpace, SpaceToDepth). */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

/* perm from the attribute, or reversed axes when absent; checked to be a
 * permutation of [0, rank). */
static smelt_status read_perm(op_ctx *c, int rank, int *perm) {
  int n;
  const int64_t *p = ir_attr_ints(c->node, "perm", &n);
  if (!p) {
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return SMELT_OK;
  }
  if (n != rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute perm has %d entries, input rank is %d", n,
                   rank);
  bool seen[SMELT_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) {
    if (p[i] < 0 || p[i] >= rank || seen[p[i]])
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute perm is not a permutation of 0..%d "
                     "(entry %d is %lld)", rank - 1, i, (long long)p[i]);
    seen[p[i]] = true;
    perm[i] = (int)p[i];
  }
  return SMELT_OK;
}

static smelt_status transpose_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (x->rank < 0) {
    int n;
    const int64_t *p = ir_attr_ints(c->node, "perm", &n);
    if (!p || n > SMELT_MAX_RANK) {
      su_out_unknown(c, 0, x->dtype);
      return SMELT_OK;
    }
    int64_t d[SMELT_MAX_RANK];
    for (int i = 0; i < n; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, n, d);
    return SMELT_OK;
  }
  int perm[SMELT_MAX_RANK];
  TRY(read_perm(c, x->rank, perm));
  int64_t d[SMELT_MAX_RANK];
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[perm[i]];
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

static smelt_status transpose_run(op_ctx *c) {
  tensor *x = c->in[0];
  int perm[SMELT_MAX_RANK];
  TRY(read_perm(c, x->rank, perm));
  su_transpose(c->out[0]->data, x->data, dtype_size(x->dtype), x->rank, x->dims, perm, c->pool);
  return SMELT_OK;
}

/* ---- DepthToSpace, SpaceToDepth ---- */

static smelt_status block_size(op_ctx *c, int64_t *b) {
  *b = op_attr_int(c, "blocksize", 0);
  if (*b <= 0 || *b > (1 << 20))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute blocksize is %lld, expected a positive "
                   "value", (long long)*b);
  return SMELT_OK;
}

static int64_t mul_dim(int64_t d, int64_t b) { return dim_known(d) ? d * b : DIM_UNKNOWN; }
static int64_t div_dim(int64_t d, int64_t b) { return dim_known(d) ? d / b : DIM_UNKNOWN; }

static smelt_status check_nchw(const tensor *x, int64_t dim_c_div, int64_t hw_div) {
  if (x->rank >= 0 && x->rank != 4)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 has rank %d, expected 4 (NCHW)", x->rank);
  if (x->rank < 0) return SMELT_OK;
  if (dim_known(x->dims[1]) && x->dims[1] % dim_c_div)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels %lld are not a multiple of %lld",
                   (long long)x->dims[1], (long long)dim_c_div);
  for (int i = 2; i < 4; i++)
    if (dim_known(x->dims[i]) && x->dims[i] % hw_div)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "dimension %d (%lld) is not a multiple of the "
                     "block size %lld", i, (long long)x->dims[i], (long long)hw_div);
  return SMELT_OK;
}

static bool is_crd(op_ctx *c) {
  const char *m = ir_attr_string(c->node, "mode", "DCR");
  return !strcmp(m, "CRD");
}

static smelt_status d2s_infer(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t b;
  TRY(su_check_movable(x, 0));
  TRY(block_size(c, &b));
  const char *m = ir_attr_string(c->node, "mode", "DCR");
  if (strcmp(m, "DCR") && strcmp(m, "CRD"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is not DCR or CRD", q(m));
  TRY(check_nchw(x, b * b, 1));
  int64_t d[4] = {DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN};
  if (x->rank == 4)
    d[0] = x->dims[0], d[1] = div_dim(x->dims[1], b * b), d[2] = mul_dim(x->dims[2], b),
    d[3] = mul_dim(x->dims[3], b);
  op_set_out(c, 0, x->dtype, 4, d);
  return SMELT_OK;
}

static smelt_status d2s_run(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t b, n = x->dims[0], ch = x->dims[1], h = x->dims[2], w = x->dims[3];
  TRY(block_size(c, &b));
  int64_t cb = ch / (b * b);
  if (is_crd(c)) {
    int64_t dims[6] = {n, cb, b, b, h, w};
    su_transpose(c->out[0]->data, x->data, dtype_size(x->dtype), 6, dims,
                 (const int[]){0, 1, 4, 2, 5, 3}, c->pool);
  } else {
    int64_t dims[6] = {n, b, b, cb, h, w};
    su_transpose(c->out[0]->data, x->data, dtype_size(x->dtype), 6, dims,
                 (const int[]){0, 3, 4, 1, 5, 2}, c->pool);
  }
  return SMELT_OK;
}

static smelt_status s2d_infer(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t b;
  TRY(su_check_movable(x, 0));
  TRY(block_size(c, &b));
  TRY(check_nchw(x, 1, b));
  int64_t d[4] = {DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN, DIM_UNKNOWN};
  if (x->rank == 4)
    d[0] = x->dims[0], d[1] = mul_dim(x->dims[1], b * b), d[2] = div_dim(x->dims[2], b),
    d[3] = div_dim(x->dims[3], b);
  op_set_out(c, 0, x->dtype, 4, d);
  return SMELT_OK;
}

static smelt_status s2d_run(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t b;
  TRY(block_size(c, &b));
  int64_t dims[6] = {x->dims[0], x->dims[1], x->dims[2] / b, b, x->dims[3] / b, b};
  su_transpose(c->out[0]->data, x->data, dtype_size(x->dtype), 6, dims,
               (const int[]){0, 3, 5, 1, 2, 4}, c->pool);
  return SMELT_OK;
}

const op_def op_family_transpose[] = {
    {"Transpose", "", 1, 1, 1, 1, transpose_infer, transpose_run, false},
    {"DepthToSpace", "", 1, 1, 1, 1, d2s_infer, d2s_run, false},
    {"SpaceToDepth", "", 1, 1, 1, 1, s2d_infer, s2d_run, false},
    {0}};
