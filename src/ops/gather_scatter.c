/* Indexed reads and writes: Gather, GatherElements, GatherND and their
 * scatter counterparts ScatterElements (and deprecated Scatter), ScatterND,
 * and TensorScatter (KV-cache writes along a sequence axis).
 * Indices may be negative (counted from the end); an index outside the axis is
 * a runtime error naming the position, checked before anything is written. */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

/* Normalizes index v for an axis of size n, or reports where it is bad. */
static smelt_status fix_index(int64_t v, int64_t n, int64_t pos, int64_t *out) {
  if (v < -n || v >= n)
    return err_set(SMELT_ERR_RUNTIME, "index %lld at position %lld is out of range for an axis "
                   "of size %lld", (long long)v, (long long)pos, (long long)n);
  *out = v < 0 ? v + n : v;
  return SMELT_OK;
}

/* ---- Gather ---- */

static smelt_status gather_infer(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  TRY(su_check_movable(x, 0));
  TRY(su_check_index_type(ind, "input 1 (indices)"));
  if (x->rank < 0 || ind->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 1) return err_set(SMELT_ERR_INVALID_MODEL, "input 0 is a scalar");
  int axis, r = x->rank + ind->rank - 1;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  if (r > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, SMELT_MAX_RANK);
  int64_t d[SMELT_MAX_RANK];
  int k = 0;
  for (int i = 0; i < axis; i++) d[k++] = x->dims[i];
  for (int i = 0; i < ind->rank; i++) d[k++] = ind->dims[i];
  for (int i = axis + 1; i < x->rank; i++) d[k++] = x->dims[i];
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status gather_run(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  int axis;
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", &axis));
  int64_t outer = shape_numel(axis, x->dims), n = x->dims[axis], ni = tensor_numel(ind);
  int64_t inner = shape_numel(x->rank - axis - 1, x->dims + axis + 1) * (int64_t)dtype_size(x->dtype);
  for (int64_t j = 0; j < ni; j++) {
    int64_t v = 0;
    TRY(fix_index(su_index_at(ind, j), n, j, &v));
  }
  const char *src = x->data;
  char *dst = c->out[0]->data;
  for (int64_t o = 0; inner && o < outer; o++)
    for (int64_t j = 0; j < ni; j++) {
      int64_t v = su_index_at(ind, j);
      if (v < 0) v += n;
      memcpy(dst + (o * ni + j) * inner, src + (o * n + v) * inner, (size_t)inner);
    }
  return SMELT_OK;
}

/* ---- GatherElements, ScatterElements ---- */

/* Checks indices (and updates) against data for the *Elements ops. */
static smelt_status elements_check(op_ctx *c, const tensor *x, const tensor *ind, int *axis) {
  TRY(su_check_index_type(ind, "input 1 (indices)"));
  if (x->rank < 0 || ind->rank < 0) {
    *axis = -1;
    return SMELT_OK;
  }
  if (ind->rank != x->rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "indices have rank %d, data %d", ind->rank, x->rank);
  if (x->rank < 1) return err_set(SMELT_ERR_INVALID_MODEL, "input 0 is a scalar");
  TRY(op_axis(op_attr_int(c, "axis", 0), x->rank, "attribute axis", axis));
  for (int i = 0; i < x->rank; i++)
    if (i != *axis && dim_known(ind->dims[i]) && dim_known(x->dims[i]) &&
        ind->dims[i] > x->dims[i])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "indices have size %lld on axis %d, data only "
                     "%lld", (long long)ind->dims[i], i, (long long)x->dims[i]);
  return SMELT_OK;
}

/* Calls fn for every element of indices with the data element offset it
 * addresses (in elements), after checking every index is in range. */
typedef void (*elem_fn)(void *ctx, int64_t pos, int64_t data_off);

static smelt_status elements_walk(const tensor *x, const tensor *ind, int axis, elem_fn fn,
                                  void *ctx) {
  int64_t xs[SMELT_MAX_RANK], idx[SMELT_MAX_RANK] = {0}, n = tensor_numel(ind), off = 0;
  su_dense_strides(x->rank, x->dims, xs);
  for (int pass = 0; pass < 2; pass++) {
    memset(idx, 0, sizeof idx);
    off = 0;
    for (int64_t p = 0; p < n; p++) {
      int64_t v = 0;
      TRY(fix_index(su_index_at(ind, p), x->dims[axis], p, &v));
      if (pass) fn(ctx, p, off + v * xs[axis]);
      for (int k = x->rank - 1; k >= 0; k--) {
        if (k != axis) off += xs[k];
        if (++idx[k] < ind->dims[k]) break;
        if (k != axis) off -= xs[k] * ind->dims[k];
        idx[k] = 0;
      }
    }
  }
  return SMELT_OK;
}

