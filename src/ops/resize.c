/* Resize (opsets 10-19) and Upsample (7, 9).
 *
 * The arithmetic follows the ONNX reference implementation, which defines the
 * conformance outputs: interpolation is separable, so each resized axis is one
 * 1-D pass (in the order of the axes attribute) over a float64 buffer; per
 * output position a window of n source indices (edge-clamped) and n weights
 * is computed from the source coordinate x_ori the coordinate transformation
 * gives.  The result is cast back with saturation (integers round half to
 * even, as numpy does).  Nearest mode picks one source index per output
 * position and copies elements bytewise, so it is exact for every dtype. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

typedef enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC } rz_mode;
typedef enum {
  CT_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_PYTORCH_HALF_PIXEL, CT_TF_CROP_AND_RESIZE,
  CT_HALF_PIXEL_SYMMETRIC
} rz_coord;
/* NM_SIMPLE: Resize-10 and Upsample (floor upsampling, ceil downsampling). */
typedef enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE } rz_nearest;

typedef struct rz_params {
  rz_mode mode;
  rz_coord coord;
  rz_nearest nearest;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
  int rank;
  double scale[SMELT_MAX_RANK];
  int64_t out[SMELT_MAX_RANK];
  double roi0[SMELT_MAX_RANK], roi1[SMELT_MAX_RANK];
  int axes[SMELT_MAX_RANK], n_axes; /* processing order */
} rz_params;

static int find_name(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

/* Attributes, with the fixed behaviour of Resize-10 and Upsample. */
static smelt_status rz_attrs(op_ctx *c, bool upsample, rz_params *p) {
  static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear"};
  static const char *const coords[] = {"half_pixel", "align_corners", "asymmetric",
                                       "pytorch_half_pixel", "tf_crop_and_resize",
                                       "half_pixel_symmetric"};
  static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};
  const char *m = ir_attr_string(c->node, "mode", "nearest");
  int mi = find_name(m, modes, 4);
  if (mi < 0 || (mi == RZ_CUBIC && (upsample || c->opset < 11)))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is not supported", q(m));
  p->mode = mi == 3 ? RZ_LINEAR : (rz_mode)mi;
  bool legacy = upsample || c->opset < 11;
  const char *ct = legacy ? "asymmetric" : ir_attr_string(c->node, "coordinate_transformation_mode",
                                                          "half_pixel");
  int ci = find_name(ct, coords, 6);
  if (ci < 0 || (ci == CT_HALF_PIXEL_SYMMETRIC && c->opset < 19))
    return err_set(SMELT_ERR_INVALID_MODEL, "coordinate_transformation_mode %s is not valid",
                   q(ct));
  p->coord = (rz_coord)ci;
  const char *nm = ir_attr_string(c->node, "nearest_mode", "round_prefer_floor");
  int ni = find_name(nm, nearests, 4);
  if (ni < 0) return err_set(SMELT_ERR_INVALID_MODEL, "nearest_mode %s is not valid", q(nm));
  p->nearest = legacy ? NM_SIMPLE : (rz_nearest)ni;
  p->cubic_a = op_attr_float(c, "cubic_coeff_a", -0.75f);
  p->exclude_outside = op_attr_int(c, "exclude_outside", 0) != 0;
  p->extrapolation = op_attr_float(c, "extrapolation_value", 0.0f);
  p->antialias = c->opset >= 18 && op_attr_int(c, "antialias", 0) != 0;
  if (p->antialias && p->mode == RZ_NEAREST)
    return err_set(SMELT_ERR_INVALID_MODEL, "antialias is not defined for mode nearest");
  return SMELT_OK;
}

/* The axes attribute (opset 18+), or every axis. */
static smelt_status rz_axes(op_ctx *c, int rank, rz_params *p) {
  int n;
  const int64_t *a = c->opset >= 18 ? ir_attr_ints(c->node, "axes", &n) : NULL;
  int64_t ax[SMELT_MAX_RANK];
  if (!a) n = rank;
  if (n > rank) return err_set(SMELT_ERR_INVALID_MODEL, "attribute axes has %d entries", n);
  for (int i = 0; i < n; i++) ax[i] = a ? a[i] : i;
  TRY(su_norm_axes(ax, n, rank, "attribute axes"));
  for (int i = 0; i < n; i++) p->axes[i] = (int)ax[i];
  p->n_axes = n;
  return SMELT_OK;
}

