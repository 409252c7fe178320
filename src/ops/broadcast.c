/* Broadcast inference and the strided row walk behind every elementwise op. */
#include "ops/broadcast.h"

#include <string.h>

#include "util/err.h"

/* Below this many output elements a tensor is computed inline: waking the
 * pool costs more than the work. */
#define EW_PARALLEL_MIN 65536
#define EW_GRAIN 32768
/* Elements per f16/bf16 conversion tile in the f32 lift. */
#define EW_LIFT_TILE 256

smelt_status ew_broadcast_inputs(op_ctx *c, int first, int n, int *rank, int64_t *dims) {
  int r = 0;
  for (int k = first; k < first + n; k++) {
    const tensor *t = op_in(c, k);
    if (!t) continue;
    if (t->rank < 0) {
      *rank = -1;
      return SMELT_OK;
    }
    smelt_status s = op_broadcast_shape(r, dims, t->rank, t->dims, &r, dims);
    if (s) return err_prefix(s, "input %d: ", k);
  }
  *rank = r;
  return SMELT_OK;
}

smelt_status ew_check_dtype(op_ctx *c, int i, const smelt_dtype *allowed) {
  const tensor *t = op_in(c, i);
  if (t && t->dtype == SMELT_UNDEFINED && c->static_infer) return SMELT_OK;
  return op_check_dtype(c, i, allowed);
}

smelt_status ew_check_table(op_ctx *c, int i, const ew_row_fn *tab) {
  const tensor *t = op_in(c, i);
  if (!t || (t->dtype == SMELT_UNDEFINED && c->static_infer)) return SMELT_OK;
  if ((unsigned)t->dtype < SMELT_DTYPE_COUNT && tab[t->dtype]) return SMELT_OK;
  return err_set(SMELT_ERR_UNSUPPORTED, "input %d has type %s, which %s does not support", i,
                 dtype_name(t->dtype), c->node->op_type);
}

smelt_status ew_check_same_dtype(op_ctx *c, int first, int n) {
  const tensor *a = op_in(c, first);
  for (int k = first + 1; k < first + n; k++) {
    const tensor *b = op_in(c, k);
    if (!a || !b || a->dtype == b->dtype) continue;
    if (c->static_infer && (!a->dtype || !b->dtype)) continue;
    return err_set(SMELT_ERR_INVALID_MODEL, "input %d has type %s but input %d has type %s", k,
                   dtype_name(b->dtype), first, dtype_name(a->dtype));
  }
  return SMELT_OK;
}

smelt_status ew_table_infer(op_ctx *c, const ew_row_fn *tab, smelt_dtype out) {
  TRY(ew_check_table(c, 0, tab));
  TRY(ew_check_same_dtype(c, 0, c->n_in));
  int r;
  int64_t d[SMELT_MAX_RANK];
  TRY(ew_broadcast_inputs(c, 0, c->n_in, &r, d));
  op_set_out(c, 0, out == SMELT_UNDEFINED ? c->in[0]->dtype : out, r, d);
  return SMELT_OK;
}

/* ---- the walk ---- */

typedef struct ew_plan {
  int rank, n_in;
  int64_t dims[SMELT_MAX_RANK];
  int64_t st[EW_MAX_IN][SMELT_MAX_RANK]; /* elements; 0 where broadcast */
  size_t in_es[EW_MAX_IN], out_es;
  char *out;
  const char *in[EW_MAX_IN];
  ew_row_fn fn;
  const void *params;
} ew_plan;

/* Per-input strides in output coordinates, then drops size-1 dims and merges
 * neighbours that every operand walks contiguously, so the inner row is as
 * long as possible. */
static smelt_status plan_init(ew_plan *p, const tensor *out, int n_in, const tensor *const *in) {
  int r = out->rank;
  p->n_in = n_in;
  for (int k = 0; k < n_in; k++) {
    const tensor *t = in[k];
    int off = r - t->rank;
    int64_t s = 1;
    if (off < 0) return err_set(SMELT_ERR_INTERNAL, "input %d has higher rank than the output", k);
    for (int i = r - 1; i >= 0; i--) {
      int64_t d = i < off ? 1 : t->dims[i - off];
      if (d == out->dims[i]) p->st[k][i] = d == 1 ? 0 : s;
      else if (d == 1) p->st[k][i] = 0;
      else
        return err_set(SMELT_ERR_INTERNAL, "input %d does not broadcast to the output shape", k);
      s *= d;
    }
  }
  int m = 0;
  for (int i = 0; i < r; i++) {
    if (out->dims[i] == 1) continue;
    bool merge = m > 0;
    for (int k = 0; merge && k < n_in; k++)
      merge = p->st[k][m - 1] == p->st[k][i] * out->dims[i];
    if (merge) {
      p->dims[m - 1] *= out->dims[i];
      for (int k = 0; k < n_in; k++) p->st[k][m - 1] = p->st[k][i];
    } else {
      p->dims[m] = out->dims[i];
      for (int k = 0; k < n_in; k++) p->st[k][m] = p->st[k][i];
      m++;
    }
  }
  if (m == 0) { /* a single element */
    p->dims[0] = 1;
    for (int k = 0; k < n_in; k++) p->st[k][0] = 0;
    m = 1;
  }
  p->rank = m;
  return SMELT_OK;
}

