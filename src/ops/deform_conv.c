/* DeformConv (opset 19), 2-D.  Like Conv, but tap (i, j) of the window at
 * output (oh, ow) reads X at
 *   (oh*sh - ph + i*dh + offset_h, ow*sw - pw + j*dw + offset_w)
 * by bilinear interpolation (zero outside the image), scaled by mask.  Input
 * channels split into offset_group groups, each with its own offsets/mask:
 * offset [N, og*kh*kw*2, OH, OW] (h then w per tap), mask [N, og*kh*kw, OH, OW].
 *
 * Per (batch, group) a sampled column matrix [Cg*kh*kw, OH*OW] is built in
 * double, then multiplied by W_g: gemm_f32 for f32/f16/bf16, a double loop
 * for f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct dconv_geom {
  nn_window w;
  int64_t N, C, M, G, Cg, Mg, OG, Kk, S_in, S_out;
} dconv_geom;

static const smelt_dtype dconv_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64, SMELT_UNDEFINED};

static smelt_status dconv_plan(op_ctx *c, dconv_geom *g) {
  const tensor *x = c->in[0], *w = c->in[1], *off = c->in[2], *m = op_in(c, 4);
  TRY(op_check_dtype(c, 0, dconv_types));
  static const char *const names[] = {"X", "W", "offset", "B", "mask"};
  for (int i = 1; i < 5; i++) TRY(nn_check_same_dtype(c, i, names[i], 0, "X"));
  TRY(nn_check_rank(c, 0, "X", 4));
  TRY(nn_check_rank(c, 1, "W", 4));
  TRY(nn_check_rank(c, 2, "offset", 4));
  TRY(nn_check_rank(c, 3, "B", 1));
  TRY(nn_check_rank(c, 4, "mask", 4));
  g->G = op_attr_int(c, "group", 1);
  g->OG = op_attr_int(c, "offset_group", 1);
  if (g->G < 1 || g->OG < 1)
    return err_set(SMELT_ERR_INVALID_MODEL, "group and offset_group must be >= 1");
  g->N = x->dims[0], g->C = x->dims[1], g->M = w->dims[0], g->Cg = w->dims[1];
  if (dim_known(g->C) && dim_known(g->Cg) && g->C != g->Cg * g->G)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels %lld of X do not match W's %lld*group %lld",
                   (long long)g->C, (long long)g->Cg, (long long)g->G);
  if ((dim_known(g->M) && g->M % g->G) || (dim_known(g->C) && g->C % g->OG))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels are not divisible by group/offset_group");
  g->Mg = dim_known(g->M) ? g->M / g->G : DIM_UNKNOWN;
  const tensor *b = op_in(c, 3);
  if (b && b->rank == 1 && dim_known(b->dims[0]) && dim_known(g->M) && b->dims[0] != g->M)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (B) has %lld values for %lld output channels",
                   (long long)b->dims[0], (long long)g->M);
  TRY(nn_window_attrs(c, 2, w->dims + 2, &g->w));
  if (g->w.auto_pad != NN_NOTSET)
    return err_set(SMELT_ERR_UNSUPPORTED, "DeformConv has no auto_pad");
  TRY(nn_window_out(&g->w, x->dims + 2, false));
  g->Kk = nn_window_kernel_size(&g->w);
  g->S_in = nn_prod(x->dims, 2, 4);
  g->S_out = nn_window_out_size(&g->w);
  const int64_t want_off[4] = {g->N, g->OG * g->Kk * 2, g->w.out[0], g->w.out[1]};
  const int64_t want_mask[4] = {g->N, g->OG * g->Kk, g->w.out[0], g->w.out[1]};
  for (int d = 0; d < 4; d++) {
    if (dim_known(off->dims[d]) && dim_known(want_off[d]) && off->dims[d] != want_off[d])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (offset) dim %d is %lld, expected %lld", d,
                     (long long)off->dims[d], (long long)want_off[d]);
    if (m && dim_known(m->dims[d]) && dim_known(want_mask[d]) && m->dims[d] != want_mask[d])
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 4 (mask) dim %d is %lld, expected %lld", d,
                     (long long)m->dims[d], (long long)want_mask[d]);
  }
  return SMELT_OK;
}

static smelt_status dconv_infer(op_ctx *c) {
  dconv_geom g;
  TRY(dconv_plan(c, &g));
  op_set_out(c, 0, c->in[0]->dtype, 4, (int64_t[]){g.N, g.M, g.w.out[0], g.w.out[1]});
  return SMELT_OK;
}

/* Bilinear sample of plane x (H x W) at (h, w), zero outside. */
static double bilinear(const double *x, int64_t H, int64_t W, double h, double w) {
  double h0 = floor(h), w0 = floor(w), fh = h - h0, fw = w - w0, v = 0;
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++) {
      double hh = h0 + a, ww = w0 + b;
      if (hh < 0 || hh >= (double)H || ww < 0 || ww >= (double)W) continue;
      double wt = (a ? fh : 1 - fh) * (b ? fw : 1 - fw);
      if (wt != 0) v += wt * x[(int64_t)hh * W + (int64_t)ww];
    }
  return v;
}

