/* Ops that select or locate elements: NonZero, Compress, Unique (output sizes
 * depend on the data: they allocate in run), TopK and OneHot. */
#include <stdlib.h>
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"

/* True if element i of t is nonzero: floats compare by value (so -0 is zero),
 * complex by both parts, everything else by its bytes. */
static bool elem_nonzero(const tensor *t, int64_t i) {
  switch (t->dtype) {
    case SMELT_F32: case SMELT_F64: case SMELT_F16: case SMELT_BF16:
      return tensor_get_f64(t, i) != 0;
    case SMELT_C64: case SMELT_C128: {
      tensor parts;
      int64_t two = 2;
      tensor_view(&parts, t->dtype == SMELT_C64 ? SMELT_F32 : SMELT_F64, 1, &two,
                  (char *)t->data + i * (int64_t)dtype_size(t->dtype));
      return tensor_get_f64(&parts, 0) != 0 || tensor_get_f64(&parts, 1) != 0;
    }
    default: {
      size_t es = dtype_size(t->dtype);
      const uint8_t *p = (const uint8_t *)t->data + (size_t)i * es;
      for (size_t k = 0; k < es; k++)
        if (p[k]) return true;
      return false;
    }
  }
}

/* ---- NonZero ---- */

static smelt_status nonzero_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (x->rank < 0) {
    int64_t d[2] = {DIM_UNKNOWN, DIM_UNKNOWN};
    op_set_out(c, 0, SMELT_I64, 2, d);
    return SMELT_OK;
  }
  int64_t d[2] = {x->rank, DIM_UNKNOWN};
  op_set_out(c, 0, SMELT_I64, 2, d);
  return SMELT_OK;
}

static smelt_status nonzero_run(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  int64_t n = tensor_numel(x), nnz = 0, r = x->rank, idx[SMELT_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) nnz += elem_nonzero(x, i);
  TRY(tensor_alloc(c->out[0], SMELT_I64, 2, (int64_t[]){r, nnz}));
  int64_t *y = c->out[0]->data, k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (elem_nonzero(x, i)) {
      for (int a = 0; a < r; a++) y[a * nnz + k] = idx[a];
      k++;
    }
    for (int a = (int)r - 1; a >= 0; a--) {
      if (++idx[a] < x->dims[a]) break;
      idx[a] = 0;
    }
  }
  return SMELT_OK;
}

/* ---- Compress ---- */

static smelt_status compress_check(op_ctx *c, int *axis) {
  tensor *x = c->in[0], *cond = c->in[1];
  TRY(su_check_movable(x, 0));
  if (cond->dtype != SMELT_BOOL && cond->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (condition) has type %s, expected bool",
                   dtype_name(cond->dtype));
  if (cond->rank >= 0 && cond->rank != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (condition) has rank %d, expected 1",
                   cond->rank);
  *axis = -1;
  if (ir_attr_find(c->node, "axis") && x->rank >= 0)
    TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", axis));
  return SMELT_OK;
}

static smelt_status compress_infer(op_ctx *c) {
  tensor *x = c->in[0];
  int axis;
  TRY(compress_check(c, &axis));
  if (!ir_attr_find(c->node, "axis")) {
    int64_t d = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, 1, &d);
  } else if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
  } else {
    int64_t d[SMELT_MAX_RANK];
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
    d[axis] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, x->rank, d);
  }
  return SMELT_OK;
}

static smelt_status compress_run(op_ctx *c) {
  tensor *x = c->in[0], *cond = c->in[1];
  int axis;
  TRY(compress_check(c, &axis));
  int64_t outer = 1, n = tensor_numel(x), inner = 1, len = tensor_numel(cond), cnt = 0;
  if (axis >= 0) {
    outer = shape_numel(axis, x->dims);
    n = x->dims[axis];
    inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  }
  if (len > n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "condition has %lld entries, the axis only %lld",
                   (long long)len, (long long)n);
  const uint8_t *cv = cond->data;
  for (int64_t i = 0; i < len; i++) cnt += cv[i] != 0;
  int64_t d[SMELT_MAX_RANK];
  int r = 1;
  d[0] = cnt;
  if (axis >= 0) {
    r = x->rank;
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)r);
    d[axis] = cnt;
  }
  TRY(tensor_alloc(c->out[0], x->dtype, r, d));
  size_t blk = (size_t)inner * dtype_size(x->dtype);
  const char *src = x->data;
  char *dst = c->out[0]->data;
  for (int64_t o = 0; blk && o < outer; o++)
    for (int64_t i = 0; i < len; i++)
      if (cv[i]) {
        memcpy(dst, src + (o * n + i) * (int64_t)blk, blk);
        dst += blk;
      }
  return SMELT_OK;
}