typedef struct elem_ctx {
  char *dst;
  const char *src;
  size_t es;
  smelt_dtype dt;
  su_reduce red;
} elem_ctx;

static void gather_elem(void *ctx, int64_t pos, int64_t off) {
  elem_ctx *e = ctx;
  memcpy(e->dst + pos * (int64_t)e->es, e->src + off * (int64_t)e->es, e->es);
}

static void scatter_elem(void *ctx, int64_t pos, int64_t off) {
  elem_ctx *e = ctx;
  su_combine(e->dt, e->red, e->dst + off * (int64_t)e->es, e->src + pos * (int64_t)e->es);
}

static smelt_status gather_elements_infer(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  int axis;
  TRY(su_check_movable(x, 0));
  TRY(elements_check(c, x, ind, &axis));
  op_set_out(c, 0, x->dtype, ind->rank, ind->dims);
  return SMELT_OK;
}

static smelt_status gather_elements_run(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  int axis;
  TRY(elements_check(c, x, ind, &axis));
  elem_ctx e = {.dst = c->out[0]->data, .src = x->data, .es = dtype_size(x->dtype)};
  return elements_walk(x, ind, axis, gather_elem, &e);
}

static smelt_status scatter_elements_infer(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
  int axis;
  su_reduce red = SU_RED_NONE;
  TRY(su_check_movable(x, 0));
  if (c->opset >= 16) TRY(su_parse_reduction(c, &red));
  TRY(su_check_reducible(x->dtype, red));
  TRY(elements_check(c, x, ind, &axis));
  if (upd->dtype != x->dtype && upd->dtype && x->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "updates have type %s, data %s",
                   dtype_name(upd->dtype), dtype_name(x->dtype));
  if (upd->rank >= 0 && ind->rank >= 0) {
    bool ok = upd->rank == ind->rank;
    for (int i = 0; ok && i < ind->rank; i++)
      ok = !dim_known(upd->dims[i]) || !dim_known(ind->dims[i]) || upd->dims[i] == ind->dims[i];
    if (!ok) return err_set(SMELT_ERR_INVALID_ARGUMENT, "updates and indices differ in shape");
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status scatter_elements_run(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2], *y = c->out[0];
  int axis;
  su_reduce red = SU_RED_NONE;
  if (c->opset >= 16) TRY(su_parse_reduction(c, &red));
  TRY(elements_check(c, x, ind, &axis));
  if (x->nbytes) memcpy(y->data, x->data, x->nbytes);
  elem_ctx e = {.dst = y->data, .src = upd->data, .es = dtype_size(x->dtype), .dt = x->dtype,
                .red = red};
  return elements_walk(x, ind, axis, scatter_elem, &e);
}

/* ---- GatherND, ScatterND ---- */

/* The index tuples of an *ND op: indices [..., k] address slices of
 * data[b + k:] within each of the batch_dims leading batches. */
typedef struct nd_layout {
  int k, b;
  int64_t batches, tuples; /* tuples per batch */
  int64_t slice;           /* elements per addressed slice */
  int64_t batch_elems;     /* data elements per batch */
  int64_t xs[SMELT_MAX_RANK];
} nd_layout;

static smelt_status nd_check(const tensor *x, const tensor *ind, int b, int *k) {
  TRY(su_check_index_type(ind, "input 1 (indices)"));
  *k = -1;
  if (x->rank < 0 || ind->rank < 0) return SMELT_OK;
  if (x->rank < 1 || ind->rank < 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "data and indices must have rank >= 1");
  if (b < 0 || b >= x->rank || b >= ind->rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "batch_dims %d must be below both ranks (%d, %d)", b,
                   x->rank, ind->rank);
  for (int i = 0; i < b; i++)
    if (dim_known(x->dims[i]) && dim_known(ind->dims[i]) && x->dims[i] != ind->dims[i])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "batch dimension %d differs: data %lld, indices "
                     "%lld", i, (long long)x->dims[i], (long long)ind->dims[i]);
  int64_t last = ind->dims[ind->rank - 1];
  if (!dim_known(last)) return SMELT_OK;
  if (last < 1 || last > x->rank - b)
    return err_set(SMELT_ERR_INVALID_MODEL, "indices' last dimension %lld must be in 1..%d",
                   (long long)last, x->rank - b);
  *k = (int)last;
  return SMELT_OK;
}

static void nd_layout_of(const tensor *x, const tensor *ind, int b, int k, nd_layout *l) {
  l->k = k;
  l->b = b;
  l->batches = shape_numel(b, x->dims);
  l->tuples = shape_numel(ind->rank - 1 - b, ind->dims + b);
  l->slice = shape_numel(x->rank - b - k, x->dims + b + k);
  l->batch_elems = shape_numel(x->rank - b, x->dims + b);
  su_dense_strides(x->rank, x->dims, l->xs);
}

