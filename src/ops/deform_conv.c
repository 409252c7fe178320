/* DeformConv (2-D): a convolution whose kernel taps are displaced by learned
 * per-position offsets and optionally scaled by a mask.
 *
 * Each tap reads the input bilinearly at (row, col) = (out * stride - pad +
 * tap * dilation + offset), zero outside the image (what ONNX's reference
 * gets from GridSample with align_corners and zero padding).  Per batch entry
 * and group the sampled, masked values form an im2col matrix [Cg*kh*kw,
 * oh*ow] that one gemm_f32 multiplies by the group's weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct dc_geom {
  nn_window w;
  int64_t N, C, M, G, Cg, Mg, OG, H, W, oh, ow, Kk;
} dc_geom;

static smelt_status dc_plan(op_ctx *c, dc_geom *g) {
  const tensor *x = c->in[0], *w = c->in[1];
  TRY(nn_check_float(c, 0, "X"));
  for (int i = 1; i < 5; i++) TRY(nn_check_same_dtype(c, i, "W, offset, B and mask", 0, "X"));
  if (x->rank != 4 || w->rank != 4)
    return err_set(SMELT_ERR_UNSUPPORTED, "DeformConv supports 2-D inputs (rank 4), got X rank %d and "
                   "W rank %d", x->rank, w->rank);
  g->N = x->dims[0], g->C = x->dims[1], g->H = x->dims[2], g->W = x->dims[3];
  g->M = w->dims[0], g->Cg = w->dims[1];
  g->G = op_attr_int(c, "group", 1);
  g->OG = op_attr_int(c, "offset_group", 1);
  if (g->G < 1 || g->OG < 1) return err_set(SMELT_ERR_INVALID_MODEL, "group and offset_group must be >= 1");
  if (dim_known(g->C) && dim_known(g->Cg) && (g->C != g->Cg * g->G || g->C % g->OG))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "X has %lld channels; W has %lld per group (%lld groups), "
                   "offset_group %lld", (long long)g->C, (long long)g->Cg, (long long)g->G, (long long)g->OG);
  if (dim_known(g->M) && g->M % g->G)
    return err_set(SMELT_ERR_INVALID_MODEL, "%lld output channels are not divisible by group %lld",
                   (long long)g->M, (long long)g->G);
  g->Mg = dim_known(g->M) ? g->M / g->G : DIM_UNKNOWN;
  TRY(nn_window_attrs(c, 2, w->dims + 2, &g->w));
  TRY(nn_window_out(&g->w, x->dims + 2, false));
  g->oh = g->w.out[0], g->ow = g->w.out[1];
  g->Kk = nn_window_kernel_size(&g->w);
  return SMELT_OK;
}

static smelt_status dc_infer(op_ctx *c) {
  dc_geom g = {0};
  if (c->in[0]->rank < 0 || c->in[1]->rank < 0) {
    nn_out_unknown(c, 0, c->in[0]->dtype);
    return SMELT_OK;
  }
  TRY(dc_plan(c, &g));
  op_set_out(c, 0, c->in[0]->dtype, 4, (int64_t[]){g.N, g.M, g.oh, g.ow});
  return SMELT_OK;
}

/* Bilinear read of plane [H, W] at (y, x), zero outside. */
static float dc_sample(const float *p, int64_t H, int64_t W, double y, double x) {
  double fy = floor(y), fx = floor(x), ly = y - fy, lx = x - fx;
  int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
  double s = 0;
  for (int dy = 0; dy < 2; dy++)
    for (int dx = 0; dx < 2; dx++) {
      int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
      s += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * p[yy * W + xx];
    }
  return (float)s;
}

