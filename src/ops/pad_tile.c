/* Ops that grow (or crop) a tensor by repeating or filling: Pad, CenterCropPad,
 * Tile and Expand.  Tile and Expand are strided views with zero strides;
 * Pad maps each output row to a source row (or a fill) per mode. */
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

/* ---- Pad core, shared with CenterCropPad ---- */

typedef enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP } pad_mode;

/* Source index for output index o of an axis of input size n padded by pb in
 * front; -1 for the constant fill. */
static int64_t pad_src(int64_t o, int64_t n, int64_t pb, pad_mode m) {
  int64_t i = o - pb;
  if (i >= 0 && i < n) return i;
  switch (m) {
    case PAD_CONSTANT: return -1;
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_WRAP: return ((i % n) + n) % n;
    case PAD_REFLECT: {
      if (n == 1) return 0;
      int64_t p = 2 * (n - 1);
      i = ((i % p) + p) % p;
      return i < n ? i : p - i;
    }
  }
  return -1;
}

static void fill_pattern(char *dst, int64_t count, const char *val, size_t es) {
  for (int64_t i = 0; i < count; i++) memcpy(dst + i * (int64_t)es, val, es);
}

/* One output row (the last axis) from source row src. */
static void pad_row(char *dst, const char *src, int64_t n, int64_t on, int64_t pb, pad_mode m,
                    const char *val, size_t es) {
  /* Outputs [lo, hi) read the input straight: 0 <= o - pb < n. */
  int64_t lo = pb > 0 ? pb : 0, hi = n + pb < on ? n + pb : on;
  for (int64_t o = 0; o < on; o++) {
    if (o == lo && hi > lo) {
      memcpy(dst + o * (int64_t)es, src + (o - pb) * (int64_t)es, (size_t)(hi - lo) * es);
      o = hi - 1;
      continue;
    }
    int64_t s = pad_src(o, n, pb, m);
    memcpy(dst + o * (int64_t)es, s < 0 ? val : src + s * (int64_t)es, es);
  }
}

/* y = x padded by pb[]/pe[] per axis (negative crops).  y is allocated.
 * n == 0 on an axis that needs values from it is rejected by the callers. */
static void pad_core(const tensor *x, tensor *y, const int64_t *pb, pad_mode m, const char *val) {
  int r = x->rank;
  size_t es = dtype_size(x->dtype);
  if (!y->nbytes) return;
  if (r == 0) {
    memcpy(y->data, x->data, es);
    return;
  }
  int64_t xs[SMELT_MAX_RANK], idx[SMELT_MAX_RANK] = {0};
  su_dense_strides(r, x->dims, xs);
  int64_t on = y->dims[r - 1], rows = tensor_numel(y) / on;
  char *dst = y->data;
  for (int64_t row = 0; row < rows; row++, dst += on * (int64_t)es) {
    int64_t off = 0;
    bool fill = false;
    for (int a = 0; a < r - 1 && !fill; a++) {
      int64_t s = pad_src(idx[a], x->dims[a], pb[a], m);
      fill = s < 0;
      off += s * xs[a];
    }
    if (fill || x->dims[r - 1] == 0)
      fill_pattern(dst, on, val, es);
    else
      pad_row(dst, (const char *)x->data + off * (int64_t)es, x->dims[r - 1], on, pb[r - 1], m,
              val, es);
    for (int a = r - 2; a >= 0; a--) {
      if (++idx[a] < y->dims[a]) break;
      idx[a] = 0;
    }
  }
}

/* ---- Pad ---- */

typedef struct pad_spec {
  pad_mode mode;
  bool known;
  int64_t pb[SMELT_MAX_RANK], pe[SMELT_MAX_RANK];
  bool touched[SMELT_MAX_RANK]; /* axes that may change (for unknown pads) */
} pad_spec;

static smelt_status pad_mode_of(op_ctx *c, pad_mode *m) {
  const char *s = ir_attr_string(c->node, "mode", "constant");
  static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, names[i])) {
      *m = (pad_mode)i;
      return SMELT_OK;
    }
  return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is not constant, reflect, edge or "
                 "wrap", q(s));
}

