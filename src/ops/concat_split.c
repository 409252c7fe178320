/* Concat and Split: joining and cutting along one axis.  Both copy whole
 * contiguous runs (everything after the axis) per outer index. */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"

/* Bytes after one step along axis, and the number of outer steps. */
static void axis_layout(const tensor *t, int axis, int64_t *outer, int64_t *inner_bytes) {
  *outer = shape_numel(axis, t->dims);
  *inner_bytes = shape_numel(t->rank - axis, t->dims + axis) * (int64_t)dtype_size(t->dtype);
}

/* ---- Concat ---- */

/* Merges dim b into *a for a non-concat axis: known sizes must agree. */
static smelt_status merge_dim(int64_t *a, int64_t b, int in, int axis) {
  if (dim_known(*a) && dim_known(b) && *a != b)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d has size %lld on axis %d, input 0 has "
                   "%lld", in, (long long)b, axis, (long long)*a);
  /* The sizes must be equal at run time, so any known or symbolic size wins
   * over an unknown one. */
  if (!dim_known(*a) && (dim_known(b) || *a == DIM_UNKNOWN)) *a = b;
  return SMELT_OK;
}

static smelt_status concat_infer(op_ctx *c) {
  const tensor *first = NULL;
  for (int i = 0; i < c->n_in; i++) {
    tensor *t = c->in[i];
    if (!t) return err_set(SMELT_ERR_INVALID_MODEL, "input %d is missing", i);
    TRY(su_check_movable(t, i));
    if (t->dtype != c->in[0]->dtype && t->dtype && c->in[0]->dtype)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d has type %s, input 0 %s", i,
                     dtype_name(t->dtype), dtype_name(c->in[0]->dtype));
    if (t->rank < 0) continue;
    if (first && t->rank != first->rank)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d has rank %d, an earlier input %d", i,
                     t->rank, first->rank);
    if (!first) first = t;
  }
  if (!first) {
    su_out_unknown(c, 0, c->in[0]->dtype);
    return SMELT_OK;
  }
  int axis;
  if (c->opset >= 4 && !ir_attr_find(c->node, "axis"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute axis is required");
  TRY(op_axis(op_attr_int(c, "axis", 1), first->rank, "attribute axis", &axis));
  int64_t d[SMELT_MAX_RANK];
  memcpy(d, first->dims, sizeof(int64_t) * (size_t)first->rank);
  int64_t sum = 0;
  for (int i = 0; i < c->n_in; i++) {
    tensor *t = c->in[i];
    if (t->rank < 0) {
      sum = DIM_UNKNOWN;
      continue;
    }
    for (int k = 0; k < t->rank; k++)
      if (k != axis) TRY(merge_dim(&d[k], t->dims[k], i, k));
    if (sum >= 0) sum = dim_known(t->dims[axis]) ? sum + t->dims[axis] : DIM_UNKNOWN;
  }
  d[axis] = sum;
  op_set_out(c, 0, c->in[0]->dtype, first->rank, d);
  return SMELT_OK;
}

static smelt_status concat_run(op_ctx *c) {
  tensor *y = c->out[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 1), y->rank, "attribute axis", &axis));
  int64_t outer, out_inner;
  axis_layout(y, axis, &outer, &out_inner);
  char *dst = y->data;
  int64_t off = 0;
  for (int i = 0; i < c->n_in; i++) {
    int64_t o, inner;
    axis_layout(c->in[i], axis, &o, &inner);
    const char *src = c->in[i]->data;
    for (int64_t k = 0; inner && k < outer; k++)
      if (src + k * inner != dst + k * out_inner + off) /* a compiled plan put it in place */
        memcpy(dst + k * out_inner + off, src + k * inner, (size_t)inner);
    off += inner;
  }
  return SMELT_OK;
}

/* ---- Split ---- */

/* Sizes of the n outputs along the axis, from the split input/attribute,
 * num_outputs (uneven last chunk) or equal parts.  sizes are DIM_UNKNOWN when
 * they cannot be known statically. */
