/* Pooling: MaxPool (with Indices), AveragePool, LpPool, their Global forms,
 * and MaxUnpool.  1-D to N-D windows with strides, dilations, pads, auto_pad
 * and ceil_mode (nn_window).  Each (batch, channel) plane is loaded into a
 * double buffer, pooled, and stored back in the element type, so one kernel
 * serves f16/bf16/f32/f64 and MaxPool's int8/uint8 exactly.  Planes run in
 * parallel on the pool.
 *
 * f32 MaxPool (without Indices), AveragePool and GlobalAveragePool over 1 or
 * 2 spatial dims take the vectorized kernels in kernels/pool2d.h, which keep
 * these semantics (max in f32 is exact; averages sum in f32 per window). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/pool2d.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

typedef struct pool_geom {
  nn_window w;
  int64_t N, C, S_in, S_out;
  pool_kind kind;
  bool count_pad;   /* AveragePool/LpPool count_include_pad */
  bool col_major;   /* MaxPool storage_order = 1 */
  double p;         /* LpPool */
} pool_geom;

static const smelt_dtype float_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64,
                                          SMELT_UNDEFINED};
static const smelt_dtype maxpool_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64,
                                            SMELT_I8,  SMELT_U8,  SMELT_UNDEFINED};

/* Plane i/o in double; integer types (MaxPool) are exact in double. */
static void plane_load(smelt_dtype dt, const void *base, int64_t off, int64_t n, double *dst) {
  if (nn_is_float(dt)) {
    nn_load_f64(dt, base, off, 1, n, dst);
    return;
  }
  int64_t *tmp = (int64_t *)dst; /* same size: convert in place */
  nn_load_i64(dt, base, off, 1, n, tmp);
  for (int64_t i = 0; i < n; i++) dst[i] = (double)tmp[i];
}

static void plane_store(smelt_dtype dt, void *base, int64_t off, int64_t n, double *src) {
  if (nn_is_float(dt)) {
    nn_store_f64(dt, base, off, 1, n, src);
    return;
  }
  int64_t *tmp = (int64_t *)src;
  for (int64_t i = 0; i < n; i++) tmp[i] = (int64_t)src[i];
  nn_store_i64(dt, base, off, 1, n, tmp);
}

static smelt_status pool_plan(op_ctx *c, pool_kind kind, pool_geom *g) {
  const tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, kind == POOL_MAX ? maxpool_types : float_types));
  if (x->rank >= 0 && x->rank < 3)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 3", x->rank);
  g->kind = kind;
  g->count_pad = op_attr_int(c, "count_include_pad", 0) != 0;
  g->col_major = op_attr_int(c, "storage_order", 0) != 0;
  g->p = (double)op_attr_int(c, "p", 2);
  if (kind == POOL_LP && g->p <= 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "p %g must be positive", g->p);
  if (x->rank < 0) return SMELT_OK;
  TRY(nn_window_attrs(c, x->rank - 2, NULL, &g->w));
  bool ceil_mode = op_attr_int(c, "ceil_mode", 0) != 0;
  TRY(nn_window_out(&g->w, x->dims + 2, ceil_mode));
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->S_in = nn_prod(x->dims, 2, x->rank);
  g->S_out = nn_window_out_size(&g->w);
  return SMELT_OK;
}

static smelt_status pool_infer_kind(op_ctx *c, pool_kind kind) {
  pool_geom g;
  TRY(pool_plan(c, kind, &g));
  const tensor *x = c->in[0];
  if (x->rank < 0) {
    for (int i = 0; i < c->n_out; i++) nn_out_unknown(c, i, i ? SMELT_I64 : x->dtype);
    return SMELT_OK;
  }
  int64_t dims[SMELT_MAX_RANK] = {g.N, g.C};
  memcpy(dims + 2, g.w.out, sizeof(int64_t) * (size_t)g.w.nsp);
  op_set_out(c, 0, x->dtype, x->rank, dims);
  if (c->n_out > 1) op_set_out(c, 1, SMELT_I64, x->rank, dims);
  return SMELT_OK;
}