/* Axes the pads apply to: input 3 (opset 18+) or all. */
static smelt_status pad_axes(op_ctx *c, int rank, int64_t *axes, int *na, bool *known) {
  tensor *t = c->opset >= 18 ? op_in(c, 3) : NULL;
  if (!t) {
    for (int i = 0; i < rank; i++) axes[i] = i;
    *na = rank;
    return SMELT_OK;
  }
  TRY(su_check_index_type(t, "input 3 (axes)"));
  if (!t->data) {
    *known = false;
    return SMELT_OK;
  }
  TRY(su_read_ints(t, "input 3 (axes)", SMELT_MAX_RANK, axes, na));
  return su_norm_axes(axes, *na, rank, "input 3 (axes)");
}

static smelt_status pad_spec_read(op_ctx *c, int rank, pad_spec *p) {
  int64_t axes[SMELT_MAX_RANK], v[2 * SMELT_MAX_RANK];
  int na = 0, n;
  memset(p, 0, sizeof *p);
  p->known = true;
  TRY(pad_mode_of(c, &p->mode));
  TRY(pad_axes(c, rank, axes, &na, &p->known));
  if (c->opset < 11) {
    const int64_t *a = ir_attr_ints(c->node, c->opset < 2 ? "paddings" : "pads", &n);
    if (!a) return err_set(SMELT_ERR_INVALID_MODEL, "attribute pads is required");
    if (n > 2 * SMELT_MAX_RANK) return err_set(SMELT_ERR_INVALID_MODEL, "too many pads");
    memcpy(v, a, sizeof *v * (size_t)n);
  } else {
    tensor *t = op_in(c, 1);
    if (!t) return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (pads) is required");
    TRY(su_check_i64(t, "input 1 (pads)"));
    if (!t->data) p->known = false;
    else TRY(su_read_ints(t, "input 1 (pads)", 2 * SMELT_MAX_RANK, v, &n));
  }
  if (!p->known) {
    for (int i = 0; i < rank; i++) p->touched[i] = true;
    if (na && c->opset >= 18 && op_in(c, 3) && op_in(c, 3)->data) {
      memset(p->touched, 0, sizeof p->touched);
      for (int i = 0; i < na; i++) p->touched[axes[i]] = true;
    }
    return SMELT_OK;
  }
  if (n != 2 * na)
    return err_set(SMELT_ERR_INVALID_MODEL, "pads has %d entries, expected %d (2 per axis)", n,
                   2 * na);
  for (int i = 0; i < na; i++) {
    p->pb[axes[i]] = v[i];
    p->pe[axes[i]] = v[i + na];
    p->touched[axes[i]] = true;
  }
  return SMELT_OK;
}

static smelt_status pad_out_dims(const tensor *x, const pad_spec *p, int64_t *d) {
  for (int i = 0; i < x->rank; i++) {
    d[i] = x->dims[i];
    if (!p->known) {
      if (p->touched[i]) d[i] = DIM_UNKNOWN;
      continue;
    }
    if (!dim_known(d[i])) {
      if (p->pb[i] || p->pe[i]) d[i] = DIM_UNKNOWN;
      continue;
    }
    if (p->pb[i] < -d[i] || p->pe[i] < -d[i] - p->pb[i] || p->pb[i] > (INT64_C(1) << 40) ||
        p->pe[i] > (INT64_C(1) << 40))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "pads %lld, %lld on axis %d of size %lld leave "
                     "no valid size", (long long)p->pb[i], (long long)p->pe[i], i,
                     (long long)d[i]);
    d[i] += p->pb[i] + p->pe[i];
    if (p->mode != PAD_CONSTANT && x->dims[i] == 0 && d[i] > 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot pad empty axis %d in a non-constant "
                     "mode", i);
  }
  return SMELT_OK;
}

static smelt_status pad_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  tensor *cv = c->opset >= 11 ? op_in(c, 2) : NULL;
  if (cv && cv->dtype != x->dtype && cv->dtype && x->dtype)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 2 (constant_value) has type %s, data %s",
                   dtype_name(cv->dtype), dtype_name(x->dtype));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  pad_spec p;
  int64_t d[SMELT_MAX_RANK];
  TRY(pad_spec_read(c, x->rank, &p));
  TRY(pad_out_dims(x, &p, d));
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

