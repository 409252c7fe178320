/* Reduce* (Sum Mean Max Min Prod L1 L2 LogSum LogSumExp SumSquare) and
 * ArgMax/ArgMin.
 *
 * Axes come from the `axes` attribute before the opset where they became an
 * input (13 for ReduceSum, 18 for the rest).  The input's dims are merged
 * into runs of kept and reduced dims; each output walks its reduced elements
 * one innermost run at a time (a strided load into a scratch row).  Floats
 * accumulate in double; integers in int64 (wrapping like the element type,
 * uint64 compared unsigned) so large values stay exact.  An empty reduction
 * gives the operation's identity: 0 for sums, 1 for Prod, the lowest value
 * (-inf) for Max, the highest (+inf) for Min, -inf for LogSum(Exp), and
 * NaN for Mean. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

typedef enum red_kind {
  RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD, RED_L1, RED_L2, RED_LOGSUM, RED_LOGSUMEXP,
  RED_SUMSQ
} red_kind;

typedef struct red_op {
  const char *name;
  red_kind kind;
  int axes_input_opset; /* from this opset on, axes is input 1 */
} red_op;

static const red_op red_ops[] = {
    {"ReduceSum", RED_SUM, 13},         {"ReduceMean", RED_MEAN, 18},
    {"ReduceMax", RED_MAX, 18},         {"ReduceMin", RED_MIN, 18},
    {"ReduceProd", RED_PROD, 18},       {"ReduceL1", RED_L1, 18},
    {"ReduceL2", RED_L2, 18},           {"ReduceLogSum", RED_LOGSUM, 18},
    {"ReduceLogSumExp", RED_LOGSUMEXP, 18}, {"ReduceSumSquare", RED_SUMSQ, 18},
};

static const red_op *find_red(op_ctx *c) {
  for (size_t i = 0; i < sizeof red_ops / sizeof *red_ops; i++)
    if (!strcmp(red_ops[i].name, c->node->op_type)) return &red_ops[i];
  return &red_ops[0];
}

static const smelt_dtype red_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64, SMELT_I32,
                                        SMELT_I64, SMELT_U32, SMELT_U64, SMELT_I8, SMELT_U8,
                                        SMELT_BOOL, SMELT_UNDEFINED};

static smelt_status red_check_type(op_ctx *c, red_kind k) {
  TRY(op_check_dtype(c, 0, red_types));
  smelt_dtype dt = c->in[0]->dtype;
  if (dt == SMELT_BOOL && k != RED_MAX && k != RED_MIN)
    return err_set(SMELT_ERR_UNSUPPORTED, "input 0 has type bool, which only ReduceMax/ReduceMin accept");
  return SMELT_OK;
}

/* ---- plan: merged runs of kept and reduced dims ---- */

typedef struct red_plan {
  int nk, nr;
  int64_t kdim[SMELT_MAX_RANK], kstride[SMELT_MAX_RANK];
  int64_t rdim[SMELT_MAX_RANK], rstride[SMELT_MAX_RANK];
  int64_t nout, count; /* outputs; elements reduced into each */
} red_plan;

static void red_make_plan(const tensor *x, const bool *mask, red_plan *p) {
  memset(p, 0, sizeof *p);
  p->nout = p->count = 1;
  int64_t stride = 1;
  int last = -1; /* 0 kept, 1 reduced: the class of the run being extended */
  int64_t strides[SMELT_MAX_RANK];
  for (int d = x->rank - 1; d >= 0; d--) {
    strides[d] = stride;
    stride *= x->dims[d];
  }
  for (int d = 0; d < x->rank; d++) {
    int64_t n = x->dims[d];
    if (mask[d]) p->count *= n;
    else p->nout *= n;
    if (n == 1) continue;
    int cls = mask[d] ? 1 : 0;
    int64_t *dim = cls ? p->rdim : p->kdim, *str = cls ? p->rstride : p->kstride;
    int *cnt = cls ? &p->nr : &p->nk;
    if (cls == last && *cnt > 0) { /* extends the previous run (dense row-major) */
      dim[*cnt - 1] *= n;
      str[*cnt - 1] = strides[d];
    } else {
      dim[*cnt] = n;
      str[*cnt] = strides[d];
      (*cnt)++;
    }
    last = cls;
  }
}

/* ---- accumulation ---- */

typedef struct red_job {
  const red_plan *p;
  red_kind kind;
  const tensor *x;
  tensor *y;
  bool is_int, is_unsigned;
  int64_t int_lo, int_hi; /* the element type's range (empty Max/Min) */
  atomic_bool failed;
} red_job;