static smelt_status maxpool_infer(op_ctx *c) { return pool_infer_kind(c, POOL_MAX); }
static smelt_status avgpool_infer(op_ctx *c) { return pool_infer_kind(c, POOL_AVG); }
static smelt_status lppool_infer(op_ctx *c) { return pool_infer_kind(c, POOL_LP); }

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* Per spatial dim and output coordinate o: the window start in the input,
 * the taps [lo, hi) that land inside the input, and the taps inside the
 * padded extent (count_include_pad).  Computed once per op, shared by all
 * planes. */
typedef struct pool_tabs {
  int64_t *start[NN_MAX_SPATIAL], *lo[NN_MAX_SPATIAL], *hi[NN_MAX_SPATIAL], *npad[NN_MAX_SPATIAL];
  int64_t *block;
} pool_tabs;

static smelt_status pool_tabs_make(const nn_window *w, pool_tabs *tb) {
  int64_t total = 0;
  for (int i = 0; i < w->nsp; i++) total += w->out[i];
  TRY(nn_alloc((void **)&tb->block, 4 * total, sizeof(int64_t), "pool windows"));
  int64_t *p = tb->block;
  for (int i = 0; i < w->nsp; i++) {
    int64_t n = w->out[i], d = w->dil[i], k = w->kernel[i];
    tb->start[i] = p, tb->lo[i] = p + n, tb->hi[i] = p + 2 * n, tb->npad[i] = p + 3 * n;
    p += 4 * n;
    for (int64_t o = 0; o < n; o++) {
      int64_t st = o * w->stride[i] - w->pad_lo[i];
      int64_t lo = ceil_div(-st, d), hi = ceil_div(w->in[i] - st, d);
      int64_t hp = ceil_div(w->in[i] + w->pad_hi[i] - st, d); /* windows start at or after -pad_lo */
      lo = lo < 0 ? 0 : lo;
      hi = hi > k ? k : hi;
      tb->start[i][o] = st;
      tb->lo[i][o] = lo;
      tb->hi[i][o] = hi < lo ? lo : hi;
      tb->npad[i][o] = hp > k ? k : hp;
    }
  }
  return SMELT_OK;
}

/* The taps of the last dim: n taps d apart from x = row + off0.  Max keeps
 * the first maximum and ignores NaN (as the ONNX reference does); only
 * MaxPool's Indices output needs the branchy argmax. */
static void pool_row(const pool_geom *g, const double *row, int64_t off0, int64_t n, int64_t d,
                     double *acc, int64_t *arg) {
  const double *x = row + off0;
  double a = *acc;
  switch (g->kind) {
    case POOL_MAX:
      if (arg)
        for (int64_t k = 0; k < n; k++) {
          if (x[k * d] > a) a = x[k * d], *arg = off0 + k * d;
        }
      else
        for (int64_t k = 0; k < n; k++) a = x[k * d] > a ? x[k * d] : a;
      break;
    case POOL_AVG:
      for (int64_t k = 0; k < n; k++) a += x[k * d];
      break;
    case POOL_LP:
      if (g->p == 2)
        for (int64_t k = 0; k < n; k++) a += x[k * d] * x[k * d];
      else
        for (int64_t k = 0; k < n; k++) a += pow(fabs(x[k * d]), g->p);
      break;
  }
  *acc = a;
}

/* One output at coordinates oc.  arg (MaxPool Indices, else NULL) receives
 * the plane offset of the maximum (the first tap if none beats -inf). */