/* Sampled columns of group gi of batch n: row (ci, i, j), column (oh, ow). */
static void dconv_columns(const dconv_geom *g, const double *X, const double *off, const double *mask,
                          int64_t n, int64_t gi, double *col) {
  const nn_window *w = &g->w;
  int64_t KW = w->kernel[1], OW = w->out[1];
  int64_t c_per_og = g->C / g->OG;
  for (int64_t ci = 0; ci < g->Cg; ci++) {
    int64_t cin = gi * g->Cg + ci, og = cin / c_per_og;
    const double *x = X + (n * g->C + cin) * g->S_in;
    for (int64_t t = 0; t < g->Kk; t++) {
      int64_t i = t / KW, j = t % KW;
      const double *oh_p = off + ((n * g->OG + og) * g->Kk * 2 + t * 2) * g->S_out;
      const double *ow_p = oh_p + g->S_out;
      const double *mk = mask ? mask + ((n * g->OG + og) * g->Kk + t) * g->S_out : NULL;
      double *dst = col + (ci * g->Kk + t) * g->S_out;
      for (int64_t p = 0; p < g->S_out; p++) {
        int64_t oh = p / OW, ow = p % OW;
        double h = (double)(oh * w->stride[0] - w->pad_lo[0] + i * w->dil[0]) + oh_p[p];
        double ww = (double)(ow * w->stride[1] - w->pad_lo[1] + j * w->dil[1]) + ow_p[p];
        double v = bilinear(x, w->in[0], w->in[1], h, ww);
        dst[p] = mk ? v * mk[p] : v;
      }
    }
  }
}

/* Loads a float tensor as doubles (NULL stays NULL). */
static smelt_status as_doubles(const tensor *t, double **out) {
  *out = NULL;
  if (!t) return SMELT_OK;
  int64_t n = tensor_numel(t);
  TRY(nn_alloc((void **)out, n, sizeof(double), "DeformConv input"));
  nn_load_f64(t->dtype, t->data, 0, 1, n, *out);
  return SMELT_OK;
}

static smelt_status dconv_run(op_ctx *c) {
  dconv_geom g;
  TRY(dconv_plan(c, &g));
  tensor *y = c->out[0];
  int64_t ny = tensor_numel(y), rows = g.Cg * g.Kk;
  if (ny == 0) return SMELT_OK;
  bool f64 = y->dtype == SMELT_F64;
  double *X = NULL, *W = NULL, *B = NULL, *O = NULL, *Mk = NULL, *col = NULL, *Y = NULL;
  float *colf = NULL, *Wf = NULL, *Yf = NULL;
  smelt_status st = as_doubles(c->in[0], &X);
  if (!st) st = as_doubles(c->in[1], &W);
  if (!st) st = as_doubles(op_in(c, 3), &B);
  if (!st) st = as_doubles(c->in[2], &O);
  if (!st) st = as_doubles(op_in(c, 4), &Mk);
  if (!st) st = nn_alloc((void **)&col, rows * g.S_out, sizeof(double), "DeformConv columns");
  if (!st) st = nn_alloc((void **)&Y, ny, sizeof(double), "DeformConv output");
  if (!st && !f64) st = nn_alloc((void **)&colf, rows * g.S_out, sizeof(float), "DeformConv columns");
  if (!st && !f64) st = nn_alloc((void **)&Wf, g.M * rows, sizeof(float), "DeformConv weights");
  if (!st && !f64) st = nn_alloc((void **)&Yf, g.Mg * g.S_out, sizeof(float), "DeformConv output");
  for (int64_t i = 0; !st && !f64 && i < g.M * rows; i++) Wf[i] = (float)W[i];
  for (int64_t n = 0; !st && n < g.N; n++)
    for (int64_t gi = 0; !st && gi < g.G; gi++) {
      dconv_columns(&g, X, O, Mk, n, gi, col);
      double *yg = Y + (n * g.M + gi * g.Mg) * g.S_out;
      if (f64) {
        for (int64_t m = 0; m < g.Mg; m++)
          for (int64_t p = 0; p < g.S_out; p++) {
            double acc = 0;
            for (int64_t r = 0; r < rows; r++) acc += W[(gi * g.Mg + m) * rows + r] * col[r * g.S_out + p];
            yg[m * g.S_out + p] = acc;
          }
      } else {
        for (int64_t i = 0; i < rows * g.S_out; i++) colf[i] = (float)col[i];
        if (rows == 0) memset(Yf, 0, sizeof(float) * (size_t)(g.Mg * g.S_out));
        else st = gemm_f32(c->pool, false, false, g.Mg, g.S_out, rows, 1.f, Wf + gi * g.Mg * rows, rows,
                           colf, g.S_out, 0.f, Yf, g.S_out);
        for (int64_t i = 0; i < g.Mg * g.S_out; i++) yg[i] = Yf[i];
      }
      for (int64_t m = 0; B && m < g.Mg; m++)
        for (int64_t p = 0; p < g.S_out; p++) yg[m * g.S_out + p] += B[gi * g.Mg + m];
    }
  if (!st) nn_store_f64(y->dtype, y->data, 0, 1, ny, Y);
  double *dbufs[] = {X, W, B, O, Mk, col, Y};
  float *fbufs[] = {colf, Wf, Yf};
  for (size_t i = 0; i < sizeof dbufs / sizeof *dbufs; i++) free(dbufs[i]);
  for (size_t i = 0; i < sizeof fbufs / sizeof *fbufs; i++) free(fbufs[i]);
  return st;
}

const op_def op_family_deform_conv[] = {
    {"DeformConv", "", 3, 5, 1, 1, dconv_infer, dconv_run, false},
    {0}};