/* Reads a float tensor of n values (scales or roi). */
static smelt_status read_floats(const tensor *t, const char *what, int n, double *v) {
  if (!dtype_is_float(t->dtype))
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has type %s, expected a float type", what,
                   dtype_name(t->dtype));
  if (tensor_numel(t) != n)
    return err_set(SMELT_ERR_INVALID_MODEL, "%s has %lld values, expected %d", what,
                   (long long)tensor_numel(t), n);
  for (int i = 0; i < n; i++) v[i] = tensor_get_f64(t, i);
  return SMELT_OK;
}

/* Output sizes from sizes, with keep_aspect_ratio_policy. */
static smelt_status rz_from_sizes(op_ctx *c, const tensor *x, const tensor *sz, rz_params *p) {
  int64_t s[SMELT_MAX_RANK];
  int n;
  TRY(su_check_i64(sz, "input 3 (sizes)"));
  TRY(su_read_ints(sz, "input 3 (sizes)", SMELT_MAX_RANK, s, &n));
  if (n != p->n_axes)
    return err_set(SMELT_ERR_INVALID_MODEL, "sizes has %d values for %d axes", n, p->n_axes);
  const char *pol = ir_attr_string(c->node, "keep_aspect_ratio_policy", "stretch");
  int pi = find_name(pol, (const char *const[]){"stretch", "not_larger", "not_smaller"}, 3);
  if (pi < 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "keep_aspect_ratio_policy %s is not valid", q(pol));
  double keep = pi == 1 ? INFINITY : 0;
  for (int i = 0; i < n; i++) {
    int a = p->axes[i];
    if (s[i] < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "sizes[%d] is negative", i);
    if (!dim_known(x->dims[a])) {
      p->out[a] = pi ? DIM_UNKNOWN : s[i];
      continue;
    }
    if (x->dims[a] == 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot resize empty axis %d", a);
    p->scale[a] = (double)s[i] / (double)x->dims[a];
    p->out[a] = s[i];
    if (pi == 1 && p->scale[a] < keep) keep = p->scale[a];
    if (pi == 2 && p->scale[a] > keep) keep = p->scale[a];
  }
  if (pi == 0) return SMELT_OK;
  for (int i = 0; i < n; i++) {
    int a = p->axes[i];
    p->scale[a] = keep;
    if (dim_known(x->dims[a])) p->out[a] = (int64_t)(keep * (double)x->dims[a] + 0.5);
  }
  return SMELT_OK;
}

static smelt_status rz_from_scales(const tensor *x, const tensor *sc, const char *what,
                                   rz_params *p) {
  double s[SMELT_MAX_RANK];
  TRY(read_floats(sc, what, p->n_axes, s));
  for (int i = 0; i < p->n_axes; i++) {
    int a = p->axes[i];
    if (!(s[i] > 0 && s[i] < 1e9))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "scale %g on axis %d is not positive", s[i], a);
    p->scale[a] = s[i];
    if (!dim_known(x->dims[a])) {
      p->out[a] = s[i] == 1 ? x->dims[a] : DIM_UNKNOWN; /* scale 1 keeps a symbol */
      continue;
    }
    double o = floor(s[i] * (double)x->dims[a]);
    if (o > (double)(INT64_C(1) << 40))
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "scale %g makes axis %d too large", s[i], a);
    p->out[a] = (int64_t)o;
  }
  return SMELT_OK;
}

/* Everything about a Resize/Upsample node.  *known false when scales or sizes
 * are not known statically (then out dims of the resized axes are unknown). */