typedef struct red_acc {
  double f, m; /* value; LogSumExp's running max */
  int64_t i;
} red_acc;

static void acc_init(const red_job *j, red_acc *a) {
  a->m = -INFINITY;
  a->f = j->kind == RED_PROD ? 1.0 : j->kind == RED_MAX ? -INFINITY : j->kind == RED_MIN ? INFINITY : 0.0;
  a->i = j->kind == RED_PROD ? 1 : j->kind == RED_MAX ? j->int_lo : j->kind == RED_MIN ? j->int_hi : 0;
}

static void acc_f64(red_kind k, red_acc *a, const double *v, int64_t n) {
  switch (k) {
    case RED_SUM: case RED_MEAN: for (int64_t i = 0; i < n; i++) a->f += v[i]; break;
    case RED_LOGSUM: for (int64_t i = 0; i < n; i++) a->f += v[i]; break;
    case RED_L1: for (int64_t i = 0; i < n; i++) a->f += fabs(v[i]); break;
    case RED_L2: case RED_SUMSQ: for (int64_t i = 0; i < n; i++) a->f += v[i] * v[i]; break;
    case RED_PROD: for (int64_t i = 0; i < n; i++) a->f *= v[i]; break;
    case RED_MAX: for (int64_t i = 0; i < n; i++) a->f = v[i] > a->f || isnan(v[i]) ? v[i] : a->f; break;
    case RED_MIN: for (int64_t i = 0; i < n; i++) a->f = v[i] < a->f || isnan(v[i]) ? v[i] : a->f; break;
    case RED_LOGSUMEXP: /* streaming: a->f is the sum of exp(x - a->m) */
      for (int64_t i = 0; i < n; i++) {
        if (v[i] == -INFINITY) continue;
        if (v[i] > a->m) {
          a->f = a->f * exp(a->m - v[i]) + 1.0;
          a->m = v[i];
        } else {
          a->f += exp(v[i] - a->m);
        }
      }
      break;
  }
}

static void acc_i64(const red_job *j, red_acc *a, const int64_t *v, int64_t n) {
  uint64_t u = (uint64_t)a->i; /* wrapping arithmetic without UB */
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = (uint64_t)v[i];
    switch (j->kind) {
      case RED_MAX:
        if (j->is_unsigned ? x > u : v[i] > (int64_t)u) u = x;
        break;
      case RED_MIN:
        if (j->is_unsigned ? x < u : v[i] < (int64_t)u) u = x;
        break;
      case RED_PROD: u *= x; break;
      case RED_L1: u += (uint64_t)(v[i] < 0 && !j->is_unsigned ? -x : x); break;
      case RED_L2: case RED_SUMSQ: u += x * x; break;
      default: u += x; break; /* Sum, Mean, LogSum, LogSumExp use the double path */
    }
  }
  a->i = (int64_t)u;
}

/* The final value as double (floats) or int64 (integers). */
static void acc_finish(const red_job *j, red_acc *a) {
  double cnt = (double)j->p->count;
  if (j->is_int) {
    if (j->kind == RED_MEAN) a->i = j->p->count ? (int64_t)((double)a->i / cnt) : 0;
    if (j->kind == RED_L2) a->i = (int64_t)sqrt((double)a->i);
    return;
  }
  switch (j->kind) {
    case RED_MEAN: a->f = a->f / cnt; break; /* 0/0: NaN for an empty set */
    case RED_L2: a->f = sqrt(a->f); break;
    case RED_LOGSUM: a->f = log(a->f); break;
    case RED_LOGSUMEXP: a->f = a->m + log(a->f); break; /* empty: -inf + log 0 = -inf */
    default: break;
  }
}

/* Integer inputs of LogSum/LogSumExp compute in double. */
static bool red_uses_f64(const red_job *j) {
  return !j->is_int || j->kind == RED_LOGSUM || j->kind == RED_LOGSUMEXP;
}