/* Element offset within its batch of tuple t of batch bi, range-checked. */
static smelt_status nd_offset(const tensor *x, const tensor *ind, const nd_layout *l, int64_t bi,
                              int64_t t, int64_t *off) {
  int64_t base = (bi * l->tuples + t) * l->k, o = 0;
  for (int j = 0; j < l->k; j++) {
    int64_t v = 0;
    TRY(fix_index(su_index_at(ind, base + j), x->dims[l->b + j], base + j, &v));
    o += v * l->xs[l->b + j];
  }
  *off = o;
  return SMELT_OK;
}

static smelt_status gather_nd_infer(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  int k, b = (int)op_attr_int(c, "batch_dims", 0);
  TRY(su_check_movable(x, 0));
  TRY(nd_check(x, ind, b, &k));
  if (k < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int r = ind->rank - 1 + x->rank - b - k;
  if (r > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, SMELT_MAX_RANK);
  int64_t d[SMELT_MAX_RANK];
  int n = 0;
  for (int i = 0; i < ind->rank - 1; i++)
    d[n++] = i < b && !dim_known(ind->dims[i]) ? x->dims[i] : ind->dims[i];
  for (int i = b + k; i < x->rank; i++) d[n++] = x->dims[i];
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status gather_nd_run(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1];
  int k, b = (int)op_attr_int(c, "batch_dims", 0);
  TRY(nd_check(x, ind, b, &k));
  nd_layout l;
  nd_layout_of(x, ind, b, k, &l);
  size_t es = dtype_size(x->dtype), chunk = (size_t)l.slice * es;
  const char *src = x->data;
  char *dst = c->out[0]->data;
  for (int64_t bi = 0; bi < l.batches; bi++)
    for (int64_t t = 0; t < l.tuples; t++) {
      int64_t off;
      TRY(nd_offset(x, ind, &l, bi, t, &off));
      if (chunk)
        memcpy(dst + (bi * l.tuples + t) * (int64_t)chunk,
               src + (bi * l.batch_elems + off) * (int64_t)es, chunk);
    }
  return SMELT_OK;
}

static smelt_status scatter_nd_infer(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2];
  int k;
  su_reduce red = SU_RED_NONE;
  TRY(su_check_movable(x, 0));
  if (c->opset >= 16) TRY(su_parse_reduction(c, &red));
  TRY(su_check_reducible(x->dtype, red));
  TRY(nd_check(x, ind, 0, &k));
  if (upd->dtype != x->dtype && upd->dtype && x->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "updates have type %s, data %s",
                   dtype_name(upd->dtype), dtype_name(x->dtype));
  if (k >= 0 && upd->rank >= 0) {
    /* updates must be indices.shape[:-1] + data.shape[k:] */
    int r = ind->rank - 1 + x->rank - k;
    bool ok = upd->rank == r;
    for (int i = 0; ok && i < r; i++) {
      int64_t want = i < ind->rank - 1 ? ind->dims[i] : x->dims[k + i - (ind->rank - 1)];
      ok = !dim_known(want) || !dim_known(upd->dims[i]) || want == upd->dims[i];
    }
    if (!ok) {
      char a[160];
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "updates have shape %s, which does not match "
                     "indices.shape[:-1] + data.shape[%d:]",
                     shape_str(a, sizeof a, upd->rank, upd->dims, NULL), k);
    }
  }
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status scatter_nd_run(op_ctx *c) {
  tensor *x = c->in[0], *ind = c->in[1], *upd = c->in[2], *y = c->out[0];
  int k;
  su_reduce red = SU_RED_NONE;
  if (c->opset >= 16) TRY(su_parse_reduction(c, &red));
  TRY(nd_check(x, ind, 0, &k));
  nd_layout l;
  nd_layout_of(x, ind, 0, k, &l);
  for (int64_t t = 0; t < l.tuples; t++) {
    int64_t off;
    TRY(nd_offset(x, ind, &l, 0, t, &off));
  }
  if (x->nbytes) memcpy(y->data, x->data, x->nbytes);
  int64_t es = (int64_t)dtype_size(x->dtype);
  char *dst = y->data;
  const char *src = upd->data;
  for (int64_t t = 0; t < l.tuples; t++) {
    int64_t off;
    nd_offset(x, ind, &l, 0, t, &off);
    if (red == SU_RED_NONE) {
      if (l.slice) memcpy(dst + off * es, src + t * l.slice * es, (size_t)(l.slice * es));
      continue;
    }
    for (int64_t j = 0; j < l.slice; j++)
      su_combine(x->dtype, red, dst + (off + j) * es, src + (t * l.slice + j) * es);
  }
  return SMELT_OK;
}