static smelt_status rz_params_read(op_ctx *c, bool upsample, rz_params *p, bool *known) {
  tensor *x = c->in[0];
  memset(p, 0, sizeof *p);
  *known = true;
  p->rank = x->rank;
  TRY(rz_attrs(c, upsample, p));
  TRY(rz_axes(c, x->rank, p));
  for (int i = 0; i < x->rank; i++) {
    p->scale[i] = 1;
    p->out[i] = x->dims[i];
    p->roi0[i] = 0;
    p->roi1[i] = 1;
  }
  if (upsample && c->opset < 9) {
    int n;
    const float *f = ir_attr_floats(c->node, "scales", &n);
    if (!f || n != x->rank)
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute scales must have %d values", x->rank);
    tensor t;
    int64_t len = n;
    tensor_view(&t, SMELT_F32, 1, &len, (void *)f);
    return rz_from_scales(x, &t, "attribute scales", p);
  }
  bool v10 = upsample || c->opset < 11;
  tensor *roi = v10 ? NULL : op_in(c, 1), *sc = op_in(c, v10 ? 1 : 2), *sz = v10 ? NULL : op_in(c, 3);
  if (sc && sc->rank == 1 && sc->dims[0] == 0) sc = NULL; /* empty: sizes are used */
  if (!sc && !sz) return err_set(SMELT_ERR_INVALID_MODEL, "neither scales nor sizes is given");
  if (sc && sz) return err_set(SMELT_ERR_INVALID_MODEL, "both scales and sizes are given");
  tensor *src = sc ? sc : sz;
  if (!src->data) {
    *known = false;
    for (int i = 0; i < p->n_axes; i++) p->out[p->axes[i]] = DIM_UNKNOWN;
    return SMELT_OK;
  }
  if (sc) TRY(rz_from_scales(x, sc, v10 ? "input 1 (scales)" : "input 2 (scales)", p));
  else TRY(rz_from_sizes(c, x, sz, p));
  if (p->coord == CT_TF_CROP_AND_RESIZE) {
    double r[2 * SMELT_MAX_RANK];
    if (!roi) return err_set(SMELT_ERR_INVALID_MODEL, "tf_crop_and_resize needs input 1 (roi)");
    if (!roi->data) {
      *known = false;
      return SMELT_OK;
    }
    TRY(read_floats(roi, "input 1 (roi)", 2 * p->n_axes, r));
    for (int i = 0; i < p->n_axes; i++) {
      p->roi0[p->axes[i]] = r[i];
      p->roi1[p->axes[i]] = r[p->n_axes + i];
    }
  }
  return SMELT_OK;
}

/* ---- one axis: source windows and weights ---- */

typedef struct rz_axis {
  int64_t in_w, out_w;
  int n;             /* window size */
  int64_t *start;    /* [out_w] first source index of the window (may be < 0) */
  double *w;         /* [out_w * n] weights */
  bool *extrap;      /* [out_w] tf_crop_and_resize: outside the input */
} rz_axis;

static double rz_x_ori(const rz_params *p, int a, int64_t in_w, int64_t y, bool *extrap) {
  double s = p->scale[a], ow = s * (double)in_w, oi = (double)p->out[a], yy = (double)y;
  *extrap = false;
  switch (p->coord) {
    case CT_ALIGN_CORNERS: return ow == 1 ? 0 : yy * (double)(in_w - 1) / (ow - 1);
    case CT_ASYMMETRIC: return yy / s;
    case CT_TF_CROP_AND_RESIZE: {
      double r = p->roi1[a] - p->roi0[a], x;
      x = ow == 1 ? r * (double)(in_w - 1) / 2 : yy * r * (double)(in_w - 1) / (ow - 1);
      x += p->roi0[a] * (double)(in_w - 1);
      *extrap = x < 0 || x > (double)(in_w - 1);
      return x;
    }
    case CT_PYTORCH_HALF_PIXEL: return ow == 1 ? -0.5 : (yy + 0.5) / s - 0.5;
    case CT_HALF_PIXEL: return (yy + 0.5) / s - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
      double adj = oi / ow, center = (double)in_w / 2, off = center * (1 - adj);
      return off + (yy + 0.5) / s - 0.5;
    }
  }
  return 0;
}