static void red_outputs(void *vctx, int64_t o0, int64_t o1) {
  red_job *j = vctx;
  const red_plan *p = j->p;
  int64_t len = p->nr ? p->rdim[p->nr - 1] : 1, str = p->nr ? p->rstride[p->nr - 1] : 1;
  void *buf = NULL;
  if (nn_alloc(&buf, len, 8, "reduction row")) {
    atomic_store(&j->failed, true);
    return;
  }
  bool f64 = red_uses_f64(j);
  for (int64_t o = o0; o < o1; o++) {
    int64_t base = 0, rem = o;
    for (int d = p->nk - 1; d >= 0; d--) {
      base += (rem % p->kdim[d]) * p->kstride[d];
      rem /= p->kdim[d];
    }
    red_acc a;
    acc_init(j, &a);
    int64_t rc[SMELT_MAX_RANK] = {0};
    for (bool more = p->count > 0; more;) {
      int64_t off = base;
      for (int d = 0; d < p->nr - 1; d++) off += rc[d] * p->rstride[d];
      if (f64) {
        double *v = buf;
        if (j->is_int) {
          nn_load_i64(j->x->dtype, j->x->data, off, str, len, buf);
          for (int64_t i = 0; i < len; i++)
            v[i] = j->is_unsigned ? (double)((uint64_t *)buf)[i] : (double)((int64_t *)buf)[i];
        } else {
          nn_load_f64(j->x->dtype, j->x->data, off, str, len, v);
        }
        acc_f64(j->kind, &a, v, len);
      } else {
        nn_load_i64(j->x->dtype, j->x->data, off, str, len, buf);
        acc_i64(j, &a, buf, len);
      }
      int d = p->nr - 2;
      while (d >= 0 && ++rc[d] == p->rdim[d]) rc[d--] = 0;
      more = d >= 0;
    }
    acc_finish(j, &a);
    if (j->is_int && f64) a.i = (int64_t)a.f;
    if (j->is_int) nn_store_i64(j->y->dtype, j->y->data, o, 1, 1, &a.i);
    else nn_store_f64(j->y->dtype, j->y->data, o, 1, 1, &a.f);
  }
  free(buf);
}

static void int_range(smelt_dtype dt, int64_t *lo, int64_t *hi) {
  switch (dt) {
    case SMELT_I8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case SMELT_U8: *lo = 0, *hi = UINT8_MAX; break;
    case SMELT_BOOL: *lo = 0, *hi = 1; break;
    case SMELT_I16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case SMELT_U16: *lo = 0, *hi = UINT16_MAX; break;
    case SMELT_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case SMELT_U32: *lo = 0, *hi = UINT32_MAX; break;
    case SMELT_U64: *lo = 0, *hi = -1; /* all bits set */ break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
  }
}

/* ---- Reduce* ---- */

/* mask of reduced dims; *noop when the op is the identity. */
static smelt_status red_axes(op_ctx *c, const red_op *op, int rank, bool *mask, bool *known) {
  return nn_reduce_axes(c, rank, c->opset >= op->axes_input_opset, mask, known);
}

static smelt_status reduce_infer(op_ctx *c) {
  const red_op *op = find_red(c);
  const tensor *x = c->in[0];
  TRY(red_check_type(c, op->kind));
  if (c->opset < op->axes_input_opset && op_in(c, 1))
    return err_set(SMELT_ERR_INVALID_MODEL, "%s before opset %d takes axes as an attribute, not an input",
                   op->name, op->axes_input_opset);
  if (x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  bool mask[SMELT_MAX_RANK], known;
  TRY(red_axes(c, op, x->rank, mask, &known));
  bool keep = op_attr_int(c, "keepdims", 1) != 0;
  int64_t dims[SMELT_MAX_RANK];
  int r = 0;
  if (!known) {
    if (!keep) {
      nn_out_unknown(c, 0, x->dtype);
      return SMELT_OK;
    }
    for (int d = 0; d < x->rank; d++) dims[r++] = x->dims[d] == 1 ? 1 : DIM_UNKNOWN;
  } else {
    for (int d = 0; d < x->rank; d++)
      if (!mask[d]) dims[r++] = x->dims[d];
      else if (keep) dims[r++] = 1;
  }
  op_set_out(c, 0, x->dtype, r, dims);
  return SMELT_OK;
}

static smelt_status reduce_run(op_ctx *c) {
  const red_op *op = find_red(c);
  const tensor *x = c->in[0];
  bool mask[SMELT_MAX_RANK], known;
  TRY(red_axes(c, op, x->rank, mask, &known));
  red_plan p;
  red_make_plan(x, mask, &p);
  red_job j = {.p = &p, .kind = op->kind, .x = x, .y = c->out[0], .is_int = !nn_is_float(x->dtype),
               .is_unsigned = dtype_is_unsigned_int(x->dtype)};
  int_range(x->dtype, &j.int_lo, &j.int_hi);
  if (p.nout == 0) return SMELT_OK;
  pool_parallel_for(c->pool, p.nout, 1 + 16384 / (p.count + 1), red_outputs, &j);
  if (atomic_load(&j.failed)) return err_nomem("reduction row", 0);
  return SMELT_OK;
}

/* ---- ArgMax / ArgMin ---- */

static smelt_status arg_infer(op_ctx *c) {
  const tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, red_types));
  if (x->rank < 0) {
    nn_out_unknown(c, 0, SMELT_I64);
    return SMELT_OK;
  }
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "axis", &axis));
  int64_t others = nn_prod(x->dims, 0, axis), after = nn_prod(x->dims, axis + 1, x->rank);
  if (x->dims[axis] == 0 && others > 0 && after > 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot take the arg of an empty axis %d", axis);
  bool keep = op_attr_int(c, "keepdims", 1) != 0;
  int64_t dims[SMELT_MAX_RANK];
  int r = 0;
  for (int d = 0; d < x->rank; d++)
    if (d != axis) dims[r++] = x->dims[d];
    else if (keep) dims[r++] = 1;
  op_set_out(c, 0, SMELT_I64, r, dims);
  return SMELT_OK;
}