/* ---- TensorScatter (KV-cache update) ---- */

static smelt_status tscatter_check(op_ctx *c, int *axis, bool *circular) {
  tensor *past = c->in[0], *upd = c->in[1], *wi = op_in(c, 2);
  const char *m = ir_attr_string(c->node, "mode", "linear");
  if (strcmp(m, "linear") && strcmp(m, "circular"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is not linear or circular", q(m));
  *circular = !strcmp(m, "circular");
  if (upd->dtype != past->dtype && upd->dtype && past->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "update has type %s, past_cache %s",
                   dtype_name(upd->dtype), dtype_name(past->dtype));
  if (wi) TRY(su_check_i64(wi, "input 2 (write_indices)"));
  *axis = -1;
  if (past->rank < 0 || upd->rank < 0) return SMELT_OK;
  if (past->rank < 2 || upd->rank != past->rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "past_cache (rank %d) and update (rank %d) need the "
                   "same rank, at least 2", past->rank, upd->rank);
  TRY(op_axis(op_attr_int(c, "axis", -2), past->rank, "attribute axis", axis));
  if (*axis == 0) return err_set(SMELT_ERR_INVALID_MODEL, "attribute axis cannot be the batch axis");
  for (int i = 0; i < past->rank; i++) {
    int64_t p = past->dims[i], u = upd->dims[i];
    if (!dim_known(p) || !dim_known(u)) continue;
    if (i == *axis ? u > p : u != p)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "update has size %lld on axis %d, past_cache "
                     "%lld", (long long)u, i, (long long)p);
  }
  if (wi && wi->rank >= 0 && (wi->rank != 1 || (dim_known(wi->dims[0]) &&
                                                 dim_known(past->dims[0]) &&
                                                 wi->dims[0] != past->dims[0])))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "write_indices must have one entry per batch");
  return SMELT_OK;
}

static smelt_status tscatter_infer(op_ctx *c) {
  int axis;
  bool circular;
  TRY(su_check_movable(c->in[0], 0));
  TRY(tscatter_check(c, &axis, &circular));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status tscatter_run(op_ctx *c) {
  tensor *past = c->in[0], *upd = c->in[1], *wi = op_in(c, 2), *y = c->out[0];
  int axis;
  bool circular;
  TRY(tscatter_check(c, &axis, &circular));
  int64_t batch = past->dims[0], per_batch = shape_numel(axis - 1, past->dims + 1);
  int64_t maxs = past->dims[axis], seq = upd->dims[axis];
  size_t es = dtype_size(past->dtype);
  int64_t inner = shape_numel(past->rank - axis - 1, past->dims + axis + 1) * (int64_t)es;
  for (int64_t b = 0; b < batch; b++) { /* check every write before any */
    int64_t w = wi ? ((const int64_t *)wi->data)[b] : 0;
    if (!circular && seq && (w < 0 || w > maxs - seq))
      return err_set(SMELT_ERR_RUNTIME, "write_indices[%lld] = %lld leaves no room for %lld "
                     "entries in %lld", (long long)b, (long long)w, (long long)seq,
                     (long long)maxs);
  }
  if (past->nbytes) memcpy(y->data, past->data, past->nbytes);
  if (!inner || !maxs) return SMELT_OK;
  char *dst = y->data;
  const char *src = upd->data;
  for (int64_t b = 0; b < batch; b++) {
    int64_t w = wi ? ((const int64_t *)wi->data)[b] : 0;
    if (circular) w = (w % maxs + maxs) % maxs; /* no overflow in w + s below */
    for (int64_t p = 0; p < per_batch; p++) {
      int64_t row = b * per_batch + p;
      for (int64_t s = 0; s < seq; s++) {
        int64_t t = circular ? (w + s) % maxs : w + s;
        memcpy(dst + (row * maxs + t) * inner, src + (row * seq + s) * inner, (size_t)inner);
      }
    }
  }
  return SMELT_OK;
}

const op_def op_family_gather_scatter[] = {
    {"Gather", "", 2, 2, 1, 1, gather_infer, gather_run, false},
    {"GatherElements", "", 2, 2, 1, 1, gather_elements_infer, gather_elements_run, false},
    {"GatherND", "", 2, 2, 1, 1, gather_nd_infer, gather_nd_run, false},
    {"ScatterElements", "", 3, 3, 1, 1, scatter_elements_infer, scatter_elements_run, false},
    {"Scatter", "", 3, 3, 1, 1, scatter_elements_infer, scatter_elements_run, false},
    {"ScatterND", "", 3, 3, 1, 1, scatter_nd_infer, scatter_nd_run, false},
    {"TensorScatter", "", 2, 3, 1, 1, tscatter_infer, tscatter_run, false},
    {0}};