static double pool_reduce(const pool_geom *g, const pool_tabs *tb, const int64_t *oc,
                          const double *x, int64_t *arg) {
  const nn_window *w = &g->w;
  int L = w->nsp - 1;
  int64_t lo[NN_MAX_SPATIAL], hi[NN_MAX_SPATIAL], st[NN_MAX_SPATIAL], kc[NN_MAX_SPATIAL];
  int64_t n_valid = 1, n_padded = 1;
  for (int i = 0; i <= L; i++) {
    lo[i] = tb->lo[i][oc[i]], hi[i] = tb->hi[i][oc[i]], st[i] = tb->start[i][oc[i]];
    n_valid *= hi[i] - lo[i];
    n_padded *= tb->npad[i][oc[i]];
    kc[i] = lo[i];
  }
  double acc = g->kind == POOL_MAX ? -INFINITY : 0.0;
  if (arg) {
    *arg = 0;
    for (int i = 0; i <= L; i++) *arg = *arg * w->in[i] + (n_valid ? st[i] + lo[i] * w->dil[i] : 0);
  }
  if (n_valid == 0) return g->kind == POOL_MAX ? -INFINITY : g->kind == POOL_AVG ? NAN : 0.0;
  for (;;) { /* rows of the last dim, outer dims by counter */
    int64_t off = 0;
    for (int i = 0; i < L; i++) off = (off + st[i] + kc[i] * w->dil[i]) * w->in[i + 1];
    pool_row(g, x, off + st[L] + lo[L] * w->dil[L], hi[L] - lo[L], w->dil[L], &acc, arg);
    int i = L - 1;
    while (i >= 0 && ++kc[i] == hi[i]) kc[i] = lo[i], i--;
    if (i < 0) break;
  }
  if (g->kind == POOL_AVG) return acc / (double)(g->count_pad ? n_padded : n_valid);
  if (g->kind == POOL_LP) return g->p == 2 ? sqrt(acc) : pow(acc, 1.0 / g->p);
  return acc;
}

/* MaxPool Indices with storage_order 1: a row-major plane offset renumbered
 * column-major (first spatial dim fastest). */
static int64_t col_major_offset(const nn_window *w, int64_t off) {
  int64_t cs[NN_MAX_SPATIAL], idx = 0, mul = 1;
  for (int i = w->nsp - 1; i >= 0; i--) {
    cs[i] = off % w->in[i];
    off /= w->in[i];
  }
  for (int i = 0; i < w->nsp; i++) {
    idx += cs[i] * mul;
    mul *= w->in[i];
  }
  return idx;
}

typedef struct pool_job {
  const pool_geom *g;
  const pool_tabs *tb;
  const tensor *x;
  tensor *y, *ind;
  atomic_bool failed;
} pool_job;

static void pool_planes(void *vctx, int64_t q0, int64_t q1) {
  pool_job *j = vctx;
  const pool_geom *g = j->g;
  double *xin = NULL, *yout = NULL;
  if (nn_alloc((void **)&xin, g->S_in, sizeof(double), "pool plane") ||
      nn_alloc((void **)&yout, g->S_out, sizeof(double), "pool plane")) {
    atomic_store(&j->failed, true);
    free(xin);
    return;
  }
  int64_t *ind = j->ind ? j->ind->data : NULL;
  for (int64_t q = q0; q < q1; q++) {
    plane_load(j->x->dtype, j->x->data, q * g->S_in, g->S_in, xin);
    int64_t oc[NN_MAX_SPATIAL] = {0};
    for (int64_t p = 0; p < g->S_out; p++) {
      int64_t arg = 0;
      yout[p] = pool_reduce(g, j->tb, oc, xin, ind ? &arg : NULL);
      for (int i = g->w.nsp - 1; i >= 0 && ++oc[i] == g->w.out[i]; i--) oc[i] = 0;
      if (ind) {
        int64_t a = g->col_major ? col_major_offset(&g->w, arg) : arg;
        ind[q * g->S_out + p] = q * g->S_in + a;
      }
    }
    plane_store(j->y->dtype, j->y->data, q * g->S_out, g->S_out, yout);
  }
  free(xin);
  free(yout);
}

