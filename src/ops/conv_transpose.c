/* ConvTranspose, 1-D to N-D, with groups, dilations, strides, pads,
 * output_padding, output_shape and auto_pad.
 *
 * f32: per (batch, group, tile of input positions) gemm_f32 computes the
 * column matrix W_g^T x X_g  ([Mg*k, tile]) and col2im scatters it into Y
 * (bias preloaded), output channels in parallel.  f16/bf16 via f32 copies, f64 on
 * a direct reference loop.
 *
 * Output size: out = stride*(in-1) + output_padding + dilated kernel - pads.
 * With output_shape (or SAME_*, whose shape is in*stride) the pads are
 * derived from it, total = stride*(in-1) + output_padding + dilated kernel -
 * out split with floor division: SAME_UPPER puts the larger half at the end,
 * otherwise at the beginning.  A negative total (output_shape larger than the
 * natural size) extends the output at the end with only bias. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm.h"
#include "ops/nn_util.h"
#include "util/err.h"

typedef struct convt_geom {
  nn_window w; /* w.in: input spatial dims, w.out: output spatial dims */
  int64_t N, C, M, G, Cg, Mg;
  int64_t S_in, S_out, Kk, Mk; /* Mk = Mg * Kk: rows of the column matrix */
} convt_geom;

static const smelt_dtype convt_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64, SMELT_UNDEFINED};

static int64_t floor_div2(int64_t a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

/* Output sizes and the pads they imply. */
static smelt_status convt_sizes(op_ctx *c, convt_geom *g, const int64_t *in) {
  nn_window *w = &g->w;
  int nsp = w->nsp, n_os, n_op;
  const int64_t *os = ir_attr_ints(c->node, "output_shape", &n_os);
  const int64_t *op = ir_attr_ints(c->node, "output_padding", &n_op);
  if (os && n_os != nsp && n_os != nsp + 2)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute output_shape has %d values, expected %d",
                   n_os, nsp);
  if (op && n_op != nsp)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute output_padding has %d values, expected %d",
                   n_op, nsp);
  if (os && n_os == nsp + 2) os += 2; /* full shape given: keep the spatial part */
  bool same = w->auto_pad == NN_SAME_UPPER || w->auto_pad == NN_SAME_LOWER;
  for (int i = 0; i < nsp; i++) {
    w->in[i] = in[i];
    int64_t opad = op ? op[i] : 0;
    if (opad < 0 || (opad >= w->stride[i] && opad >= w->dil[i]))
      return err_set(SMELT_ERR_INVALID_MODEL, "output_padding[%d] = %lld must be less than the stride or dilation",
                     i, (long long)opad);
    if (!dim_known(in[i]) || !dim_known(w->kernel[i])) {
      w->out[i] = os ? os[i] : DIM_UNKNOWN;
      continue;
    }
    int64_t full = w->stride[i] * (in[i] - 1) + opad + (w->kernel[i] - 1) * w->dil[i] + 1;
    if (w->auto_pad == NN_VALID) w->pad_lo[i] = w->pad_hi[i] = 0;
    if (os || same) {
      int64_t out = os ? os[i] : in[i] * w->stride[i];
      int64_t total = full - out, half = floor_div2(total);
      w->pad_lo[i] = w->auto_pad == NN_SAME_UPPER ? half : total - half;
      w->pad_hi[i] = total - w->pad_lo[i];
      w->out[i] = out;
    } else {
      w->out[i] = full - w->pad_lo[i] - w->pad_hi[i];
    }
    if (w->out[i] < 0)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "spatial dim %d: output size %lld is negative", i,
                     (long long)w->out[i]);
  }
  return SMELT_OK;
}

