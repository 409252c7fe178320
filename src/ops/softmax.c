/* Softmax, LogSoftmax, Hardmax.  Opset >= 13: along one axis (default -1).
 * Opset < 13: the input is coerced to 2-D at axis (default 1) and each row
 * of prod(dims[axis:]) elements is normalized.  Rows (strided for an inner
 * axis) are computed in double and run in parallel.  f32 Softmax over
 * contiguous rows runs the vectorized row kernel of kernels/vmath.h. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/vmath.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef enum smax_kind { SMAX_SOFT, SMAX_LOG, SMAX_HARD } smax_kind;

static smelt_status smax_axis(op_ctx *c, int rank, int *axis) {
  int64_t dflt = c->opset >= 13 ? -1 : 1;
  if (rank == 0 && c->opset < 13) { /* a scalar is one row of one element */
    *axis = 0;
    return SMELT_OK;
  }
  return op_axis(op_attr_int(c, "axis", dflt), rank, "axis", axis);
}

static smelt_status smax_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "input"));
  const tensor *x = c->in[0];
  if (x->rank >= 0) {
    int axis;
    TRY(smax_axis(c, x->rank, &axis));
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

typedef struct smax_job {
  const tensor *x;
  tensor *y;
  int64_t n, inner;
  smax_kind kind;
  const vmath_kernels *vm;
  atomic_bool failed;
} smax_job;

static void smax_row(const smax_job *j, double *v) {
  int64_t n = j->n, arg = 0;
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (v[i] > mx || i == 0) mx = v[i], arg = i;
  if (j->kind == SMAX_HARD) {
    for (int64_t i = 0; i < n; i++) v[i] = i == arg ? 1.0 : 0.0;
    return;
  }
  double sum = 0;
  if (j->kind == SMAX_LOG) {
    for (int64_t i = 0; i < n; i++) sum += exp(v[i] - mx);
    double lse = mx + log(sum);
    for (int64_t i = 0; i < n; i++) v[i] -= lse;
  } else {
    for (int64_t i = 0; i < n; i++) sum += (v[i] = exp(v[i] - mx));
    double inv = 1.0 / sum;
    for (int64_t i = 0; i < n; i++) v[i] *= inv;
  }
}

/* The hot case (attention scores): an f32 Softmax over contiguous rows,
 * vectorized exp and a double sum (kernels/vmath.h); on the portable path
 * expf and a double sum, within an ulp or two of the double path. */
static void smax_rows_f32(const smax_job *j, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r++) {
    const float *x = (const float *)j->x->data + r * j->n;
    float *y = (float *)j->y->data + r * j->n;
    if (j->vm) {
      j->vm->softmax_row(x, y, j->n);
      continue;
    }
    float mx = x[0];
    for (int64_t i = 1; i < j->n; i++) mx = x[i] > mx || mx != mx ? x[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < j->n; i++) sum += (y[i] = expf(x[i] - mx));
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < j->n; i++) y[i] *= inv;
  }
}

static void smax_rows(void *vctx, int64_t r0, int64_t r1) {
  smax_job *j = vctx;
  if (j->kind == SMAX_SOFT && j->inner == 1 && j->n > 0 && j->x->dtype == SMELT_F32) {
    smax_rows_f32(j, r0, r1);
    return;
  }
  double *buf = NULL;
  if (nn_alloc((void **)&buf, j->n, sizeof(double), "softmax row")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    int64_t off = (r / j->inner) * j->n * j->inner + r % j->inner;
    nn_load_f64(j->x->dtype, j->x->data, off, j->inner, j->n, buf);
    smax_row(j, buf);
    nn_store_f64(j->y->dtype, j->y->data, off, j->inner, j->n, buf);
  }
  free(buf);
}

static smelt_status smax_run_kind(op_ctx *c, smax_kind kind) {
  const tensor *x = c->in[0];
  int axis;
  TRY(smax_axis(c, x->rank, &axis));
  smax_job j = {.x = x, .y = c->out[0], .kind = kind, .vm = vmath_for_ops()};
  int64_t outer;
  if (x->rank == 0) outer = j.n = j.inner = 1;
  else nn_split_axis(x, axis, c->opset < 13, &outer, &j.n, &j.inner);
  if (tensor_numel(x) == 0) return SMELT_OK;
  pool_parallel_for(c->pool, outer * j.inner, 1 + 16384 / (j.n + 1), smax_rows, &j);
  if (atomic_load(&j.failed)) return err_nomem("softmax row", (size_t)j.n * 8);
  return SMELT_OK;
}

static smelt_status softmax_run(op_ctx *c) { return smax_run_kind(c, SMAX_SOFT); }
static smelt_status logsoftmax_run(op_ctx *c) { return smax_run_kind(c, SMAX_LOG); }
static smelt_status hardmax_run(op_ctx *c) { return smax_run_kind(c, SMAX_HARD); }

const op_def op_family_softmax[] = {
    {"Softmax", "", 1, 1, 1, 1, smax_infer, softmax_run, false},
    {"LogSoftmax", "", 1, 1, 1, 1, smax_infer, logsoftmax_run, false},
    {"Hardmax", "", 1, 1, 1, 1, smax_infer, hardmax_run, false},
    {0}};