static double cubic_kernel(double x, double A) {
  x = fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

/* Window size for the mode; antialiased kernels widen by 1 / scale. */
static int rz_window(const rz_params *p, double scale) {
  if (p->mode == RZ_NEAREST) return 2;
  if (!p->antialias) return p->mode == RZ_LINEAR ? 2 : 4;
  double s = scale < 1 ? scale : 1;
  int64_t st = (int64_t)floor((p->mode == RZ_LINEAR ? -1 : -2) / s) + 1;
  return (int)(2 - 2 * st);
}

/* The n weights for fractional position ratio in (0, 1]. */
static void rz_coeffs(const rz_params *p, double ratio, double scale, int n, double *w) {
  double A = p->cubic_a;
  if (p->mode == RZ_NEAREST) {
    bool hi;
    if (ratio == 1) hi = true; /* integral x_ori */
    else switch (p->nearest) {
        case NM_ROUND_PREFER_FLOOR: hi = ratio > 0.5; break;
        case NM_ROUND_PREFER_CEIL: hi = ratio >= 0.5; break;
        case NM_FLOOR: hi = false; break;
        case NM_CEIL: hi = true; break;
        default: hi = scale < 1; break; /* simple */
      }
    w[0] = !hi;
    w[1] = hi;
    return;
  }
  if (!p->antialias) {
    if (p->mode == RZ_LINEAR) {
      w[0] = 1 - ratio;
      w[1] = ratio;
    } else {
      w[0] = cubic_kernel(ratio + 1, A);
      w[1] = cubic_kernel(ratio, A);
      w[2] = cubic_kernel(1 - ratio, A);
      w[3] = cubic_kernel(2 - ratio, A);
    }
    return;
  }
  double s = scale < 1 ? scale : 1, sum = 0;
  int64_t st = p->mode == RZ_LINEAR ? (int64_t)floor(-1 / s) + 1 : (int64_t)floor(-2 / s) + 1;
  for (int k = 0; k < n; k++) {
    double arg = ((double)(st + k) - ratio) * s;
    if (p->mode == RZ_LINEAR) {
      double v = 1 - fabs(arg);
      w[k] = v < 0 ? 0 : v > 1 ? 1 : v;
    } else {
      w[k] = cubic_kernel(arg, A);
    }
    sum += w[k];
  }
  for (int k = 0; k < n; k++) w[k] /= sum;
}

static void rz_axis_free(rz_axis *ax) {
  free(ax->start);
  free(ax->w);
  free(ax->extrap);
}

static smelt_status rz_axis_make(const rz_params *p, int a, int64_t in_w, rz_axis *ax) {
  memset(ax, 0, sizeof *ax);
  ax->in_w = in_w;
  ax->out_w = p->out[a];
  ax->n = rz_window(p, p->scale[a]);
  if (ax->n <= 0 || ax->n > (1 << 24))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "scale %g is too small", p->scale[a]);
  size_t m = (size_t)(ax->out_w ? ax->out_w : 1);
  if (m > SIZE_MAX / 8 / (size_t)ax->n) return err_nomem("Resize weights", SIZE_MAX);
  ax->start = malloc(m * sizeof *ax->start);
  ax->w = malloc(m * (size_t)ax->n * sizeof *ax->w);
  ax->extrap = malloc(m * sizeof *ax->extrap);
  if (!ax->start || !ax->w || !ax->extrap) {
    rz_axis_free(ax);
    return err_nomem("Resize weights", m * (size_t)ax->n * sizeof(double));
  }
  int n = ax->n, pad = (n + 1) / 2;
  for (int64_t y = 0; y < ax->out_w; y++) {
    double x = rz_x_ori(p, a, in_w, y, &ax->extrap[y]), fl = floor(x);
    double ratio = x == fl ? 1 : x - fl, *w = ax->w + y * n;
    rz_coeffs(p, ratio, p->scale[a], n, w);
    /* The n source indices nearest x, ties to the smaller (as the reference's
     * edge-padded neighbour search). */
    double xp = x + pad, pf = floor(xp), frac = xp - pf;
    int64_t off = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1)
                             : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
    ax->start[y] = (int64_t)pf + off - pad;
    if (p->exclude_outside) {
      double sum = 0;
      for (int k = 0; k < n; k++) {
        int64_t i = ax->start[y] + k;
        if (i < 0 || i >= in_w) w[k] = 0;
        sum += w[k];
      }
      if (sum == 0) sum = 1;
      for (int k = 0; k < n; k++) w[k] /= sum;
    }
  }
  return SMELT_OK;
}

static int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