/* ---- Unique ---- */

/* Units are the slices along the axis (or single elements without one). */
typedef struct unique_ctx {
  const char *data;
  smelt_dtype dt;
  size_t es;
  int64_t outer, n, inner;
} unique_ctx;

static int unique_cmp(const void *ctx, int64_t a, int64_t b) {
  const unique_ctx *u = ctx;
  for (int64_t o = 0; o < u->outer; o++)
    for (int64_t j = 0; j < u->inner; j++) {
      int64_t base = o * u->n * u->inner + j;
      int r = su_cmp_elem(u->dt, u->data + (base + a * u->inner) * (int64_t)u->es,
                          u->data + (base + b * u->inner) * (int64_t)u->es);
      if (r) return r;
    }
  return 0;
}

static int first_cmp(const void *ctx, int64_t a, int64_t b) {
  const int64_t *first = ctx;
  return first[a] < first[b] ? -1 : first[a] > first[b];
}

static smelt_status unique_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  int64_t d[SMELT_MAX_RANK], u = DIM_UNKNOWN;
  if (ir_attr_find(c->node, "axis") && x->rank >= 0) {
    int axis;
    TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
    d[axis] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, x->rank, d);
  } else if (ir_attr_find(c->node, "axis")) {
    su_out_unknown(c, 0, x->dtype);
  } else {
    op_set_out(c, 0, x->dtype, 1, &u);
  }
  for (int i = 1; i < c->n_out; i++) op_set_out(c, i, SMELT_I64, 1, &u);
  return SMELT_OK;
}

/* Groups sorted units: grp[i] is unit order[i]'s group; returns group count. */
static int64_t unique_group(const unique_ctx *u, const int64_t *order, int64_t n, int64_t *grp) {
  int64_t g = -1;
  for (int64_t i = 0; i < n; i++) {
    if (i == 0 || unique_cmp(u, order[i - 1], order[i])) g++;
    grp[i] = g;
  }
  return g + 1;
}

static smelt_status unique_outputs(op_ctx *c, const unique_ctx *u, int axis, int64_t ng,
                                   const int64_t *first, const int64_t *gpos, const int64_t *inv,
                                   const int64_t *cnt) {
  tensor *x = c->in[0];
  int64_t d[SMELT_MAX_RANK];
  int r = 1;
  d[0] = ng;
  if (axis >= 0) {
    r = x->rank;
    memcpy(d, x->dims, sizeof(int64_t) * (size_t)r);
    d[axis] = ng;
  }
  TRY(tensor_alloc(c->out[0], x->dtype, r, d));
  size_t blk = (size_t)u->inner * u->es;
  char *y = c->out[0]->data;
  for (int64_t g = 0; g < ng; g++)
    for (int64_t o = 0; blk && o < u->outer; o++)
      memcpy(y + (o * ng + gpos[g]) * (int64_t)blk, u->data + (o * u->n + first[g]) * (int64_t)blk,
             blk);
  /* indices (first occurrences), inverse_indices, counts */
  int64_t len[3] = {ng, u->n, ng};
  for (int k = 0; k < 3 && k + 1 < c->n_out; k++)
    TRY(tensor_alloc(c->out[k + 1], SMELT_I64, 1, &len[k]));
  for (int64_t g = 0; g < ng; g++) {
    if (c->n_out > 1) ((int64_t *)c->out[1]->data)[gpos[g]] = first[g];
    if (c->n_out > 3) ((int64_t *)c->out[3]->data)[gpos[g]] = cnt[g];
  }
  for (int64_t i = 0; c->n_out > 2 && i < u->n; i++)
    ((int64_t *)c->out[2]->data)[i] = gpos[inv[i]];
  return SMELT_OK;
}