/* g as the 2-D kernels see it (1-D runs as H = 1) */
static pool2d_desc pool_desc_of(const pool_geom *g) {
  const nn_window *w = &g->w;
  int two = w->nsp == 2;
  return (pool2d_desc){.N = g->N, .C = g->C, .H = two ? w->in[0] : 1, .W = w->in[two],
                       .KH = two ? w->kernel[0] : 1, .KW = w->kernel[two], .OH = two ? w->out[0] : 1,
                       .OW = w->out[two], .sh = two ? w->stride[0] : 1, .sw = w->stride[two],
                       .dh = two ? w->dil[0] : 1, .dw = w->dil[two], .pt = two ? w->pad_lo[0] : 0,
                       .pl = w->pad_lo[two], .pb = two ? w->pad_hi[0] : 0, .pr = w->pad_hi[two],
                       .is_max = g->kind == POOL_MAX, .count_pad = g->count_pad};
}

/* A MaxPool between channels-last bf16 activations (passes/bf16_acts.c:
 * cl_in and cl_out): kernels/pool2d.h's pool2d_max_cl_bf16, exact */
static smelt_status pool_cl(op_ctx *c, const pool_geom *g, bool *done) {
  *done = false;
  if (!c->node || !ir_attr_int(c->node, "cl_in", 0) || !ir_attr_int(c->node, "cl_out", 0)) return SMELT_OK;
  *done = true;
  if (g->kind != POOL_MAX || g->w.nsp != 2 || c->in[0]->dtype != SMELT_BF16 || c->out[0]->dtype != SMELT_BF16 ||
      (c->n_out > 1 && c->node->outputs[1] >= 0))
    return err_set(SMELT_ERR_INTERNAL, "a channels-last pool that is not a bf16 2-D MaxPool without Indices");
  pool2d_desc d = pool_desc_of(g);
  return pool2d_max_cl_bf16(c->pool, &d, isa_active(), c->in[0]->data, c->out[0]->data);
}

/* The vectorized kernel when it covers the op (*done); else the reference. */
static smelt_status pool_fast(op_ctx *c, const pool_geom *g, bool *done) {
  const tensor *x = c->in[0];
  const nn_window *w = &g->w;
  *done = false;
  if (g->kind == POOL_LP || x->dtype != SMELT_F32 || w->nsp > 2) return SMELT_OK;
  if (c->n_out > 1 && c->node->outputs[1] >= 0) return SMELT_OK; /* Indices wanted */
  pool2d_desc d = pool_desc_of(g);
  if (!pool2d_supports(&d)) return SMELT_OK;
  *done = true;
  return pool2d_f32(c->pool, &d, isa_active(), x->data, c->out[0]->data);
}

static smelt_status pool_run_kind(op_ctx *c, pool_kind kind) {
  pool_geom g;
  TRY(pool_plan(c, kind, &g));
  if (tensor_numel(c->out[0]) == 0) return SMELT_OK;
  bool done;
  smelt_status cl = pool_cl(c, &g, &done);
  if (done) return cl;
  smelt_status fast = pool_fast(c, &g, &done);
  if (done) return fast;
  pool_tabs tb = {0};
  pool_job j = {.g = &g, .tb = &tb, .x = c->in[0], .y = c->out[0], .ind = c->n_out > 1 ? c->out[1] : NULL};
  if (tensor_numel(j.y) == 0) return SMELT_OK;
  TRY(pool_tabs_make(&g.w, &tb));
  int64_t grain = 1 + 65536 / (g.S_out * (nn_window_kernel_size(&g.w) + 1) + 1);
  pool_parallel_for(c->pool, g.N * g.C, grain, pool_planes, &j);
  free(tb.block);
  if (atomic_load(&j.failed)) return err_nomem("pool plane", (size_t)(g.S_in + g.S_out) * 8);
  return SMELT_OK;
}

