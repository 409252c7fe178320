/* GridSample (nearest / linear / cubic; zeros / border / reflection padding;
 * align_corners; any number of spatial dims, 2-D and 3-D in practice) and
 * AffineGrid, which makes the grids GridSample reads.
 *
 * GridSample follows PyTorch as ONNX's reference does: a grid point is
 * denormalized per axis (in the grid's precision), rounded half to even for
 * nearest, moved into range for border/reflection padding, and then read
 * through per-axis taps (1, 2 or 4 per axis) whose indices are clamped,
 * reflected or zeroed by the padding mode.  The taps of one grid point serve
 * every channel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

#define GS_MAX_DIMS 3
#define GS_MAX_TAPS 4

typedef enum gs_mode { GS_NEAREST, GS_LINEAR, GS_CUBIC } gs_mode;
typedef enum gs_pad { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_pad;

typedef struct gs_cfg {
  gs_mode mode;
  gs_pad pad;
  bool align, f64; /* f64: the grid is double, else coordinates are rounded to float */
  int r;           /* spatial dims */
  int64_t dims[GS_MAX_DIMS];
} gs_cfg;

static smelt_status gs_attrs(op_ctx *c, gs_cfg *g) {
  const char *m = ir_attr_string(c->node, "mode", c->opset >= 20 ? "linear" : "bilinear");
  const char *p = ir_attr_string(c->node, "padding_mode", "zeros");
  if (!strcmp(m, "nearest")) g->mode = GS_NEAREST;
  else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) g->mode = GS_LINEAR;
  else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) g->mode = GS_CUBIC;
  else return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is unknown", q(m));
  if (!strcmp(p, "zeros")) g->pad = GS_ZEROS;
  else if (!strcmp(p, "border")) g->pad = GS_BORDER;
  else if (!strcmp(p, "reflection")) g->pad = GS_REFLECTION;
  else return err_set(SMELT_ERR_INVALID_MODEL, "attribute padding_mode %s is unknown", q(p));
  g->align = op_attr_int(c, "align_corners", 0) != 0;
  return SMELT_OK;
}

static smelt_status gs_infer(op_ctx *c) {
  gs_cfg g = {0};
  TRY(gs_attrs(c, &g));
  TRY(nn_check_float(c, 0, "X"));
  TRY(nn_check_float(c, 1, "grid"));
  const tensor *x = c->in[0], *grid = c->in[1];
  if (x->rank < 0 || grid->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int r = x->rank - 2;
  if (r < 1 || r > GS_MAX_DIMS || grid->rank != x->rank)
    return err_set(SMELT_ERR_UNSUPPORTED, "X has rank %d and grid rank %d; expected equal ranks 3..%d",
                   x->rank, grid->rank, GS_MAX_DIMS + 2);
  if (dim_known(grid->dims[r + 1]) && grid->dims[r + 1] != r)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "grid's last dim is %lld, expected %d",
                   (long long)grid->dims[r + 1], r);
  int64_t d[SMELT_MAX_RANK];
  d[0] = x->dims[0];
  d[1] = x->dims[1];
  for (int i = 0; i < r; i++) d[2 + i] = grid->dims[1 + i];
  op_set_out(c, 0, x->dtype, x->rank, d);
  return SMELT_OK;
}

/* ---- coordinates ---- */