/* Computes output elements [begin, end) row by row. */
static void plan_walk(void *ctx, int64_t begin, int64_t end) {
  const ew_plan *p = ctx;
  int r = p->rank, n_in = p->n_in;
  int64_t idx[SMELT_MAX_RANK], off[EW_MAX_IN] = {0};
  int64_t rem = begin;
  for (int i = r - 1; i >= 0; i--) {
    idx[i] = rem % p->dims[i];
    rem /= p->dims[i];
    for (int k = 0; k < n_in; k++) off[k] += idx[i] * p->st[k][i];
  }
  int64_t inner = p->dims[r - 1], ist[EW_MAX_IN];
  for (int k = 0; k < n_in; k++) ist[k] = p->st[k][r - 1];
  for (int64_t pos = begin; pos < end;) {
    int64_t len = inner - idx[r - 1];
    if (len > end - pos) len = end - pos;
    const void *ptr[EW_MAX_IN];
    for (int k = 0; k < n_in; k++) ptr[k] = p->in[k] + (size_t)off[k] * p->in_es[k];
    p->fn(p->params, len, p->out + (size_t)pos * p->out_es, ptr, ist);
    pos += len;
    idx[r - 1] += len;
    for (int k = 0; k < n_in; k++) off[k] += len * ist[k];
    for (int i = r - 1; i > 0 && idx[i] == p->dims[i]; i--) { /* carry */
      idx[i] = 0;
      idx[i - 1]++;
      for (int k = 0; k < n_in; k++) off[k] += p->st[k][i - 1] - p->dims[i] * p->st[k][i];
    }
  }
}

smelt_status ew_apply(op_ctx *c, tensor *out, int n_in, const tensor *const *in, ew_row_fn fn,
                      const void *params) {
  if (n_in < 1 || n_in > EW_MAX_IN)
    return err_set(SMELT_ERR_INTERNAL, "elementwise walk over %d operands", n_in);
  int64_t n = tensor_numel(out);
  if (n < 0) return err_set(SMELT_ERR_INTERNAL, "elementwise output has no concrete shape");
  if (n == 0) return SMELT_OK;
  ew_plan p;
  memset(&p, 0, sizeof p);
  TRY(plan_init(&p, out, n_in, in));
  for (int k = 0; k < n_in; k++) {
    p.in[k] = in[k]->data;
    p.in_es[k] = dtype_size(in[k]->dtype);
  }
  p.out = out->data;
  p.out_es = dtype_size(out->dtype);
  /* Rows are addressed by byte: a packed (sub-byte) operand must not get here. */
  for (int k = 0; k <= n_in; k++)
    if ((k < n_in ? p.in_es[k] : p.out_es) == 0)
      return err_set(SMELT_ERR_INTERNAL, "elementwise walk over a %s operand",
                     dtype_name(k < n_in ? in[k]->dtype : out->dtype));
  p.fn = fn;
  p.params = params;
  if (n < EW_PARALLEL_MIN || !c->pool) plan_walk(&p, 0, n);
  else pool_parallel_for(c->pool, n, EW_GRAIN, plan_walk, &p);
  return SMELT_OK;
}

/* ---- f16/bf16 through f32 ---- */

typedef struct ew_lift {
  ew_row_fn fn;
  const void *params;
  int n_in;
  smelt_dtype in_dt[EW_MAX_IN], out_dt;
} ew_lift;

static float half_load(smelt_dtype t, uint16_t h) {
  return t == SMELT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

static void lift_row(const void *params, int64_t n, void *out, const void *const *in,
                     const int64_t *st) {
  const ew_lift *l = params;
  float ibuf[EW_MAX_IN][EW_LIFT_TILE], obuf[EW_LIFT_TILE];
  bool out_half = ew_is_half(l->out_dt);
  size_t out_es = dtype_size(l->out_dt);
  for (int64_t at = 0; at < n; at += EW_LIFT_TILE) {
    int64_t len = n - at < EW_LIFT_TILE ? n - at : EW_LIFT_TILE;
    const void *ptr[EW_MAX_IN];
    int64_t s[EW_MAX_IN];
    for (int k = 0; k < l->n_in; k++) {
      smelt_dtype t = l->in_dt[k];
      if (ew_is_half(t)) {
        const uint16_t *src = (const uint16_t *)in[k] + at * st[k];
        int64_t cnt = st[k] ? len : 1;
        for (int64_t i = 0; i < cnt; i++) ibuf[k][i] = half_load(t, src[i * st[k]]);
        ptr[k] = ibuf[k];
        s[k] = st[k] ? 1 : 0;
      } else {
        ptr[k] = (const char *)in[k] + (size_t)(at * st[k]) * dtype_size(t);
        s[k] = st[k];
      }
    }
    void *o = out_half ? (void *)obuf : (char *)out + (size_t)at * out_es;
    l->fn(l->params, len, o, ptr, s);
    if (out_half) {
      uint16_t *dst = (uint16_t *)out + at;
      if (l->out_dt == SMELT_F16)
        for (int64_t i = 0; i < len; i++) dst[i] = f32_to_f16(obuf[i]);
      else
        for (int64_t i = 0; i < len; i++) dst[i] = f32_to_bf16(obuf[i]);
    }
  }
}

smelt_status ew_apply_f32(op_ctx *c, tensor *out, int n_in, const tensor *const *in,
                          ew_row_fn fn_f32, const void *params) {
  bool any_half = ew_is_half(out->dtype);
  for (int k = 0; k < n_in && k < EW_MAX_IN; k++) any_half |= ew_is_half(in[k]->dtype);
  if (!any_half) return ew_apply(c, out, n_in, in, fn_f32, params);
  if (n_in < 1 || n_in > EW_MAX_IN)
    return err_set(SMELT_ERR_INTERNAL, "elementwise walk over %d operands", n_in);
  ew_lift l = {.fn = fn_f32, .params = params, .n_in = n_in, .out_dt = out->dtype};
  for (int k = 0; k < n_in; k++) l.in_dt[k] = in[k]->dtype;
  return ew_apply(c, out, n_in, in, lift_row, &l);
}