static smelt_status maxpool_run(op_ctx *c) { return pool_run_kind(c, POOL_MAX); }
static smelt_status avgpool_run(op_ctx *c) { return pool_run_kind(c, POOL_AVG); }
static smelt_status lppool_run(op_ctx *c) { return pool_run_kind(c, POOL_LP); }

/* ---- global pools ---- */

static smelt_status global_infer(op_ctx *c) {
  const tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, float_types));
  if (x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 3)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 3", x->rank);
  int64_t dims[SMELT_MAX_RANK];
  for (int i = 0; i < x->rank; i++) dims[i] = i < 2 ? x->dims[i] : 1;
  op_set_out(c, 0, x->dtype, x->rank, dims);
  return SMELT_OK;
}

typedef struct global_job {
  const tensor *x;
  tensor *y;
  int64_t S;
  pool_kind kind;
  double p;
  atomic_bool failed;
} global_job;

static void global_planes(void *vctx, int64_t q0, int64_t q1) {
  global_job *j = vctx;
  double *buf = NULL;
  if (nn_alloc((void **)&buf, j->S, sizeof(double), "global pool plane")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t q = q0; q < q1; q++) {
    nn_load_f64(j->x->dtype, j->x->data, q * j->S, 1, j->S, buf);
    double acc = j->kind == POOL_MAX ? -INFINITY : 0.0;
    for (int64_t i = 0; i < j->S; i++) {
      if (j->kind == POOL_MAX) acc = buf[i] > acc || i == 0 ? buf[i] : acc;
      else if (j->kind == POOL_AVG) acc += buf[i];
      else acc += j->p == 2 ? buf[i] * buf[i] : pow(fabs(buf[i]), j->p);
    }
    if (j->kind == POOL_AVG) acc = j->S ? acc / (double)j->S : NAN;
    if (j->kind == POOL_LP) acc = j->p == 2 ? sqrt(acc) : pow(acc, 1.0 / j->p);
    nn_store_f64(j->y->dtype, j->y->data, q, 1, 1, &acc);
  }
  free(buf);
}

static smelt_status global_run_kind(op_ctx *c, pool_kind kind) {
  const tensor *x = c->in[0];
  if (kind == POOL_AVG && x->dtype == SMELT_F32) {
    global_avg_f32(c->pool, isa_active(), x->dims[0] * x->dims[1], nn_prod(x->dims, 2, x->rank),
                   x->data, c->out[0]->data);
    return SMELT_OK;
  }
  global_job j = {.x = x, .y = c->out[0], .S = nn_prod(x->dims, 2, x->rank), .kind = kind,
                  .p = (double)op_attr_int(c, "p", 2)};
  if (kind == POOL_LP && j.p <= 0) return err_set(SMELT_ERR_INVALID_MODEL, "p %g must be positive", j.p);
  pool_parallel_for(c->pool, x->dims[0] * x->dims[1], 1 + 65536 / (j.S + 1), global_planes, &j);
  if (atomic_load(&j.failed)) return err_nomem("global pool plane", (size_t)j.S * 8);
  return SMELT_OK;
}

static smelt_status gap_run(op_ctx *c) { return global_run_kind(c, POOL_AVG); }
static smelt_status gmp_run(op_ctx *c) { return global_run_kind(c, POOL_MAX); }
static smelt_status glp_run(op_ctx *c) { return global_run_kind(c, POOL_LP); }

/* ---- MaxUnpool ----
 * Indices address the default unpooled shape ((in-1)*stride + kernel - pads);
 * an output_shape input embeds that result at the origin of a larger zero
 * tensor (as the ONNX reference does). */

