/* SwiGLU (opset 28): Y = A * sigmoid(alpha * A) * B, A and B of one shape
 * (no broadcasting).  Each step is rounded to the input type, as ONNX's
 * reference computes it in that type. */
#include <math.h>
#include <stdlib.h>

#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status swiglu_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "A"));
  TRY(nn_check_same_dtype(c, 1, "B", 0, "A"));
  const tensor *a = c->in[0], *b = c->in[1];
  if (a->rank >= 0 && b->rank >= 0) {
    bool same = a->rank == b->rank;
    for (int i = 0; same && i < a->rank; i++)
      same = !dim_known(a->dims[i]) || !dim_known(b->dims[i]) || a->dims[i] == b->dims[i];
    if (!same) return err_set(SMELT_ERR_INVALID_ARGUMENT, "A and B must have the same shape");
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status swiglu_run(op_ctx *c) {
  const tensor *a = c->in[0], *b = c->in[1];
  if (tensor_numel(a) != tensor_numel(b))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "A and B must have the same shape");
  smelt_dtype dt = a->dtype;
  double alpha = op_attr_float(c, "alpha", 1.0f);
  int64_t n = tensor_numel(a);
  double *va = NULL, *vb = NULL;
  smelt_status s = nn_alloc((void **)&va, n + 1, sizeof(double), "A");
  if (!s) s = nn_alloc((void **)&vb, n + 1, sizeof(double), "B");
  if (!s) {
    nn_load_f64(dt, a->data, 0, 1, n, va);
    nn_load_f64(dt, b->data, 0, 1, n, vb);
    for (int64_t i = 0; i < n; i++) {
      double sig = nn_round_to(dt, 1.0 / (1.0 + exp(-alpha * va[i])));
      va[i] = nn_round_to(dt, nn_round_to(dt, va[i] * sig) * vb[i]);
    }
    nn_store_f64(dt, c->out[0]->data, 0, 1, n, va);
  }
  free(va);
  free(vb);
  return s;
}

const op_def op_family_swiglu[] = {
    {"SwiGLU", "", 2, 2, 1, 1, swiglu_infer, swiglu_run, false},
    {0}};
