/* Slice (strided windows, negative steps) and ReverseSequence (per-batch
 * reversal along time).  Slice is a strided view copied with su_copy_strided. */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"

/* The slice parameters of every axis: axes not named keep [0, dim) step 1. */
typedef struct slice_spec {
  int n;
  int64_t starts[SMELT_MAX_RANK], ends[SMELT_MAX_RANK], axes[SMELT_MAX_RANK],
      steps[SMELT_MAX_RANK];
} slice_spec;

/* Reads one of the int tensors of Slice-10+; *known false if its value is not
 * known yet. */
static smelt_status read_param(op_ctx *c, int i, const char *what, int64_t *v, int *n,
                               bool *known) {
  tensor *t = op_in(c, i);
  if (!t) {
    *n = -1;
    return SMELT_OK;
  }
  TRY(su_check_index_type(t, what));
  if (!t->data) {
    *known = false;
    return SMELT_OK;
  }
  return su_read_ints(t, what, SMELT_MAX_RANK, v, n);
}

static smelt_status copy_attr(op_ctx *c, const char *name, int64_t *v, int *n) {
  const int64_t *a = ir_attr_ints(c->node, name, n);
  if (!a) {
    *n = -1;
    return SMELT_OK;
  }
  if (*n > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute %s has %d entries", name, *n);
  memcpy(v, a, sizeof *v * (size_t)*n);
  return SMELT_OK;
}

/* Gathers starts/ends/axes/steps from attributes (opset < 10) or inputs.
 * *known false when some value is not known statically. */
static smelt_status read_spec(op_ctx *c, int rank, slice_spec *s, bool *known) {
  int ns, ne, na, nt = -1;
  *known = true;
  if (c->opset < 10) {
    TRY(copy_attr(c, "starts", s->starts, &ns));
    TRY(copy_attr(c, "ends", s->ends, &ne));
    TRY(copy_attr(c, "axes", s->axes, &na));
    if (ns < 0 || ne < 0)
      return err_set(SMELT_ERR_INVALID_MODEL, "attributes starts and ends are required");
  } else {
    if (!op_in(c, 1) || !op_in(c, 2))
      return err_set(SMELT_ERR_INVALID_MODEL, "inputs starts and ends are required");
    TRY(read_param(c, 1, "input 1 (starts)", s->starts, &ns, known));
    TRY(read_param(c, 2, "input 2 (ends)", s->ends, &ne, known));
    TRY(read_param(c, 3, "input 3 (axes)", s->axes, &na, known));
    TRY(read_param(c, 4, "input 4 (steps)", s->steps, &nt, known));
    if (!*known) return SMELT_OK;
  }
  if (ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return err_set(SMELT_ERR_INVALID_MODEL, "starts, ends, axes and steps have different lengths "
                   "(%d, %d, %d, %d)", ns, ne, na, nt);
  s->n = ns;
  for (int i = 0; i < ns; i++) {
    if (na < 0) s->axes[i] = i;
    if (nt < 0) s->steps[i] = 1;
    if (s->steps[i] == 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "steps[%d] is 0", i);
  }
  if (ns > rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "%d axes sliced, input rank is %d", ns, rank);
  return su_norm_axes(s->axes, ns, rank, "axes");
}

/* Clamps start/end for a dim per the spec and returns the element count.
 * Unlike Python, a start below -dim with a negative step clamps to 0 (the spec
 * and onnxruntime), so it still yields element 0. */
static int64_t slice_count(int64_t dim, int64_t step, int64_t *start, int64_t end) {
  int64_t st = *start, en = end;
  if (dim == 0) {
    *start = 0;
    return 0;
  }
  if (st < 0) st += dim;
  if (en < 0) en += dim;
  if (step > 0) {
    st = st < 0 ? 0 : st > dim ? dim : st;
    en = en < 0 ? 0 : en > dim ? dim : en;
  } else {
    st = st < 0 ? 0 : st > dim - 1 ? dim - 1 : st;
    en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
  }
  *start = st;
  uint64_t span = step > 0 ? (en > st ? (uint64_t)(en - st) : 0) : (st > en ? (uint64_t)(st - en) : 0);
  uint64_t ustep = step > 0 ? (uint64_t)step : (uint64_t)0 - (uint64_t)step;
  return (int64_t)(span / ustep + (span % ustep != 0));
}

static smelt_status slice_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  slice_spec s;
  bool known;
  TRY(read_spec(c, x->rank, &s, &known));
  int64_t d[SMELT_MAX_RANK];
  memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
  if (!known) {
    /* With known axes only those dims change; else every one may. */
    int64_t ax[SMELT_MAX_RANK];
    int na = -1;
    bool ak = true;
    TRY(read_param(c, 3, "input 3 (axes)", ax, &na, &ak));
    if (ak && na >= 0 && su_norm_axes(ax, na, x->rank, "axes") == SMELT_OK)
      for (int i = 0; i < na; i++) d[ax[i]] = DIM_UNKNOWN;
    else
      for (int i = 0; i < x->rank; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, x->rank, d);
    return SMELT_OK;
  }
  for (int i = 0; i < s.n; i++) {
    int a = (int)s.axes[i];
    int64_t st = s.starts[i];
    if (dim_known(d[a]))
      d[a] = slice_count(d[a], s.steps[i], &st, s.ends[i]);
    else if (!(st == 0 && s.steps[i] == 1 && s.ends[i] >= INT32_MAX))
      d[a] = DIM_UNKNOWN; /* a whole-axis slice keeps its symbol */
  }
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

static smelt_status slice_run(op_ctx *c) {
  tensor *x = c->in[0], *y = c->out[0];
  slice_spec s;
  bool known;
  TRY(read_spec(c, x->rank, &s, &known));
  if (!y->nbytes) return SMELT_OK;
  int64_t es = (int64_t)dtype_size(x->dtype), str[SMELT_MAX_RANK], sstr[SMELT_MAX_RANK];
  su_dense_strides(x->rank, x->dims, str);
  int64_t off = 0;
  for (int k = 0; k < x->rank; k++) sstr[k] = str[k] * es;
  for (int i = 0; i < s.n; i++) {
    int a = (int)s.axes[i];
    int64_t st = s.starts[i];
    int64_t n = slice_count(x->dims[a], s.steps[i], &st, s.ends[i]);
    off += st * str[a] * es;
    /* With two or more elements |step| < dim, so the product fits; a huge
     * step takes one element and its stride is never used. */
    sstr[a] = n > 1 ? s.steps[i] * str[a] * es : 0;
  }
  su_copy_strided(y->data, (const char *)x->data + off, (size_t)es, y->rank, y->dims, sstr,
                  c->pool);
  return SMELT_OK;
}

/* ---- ReverseSequence ---- */

static smelt_status revseq_axes(op_ctx *c, int *b, int *t) {
  int64_t ba = op_attr_int(c, "batch_axis", 1), ta = op_attr_int(c, "time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return err_set(SMELT_ERR_INVALID_MODEL, "batch_axis %lld and time_axis %lld must be 0 and 1 "
                   "in some order", (long long)ba, (long long)ta);
  *b = (int)ba;
  *t = (int)ta;
  return SMELT_OK;
}

static smelt_status revseq_infer(op_ctx *c) {
  tensor *x = c->in[0], *len = c->in[1];
  int b = 0, t = 0;
  TRY(su_check_movable(x, 0));
  TRY(revseq_axes(c, &b, &t));
  TRY(su_check_i64(len, "input 1 (sequence_lens)"));
  if (x->rank >= 0 && x->rank < 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 has rank %d, expected at least 2", x->rank);
  if (len->rank >= 0 && len->rank != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (sequence_lens) has rank %d, expected 1",
                   len->rank);
  if (x->rank >= 2 && len->rank == 1 && dim_known(x->dims[b]) && dim_known(len->dims[0]) &&
      x->dims[b] != len->dims[0])
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "sequence_lens has %lld entries for a batch of "
                   "%lld", (long long)len->dims[0], (long long)x->dims[b]);
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status revseq_run(op_ctx *c) {
  tensor *x = c->in[0], *len = c->in[1];
  int b = 0, t = 0;
  TRY(revseq_axes(c, &b, &t));
  int64_t str[SMELT_MAX_RANK], es = (int64_t)dtype_size(x->dtype);
  su_dense_strides(x->rank, x->dims, str);
  int64_t nb = x->dims[b], nt = x->dims[t], inner = str[1] * es;
  const char *src = x->data;
  char *dst = c->out[0]->data;
  if (x->nbytes) memcpy(dst, src, x->nbytes);
  for (int64_t i = 0; i < nb; i++) {
    int64_t l = ((const int64_t *)len->data)[i];
    if (l < 0 || l > nt)
      return err_set(SMELT_ERR_RUNTIME, "sequence_lens[%lld] is %lld, outside 0..%lld",
                     (long long)i, (long long)l, (long long)nt);
    for (int64_t k = 0; k < l; k++)
      memcpy(dst + (i * str[b] + k * str[t]) * es, src + (i * str[b] + (l - 1 - k) * str[t]) * es,
             (size_t)inner);
  }
  return SMELT_OK;
}

const op_def op_family_slice[] = {
    {"Slice", "", 1, 5, 1, 1, slice_infer, slice_run, false},
    {"ReverseSequence", "", 2, 2, 1, 1, revseq_infer, revseq_run, false},
    {0}};