/* Reflects x into [lo, hi] by bouncing off the nearer border. */
static double gs_reflect(double x, double lo, double hi) {
  double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = (int64_t)(dx / rng);
    double r = dx - (double)n * rng;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = (int64_t)(dx / rng);
    double r = dx - (double)n * rng;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

static double gs_round(const gs_cfg *g, double v) { return g->f64 ? v : (double)(float)v; }

/* The grid value for axis of length L as a pixel coordinate, padding applied. */
static double gs_coord(const gs_cfg *g, double v, int64_t L) {
  double x;
  if (g->f64) x = g->align ? (v + 1) / 2.0 * (double)(L - 1) : ((v + 1) * (double)L - 1) / 2.0;
  else {
    float f = (float)v;
    x = g->align ? (f + 1.0f) / 2.0f * (float)(L - 1) : ((f + 1.0f) * (float)L - 1.0f) / 2.0f;
  }
  if (g->mode == GS_NEAREST) x = nearbyint(x);
  double lo = g->align ? 0 : -0.5, hi = g->align ? (double)(L - 1) : (double)L - 0.5;
  if (x < lo || x > hi) {
    if (g->pad == GS_BORDER) x = x < 0 ? 0 : x > (double)(L - 1) ? (double)(L - 1) : x;
    else if (g->pad == GS_REFLECTION) x = gs_round(g, gs_reflect(x, lo, hi));
  }
  return x;
}

/* Maps a tap index through the padding mode; -1 reads as zero. */
static int64_t gs_index(const gs_cfg *g, int64_t i, int64_t L) {
  if (g->pad == GS_ZEROS) return i >= 0 && i < L ? i : -1;
  if (g->pad == GS_REFLECTION) {
    double lo = g->align ? 0 : -0.5, hi = g->align ? (double)(L - 1) : (double)L - 0.5;
    i = (int64_t)gs_reflect((double)i, lo, hi);
  }
  return i < 0 ? 0 : i >= L ? L - 1 : i;
}

/* Keys' cubic convolution weights (alpha -0.75) for fractional offset t. */
static void gs_cubic(double t, double *w) {
  const double A = -0.75;
  double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  w[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
  w[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
  w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
  w[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* Taps of one axis: n indices (-1 = zero) and weights. */
static int gs_axis_taps(const gs_cfg *g, double x, int64_t L, int64_t *idx, double *w) {
  if (g->mode == GS_NEAREST) {
    idx[0] = gs_index(g, (int64_t)x, L);
    w[0] = 1;
    return 1;
  }
  double f = floor(x), t = x - f;
  int64_t i0 = (int64_t)f;
  if (g->mode == GS_LINEAR) {
    idx[0] = gs_index(g, i0, L), idx[1] = gs_index(g, i0 + 1, L);
    w[0] = 1 - t, w[1] = t;
    return 2;
  }
  gs_cubic(t, w);
  for (int k = 0; k < 4; k++) idx[k] = gs_index(g, i0 - 1 + k, L);
  return 4;
}

/* ---- sampling ---- */

typedef struct gs_point {
  int n_taps;
  int64_t off[64]; /* flat offsets in a channel plane; -1: zero */
  double w[64];
} gs_point;

/* All taps of one grid point: the product of the per-axis taps. */
static void gs_point_taps(const gs_cfg *g, const double *coord, gs_point *p) {
  int64_t idx[GS_MAX_DIMS][GS_MAX_TAPS];
  double w[GS_MAX_DIMS][GS_MAX_TAPS];
  int cnt[GS_MAX_DIMS];
  for (int a = 0; a < g->r; a++)
    cnt[a] = gs_axis_taps(g, gs_coord(g, coord[a], g->dims[a]), g->dims[a], idx[a], w[a]);
  p->n_taps = 1;
  for (int a = 0; a < g->r; a++) p->n_taps *= cnt[a];
  for (int t = 0; t < p->n_taps; t++) {
    int64_t off = 0;
    double wt = 1;
    for (int a = 0, rem = t; a < g->r; a++) {
      int k = rem % cnt[a];
      rem /= cnt[a];
      if (off >= 0 && idx[a][k] >= 0) off = off * g->dims[a] + idx[a][k];
      else off = -1;
      wt *= w[a][k];
    }
    p->off[t] = off;
    p->w[t] = wt;
  }
}

static smelt_status gs_run(op_ctx *c) {
  gs_cfg g = {0};
  TRY(gs_attrs(c, &g));
  TRY(gs_infer(c));
  const tensor *x = c->in[0], *grid = c->in[1];
  tensor *y = c->out[0];
  g.r = x->rank - 2;
  g.f64 = grid->dtype == SMELT_F64;
  for (int a = 0; a < g.r; a++) g.dims[a] = x->dims[2 + a];
  int64_t N = x->dims[0], C = x->dims[1], plane = nn_prod(x->dims, 2, x->rank);
  int64_t P = nn_prod(grid->dims, 1, grid->rank - 1);
  if (grid->dims[0] != N)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "grid has batch %lld, X %lld", (long long)grid->dims[0],
                   (long long)N);
  double *xv = NULL, coord[GS_MAX_DIMS], gv[GS_MAX_DIMS];
  TRY(nn_alloc((void **)&xv, plane * C + 1, sizeof(double), "X plane"));
  gs_point pt;
  for (int64_t n = 0; n < N; n++) {
    nn_load_f64(x->dtype, x->data, n * C * plane, 1, C * plane, xv);
    for (int64_t p = 0; p < P; p++) {
      nn_load_f64(grid->dtype, grid->data, (n * P + p) * g.r, 1, g.r, gv);
      for (int a = 0; a < g.r; a++) coord[a] = gv[g.r - 1 - a]; /* the grid lists x (last axis) first */
      gs_point_taps(&g, coord, &pt);
      for (int64_t ch = 0; ch < C; ch++) {
        double s = 0;
        for (int t = 0; t < pt.n_taps; t++)
          if (pt.off[t] >= 0) s += pt.w[t] * xv[ch * plane + pt.off[t]];
        nn_store_f64(y->dtype, y->data, (n * C + ch) * P + p, 1, 1, &s);
      }
    }
  }
  free(xv);
  return SMELT_OK;
}

/* ---- AffineGrid ---- */

static smelt_status ag_size(op_ctx *c, int64_t *size, int *n) {
  const tensor *s = c->in[1];
  if (s->dtype != SMELT_I64 || s->rank != 1 || (s->dims[0] != 4 && s->dims[0] != 5))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (size) must be 4 or 5 int64 values");
  *n = (int)s->dims[0];
  for (int i = 0; i < *n; i++) size[i] = ((const int64_t *)s->data)[i];
  for (int i = 0; i < *n; i++)
    if (size[i] < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 1 (size) has a negative value");
  return SMELT_OK;
}

static smelt_status ag_infer(op_ctx *c) {
  TRY(nn_check_float(c, 0, "theta"));
  const tensor *s = c->in[1];
  if (!s->data) {
    nn_out_unknown(c, 0, c->in[0]->dtype);
    return SMELT_OK;
  }
  int64_t size[5] = {0}, d[5] = {0};
  int n = 0;
  TRY(ag_size(c, size, &n));
  d[0] = size[0];
  for (int i = 2; i < n; i++) d[i - 1] = size[i];
  d[n - 1] = n - 2;
  op_set_out(c, 0, c->in[0]->dtype, n, d);
  return SMELT_OK;
}

/* Base coordinate i of an axis of length L in [-1, 1]. */
static double ag_base(int64_t i, int64_t L, bool align) {
  if (align) return L > 1 ? -1.0 + 2.0 * (double)i / (double)(L - 1) : -1.0;
  return -1.0 + (2.0 * (double)i + 1.0) / (double)L;
}

static smelt_status ag_run(op_ctx *c) {
  TRY(ag_infer(c));
  const tensor *th = c->in[0];
  int64_t size[5] = {0};
  int n = 0;
  TRY(ag_size(c, size, &n));
  int r = n - 2; /* 2 or 3 spatial axes */
  if (th->rank != 3 || th->dims[0] != size[0] || th->dims[1] != r || th->dims[2] != r + 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "theta must have shape [%lld, %d, %d]", (long long)size[0],
                   r, r + 1);
  bool align = op_attr_int(c, "align_corners", 0) != 0;
  int64_t P = nn_prod(size, 2, n);
  double t[12], v[3], out[3];
  for (int64_t b = 0; b < size[0]; b++) {
    nn_load_f64(th->dtype, th->data, b * r * (r + 1), 1, r * (r + 1), t);
    for (int64_t p = 0; p < P; p++) {
      /* v lists x (last axis) first, as the grid does */
      int64_t rem = p;
      for (int a = r - 1; a >= 0; a--) {
        int64_t L = size[2 + a];
        v[r - 1 - a] = ag_base(rem % L, L, align);
        rem /= L;
      }
      for (int k = 0; k < r; k++) {
        double s = t[k * (r + 1) + r];
        for (int j = 0; j < r; j++) s += t[k * (r + 1) + j] * v[j];
        out[k] = s;
      }
      nn_store_f64(c->out[0]->dtype, c->out[0]->data, (b * P + p) * r, 1, r, out);
    }
  }
  return SMELT_OK;
}

const op_def op_family_grid_sample[] = {
    {"GridSample", "", 2, 2, 1, 1, gs_infer, gs_run, false},
    {"AffineGrid", "", 2, 2, 1, 1, ag_infer, ag_run, false},
    {0}};