/* One pass: src [outer, in_w, inner] -> dst [outer, out_w, inner]. */
static void rz_pass(const rz_params *p, const rz_axis *ax, const double *src, double *dst,
                    int64_t outer, int64_t inner) {
  for (int64_t o = 0; o < outer; o++) {
    const double *s = src + o * ax->in_w * inner;
    double *d = dst + o * ax->out_w * inner;
    for (int64_t y = 0; y < ax->out_w; y++) {
      double *dr = d + y * inner;
      if (ax->extrap[y]) {
        for (int64_t j = 0; j < inner; j++) dr[j] = p->extrapolation;
        continue;
      }
      for (int64_t j = 0; j < inner; j++) dr[j] = 0;
      for (int k = 0; k < ax->n; k++) {
        double w = ax->w[y * ax->n + k];
        if (w == 0) continue;
        const double *sr = s + clampi(ax->start[y] + k, ax->in_w) * inner;
        for (int64_t j = 0; j < inner; j++) dr[j] += w * sr[j];
      }
    }
  }
}

/* ---- casting back ---- */

static double type_max(smelt_dtype dt) {
  switch (dt) {
    case SMELT_F16: return 65504.0;
    case SMELT_BF16: return 3.3895313892515355e38;
    case SMELT_F32: return 3.4028234663852886e38;
    case SMELT_I8: return 127;
    case SMELT_U8: return 255;
    case SMELT_I16: return 32767;
    case SMELT_U16: return 65535;
    case SMELT_I32: return 2147483647.0;
    case SMELT_U32: return 4294967295.0;
    case SMELT_I64: return 9223372036854774784.0; /* largest double below 2^63 */
    case SMELT_U64: return 18446744073709549568.0;
    default: return INFINITY;
  }
}

static double type_min(smelt_dtype dt) {
  if (dtype_is_unsigned_int(dt)) return 0;
  if (dt == SMELT_I64) return -9223372036854775808.0;
  return dtype_is_int(dt) ? -type_max(dt) - 1 : -type_max(dt);
}

/* numpy's saturate_cast: integers round half to even, then everything clips
 * to the type's range. */
static void store_saturated(tensor *y, int64_t i, double v) {
  if (dtype_is_int(y->dtype)) v = isnan(v) ? 0 : nearbyint(v);
  double lo = type_min(y->dtype), hi = type_max(y->dtype);
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  tensor_set_f64(y, i, v);
}

/* ---- the two paths ---- */

static smelt_status rz_run_interp(const rz_params *p, const tensor *x, tensor *y) {
  int64_t n = tensor_numel(x), cur[SMELT_MAX_RANK];
  memcpy(cur, x->dims, sizeof(int64_t) * (size_t)x->rank);
  for (int i = 0; i < p->n_axes; i++) { /* the largest intermediate buffer */
    cur[p->axes[i]] = p->out[p->axes[i]];
    int64_t m = shape_numel(x->rank, cur);
    if (m < 0) return err_nomem("Resize buffer", SIZE_MAX);
    if (m > n) n = m;
  }
  if ((uint64_t)n > SIZE_MAX / 16) return err_nomem("Resize buffer", SIZE_MAX);
  double *b0 = malloc((size_t)(n ? n : 1) * sizeof(double)), *b1 = malloc((size_t)(n ? n : 1) * sizeof(double));
  if (!b0 || !b1) {
    free(b0);
    free(b1);
    return err_nomem("Resize buffer", (size_t)n * sizeof(double));
  }
  int64_t total = tensor_numel(x);
  for (int64_t i = 0; i < total; i++) b0[i] = tensor_get_f64(x, i);
  memcpy(cur, x->dims, sizeof(int64_t) * (size_t)x->rank);
  smelt_status s = SMELT_OK;
  for (int i = 0; !s && i < p->n_axes; i++) {
    int a = p->axes[i];
    bool roi_id = p->coord != CT_TF_CROP_AND_RESIZE || (fabs(p->roi0[a]) <= 1e-9 &&
                                                          fabs(p->roi1[a] - 1) <= 1e-9);
    if (fabs(p->scale[a] - 1) <= 1e-9 && p->out[a] == cur[a] && roi_id) continue;
    rz_axis ax;
    s = rz_axis_make(p, a, cur[a], &ax);
    if (s) break;
    rz_pass(p, &ax, b0, b1, shape_numel(a, cur), shape_numel(x->rank - a - 1, cur + a + 1));
    rz_axis_free(&ax);
    cur[a] = p->out[a];
    double *t = b0;
    b0 = b1;
    b1 = t;
  }
  int64_t on = tensor_numel(y);
  for (int64_t i = 0; !s && i < on; i++) store_saturated(y, i, b0[i]);
  free(b0);
  free(b1);
  return s;
}