/* The im2col rows of group grp for batch entry n. */
static void dc_columns(const dc_geom *g, const float *X, const float *off, const float *mask,
                       int64_t n, int64_t grp, float *col) {
  int64_t P = g->oh * g->ow, kw = g->w.kernel[1], cpo = g->C / g->OG;
  for (int64_t cg = 0; cg < g->Cg; cg++) {
    int64_t ch = grp * g->Cg + cg, og = ch / cpo;
    const float *plane = X + (n * g->C + ch) * g->H * g->W;
    for (int64_t t = 0; t < g->Kk; t++) {
      int64_t ky = t / kw, kx = t % kw;
      const float *oy = off + ((n * g->OG + og) * g->Kk * 2 + 2 * t) * P, *ox = oy + P;
      const float *mk = mask ? mask + ((n * g->OG + og) * g->Kk + t) * P : NULL;
      float *row = col + (cg * g->Kk + t) * P;
      for (int64_t i = 0; i < g->oh; i++)
        for (int64_t j = 0; j < g->ow; j++) {
          int64_t p = i * g->ow + j;
          double y = (double)(i * g->w.stride[0] - g->w.pad_lo[0] + ky * g->w.dil[0]) + oy[p];
          double x = (double)(j * g->w.stride[1] - g->w.pad_lo[1] + kx * g->w.dil[1]) + ox[p];
          row[p] = dc_sample(plane, g->H, g->W, y, x) * (mk ? mk[p] : 1.0f);
        }
    }
  }
}

static smelt_status dc_check_inputs(op_ctx *c, const dc_geom *g) {
  const tensor *off = c->in[2], *b = op_in(c, 3), *mk = op_in(c, 4);
  int64_t P = g->oh * g->ow;
  if (tensor_numel(off) != g->N * g->OG * g->Kk * 2 * P)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "offset has %lld values, expected [%lld, %lld, %lld, %lld]",
                   (long long)tensor_numel(off), (long long)g->N, (long long)(g->OG * g->Kk * 2),
                   (long long)g->oh, (long long)g->ow);
  if (mk && tensor_numel(mk) != g->N * g->OG * g->Kk * P)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "mask has %lld values, expected [%lld, %lld, %lld, %lld]",
                   (long long)tensor_numel(mk), (long long)g->N, (long long)(g->OG * g->Kk),
                   (long long)g->oh, (long long)g->ow);
  if (b && tensor_numel(b) != g->M)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "B has %lld values for %lld output channels",
                   (long long)tensor_numel(b), (long long)g->M);
  return SMELT_OK;
}

static smelt_status dc_run(op_ctx *c) {
  dc_geom g = {0};
  TRY(dc_plan(c, &g));
  TRY(dc_check_inputs(c, &g));
  const tensor *x = c->in[0], *w = c->in[1], *off = c->in[2], *b = op_in(c, 3), *mk = op_in(c, 4);
  float *X = NULL, *Wt = NULL, *O = NULL, *B = NULL, *Mk = NULL, *Y = NULL, *col = NULL;
  int64_t P = g.oh * g.ow;
  smelt_status s = nn_f32_acquire(x, &X);
  if (!s) s = nn_f32_acquire(w, &Wt);
  if (!s) s = nn_f32_acquire(off, &O);
  if (!s && b) s = nn_f32_acquire(b, &B);
  if (!s && mk) s = nn_f32_acquire(mk, &Mk);
  if (!s) s = nn_f32_out(c->out[0], &Y);
  if (!s) s = nn_alloc((void **)&col, g.Cg * g.Kk * P + 1, sizeof(float), "deformed columns");
  for (int64_t n = 0; !s && n < g.N; n++)
    for (int64_t grp = 0; grp < g.G; grp++) {
      dc_columns(&g, X, O, Mk, n, grp, col);
      float *yg = Y + (n * g.M + grp * g.Mg) * P;
      for (int64_t m = 0; m < g.Mg; m++)
        for (int64_t p = 0; p < P; p++) yg[m * P + p] = B ? B[grp * g.Mg + m] : 0.0f;
      gemm_f32(c->pool, false, false, g.Mg, P, g.Cg * g.Kk, 1.0f, Wt + grp * g.Mg * g.Cg * g.Kk,
               g.Cg * g.Kk, col, P, 1.0f, yg, P);
    }
  if (!s) nn_f32_commit(c->out[0], Y);
  else if (Y && c->out[0]->dtype != SMELT_F32) free(Y);
  if (X) nn_f32_release(x, X);
  if (Wt) nn_f32_release(w, Wt);
  if (O) nn_f32_release(off, O);
  if (B) nn_f32_release(b, B);
  if (Mk) nn_f32_release(mk, Mk);
  free(col);
  return s;
}

const op_def op_family_deform_conv[] = {
    {"DeformConv", "", 3, 5, 1, 1, dc_infer, dc_run, false},
    {0}};