static smelt_status pad_run(op_ctx *c) {
  tensor *x = c->in[0];
  pad_spec p;
  TRY(pad_spec_read(c, x->rank, &p));
  char val[16] = {0};
  if (c->opset < 11) {
    tensor v;
    tensor_view(&v, x->dtype, 0, NULL, val);
    tensor_set_f64(&v, 0, op_attr_float(c, "value", 0));
  } else if (op_in(c, 2) && c->in[2]->nbytes) {
    if (c->in[2]->nbytes != dtype_size(x->dtype))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (constant_value) must hold one value");
    memcpy(val, c->in[2]->data, c->in[2]->nbytes);
  }
  pad_core(x, c->out[0], p.pb, p.mode, val);
  return SMELT_OK;
}

/* ---- CenterCropPad ---- */

static smelt_status ccp_spec(op_ctx *c, const tensor *x, int64_t *pb, int64_t *d, bool *known) {
  tensor *s = c->in[1];
  int64_t axes[SMELT_MAX_RANK], sh[SMELT_MAX_RANK];
  int na, ns;
  TRY(su_check_index_type(s, "input 1 (shape)"));
  const int64_t *a = ir_attr_ints(c->node, "axes", &na);
  if (!a) na = x->rank;
  if (na > x->rank) return err_set(SMELT_ERR_INVALID_MODEL, "attribute axes has %d entries", na);
  for (int i = 0; i < na; i++) axes[i] = a ? a[i] : i;
  TRY(su_norm_axes(axes, na, x->rank, "attribute axes"));
  memcpy(d, x->dims, sizeof(int64_t) * (size_t)x->rank);
  memset(pb, 0, sizeof(int64_t) * (size_t)x->rank);
  *known = s->data != NULL;
  if (!*known) {
    for (int i = 0; i < na; i++) d[axes[i]] = DIM_UNKNOWN;
    return SMELT_OK;
  }
  TRY(su_read_ints(s, "input 1 (shape)", SMELT_MAX_RANK, sh, &ns));
  if (ns != na)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (shape) has %d entries for %d axes", ns, na);
  for (int i = 0; i < na; i++) {
    int ax = (int)axes[i];
    if (sh[i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "target size %lld is negative", (long long)sh[i]);
    if (dim_known(x->dims[ax]))
      pb[ax] = sh[i] >= x->dims[ax] ? (sh[i] - x->dims[ax]) / 2 : -((x->dims[ax] - sh[i]) / 2);
    d[ax] = sh[i];
  }
  return SMELT_OK;
}

static smelt_status ccp_infer(op_ctx *c) {
  tensor *x = c->in[0];
  TRY(su_check_movable(x, 0));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int64_t pb[SMELT_MAX_RANK], d[SMELT_MAX_RANK];
  bool known;
  TRY(ccp_spec(c, x, pb, d, &known));
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

static smelt_status ccp_run(op_ctx *c) {
  tensor *x = c->in[0];
  int64_t pb[SMELT_MAX_RANK], d[SMELT_MAX_RANK];
  bool known;
  TRY(ccp_spec(c, x, pb, d, &known));
  char zero[16] = {0};
  pad_core(x, c->out[0], pb, PAD_CONSTANT, zero);
  return SMELT_OK;
}

/* ---- Tile ---- */

static smelt_status tile_infer(op_ctx *c) {
  tensor *x = c->in[0], *rp = c->in[1];
  TRY(su_check_movable(x, 0));
  TRY(su_check_i64(rp, "input 1 (repeats)"));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int64_t d[SMELT_MAX_RANK], r[SMELT_MAX_RANK];
  int n;
  if (!rp->data) {
    for (int i = 0; i < x->rank; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, x->rank, d);
    return SMELT_OK;
  }
  TRY(su_read_ints(rp, "input 1 (repeats)", SMELT_MAX_RANK, r, &n));
  if (n != x->rank)
    return err_set(SMELT_ERR_INVALID_MODEL, "repeats has %d entries, input rank is %d", n,
                   x->rank);
  for (int i = 0; i < n; i++) {
    if (r[i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "repeats[%d] is %lld", i, (long long)r[i]);
    if (dim_known(x->dims[i]) && x->dims[i] && r[i] > INT64_MAX / 4 / x->dims[i])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "repeats[%d] is too large", i);
    d[i] = dim_known(x->dims[i]) ? x->dims[i] * r[i] : r[i] == 1 ? x->dims[i] : DIM_UNKNOWN;
  }
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

static smelt_status tile_run(op_ctx *c) {
  tensor *x = c->in[0], *y = c->out[0];
  int64_t xs[SMELT_MAX_RANK], d[SU_MAX_AXES], s[SU_MAX_AXES], es = (int64_t)dtype_size(x->dtype);
  if (!y->nbytes) return SMELT_OK;
  su_dense_strides(x->rank, x->dims, xs);
  /* Output [r0*d0, r1*d1, ...] is the view [r0, d0, r1, d1, ...] with zero
   * strides on the repeat axes. */
  for (int i = 0; i < x->rank; i++) {
    d[2 * i] = y->dims[i] / x->dims[i];
    s[2 * i] = 0;
    d[2 * i + 1] = x->dims[i];
    s[2 * i + 1] = xs[i] * es;
  }
  su_copy_strided(y->data, x->data, (size_t)es, 2 * x->rank, d, s, c->pool);
  return SMELT_OK;
}

/* ---- Expand ---- */

static smelt_status expand_infer(op_ctx *c) {
  tensor *x = c->in[0], *sh = c->in[1];
  TRY(su_check_movable(x, 0));
  TRY(su_check_i64(sh, "input 1 (shape)"));
  if (sh->rank >= 0 && sh->rank != 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (shape) has rank %d, expected 1", sh->rank);
  int64_t t[SMELT_MAX_RANK], d[SMELT_MAX_RANK];
  int n, r;
  if (!sh->data || x->rank < 0) {
    int64_t len = sh->rank == 1 ? sh->dims[0] : DIM_UNKNOWN;
    if (!dim_known(len) || x->rank < 0 || len > SMELT_MAX_RANK) {
      su_out_unknown(c, 0, x->dtype);
      return SMELT_OK;
    }
    r = x->rank > len ? x->rank : (int)len;
    for (int i = 0; i < r; i++) d[i] = DIM_UNKNOWN;
    op_set_out(c, 0, x->dtype, r, d);
    return SMELT_OK;
  }
  TRY(su_read_ints(sh, "input 1 (shape)", SMELT_MAX_RANK, t, &n));
  for (int i = 0; i < n; i++)
    if (t[i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "shape[%d] is %lld", i, (long long)t[i]);
  TRY(op_broadcast_shape(x->rank, x->dims, n, t, &r, d));
  op_set_out(c, 0, x->dtype, r, d);
  return SMELT_OK;
}

static smelt_status expand_run(op_ctx *c) {
  tensor *x = c->in[0], *y = c->out[0];
  int64_t xs[SMELT_MAX_RANK], s[SMELT_MAX_RANK], es = (int64_t)dtype_size(x->dtype);
  if (!y->nbytes) return SMELT_OK;
  su_dense_strides(x->rank, x->dims, xs);
  int lead = y->rank - x->rank;
  for (int j = 0; j < y->rank; j++) {
    int i = j - lead;
    s[j] = i < 0 || x->dims[i] == 1 ? 0 : xs[i] * es;
  }
  su_copy_strided(y->data, x->data, (size_t)es, y->rank, y->dims, s, c->pool);
  return SMELT_OK;
}

const op_def op_family_pad_tile[] = {
    {"Pad", "", 1, 4, 1, 1, pad_infer, pad_run, false},
    {"CenterCropPad", "", 2, 2, 1, 1, ccp_infer, ccp_run, false},
    {"Tile", "", 2, 2, 1, 1, tile_infer, tile_run, false},
    {"Expand", "", 2, 2, 1, 1, expand_infer, expand_run, false},
    {0}};