static smelt_status unique_run(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  int axis = -1;
  if (ir_attr_find(c->node, "axis"))
    TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  bool sorted = op_attr_int(c, "sorted", 1) != 0;
  unique_ctx u = {x->data, x->dtype, dtype_size(x->dtype), 1, tensor_numel(x), 1};
  if (axis >= 0) {
    u.outer = shape_numel(axis, x->dims);
    u.n = x->dims[axis];
    u.inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  }
  int64_t n = u.n;
  /* order/tmp/grp/inv/first/cnt/gpos/gidx: 8 arrays of n. */
  int64_t *mem = malloc(sizeof(int64_t) * 8 * (size_t)(n ? n : 1));
  if (!mem) return err_nomem("Unique work arrays", sizeof(int64_t) * 8 * (size_t)n);
  int64_t *order = mem, *tmp = mem + n, *grp = mem + 2 * n, *inv = mem + 3 * n,
          *first = mem + 4 * n, *cnt = mem + 5 * n, *gpos = mem + 6 * n, *gidx = mem + 7 * n;
  for (int64_t i = 0; i < n; i++) order[i] = i;
  su_sort_idx(order, tmp, n, unique_cmp, &u);
  int64_t ng = unique_group(&u, order, n, grp);
  for (int64_t i = 0; i < n; i++) {
    int64_t g = grp[i];
    inv[order[i]] = g;
    if (i == 0 || grp[i - 1] != g) first[g] = order[i], cnt[g] = 0; /* stable: lowest index */
    cnt[g]++;
  }
  /* Output position of each group: sorted order, or by first occurrence. */
  for (int64_t g = 0; g < ng; g++) gidx[g] = g;
  if (!sorted) su_sort_idx(gidx, tmp, ng, first_cmp, first);
  for (int64_t k = 0; k < ng; k++) gpos[gidx[k]] = k;
  smelt_status s = unique_outputs(c, &u, axis, ng, first, gpos, inv, cnt);
  free(mem);
  return s;
}

/* ---- TopK ---- */

static smelt_status topk_k(op_ctx *c, int64_t *k, bool *known) {
  *known = true;
  if (c->opset < 10) {
    *k = op_attr_int(c, "k", -1);
  } else {
    tensor *t = op_in(c, 1);
    if (!t) return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (K) is required");
    TRY(su_check_i64(t, "input 1 (K)"));
    if (!t->data) {
      *known = false;
      return SMELT_OK;
    }
    if (tensor_numel(t) != 1)
      return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (K) must hold one value");
    *k = ((const int64_t *)t->data)[0];
  }
  if (*k < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "K is %lld", (long long)*k);
  return SMELT_OK;
}

static smelt_status topk_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (x->dtype == SMELT_BOOL || dtype_size(x->dtype) == 16 || x->dtype == SMELT_C64)
    return err_set(SMELT_ERR_UNSUPPORTED, "TopK on type %s is not supported", dtype_name(x->dtype));
  int64_t k;
  bool known;
  TRY(topk_k(c, &k, &known));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    su_out_unknown(c, 1, SMELT_I64);
    return SMELT_OK;
  }
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), x->rank, "attribute axis", &axis));
  int64_t d[SMELT_MAX_RANK];
  memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
  if (known && dim_known(d[axis]) && k > d[axis])
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "K %lld exceeds the axis size %lld", (long long)k,
                   (long long)d[axis]);
  d[axis] = known ? k : DIM_UNKNOWN;
  op_set_out(c, 0, x->dtype, x->rank, d);
  op_set_out(c, 1, SMELT_I64, x->rank, d);
  return SMELT_OK;
}

typedef struct topk_ctx {
  const char *vals; /* one slice, contiguous */
  size_t es;
  smelt_dtype dt;
  int sign; /* -1: largest first */
} topk_ctx;

static int topk_cmp(const void *ctx, int64_t a, int64_t b) {
  const topk_ctx *t = ctx;
  return t->sign * su_cmp_elem(t->dt, t->vals + a * (int64_t)t->es, t->vals + b * (int64_t)t->es);
}