static smelt_status convt_plan(op_ctx *c, convt_geom *g) {
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  TRY(nn_check_conv_operands(c, convt_types, &g->G));
  if (x->rank < 0 || w->rank < 0) return SMELT_OK;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->Mg = w->dims[1];
  g->M = dim_known(g->Mg) ? g->Mg * g->G : DIM_UNKNOWN;
  if (dim_known(g->C) && dim_known(w->dims[0]) && g->C != w->dims[0])
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels %lld of X do not match W's first dim %lld",
                   (long long)g->C, (long long)w->dims[0]);
  if (dim_known(g->C) && g->C % g->G)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels %lld of X are not divisible by group %lld",
                   (long long)g->C, (long long)g->G);
  g->Cg = dim_known(g->C) ? g->C / g->G : DIM_UNKNOWN;
  if (b && b->rank == 1 && dim_known(b->dims[0]) && dim_known(g->M) && b->dims[0] != g->M)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (B) has %lld values for %lld output channels",
                   (long long)b->dims[0], (long long)g->M);
  TRY(nn_window_attrs(c, x->rank - 2, w->dims + 2, &g->w));
  TRY(convt_sizes(c, g, x->dims + 2));
  g->S_in = nn_prod(x->dims, 2, x->rank);
  g->S_out = nn_window_out_size(&g->w);
  g->Kk = nn_window_kernel_size(&g->w);
  g->Mk = dim_known(g->Mg) && g->Kk >= 0 ? g->Mg * g->Kk : DIM_UNKNOWN;
  return SMELT_OK;
}

static smelt_status convt_infer(op_ctx *c) {
  convt_geom g;
  TRY(convt_plan(c, &g));
  const tensor *x = c->in[0];
  if (x->rank < 0 || c->in[1]->rank < 0) {
    nn_out_unknown(c, 0, x->dtype);
    return SMELT_OK;
  }
  int64_t dims[SMELT_MAX_RANK] = {g.N, g.M};
  memcpy(dims + 2, g.w.out, sizeof(int64_t) * (size_t)g.w.nsp);
  op_set_out(c, 0, x->dtype, x->rank, dims);
  return SMELT_OK;
}

/* ---- col2im ---- */

typedef struct convt_job {
  const convt_geom *g;
  const float *col; /* [Mk, width] for input positions [p0, p0 + width) */
  float *y;         /* the group's first output channel */
  int64_t p0, width;
} convt_job;

/* Adds the column rows of output channels [m0, m1) into their planes. */
static void col2im_channels(void *vctx, int64_t m0, int64_t m1) {
  const convt_job *j = vctx;
  const convt_geom *g = j->g;
  const nn_window *w = &g->w;
  int nsp = w->nsp;
  for (int64_t r = m0 * g->Kk; r < m1 * g->Kk; r++) {
    int64_t kc[NN_MAX_SPATIAL], rem = r % g->Kk;
    for (int i = nsp - 1; i >= 0; i--) {
      kc[i] = rem % w->kernel[i];
      rem /= w->kernel[i];
    }
    const float *src = j->col + r * j->width;
    float *plane = j->y + (r / g->Kk) * g->S_out;
    int64_t ic[NN_MAX_SPATIAL];
    rem = j->p0;
    for (int i = nsp - 1; i >= 0; i--) {
      ic[i] = rem % w->in[i];
      rem /= w->in[i];
    }
    for (int64_t p = 0; p < j->width; p++) {
      int64_t off = 0;
      bool valid = true;
      for (int i = 0; i < nsp; i++) {
        int64_t oc = ic[i] * w->stride[i] - w->pad_lo[i] + kc[i] * w->dil[i];
        valid &= oc >= 0 && oc < w->out[i];
        off = off * w->out[i] + oc;
      }
      if (valid) plane[off] += src[p];
      for (int i = nsp - 1; i >= 0 && ++ic[i] == w->in[i]; i--) ic[i] = 0;
    }
  }
}