typedef struct arg_job {
  const tensor *x;
  int64_t *y;
  int64_t n, inner;
  bool is_max, last, is_int, is_unsigned;
  atomic_bool failed;
} arg_job;

/* True if a should replace the current best b (ties per select_last_index;
 * NaN wins like numpy's argmax/argmin). */
static bool arg_better_f(const arg_job *j, double a, double b) {
  if (isnan(b)) return false;
  if (isnan(a)) return true;
  return j->is_max ? (j->last ? a >= b : a > b) : (j->last ? a <= b : a < b);
}

static bool arg_better_i(const arg_job *j, int64_t a, int64_t b) {
  bool gt = j->is_unsigned ? (uint64_t)a > (uint64_t)b : a > b;
  bool lt = j->is_unsigned ? (uint64_t)a < (uint64_t)b : a < b;
  return j->is_max ? (gt || (j->last && a == b)) : (lt || (j->last && a == b));
}

static void arg_rows(void *vctx, int64_t r0, int64_t r1) {
  arg_job *j = vctx;
  void *buf = NULL;
  if (nn_alloc(&buf, j->n, 8, "arg row")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t r = r0; r < r1; r++) {
    int64_t off = (r / j->inner) * j->n * j->inner + r % j->inner, best = 0;
    if (j->is_int) {
      int64_t *v = buf;
      nn_load_i64(j->x->dtype, j->x->data, off, j->inner, j->n, v);
      for (int64_t i = 1; i < j->n; i++)
        if (arg_better_i(j, v[i], v[best])) best = i;
    } else {
      double *v = buf;
      nn_load_f64(j->x->dtype, j->x->data, off, j->inner, j->n, v);
      for (int64_t i = 1; i < j->n; i++)
        if (arg_better_f(j, v[i], v[best])) best = i;
    }
    j->y[r] = best;
  }
  free(buf);
}

static smelt_status arg_run_kind(op_ctx *c, bool is_max) {
  const tensor *x = c->in[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "axis", &axis));
  arg_job j = {.x = x, .y = c->out[0]->data, .is_max = is_max,
               .last = op_attr_int(c, "select_last_index", 0) != 0,
               .is_int = !nn_is_float(x->dtype), .is_unsigned = dtype_is_unsigned_int(x->dtype)};
  int64_t outer;
  nn_split_axis(x, axis, false, &outer, &j.n, &j.inner);
  if (outer * j.inner == 0) return SMELT_OK;
  pool_parallel_for(c->pool, outer * j.inner, 1 + 16384 / (j.n + 1), arg_rows, &j);
  if (atomic_load(&j.failed)) return err_nomem("arg row", (size_t)j.n * 8);
  return SMELT_OK;
}

static smelt_status argmax_run(op_ctx *c) { return arg_run_kind(c, true); }
static smelt_status argmin_run(op_ctx *c) { return arg_run_kind(c, false); }

const op_def op_family_reduce[] = {
    {"ReduceSum", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceMean", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceMax", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceMin", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceProd", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceL1", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceL2", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceLogSum", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceLogSumExp", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ReduceSumSquare", "", 1, 2, 1, 1, reduce_infer, reduce_run, false},
    {"ArgMax", "", 1, 1, 1, 1, arg_infer, argmax_run, false},
    {"ArgMin", "", 1, 1, 1, 1, arg_infer, argmin_run, false},
    {0}};
