/* Det: determinants of the trailing square matrices, by LU decomposition
 * with partial pivoting in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status det_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "X"));
  const tensor *x = c->in[0];
  if (x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 2) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input has rank %d, expected >= 2", x->rank);
  int64_t m = x->dims[x->rank - 2], n = x->dims[x->rank - 1];
  if (dim_known(m) && dim_known(n) && m != n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "the last two dims (%lld, %lld) are not square", (long long)m,
                   (long long)n);
  op_set_out(c, 0, x->dtype, x->rank - 2, x->dims);
  return SMELT_OK;
}

/* Determinant of the n x n matrix a (destroyed). */
static double det_lu(double *a, int64_t n) {
  double det = 1;
  for (int64_t k = 0; k < n; k++) {
    int64_t p = k;
    for (int64_t i = k + 1; i < n; i++)
      if (fabs(a[i * n + k]) > fabs(a[p * n + k])) p = i;
    if (a[p * n + k] == 0) return 0;
    if (p != k) {
      for (int64_t j = 0; j < n; j++) {
        double t = a[k * n + j];
        a[k * n + j] = a[p * n + j];
        a[p * n + j] = t;
      }
      det = -det;
    }
    det *= a[k * n + k];
    for (int64_t i = k + 1; i < n; i++) {
      double f = a[i * n + k] / a[k * n + k];
      for (int64_t j = k + 1; j < n; j++) a[i * n + j] -= f * a[k * n + j];
    }
  }
  return det;
}

static smelt_status det_run(op_ctx *c) {
  const tensor *x = c->in[0];
  int64_t n = x->dims[x->rank - 1], mats = tensor_numel(c->out[0]);
  double *a = NULL;
  TRY(nn_alloc((void **)&a, n * n + 1, sizeof(double), "matrix"));
  for (int64_t i = 0; i < mats; i++) {
    nn_load_f64(x->dtype, x->data, i * n * n, 1, n * n, a);
    double d = det_lu(a, n);
    nn_store_f64(x->dtype, c->out[0]->data, i, 1, 1, &d);
  }
  free(a);
  return SMELT_OK;
}

const op_def op_family_det[] = {
    {"Det", "", 1, 1, 1, 1, det_infer, det_run, false},
    {0}};