static smelt_status split_sizes(op_ctx *c, int64_t dim, int64_t *sizes) {
  int n = c->n_out, ns = 0;
  int64_t sp[SMELT_MAX_RANK * 4];
  bool have = false;
  tensor *st = op_in(c, 1);
  if (c->opset >= 13 && st) {
    TRY(su_check_i64(st, "input 1 (split)"));
    if (!st->data) {
      for (int i = 0; i < n; i++) sizes[i] = DIM_UNKNOWN;
      return SMELT_OK;
    }
    if (tensor_numel(st) != n)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (split) has %lld entries for %d outputs",
                     (long long)tensor_numel(st), n);
    for (int i = 0; i < n; i++) sp[i] = su_index_at(st, i);
    have = true;
  } else if (c->opset < 13) {
    const int64_t *a = ir_attr_ints(c->node, "split", &ns);
    if (a) {
      if (ns != n)
        return err_set(SMELT_ERR_INVALID_MODEL, "attribute split has %d entries for %d outputs",
                       ns, n);
      memcpy(sp, a, sizeof *sp * (size_t)n);
      have = true;
    }
  }
  if (have) {
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      if (sp[i] < 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "split[%d] is %lld", i, (long long)sp[i]);
      sum += sp[i];
      sizes[i] = sp[i];
    }
    if (dim_known(dim) && sum != dim)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "split sizes sum to %lld, the axis has %lld",
                     (long long)sum, (long long)dim);
    return SMELT_OK;
  }
  int64_t no = op_attr_int(c, "num_outputs", 0);
  if (c->opset >= 18 && ir_attr_find(c->node, "num_outputs") && no != n)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute num_outputs is %lld, the node has %d "
                   "outputs", (long long)no, n);
  for (int i = 0; i < n; i++) sizes[i] = DIM_UNKNOWN;
  if (!dim_known(dim)) return SMELT_OK;
  bool uneven_ok = c->opset >= 18;
  int64_t chunk = uneven_ok ? (dim + n - 1) / n : dim / n;
  if (!uneven_ok && dim % n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "axis of size %lld does not split into %d equal "
                   "parts", (long long)dim, n);
  if (dim - chunk * (n - 1) < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "axis of size %lld cannot make %d chunks of %lld",
                   (long long)dim, n, (long long)chunk);
  for (int i = 0; i < n; i++) sizes[i] = i < n - 1 ? chunk : dim - chunk * (n - 1);
  return SMELT_OK;
}

static smelt_status split_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (c->n_out > SMELT_MAX_RANK * 4)
    return err_set(SMELT_ERR_UNSUPPORTED, "Split into %d outputs (at most %d)", c->n_out,
                   SMELT_MAX_RANK * 4);
  if (x->rank < 0) {
    for (int i = 0; i < c->n_out; i++) su_out_unknown(c, i, x->dtype);
    return SMELT_OK;
  }
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  int64_t sizes[SMELT_MAX_RANK * 4], d[SMELT_MAX_RANK];
  TRY(split_sizes(c, x->dims[axis], sizes));
  memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int i = 0; i < c->n_out; i++) {
    d[axis] = sizes[i];
    op_set_out(c, i, x->dtype, x->rank, d);
  }
  return SMELT_OK;
}

static smelt_status split_run(op_ctx *c) {
  tensor *x = c->in[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  int64_t outer, in_inner, off = 0;
  axis_layout(x, axis, &outer, &in_inner);
  const char *src = x->data;
  for (int i = 0; i < c->n_out; i++) {
    int64_t o, inner;
    axis_layout(c->out[i], axis, &o, &inner);
    char *dst = c->out[i]->data;
    for (int64_t k = 0; inner && k < outer; k++)
      memcpy(dst + k * inner, src + k * in_inner + off, (size_t)inner);
    off += inner;
  }
  return SMELT_OK;
}

const op_def op_family_concat_split[] = {
    {"Concat", "", 1, -1, 1, 1, concat_infer, concat_run, false},
    {"Split", "", 1, 2, 1, -1, split_infer, split_run, false},
    {0}};
