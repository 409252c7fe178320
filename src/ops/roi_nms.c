/* Detection ops: RoiAlign (avg / max, half_pixel or output_half_pixel) and
 * NonMaxSuppression.  Both follow ONNX Runtime's behaviour as the ONNX
 * reference encodes it: RoiAlign samples a regular grid per bin with bilinear
 * weights (max mode takes the largest weighted corner), and NMS visits boxes
 * by descending score (ties: lower index first), keeping a box unless its IoU
 * with a kept box of the same class exceeds the threshold. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "ops/shape_util.h"
#include "util/err.h"
#include "util/quote.h"

/* ---- RoiAlign ---- */

typedef struct roi_cfg {
  bool max_mode, half_pixel;
  int64_t ph, pw, sampling;
  float scale;
} roi_cfg;

static smelt_status roi_attrs(op_ctx *c, roi_cfg *g) {
  const char *m = ir_attr_string(c->node, "mode", "avg");
  const char *t = ir_attr_string(c->node, "coordinate_transformation_mode",
                                 c->opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (strcmp(m, "avg") && strcmp(m, "max"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is unknown", q(m));
  if (strcmp(t, "half_pixel") && strcmp(t, "output_half_pixel"))
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute coordinate_transformation_mode %s is unknown", q(t));
  g->max_mode = !strcmp(m, "max");
  g->half_pixel = !strcmp(t, "half_pixel");
  g->ph = op_attr_int(c, "output_height", 1);
  g->pw = op_attr_int(c, "output_width", 1);
  g->sampling = op_attr_int(c, "sampling_ratio", 0);
  g->scale = op_attr_float(c, "spatial_scale", 1.0f);
  if (g->ph < 1 || g->pw < 1 || g->sampling < 0)
    return err_set(SMELT_ERR_INVALID_MODEL, "output_height/output_width must be >= 1 and "
                   "sampling_ratio >= 0");
  return SMELT_OK;
}

static smelt_status roi_infer(op_ctx *c) {
  roi_cfg g = {0};
  TRY(roi_attrs(c, &g));
  TRY(nn_check_float(c, 0, "X"));
  TRY(nn_check_same_dtype(c, 1, "rois", 0, "X"));
  TRY(nn_check_rank(c, 0, "X", 4));
  TRY(nn_check_rank(c, 1, "rois", 2));
  const tensor *x = c->in[0], *r = c->in[1];
  int64_t d[4] = {r->rank == 2 ? r->dims[0] : DIM_UNKNOWN, x->rank == 4 ? x->dims[1] : DIM_UNKNOWN,
                  g.ph, g.pw};
  op_set_out(c, 0, x->dtype, 4, d);
  return SMELT_OK;
}

/* One bilinear sample: four plane offsets and weights (all zero outside). */
typedef struct roi_tap {
  int64_t pos[4];
  double w[4];
} roi_tap;

static void roi_sample(double y, double x, int64_t H, int64_t W, roi_tap *t) {
  memset(t, 0, sizeof *t);
  if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return;
  if (y < 0) y = 0;
  if (x < 0) x = 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, y = (double)yl;
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, x = (double)xl;
  else xh = xl + 1;
  double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
  t->pos[0] = yl * W + xl, t->pos[1] = yl * W + xh, t->pos[2] = yh * W + xl, t->pos[3] = yh * W + xh;
  t->w[0] = hy * hx, t->w[1] = hy * lx, t->w[2] = ly * hx, t->w[3] = ly * lx;
}

/* Output bin (ph, pw) of one channel plane for a roi [x1, y1, x2, y2]. */
static double roi_bin(const roi_cfg *g, const double *plane, int64_t H, int64_t W, const double *box,
                      int64_t py, int64_t px) {
  double off = g->half_pixel ? 0.5 : 0.0;
  double sw = box[0] * g->scale - off, sh = box[1] * g->scale - off;
  double rw = box[2] * g->scale - off - sw, rh = box[3] * g->scale - off - sh;
  if (!g->half_pixel) { /* malformed rois become 1x1 */
    if (rw < 1) rw = 1;
    if (rh < 1) rh = 1;
  }
  double bh = rh / (double)g->ph, bw = rw / (double)g->pw;
  int64_t gh = g->sampling > 0 ? g->sampling : (int64_t)ceil(rh / (double)g->ph);
  int64_t gw = g->sampling > 0 ? g->sampling : (int64_t)ceil(rw / (double)g->pw);
  int64_t count = gh * gw > 1 ? gh * gw : 1;
  double acc = 0;
  bool first = true;
  for (int64_t iy = 0; iy < gh; iy++)
    for (int64_t ix = 0; ix < gw; ix++) {
      double y = sh + (double)py * bh + ((double)iy + 0.5) * bh / (double)gh;
      double x = sw + (double)px * bw + ((double)ix + 0.5) * bw / (double)gw;
      roi_tap t;
      roi_sample(y, x, H, W, &t);
      if (!g->max_mode) {
        for (int k = 0; k < 4; k++) acc += t.w[k] * plane[t.pos[k]];
        continue;
      }
      double v = t.w[0] * plane[t.pos[0]];
      for (int k = 1; k < 4; k++)
        if (t.w[k] * plane[t.pos[k]] > v) v = t.w[k] * plane[t.pos[k]];
      if (first || v > acc) acc = v;
      first = false;
    }
  return g->max_mode ? acc : acc / (double)count;
}

static smelt_status roi_run(op_ctx *c) {
  roi_cfg g = {0};
  TRY(roi_attrs(c, &g));
  const tensor *x = c->in[0], *rois = c->in[1], *bi = c->in[2];
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = rois->dims[0];
  if (rois->dims[1] != 4)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "rois must have 4 columns, it has %lld", (long long)rois->dims[1]);
  TRY(su_check_index_type(bi, "input 2 (batch_indices)"));
  if (tensor_numel(bi) != R)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "batch_indices has %lld values for %lld rois",
                   (long long)tensor_numel(bi), (long long)R);
  double *plane = NULL, box[4];
  TRY(nn_alloc((void **)&plane, H * W + 1, sizeof(double), "X plane"));
  smelt_status s = SMELT_OK;
  for (int64_t r = 0; !s && r < R; r++) {
    int64_t b = su_index_at(bi, r);
    if (b < 0 || b >= N) {
      s = err_set(SMELT_ERR_INVALID_ARGUMENT, "batch_indices[%lld] = %lld is outside 0..%lld",
                  (long long)r, (long long)b, (long long)N - 1);
      break;
    }
    nn_load_f64(rois->dtype, rois->data, r * 4, 1, 4, box);
    for (int64_t ch = 0; ch < C; ch++) {
      nn_load_f64(x->dtype, x->data, (b * C + ch) * H * W, 1, H * W, plane);
      for (int64_t py = 0; py < g.ph; py++)
        for (int64_t px = 0; px < g.pw; px++) {
          double v = H && W ? roi_bin(&g, plane, H, W, box, py, px) : 0;
          nn_store_f64(c->out[0]->dtype, c->out[0]->data, ((r * C + ch) * g.ph + py) * g.pw + px, 1, 1, &v);
        }
    }
  }
  free(plane);
  return s;
}

/* ---- NonMaxSuppression ---- */

typedef struct nms_box {
  double x0, y0, x1, y1; /* min/max corners */
} nms_box;

static nms_box nms_corners(const double *b, bool center) {
  nms_box r;
  if (center) {
    r.x0 = b[0] - b[2] / 2, r.x1 = b[0] + b[2] / 2;
    r.y0 = b[1] - b[3] / 2, r.y1 = b[1] + b[3] / 2;
  } else { /* [y1, x1, y2, x2] in either order */
    r.y0 = b[0] < b[2] ? b[0] : b[2], r.y1 = b[0] < b[2] ? b[2] : b[0];
    r.x0 = b[1] < b[3] ? b[1] : b[3], r.x1 = b[1] < b[3] ? b[3] : b[1];
  }
  return r;
}

static bool nms_suppress(const nms_box *a, const nms_box *b, double thr) {
  double ix0 = a->x0 > b->x0 ? a->x0 : b->x0, ix1 = a->x1 < b->x1 ? a->x1 : b->x1;
  double iy0 = a->y0 > b->y0 ? a->y0 : b->y0, iy1 = a->y1 < b->y1 ? a->y1 : b->y1;
  if (ix1 <= ix0 || iy1 <= iy0) return false;
  double inter = (ix1 - ix0) * (iy1 - iy0);
  double a1 = (a->x1 - a->x0) * (a->y1 - a->y0), a2 = (b->x1 - b->x0) * (b->y1 - b->y0);
  double uni = a1 + a2 - inter;
  if (inter <= 0 || a1 <= 0 || a2 <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

typedef struct nms_sort_ctx {
  const double *scores;
} nms_sort_ctx;

/* Descending score, then ascending index. */
static int nms_cmp(const void *ctx, int64_t a, int64_t b) {
  const double *s = ((const nms_sort_ctx *)ctx)->scores;
  if (s[a] != s[b]) return s[a] > s[b] ? -1 : 1;
  return a < b ? -1 : a > b;
}

static smelt_status nms_infer(op_ctx *c) {
  op_set_out(c, 0, SMELT_I64, 2, (int64_t[]){DIM_UNKNOWN, 3});
  return SMELT_OK;
}

static double nms_scalar(op_ctx *c, int i, double dflt, bool *given) {
  const tensor *t = op_in(c, i);
  *given = t && tensor_numel(t) > 0;
  return *given ? tensor_get_f64(t, 0) : dflt;
}

typedef struct nms_state {
  int64_t *sel; /* triples */
  int64_t n, cap;
} nms_state;

static smelt_status nms_push(nms_state *st, int64_t b, int64_t cl, int64_t box) {
  if (st->n == st->cap) {
    int64_t cap = st->cap ? 2 * st->cap : 64;
    int64_t *p = realloc(st->sel, sizeof(int64_t) * 3 * (size_t)cap);
    if (!p) return err_nomem("selected indices", sizeof(int64_t) * 3 * (size_t)cap);
    st->sel = p, st->cap = cap;
  }
  st->sel[3 * st->n] = b, st->sel[3 * st->n + 1] = cl, st->sel[3 * st->n + 2] = box;
  st->n++;
  return SMELT_OK;
}

/* One (batch, class): candidates sorted, then greedily kept. */
static smelt_status nms_class(nms_state *st, int64_t b, int64_t cl, const nms_box *boxes,
                              const double *scores, int64_t nb, int64_t max_out, double iou,
                              bool use_thr, double thr, int64_t *idx, int64_t *tmp, int64_t *kept) {
  int64_t n = 0, nk = 0;
  for (int64_t i = 0; i < nb; i++)
    if (!use_thr || scores[i] > thr) idx[n++] = i;
  nms_sort_ctx ctx = {scores};
  su_sort_idx(idx, tmp, n, nms_cmp, &ctx);
  for (int64_t k = 0; k < n && nk < max_out; k++) {
    bool keep = true;
    for (int64_t j = 0; keep && j < nk; j++) keep = !nms_suppress(&boxes[idx[k]], &boxes[kept[j]], iou);
    if (!keep) continue;
    kept[nk++] = idx[k];
    TRY(nms_push(st, b, cl, idx[k]));
  }
  return SMELT_OK;
}

static smelt_status nms_run(op_ctx *c) {
  const tensor *bx = c->in[0], *sc = c->in[1];
  if (bx->rank != 3 || bx->dims[2] != 4 || sc->rank != 3 || sc->dims[0] != bx->dims[0] ||
      sc->dims[2] != bx->dims[1])
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "boxes must be [B, n, 4] and scores [B, classes, n]");
  if (!nn_is_float(bx->dtype) || !nn_is_float(sc->dtype))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "boxes and scores must be float tensors");
  bool center = op_attr_int(c, "center_point_box", 0) != 0, g1, g2, use_thr;
  double mo = nms_scalar(c, 2, 0, &g1), iou = nms_scalar(c, 3, 0, &g2), thr = nms_scalar(c, 4, 0, &use_thr);
  int64_t B = bx->dims[0], nb = bx->dims[1], ncl = sc->dims[1], max_out = mo > 0 ? (int64_t)mo : 0;
  nms_state st = {0};
  nms_box *boxes = NULL;
  double *bv = NULL, *scores = NULL;
  int64_t *idx = NULL, *tmp = NULL, *kept = NULL;
  smelt_status s = nn_alloc((void **)&boxes, nb + 1, sizeof(nms_box), "boxes");
  if (!s) s = nn_alloc((void **)&bv, 4 * nb + 1, sizeof(double), "boxes");
  if (!s) s = nn_alloc((void **)&scores, nb + 1, sizeof(double), "scores");
  if (!s) s = nn_alloc((void **)&idx, nb + 1, sizeof(int64_t), "order");
  if (!s) s = nn_alloc((void **)&tmp, nb + 1, sizeof(int64_t), "order");
  if (!s) s = nn_alloc((void **)&kept, nb + 1, sizeof(int64_t), "kept boxes");
  for (int64_t b = 0; !s && b < B; b++) {
    nn_load_f64(bx->dtype, bx->data, b * nb * 4, 1, nb * 4, bv);
    for (int64_t i = 0; i < nb; i++) boxes[i] = nms_corners(bv + 4 * i, center);
    for (int64_t cl = 0; !s && cl < ncl; cl++) {
      nn_load_f64(sc->dtype, sc->data, (b * ncl + cl) * nb, 1, nb, scores);
      s = nms_class(&st, b, cl, boxes, scores, nb, max_out, iou, use_thr, thr, idx, tmp, kept);
    }
  }
  if (!s) s = tensor_alloc(c->out[0], SMELT_I64, 2, (int64_t[]){st.n, 3});
  if (!s && st.n) memcpy(c->out[0]->data, st.sel, sizeof(int64_t) * 3 * (size_t)st.n);
  free(st.sel), free(boxes), free(bv), free(scores), free(idx), free(tmp), free(kept);
  return s;
}

const op_def op_family_roi_nms[] = {
    {"RoiAlign", "", 3, 3, 1, 1, roi_infer, roi_run, false},
    {"NonMaxSuppression", "", 2, 5, 1, 1, nms_infer, nms_run, true},
    {0}};