static smelt_status topk_run(op_ctx *c) {
  tensor *x = c->in[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), x->rank, "attribute axis", &axis));
  int64_t n = x->dims[axis], k = c->out[0]->dims[axis];
  int64_t outer = shape_numel(axis, x->dims), inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1);
  size_t es = dtype_size(x->dtype);
  char *buf = malloc((size_t)(n ? n : 1) * (es + 2 * sizeof(int64_t)));
  if (!buf) return err_nomem("TopK work arrays", (size_t)n * (es + 16));
  int64_t *order = (int64_t *)buf, *tmp = order + n;
  char *slice = (char *)(tmp + n);
  /* Stable sort: equal values keep the lower index first, as the spec asks. */
  topk_ctx t = {slice, es, x->dtype, op_attr_int(c, "largest", 1) ? -1 : 1};
  const char *src = x->data;
  char *vo = c->out[0]->data;
  int64_t *io = c->out[1]->data;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      for (int64_t i = 0; i < n; i++) {
        memcpy(slice + i * (int64_t)es, src + ((o * n + i) * inner + j) * (int64_t)es, es);
        order[i] = i;
      }
      su_sort_idx(order, tmp, n, topk_cmp, &t);
      for (int64_t i = 0; i < k; i++) {
        int64_t pos = (o * k + i) * inner + j;
        memcpy(vo + pos * (int64_t)es, slice + order[i] * (int64_t)es, es);
        io[pos] = order[i];
      }
    }
  free(buf);
  return SMELT_OK;
}

/* ---- OneHot ---- */

static smelt_status onehot_depth(op_ctx *c, int64_t *depth, bool *known) {
  tensor *d = c->in[1];
  *known = d->data != NULL;
  if (d->dtype == SMELT_STRING || d->dtype == SMELT_BOOL)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (depth) must be numeric");
  if (!*known) return SMELT_OK;
  if (tensor_numel(d) != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (depth) must hold one value");
  double v = tensor_get_f64(d, 0);
  if (!(v >= 1 && v < (double)(INT64_C(1) << 40)))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "depth %g is not a positive size", v);
  *depth = (int64_t)v;
  return SMELT_OK;
}

static smelt_status onehot_infer(op_ctx *c) {
  tensor *ind = c->in[0], *vals = c->in[2];
  TRY(su_check_movable(vals, 2));
  if (!dtype_is_int(ind->dtype) && !dtype_is_float(ind->dtype) && ind->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (indices) must be numeric, not %s",
                   dtype_name(ind->dtype));
  int64_t nv = vals->rank >= 0 ? tensor_numel(vals) : -1;
  if (nv >= 0 && nv != 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (values) must hold 2 values [off, on]");
  int64_t depth = DIM_UNKNOWN;
  bool known;
  TRY(onehot_depth(c, &depth, &known));
  if (ind->rank < 0) {
    su_out_unknown(c, 0, vals->dtype);
    return SMELT_OK;
  }
  int r = ind->rank + 1, axis;
  if (r > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, SMELT_MAX_RANK);
  TRY(op_axis(op_attr_int(c, "axis", -1), r, "attribute axis", &axis));
  int64_t d[SMELT_MAX_RANK];
  for (int i = 0, k = 0; i < r; i++) d[i] = i == axis ? (known ? depth : DIM_UNKNOWN) : ind->dims[k++];
  op_set_out(c, 0, vals->dtype, r, d);
  return SMELT_OK;
}

static smelt_status onehot_run(op_ctx *c) {
  tensor *ind = c->in[0], *vals = c->in[2], *y = c->out[0];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", -1), y->rank, "attribute axis", &axis));
  int64_t depth = y->dims[axis], outer = shape_numel(axis, ind->dims);
  int64_t inner = shape_numel(ind->rank - axis, ind->dims + axis);
  size_t es = dtype_size(vals->dtype);
  const char *off = vals->data, *on = off + es;
  char *dst = y->data;
  for (size_t p = 0; p < y->nbytes; p += es) memcpy(dst + p, off, es);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double v = tensor_get_f64(ind, o * inner + i);
      if (!(v > -(double)depth - 1 && v < (double)depth)) continue;
      int64_t k = (int64_t)v;
      if (k < 0) k += depth;
      if (k < 0 || k >= depth) continue;
      memcpy(dst + ((o * depth + k) * inner + i) * (int64_t)es, on, es);
    }
  return SMELT_OK;
}

const op_def op_family_index[] = {
    {"NonZero", "", 1, 1, 1, 1, nonzero_infer, nonzero_run, true},
    {"Compress", "", 2, 2, 1, 1, compress_infer, compress_run, true},
    {"Unique", "", 1, 1, 1, 4, unique_infer, unique_run, true},
    {"TopK", "", 1, 2, 2, 2, topk_infer, topk_run, false},
    {"OneHot", "", 3, 3, 1, 1, onehot_infer, onehot_run, false},
    {0}};