/* Nearest: one source index per output position and axis (-1: extrapolate). */
static smelt_status rz_run_nearest(const rz_params *p, const tensor *x, tensor *y) {
  int r = x->rank;
  int64_t *map[SMELT_MAX_RANK] = {0}, xs[SMELT_MAX_RANK];
  smelt_status s = SMELT_OK;
  for (int a = 0; a < r && !s; a++) {
    map[a] = malloc(sizeof(int64_t) * (size_t)(y->dims[a] ? y->dims[a] : 1));
    if (!map[a]) {
      s = err_nomem("Resize index map", sizeof(int64_t) * (size_t)y->dims[a]);
      break;
    }
    bool identity = fabs(p->scale[a] - 1) <= 1e-9 && y->dims[a] == x->dims[a] &&
                    (p->coord != CT_TF_CROP_AND_RESIZE || (p->roi0[a] == 0 && p->roi1[a] == 1));
    if (identity || x->dims[a] == 0) {
      for (int64_t i = 0; i < y->dims[a]; i++) map[a][i] = i;
      continue;
    }
    rz_axis ax;
    s = rz_axis_make(p, a, x->dims[a], &ax);
    for (int64_t i = 0; !s && i < y->dims[a]; i++)
      map[a][i] = ax.extrap[i] ? -1 : clampi(ax.start[i] + (ax.w[i * 2 + 1] != 0), x->dims[a]);
    if (!s) rz_axis_free(&ax);
  }
  if (!s && y->nbytes) {
    size_t es = dtype_size(x->dtype);
    char fill[16] = {0};
    tensor ft;
    tensor_view(&ft, x->dtype, 0, NULL, fill);
    store_saturated(&ft, 0, p->extrapolation);
    su_dense_strides(r, x->dims, xs);
    int64_t idx[SMELT_MAX_RANK] = {0}, n = tensor_numel(y);
    char *d = y->data;
    for (int64_t o = 0; o < n; o++, d += es) {
      int64_t off = 0;
      bool ex = false;
      for (int a = 0; a < r; a++) {
        int64_t m = map[a][idx[a]];
        ex |= m < 0;
        off += m * xs[a];
      }
      memcpy(d, ex ? fill : (const char *)x->data + off * (int64_t)es, es);
      for (int a = r - 1; a >= 0; a--) {
        if (++idx[a] < y->dims[a]) break;
        idx[a] = 0;
      }
    }
  }
  for (int a = 0; a < r; a++) free(map[a]);
  return s;
}

static const smelt_dtype rz_types[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I8,
                                       SMELT_U8, SMELT_I16, SMELT_U16, SMELT_I32, SMELT_U32,
                                       SMELT_I64, SMELT_U64, SMELT_UNDEFINED};

static smelt_status rz_infer_common(op_ctx *c, bool upsample) {
  tensor *x = c->in[0];
  TRY(op_check_dtype(c, 0, rz_types));
  if (x->rank < 0) {
    su_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  rz_params p;
  bool known;
  TRY(rz_params_read(c, upsample, &p, &known));
  op_set_out(c, 0, x->dtype, x->rank, p.out);
  return SMELT_OK;
}

static smelt_status rz_run_common(op_ctx *c, bool upsample) {
  tensor *x = c->in[0], *y = c->out[0];
  rz_params p;
  bool known;
  TRY(rz_params_read(c, upsample, &p, &known));
  if (!y->nbytes) return SMELT_OK;
  for (int i = 0; i < p.n_axes; i++)
    if (x->dims[p.axes[i]] == 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot resize empty axis %d", p.axes[i]);
  return p.mode == RZ_NEAREST ? rz_run_nearest(&p, x, y) : rz_run_interp(&p, x, y);
}

static smelt_status resize_infer(op_ctx *c) { return rz_infer_common(c, false); }
static smelt_status resize_run(op_ctx *c) { return rz_run_common(c, false); }
static smelt_status upsample_infer(op_ctx *c) { return rz_infer_common(c, true); }
static smelt_status upsample_run(op_ctx *c) { return rz_run_common(c, true); }

const op_def op_family_resize[] = {
    {"Resize", "", 1, 4, 1, 1, resize_infer, resize_run, false},
    {"Upsample", "", 1, 2, 1, 1, upsample_infer, upsample_run, false},
    {0}};