static smelt_status unpool_default_shape(op_ctx *c, int64_t *dims) {
  const tensor *x = c->in[0];
  nn_window w;
  TRY(nn_window_attrs(c, x->rank - 2, NULL, &w));
  dims[0] = x->dims[0];
  dims[1] = x->dims[1];
  for (int i = 0; i < w.nsp; i++) {
    int64_t in = x->dims[2 + i];
    if (!dim_known(in)) {
      dims[2 + i] = DIM_UNKNOWN;
      continue;
    }
    int64_t o = (in - 1) * w.stride[i] + w.kernel[i] - w.pad_lo[i] - w.pad_hi[i];
    if (o < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "spatial dim %d: unpooled size %lld is negative", i,
                     (long long)o);
    dims[2 + i] = o;
  }
  return SMELT_OK;
}

static smelt_status unpool_infer(op_ctx *c) {
  const tensor *x = c->in[0], *ind = c->in[1], *os = op_in(c, 2);
  TRY(op_check_dtype(c, 0, float_types));
  if (ind->dtype != SMELT_I64 && ind->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 1 (I) has type %s, expected int64",
                   dtype_name(ind->dtype));
  if (x->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  if (x->rank < 3)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected at least 3", x->rank);
  int64_t dims[SMELT_MAX_RANK];
  TRY(unpool_default_shape(c, dims));
  if (os) {
    if (!os->data) {
      for (int i = 0; i < x->rank; i++) dims[i] = DIM_UNKNOWN;
    } else {
      if (tensor_numel(os) != x->rank || os->dtype != SMELT_I64)
        return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (output_shape) must be %d int64 values",
                       x->rank);
      const int64_t *v = os->data;
      for (int i = 0; i < x->rank; i++) {
        if (dim_known(dims[i]) && v[i] < dims[i])
          return err_set(SMELT_ERR_INVALID_ARGUMENT,
                         "output_shape[%d] = %lld is smaller than the unpooled size %lld", i,
                         (long long)v[i], (long long)dims[i]);
        dims[i] = v[i];
      }
    }
  }
  op_set_out(c, 0, x->dtype, x->rank, dims);
  return SMELT_OK;
}

static smelt_status unpool_run(op_ctx *c) {
  const tensor *x = c->in[0], *ind = c->in[1];
  tensor *y = c->out[0];
  int64_t def[SMELT_MAX_RANK];
  TRY(unpool_default_shape(c, def));
  int64_t n = tensor_numel(x), ndef = shape_numel(x->rank, def);
  if (tensor_numel(ind) != n)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (I) has %lld elements, X has %lld",
                   (long long)tensor_numel(ind), (long long)n);
  size_t es = dtype_size(y->dtype);
  const int64_t *I = ind->data;
  memset(y->data, 0, y->nbytes); /* positions no index names are 0 */
  for (int64_t i = 0; i < n; i++) {
    int64_t k = I[i];
    if (k < 0 || k >= ndef)
      return err_set(SMELT_ERR_RUNTIME, "index %lld at %lld is outside the unpooled size %lld",
                     (long long)k, (long long)i, (long long)ndef);
    /* default-shape coordinates -> output offset */
    int64_t off = 0, rem = k, mul = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
      off += (rem % def[d]) * mul;
      rem /= def[d];
      mul *= y->dims[d];
    }
    memcpy((char *)y->data + off * es, (const char *)x->data + i * es, es);
  }
  return SMELT_OK;
}

const op_def op_family_pool[] = {
    {"MaxPool", "", 1, 1, 1, 2, maxpool_infer, maxpool_run, false},
    {"AveragePool", "", 1, 1, 1, 1, avgpool_infer, avgpool_run, false},
    {"LpPool", "", 1, 1, 1, 1, lppool_infer, lppool_run, false},
    {"GlobalAveragePool", "", 1, 1, 1, 1, global_infer, gap_run, false},
    {"GlobalMaxPool", "", 1, 1, 1, 1, global_infer, gmp_run, false},
    {"GlobalLpPool", "", 1, 1, 1, 1, global_infer, glp_run, false},
    {"MaxUnpool", "", 2, 3, 1, 1, unpool_infer, unpool_run, false},
    {0}};