static smelt_status convt_f32(op_ctx *c, const convt_geom *g, const float *X, const float *W,
                              const float *B, float *Y) {
  for (int64_t q = 0; q < g->N * g->M; q++) {
    float bv = B ? B[q % g->M] : 0.f;
    for (int64_t i = 0; i < g->S_out; i++) Y[q * g->S_out + i] = bv;
  }
  if (g->Mk == 0 || g->S_in == 0) return SMELT_OK;
  int64_t budget = ((int64_t)1 << 20) / g->Mk; /* ~4 MiB of columns per tile */
  int64_t tile = budget < 16 ? 16 : budget;
  if (tile > g->S_in) tile = g->S_in;
  float *col = NULL;
  TRY(nn_alloc((void **)&col, g->Mk * tile, sizeof(float), "ConvTranspose columns"));
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t gi = 0; gi < g->G; gi++) {
      const float *x = X + (n * g->C + gi * g->Cg) * g->S_in;
      const float *wg = W + gi * g->Cg * g->Mk; /* [Cg, Mg*Kk] */
      convt_job j = {g, col, Y + (n * g->M + gi * g->Mg) * g->S_out, 0, 0};
      for (j.p0 = 0; j.p0 < g->S_in; j.p0 += tile) {
        j.width = g->S_in - j.p0 < tile ? g->S_in - j.p0 : tile;
        if (g->Cg == 0) {
          memset(col, 0, sizeof(float) * (size_t)(g->Mk * j.width));
        } else {
          smelt_status st = gemm_f32(c->pool, true, false, g->Mk, j.width, g->Cg, 1.f, wg, g->Mk, x + j.p0,
                                     g->S_in, 0.f, col, j.width);
          if (st) {
            free(col);
            return st;
          }
        }
        pool_parallel_for(c->pool, g->Mg, 1, col2im_channels, &j);
      }
    }
  free(col);
  return SMELT_OK;
}

/* Direct scatter in double: every input element times every tap. */
static void convt_f64(const convt_geom *g, const double *X, const double *W, const double *B,
                      double *Y) {
  const nn_window *w = &g->w;
  for (int64_t q = 0; q < g->N * g->M; q++)
    for (int64_t i = 0; i < g->S_out; i++) Y[q * g->S_out + i] = B ? B[q % g->M] : 0.0;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t ci = 0; ci < g->C; ci++) {
      int64_t gi = ci / g->Cg;
      for (int64_t p = 0; p < g->S_in; p++) {
        double xv = X[(n * g->C + ci) * g->S_in + p];
        for (int64_t t = 0; t < g->Kk; t++) {
          int64_t rp = p, rt = t, off = 0, mul = 1;
          bool valid = true;
          for (int i = w->nsp - 1; i >= 0; i--) {
            int64_t ic = rp % w->in[i], kc = rt % w->kernel[i];
            rp /= w->in[i];
            rt /= w->kernel[i];
            int64_t oc = ic * w->stride[i] - w->pad_lo[i] + kc * w->dil[i];
            valid &= oc >= 0 && oc < w->out[i];
            off += oc * mul;
            mul *= w->out[i];
          }
          if (!valid) continue;
          for (int64_t m = 0; m < g->Mg; m++)
            Y[(n * g->M + gi * g->Mg + m) * g->S_out + off] += xv * W[(ci * g->Mg + m) * g->Kk + t];
        }
      }
    }
}

static smelt_status convt_run(op_ctx *c) {
  convt_geom g;
  TRY(convt_plan(c, &g));
  tensor *y = c->out[0];
  if (tensor_numel(y) == 0) return SMELT_OK;
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  if (y->dtype == SMELT_F64) {
    convt_f64(&g, x->data, w->data, b ? b->data : NULL, y->data);
    return SMELT_OK;
  }
  float *X = NULL, *W = NULL, *B = NULL, *Y = NULL;
  smelt_status st = nn_f32_acquire(x, &X);
  if (!st) st = nn_f32_acquire(w, &W);
  if (!st && b) st = nn_f32_acquire(b, &B);
  if (!st) st = nn_f32_out(y, &Y);
  if (!st) {
    st = convt_f32(c, &g, X, W, B, Y);
    nn_f32_commit(y, Y);
  }
  if (X) nn_f32_release(x, X);
  if (W) nn_f32_release(w, W);
  if (B) nn_f32_release(b, B);
  return st;
}

const op_def op_family_conv_transpose[] = {
    {"ConvTranspose", "", 2, 3, 1, 1, convt_infer, convt_run, false},
    {0}};
