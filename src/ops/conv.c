/* Conv, 1-D to N-D, with groups, dilations, strides, pads and auto_pad.
 *
 * f32: per (batch, group, tile of output positions) an im2col matrix
 * [Cg*k, tile] feeds the GEMM (W_g [Mg, Cg*k] x col), written straight into
 * Y with the bias added in the GEMM's epilogue.  The same core serves the
 * fused smelt.Conv (conv_core.h): a residual is preloaded into the tile
 * (beta = 1) and the activation applied in the epilogue (relu, clip) or on
 * the tile right after its GEMM.  A 1x1 stride-1 unpadded conv skips
 * im2col (X is already the column matrix); a 2-D depthwise conv (group ==
 * C == M) runs a direct loop.  Tiles bound the scratch; when there are many
 * tasks each runs whole on one thread, otherwise im2col and GEMM use the pool.
 * f16/bf16 compute via f32 copies, f64 on a direct reference loop.
 *
 * Which route runs a conv is the kernel registry's choice (conv_registry.h:
 * the fast kernels of kernels/conv.h over prepared weights kept in the
 * session's per-node cache, the 1x1 routes and the strided 1x1 of
 * conv_routes.c, and the routes here: im2col + GEMM, the general fallback,
 * the depthwise loop, im2col then the transposed GEMM for strided convs
 * over small planes, the float64 loop).  Run, prepare and --explain ask it
 * the same question (conv_f32, conv_prepare_geom, conv_describe_geom).  The
 * fast kernels apply smelt.Conv's residual and a Relu/Clip themselves
 * (conv2d_run_ep); other activations run in one pass over Y after them. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "kernels/conv_bf16.h"
#include "kernels/gemm.h"
#include "ops/conv_memo.h"
#include "ops/conv_route.h"
#include "ops/gemm_weights.h"
#include "ops/op_cache.h"
#include "util/err.h"

static const smelt_dtype conv_types[] = {SMELT_F32, SMELT_F16, SMELT_BF16, SMELT_F64, SMELT_UNDEFINED};

/* Checks types and shapes and fills g (dims may be unknown statically). */
static smelt_status conv_plan(op_ctx *c, conv_geom *g) {
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  op_ctx c2;
  tensor xf[2], *ins[4];
  TRY(nn_check_conv_operands(conv_x_as_f32(c, &c2, xf, ins), conv_types, &g->G));
  if (x->rank < 0 || w->rank < 0) return SMELT_OK; /* caller leaves the output unranked */
  int nsp = x->rank - 2;
  g->N = x->dims[0];
  g->C = x->dims[1];
  g->M = w->dims[0];
  g->Cg = w->dims[1];
  if (dim_known(g->C) && dim_known(g->Cg) && g->C != g->Cg * g->G)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "channels %lld of X do not match W's %lld*group %lld",
                   (long long)g->C, (long long)g->Cg, (long long)g->G);
  if (dim_known(g->M) && g->M % g->G)
    return err_set(SMELT_ERR_INVALID_MODEL, "W's %lld output channels are not divisible by group %lld",
                   (long long)g->M, (long long)g->G);
  g->Mg = dim_known(g->M) ? g->M / g->G : DIM_UNKNOWN;
  if (b && b->rank == 1 && dim_known(b->dims[0]) && dim_known(g->M) && b->dims[0] != g->M)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 2 (B) has %lld values for %lld output channels",
                   (long long)b->dims[0], (long long)g->M);
  TRY(nn_window_attrs(c, nsp, w->dims + 2, &g->w));
  TRY(nn_window_out(&g->w, x->dims + 2, false));
  g->S_in = nn_prod(x->dims, 2, x->rank);
  g->S_out = nn_window_out_size(&g->w);
  g->Kk = nn_window_kernel_size(&g->w);
  g->Kdim = dim_known(g->Cg) && g->Kk >= 0 && (g->Kk == 0 || g->Cg <= INT64_MAX / g->Kk)
                ? g->Cg * g->Kk
                : DIM_UNKNOWN;
  g->x_cl = (conv_cl_of(c->node) & CB_CL_X) != 0, g->y_cl = (conv_cl_of(c->node) & CB_CL_Y) != 0;
  return SMELT_OK;
}

smelt_status conv_op_infer(op_ctx *c) {
  conv_geom g;
  TRY(conv_plan(c, &g));
  const tensor *x = c->in[0], *w = c->in[1];
  /* a bf16 X beside fp32 weights gives fp32, or bf16 where the node is
   * told to write it (bf16_out, passes/bf16_acts.c) */
  smelt_dtype yt = conv_bf16_act_in(c) ? SMELT_F32 : x->dtype;
  if (conv_bf16_acts_node(c->node) && ir_attr_int(c->node, "bf16_out", 0) && (yt == SMELT_F32 || yt == SMELT_BF16))
    yt = SMELT_BF16;
  if (x->rank < 0 || w->rank < 0) {
    nn_out_unknown(c, 0, yt);
    return SMELT_OK;
  }
  int64_t dims[SMELT_MAX_RANK] = {g.N, g.M};
  memcpy(dims + 2, g.w.out, sizeof(int64_t) * (size_t)g.w.nsp);
  op_set_out(c, 0, yt, x->rank, dims);
  return SMELT_OK;
}

/* ---- im2col ---- */

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/* Rows [r0, r1) of the column matrix for output positions [p0, p0 + width):
 * row r = (input channel, kernel tap) holds, for each position, the input
 * element that tap reads (0 in the padding).  x points at the group's first
 * channel. */
static void im2col_rows(const conv_geom *g, const float *x, int64_t p0, int64_t width, float *col,
                        int64_t r0, int64_t r1) {
  const nn_window *w = &g->w;
  int nsp = w->nsp, L = nsp - 1;
  for (int64_t r = r0; r < r1; r++) {
    int64_t kc[NN_MAX_SPATIAL], rem = r % g->Kk;
    for (int i = L; i >= 0; i--) {
      kc[i] = rem % w->kernel[i];
      rem /= w->kernel[i];
    }
    const float *xc = x + (r / g->Kk) * g->S_in;
    float *dst = col + (r - r0) * width;
    int64_t base = kc[L] * w->dil[L] - w->pad_lo[L], sL = w->stride[L], inL = w->in[L];
    for (int64_t p = p0; p < p0 + width;) {
      int64_t oc[NN_MAX_SPATIAL] = {0}, q = p;
      for (int i = L; i >= 0; i--) {
        oc[i] = q % w->out[i];
        q /= w->out[i];
      }
      int64_t run = w->out[L] - oc[L];
      if (run > p0 + width - p) run = p0 + width - p;
      bool valid = true;
      int64_t off = 0;
      for (int i = 0; i < L; i++) {
        int64_t ic = oc[i] * w->stride[i] - w->pad_lo[i] + kc[i] * w->dil[i];
        valid &= ic >= 0 && ic < w->in[i];
        off = off * w->in[i] + ic;
      }
      float *dd = dst + (p - p0);
      if (!valid) {
        memset(dd, 0, sizeof(float) * (size_t)run);
      } else {
        /* taps inside the row: (oc[L] + j) * sL + base in [0, inL) */
        int64_t jlo = ceil_div(-base, sL) - oc[L], jhi = ceil_div(inL - base, sL) - oc[L];
        if (jlo < 0) jlo = 0;
        if (jhi > run) jhi = run;
        if (jhi < jlo) jhi = jlo;
        const float *xr = xc + off * inL + oc[L] * sL + base;
        for (int64_t j = 0; j < jlo; j++) dd[j] = 0.f;
        if (sL == 1) memcpy(dd + jlo, xr + jlo, sizeof(float) * (size_t)(jhi - jlo));
        else
          for (int64_t j = jlo; j < jhi; j++) dd[j] = xr[j * sL];
        for (int64_t j = jhi; j < run; j++) dd[j] = 0.f;
      }
      p += run;
    }
  }
}

/* ---- f32 driver ---- */

typedef struct conv_job {
  const conv_geom *g;
  const float *X, *W, *B;
  float *Y;
  const conv_epilogue *ep;
  int64_t tile, ntiles;
  bool pointwise; /* 1x1, stride 1, no pads: X is the column matrix */
  const gemm_packed *packed_a; /* W packed for the GEMM (one group), or NULL */
  atomic_bool failed;
  /* for the parallel im2col of one task */
  const float *im_x;
  float *im_col;
  int64_t im_p0, im_width;
} conv_job;

static void im2col_chunk(void *vctx, int64_t r0, int64_t r1) {
  conv_job *j = vctx;
  im2col_rows(j->g, j->im_x, j->im_p0, j->im_width, j->im_col + r0 * j->im_width, r0, r1);
}

/* Rows of a tile with their residual preloaded (or zeroed when nothing is
 * accumulated onto them), for a GEMM with beta = 1 or a K = 0 product. */
static void tile_preload(const conv_job *j, float *y, int64_t width, bool zero) {
  const conv_geom *g = j->g;
  const float *res = j->ep->residual ? j->ep->residual + (y - j->Y) : NULL;
  for (int64_t m = 0; m < g->Mg; m++) {
    if (res) memcpy(y + m * g->S_out, res + m * g->S_out, sizeof(float) * (size_t)width);
    else if (zero) memset(y + m * g->S_out, 0, sizeof(float) * (size_t)width);
  }
}

/* A product over zero input taps: Y = act(B + residual). */
static void tile_empty(const conv_job *j, float *y, int64_t width, int64_t gi) {
  const conv_geom *g = j->g;
  tile_preload(j, y, width, true);
  for (int64_t m = 0; m < g->Mg; m++) {
    float *row = y + m * g->S_out;
    if (j->B)
      for (int64_t p = 0; p < width; p++) row[p] += j->B[gi * g->Mg + m];
    fused_act_apply(&j->ep->act, row, width);
  }
}

/* Task t = (batch, group, tile).  col: scratch of Kdim*tile floats (unused
 * when pointwise).  pool: used for im2col and GEMM (NULL inside a task split). */
static void conv_task(conv_job *j, int64_t t, float *col, smelt_pool *pool) {
  const conv_geom *g = j->g;
  int64_t tile = t % j->ntiles, ng = t / j->ntiles, n = ng / g->G, gi = ng % g->G;
  int64_t p0 = tile * j->tile, width = g->S_out - p0 < j->tile ? g->S_out - p0 : j->tile;
  const float *x = j->X + (n * g->C + gi * g->Cg) * g->S_in;
  const float *wg = j->W + gi * g->Mg * g->Kdim;
  float *y = j->Y + (n * g->M + gi * g->Mg) * g->S_out + p0;
  if (g->Kdim == 0) {
    tile_empty(j, y, width, gi);
    return;
  }
  const float *bmat = x + p0;
  int64_t ldb = g->S_in;
  if (!j->pointwise) {
    if (pool) { /* only when tasks run one at a time: the job carries this one */
      j->im_x = x;
      j->im_col = col;
      j->im_p0 = p0;
      j->im_width = width;
      pool_parallel_for(pool, g->Kdim, 1 + 16384 / width, im2col_chunk, j);
    } else {
      im2col_rows(g, x, p0, width, col, 0, g->Kdim);
    }
    bmat = col;
    ldb = width;
  }
  tile_preload(j, y, width, false);
  gemm_params gp = gemm_params_default();
  gp.M = g->Mg;
  gp.N = width;
  gp.K = g->Kdim;
  gp.A = wg;
  gp.lda = g->Kdim;
  gp.B = bmat;
  gp.ldb = ldb;
  gp.C = y;
  gp.ldc = g->S_out;
  gp.packed_a = j->packed_a;
  gp.beta = j->ep->residual ? 1.f : 0.f;
  if (j->B) {
    gp.epilogue.bias_kind = GEMM_BIAS_ROW;
    gp.epilogue.bias = j->B + gi * g->Mg;
  }
  bool in_tile = fused_act_in_gemm(&j->ep->act, &gp.epilogue);
  if (gemm_f32_ex(pool, &gp)) atomic_store(&j->failed, true); /* bad arguments: a bug */
  if (!in_tile)
    for (int64_t m = 0; m < g->Mg; m++) fused_act_apply(&j->ep->act, y + m * g->S_out, width);
}

static void conv_tasks(void *vctx, int64_t t0, int64_t t1) {
  conv_job *j = vctx;
  float *col = NULL;
  if (!j->pointwise && nn_alloc((void **)&col, j->g->Kdim * j->tile, sizeof(float), "im2col")) {
    atomic_store(&j->failed, true);
    return;
  }
  for (int64_t t = t0; t < t1; t++) conv_task(j, t, col, NULL);
  free(col);
}

/* ---- 2-D depthwise ----
 * Per plane and output row, each in-bounds tap (kh, kw) adds
 * w * x[ih, ow*sw + kw*dw - pw] over the range of ow where that column is
 * inside the input: a strided (contiguous for stride 1) loop along the row
 * with no bounds checks. */

static void depthwise_planes(void *vctx, int64_t q0, int64_t q1) {
  const conv_job *j = vctx;
  const conv_geom *g = j->g;
  const nn_window *w = &g->w;
  int64_t IH = w->in[0], IW = w->in[1], OH = w->out[0], OW = w->out[1];
  int64_t KH = w->kernel[0], KW = w->kernel[1], sh = w->stride[0], sw = w->stride[1];
  int64_t dh = w->dil[0], dw = w->dil[1], ph = w->pad_lo[0], pw = w->pad_lo[1];
  for (int64_t q = q0; q < q1; q++) {
    int64_t ch = q % g->C;
    const float *x = j->X + q * g->S_in, *k = j->W + ch * KH * KW;
    const float *res = j->ep->residual ? j->ep->residual + q * g->S_out : NULL;
    float *y = j->Y + q * g->S_out;
    float bv = j->B ? j->B[ch] : 0.f;
    for (int64_t oh = 0; oh < OH; oh++) {
      float *yr = y + oh * OW;
      for (int64_t ow = 0; ow < OW; ow++) yr[ow] = bv;
      for (int64_t kh = 0; kh < KH; kh++) {
        int64_t ih = oh * sh - ph + kh * dh;
        if (ih < 0 || ih >= IH) continue;
        const float *xr = x + ih * IW;
        for (int64_t kw = 0; kw < KW; kw++) {
          int64_t off = kw * dw - pw; /* iw = ow * sw + off */
          int64_t lo = ceil_div(-off, sw), hi = ceil_div(IW - off, sw);
          if (lo < 0) lo = 0;
          if (hi > OW) hi = OW;
          float wv = k[kh * KW + kw];
          if (sw == 1)
            for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow + off];
          else
            for (int64_t ow = lo; ow < hi; ow++) yr[ow] += wv * xr[ow * sw + off];
        }
      }
      if (res)
        for (int64_t ow = 0; ow < OW; ow++) yr[ow] += res[oh * OW + ow];
    }
    fused_act_apply(&j->ep->act, y, g->S_out);
  }
}

/* Positions per im2col tile (one GEMM task): ~1 MiB of im2col, so it stays
 * in cache next to the GEMM's panels; whole 32-column panels of the widest
 * GEMM tile (a partial panel costs its full width: wav2vec2's 512 -> 512
 * k3/2 conv over 1599 positions in tiles of 170 took 14.7 ms at 2 threads,
 * in tiles of 160 12.4, 2-core Zen 4); and at least 4 tasks a thread over
 * the `groups` (images x groups) when the positions allow, so the last
 * tasks do not leave a thread idle (799 positions in 5 tiles of 160: 7.3
 * ms; in tiles of 64: 6.4).  At least 64 positions. */
static int64_t conv_im2col_tile(int64_t Kdim, int64_t groups, int64_t S, int threads) {
  int64_t t = ((int64_t)1 << 18) / (Kdim > 0 ? Kdim : 1);
  int64_t gr = groups > 0 ? groups : 1, per_group = (4 * (int64_t)threads + gr - 1) / gr; /* tiles a group should make */
  int64_t spread = (S + per_group - 1) / per_group;
  if (threads > 1 && spread < t) t = spread;
  t = t / 32 * 32;
  return t < 64 ? 64 : t;
}

/* A strided one-group convolution with taps (3x3, 7x7, ...) over a plane
 * the GEMM's column panels fit badly (7x7, 14x14: conv_pointwise_t_suits) runs
 * as the transposed 1x1 route over its im2col: the column matrix
 * (Kdim x positions per image) is the 1x1 conv's input, W (M x Kdim) its
 * weight, W^T packed once per session as the GEMM's B.  The GEMM then has
 * the positions as rows and the output channels as columns, and its
 * prefetch streams the weight (4608 x 512 at resnet50's last stage: 9.4 MB
 * for 49 positions) while it computes.  resnet50, 2 threads, on a 2-core
 * Emerald Rapids: the 512->512 stride-2 layer to 7x7 2.13 -> 1.63 ms, the
 * 256->256 one to 14x14 1.39 -> 1.26 (ONNX Runtime 1.01 / 0.86); the
 * stride-1 layers at those planes ran slower this way (7x7 1.24 -> 1.60,
 * 14x14 0.75 -> 1.22 against the direct kernel and Winograd), so only
 * strided ones take it.  A constant float32 W, with an op cache, only;
 * not where the cost model picks direct-cv (kernels/conv_direct_cv.c: no
 * im2col, no transposed copy; the same two layers 1.25 and 1.17 ms). */
static void col_rows(void *vctx, int64_t i0, int64_t i1) {
  const conv_xcopy_job *j = vctx;
  const conv_geom *g = j->g;
  for (int64_t i = i0; i < i1; i++) { /* item: (image, channel) */
    int64_t n = i / g->C, ch = i % g->C;
    im2col_rows(g, j->X + n * g->C * g->S_in, 0, g->S_out, j->dst + (n * g->Kdim + ch * g->Kk) * g->S_out,
                ch * g->Kk, (ch + 1) * g->Kk);
  }
}

static const gemm_packed *col_t_weights(const conv_call *a) {
  return gemm_weights_b(a->c->cache, a->c->pool, true, a->g->Kdim, a->g->M, a->c->in[1]->data);
}

smelt_status conv_route_col_t_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  *taken = col_t_weights(a) != NULL;
  return SMELT_OK;
}

smelt_status conv_route_col_t_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  const conv_geom *g = a->g;
  const gemm_packed *wt = a->W == a->c->in[1]->data ? col_t_weights(a) : NULL;
  *taken = wt != NULL;
  if (!wt) return SMELT_OK;
  size_t bytes = sizeof(float) * (size_t)(g->N * g->Kdim * g->S_out);
  float *col = tensor_data_alloc(bytes);
  if (!col) return err_nomem("conv: the column matrix", bytes);
  conv_xcopy_job cj = {g, a->X, col};
  pool_parallel_for(a->c->pool, g->N * g->C, 8, col_rows, &cj);
  smelt_status st = conv_pw_t_ep(a->c, g, g->Kdim, col, a->W, wt, a->B, a->ep, a->Y);
  tensor_data_free(col);
  return st;
}

void conv_route_col_t_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "f32 im2col, then the transposed GEMM over W^T packed once (ops/conv.c, kernels/conv_pointwise.c)");
}

/* ---- the im2col family: im2col + GEMM, the depthwise loop ---- */

/* The weight as the im2col GEMM's A (M x Kdim), packed once per session
 * (ops/gemm_weights.h): one group only, a constant float32 W. */
static const gemm_packed *conv_packed_a(op_ctx *c, const conv_geom *g) {
  const tensor *w = c->in[1];
  if (g->G != 1 || g->Kdim <= 0 || g->M <= 0 || w->dtype != SMELT_F32 || !op_input_is_constant(c, 1)) return NULL;
  return gemm_weights_a(c->cache, c->pool, false, g->M, g->Kdim, w->data);
}

smelt_status conv_route_im2col_prepare(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  *taken = true;
  (void)conv_packed_a(a->c, a->g);
  return SMELT_OK;
}

static conv_job job_of(const conv_call *a) {
  conv_job j = {.g = a->g, .X = a->X, .W = a->W, .B = a->B, .Y = a->Y, .ep = a->ep};
  if (a->W == a->c->in[1]->data) j.packed_a = conv_packed_a(a->c, a->g);
  return j;
}

smelt_status conv_route_dw_loop_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  *taken = true;
  conv_job j = job_of(a);
  pool_parallel_for(a->c->pool, a->g->N * a->g->C, 1, depthwise_planes, &j);
  return SMELT_OK;
}

void conv_route_dw_loop_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "f32 depthwise loop (ops/conv.c)");
}

smelt_status conv_route_im2col_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  *taken = true;
  const conv_geom *g = a->g;
  conv_job j = job_of(a);
  j.pointwise = true;
  for (int i = 0; i < g->w.nsp; i++)
    j.pointwise &= g->w.kernel[i] == 1 && g->w.stride[i] == 1 && g->w.pad_lo[i] == 0 &&
                   g->w.pad_hi[i] == 0;
  int threads = pool_threads(a->c->pool);
  j.tile = j.pointwise ? g->S_out : conv_im2col_tile(g->Kdim, g->N * g->G, g->S_out, threads);
  if (j.tile > g->S_out) j.tile = g->S_out;
  j.ntiles = (g->S_out + j.tile - 1) / j.tile;
  int64_t ntasks = g->N * g->G * j.ntiles;
  if (threads > 1 && ntasks >= 2 * threads) {
    pool_parallel_for(a->c->pool, ntasks, 1, conv_tasks, &j);
    if (atomic_load(&j.failed)) return err_nomem("im2col (or a rejected GEMM)", (size_t)(g->Kdim * j.tile) * 4);
    return SMELT_OK;
  }
  float *col = NULL;
  if (!j.pointwise) TRY(nn_alloc((void **)&col, g->Kdim * j.tile, sizeof(float), "im2col"));
  for (int64_t t = 0; t < ntasks; t++) conv_task(&j, t, col, a->c->pool);
  free(col);
  if (atomic_load(&j.failed)) return err_set(SMELT_ERR_INTERNAL, "conv: the GEMM rejected its arguments");
  return SMELT_OK;
}

void conv_route_im2col_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "f32 im2col + GEMM (ops/conv.c)");
}

/* ---- the registry's choice ---- */

static smelt_status no_kernel(const conv_query *q) {
  return err_set(SMELT_ERR_UNSUPPORTED, "conv: no kernel in the registry takes %s x %s -> %s (weight %s, %s, %s)",
                 dtype_name(q->x), dtype_name(q->w), dtype_name(q->y), conv_wform_name(q->wf),
                 conv_shape_name(q->shape), isa_name(q->isa));
}

smelt_status conv_f32(op_ctx *c, const conv_geom *g, const float *X, const float *W, const float *B, float *Y,
                      const conv_epilogue *ep) {
  conv_query q;
  conv_query_of(c, g, &q);
  conv_call a = {c, g, X, W, B, Y, ep};
  for (unsigned skip = 0;;) {
    const conv_kernel *k = conv_select(&q, skip);
    if (!k) return no_kernel(&q);
    if (ep->residual == Y && !k->residual_in_place) { /* an output over its residual (conv_residual_in_place) */
      size_t bytes = sizeof(float) * (size_t)(g->N * g->M * g->S_out);
      float *r = tensor_data_alloc(bytes ? bytes : sizeof(float));
      if (!r) return err_nomem("conv residual", bytes);
      memcpy(r, Y, bytes);
      conv_epilogue e2 = *ep;
      e2.residual = r, e2.rec = NULL;
      smelt_status st = conv_f32(c, g, X, W, B, Y, &e2);
      tensor_data_free(r);
      return st;
    }
    bool taken = true;
    smelt_status st = k->run(k, &q, &a, &taken);
    if (st || taken) return st;
    skip |= 1u << conv_kernel_index(k); /* no cache or memory for its weights: the next entry */
  }
}

smelt_status conv_prepare_geom(op_ctx *c, const conv_geom *g) {
  conv_query q;
  conv_query_of(c, g, &q);
  conv_call a = {.c = c, .g = g, .W = c->in[1]->data};
  for (unsigned skip = 0;;) {
    const conv_kernel *k = conv_select(&q, skip);
    if (!k || !k->prepare) return SMELT_OK;
    bool taken = true;
    smelt_status st = k->prepare(k, &q, &a, &taken);
    if (st || taken) return st;
    skip |= 1u << conv_kernel_index(k);
  }
}

void conv_describe_geom(op_ctx *c, const conv_geom *g, char *buf, size_t n) {
  conv_query q;
  conv_query_of(c, g, &q);
  conv_call a = {.c = c, .g = g};
  const conv_kernel *k = conv_select(&q, 0);
  if (k) k->describe(k, &q, &a, buf, n);
  else snprintf(buf, n, "no kernel (%s weight, %s)", conv_wform_name(q.wf), conv_shape_name(q.shape));
}

smelt_status conv_op_prepare(op_ctx *c) {
  const tensor *x = c->in[0], *w = c->in[1];
  if (!c->cache || !op_input_is_constant(c, 1) || (x->dtype != SMELT_F32 && !conv_bf16_act_in(c)) ||
      w->dtype != SMELT_F32)
    return SMELT_OK;
  conv_geom g;
  TRY(conv_plan(c, &g));
  if (x->rank < 0 || tensor_numel(x) <= 0 || tensor_numel(w) <= 0) return SMELT_OK;
  return conv_prepare_geom(c, &g);
}

/* A shape-only context for node nd of g, for the questions the scheduler
 * and passes/bf16_acts.c ask before any run: X viewed as fp32 (a bf16 X
 * on a node marked bf16 picks as an fp32 one), W, and B when `bias`; its
 * geometry in n->g.  False: shapes unknown or not such a conv. */
typedef struct node_ctx {
  tensor x, w, b, y, *in[3], *out[1];
  op_ctx c;
  conv_geom g;
} node_ctx;

static bool node_ctx_of(const ir_graph *g, const ir_node *nd, bool bias, node_ctx *n) {
  if (nd->n_inputs < 2 || nd->n_outputs < 1 || nd->inputs[0] < 0 || nd->inputs[1] < 0) return false;
  const ir_value *xv = &g->values[nd->inputs[0]], *wv = &g->values[nd->inputs[1]];
  const ir_value *bv = bias && nd->n_inputs > 2 && nd->inputs[2] >= 0 ? &g->values[nd->inputs[2]] : NULL;
  bool bf16 = xv->dtype == SMELT_BF16 && conv_bf16_acts_node(nd);
  if ((xv->dtype != SMELT_F32 && !bf16) || wv->dtype != SMELT_F32 || xv->rank < 3 || wv->rank != xv->rank ||
      (bv && (bv->dtype != SMELT_F32 || bv->rank != 1)))
    return false;
  for (int i = 0; i < xv->rank; i++)
    if (!dim_known(xv->dims[i]) || !dim_known(wv->dims[i])) return false;
  memset(n, 0, sizeof *n);
  tensor_view(&n->x, SMELT_F32, xv->rank, xv->dims, NULL);
  tensor_view(&n->w, wv->dtype, wv->rank, wv->dims, wv->constant ? wv->constant->data : NULL);
  if (bv) tensor_view(&n->b, bv->dtype, bv->rank, bv->dims, NULL);
  n->in[0] = &n->x, n->in[1] = &n->w, n->in[2] = bv ? &n->b : NULL, n->out[0] = &n->y;
  n->c = (op_ctx){.graph = g, .node = nd, .opset = nd->opset, .n_in = bv ? 3 : 2, .n_out = 1, .in = n->in,
                  .out = n->out, .static_infer = true};
  if (conv_plan(&n->c, &n->g)) {
    err_clear();
    return false;
  }
  return true;
}

bool conv_residual_in_place(const ir_graph *g, const ir_node *nd) {
  /* the output goes over the residual only in the same element type and layout */
  unsigned cl = conv_cl_of(nd);
  if (nd->n_inputs < 4 || nd->inputs[3] < 0 || nd->n_outputs < 1 ||
      g->values[nd->inputs[3]].dtype != g->values[nd->outputs[0]].dtype || !(cl & CB_CL_R) != !(cl & CB_CL_Y))
    return false;
  node_ctx n;
  if (!node_ctx_of(g, nd, false, &n)) return false;
  conv_query q;
  conv_query_of(&n.c, &n.g, &q);
  const conv_kernel *k = conv_select(&q, 0);
  return k && k->residual_in_place;
}

bool conv_node_bf16_io(const ir_graph *g, const ir_node *nd, int threads) {
  return conv_node_bf16_form(g, nd, threads, -1, -1) >= 0;
}

/* node_ctx_of with its bias, and a smelt.Conv's activation in *act (none
 * for an ONNX Conv); false where either cannot be had */
static bool node_ctx_act(const ir_graph *g, const ir_node *nd, node_ctx *n, fused_act *act) {
  *act = (fused_act){FUSED_ACT_NONE, -INFINITY, INFINITY, NULL};
  if (!node_ctx_of(g, nd, true, n)) return false;
  if (!strcmp(nd->domain, "smelt") && fused_act_read(nd, act)) {
    err_clear();
    return false;
  }
  return true;
}

int conv_node_bf16_form(const ir_graph *g, const ir_node *nd, int threads, int x_cl, int y_cl) {
  if (!conv_marked_bf16(nd) || nd->n_outputs != 1) return -1;
  bool fused = !strcmp(nd->domain, "smelt");
  const ir_value *rv = fused && nd->n_inputs > 3 && nd->inputs[3] >= 0 ? &g->values[nd->inputs[3]] : NULL;
  if (rv && rv->dtype != SMELT_F32 && rv->dtype != SMELT_BF16) return -1;
  node_ctx n;
  fused_act act;
  if (!node_ctx_act(g, nd, &n, &act)) return -1;
  if (x_cl >= 0) n.g.x_cl = x_cl;
  if (y_cl >= 0) n.g.y_cl = y_cl;
  int form;
  return conv_bf16_io_pick(&n.c, &n.g, &act, threads, &form, NULL) ? form : -1;
}

bool conv_node_dw_cl(const ir_graph *g, const ir_node *nd) {
  if (nd->n_outputs != 1 || (!strcmp(nd->domain, "smelt") && nd->n_inputs > 3 && nd->inputs[3] >= 0)) return false;
  node_ctx n;
  fused_act act;
  return node_ctx_act(g, nd, &n, &act) && conv_dw_cl_applies(&n.c, &n.g, &act);
}

smelt_status conv_op_describe(op_ctx *c, char *buf, size_t n) {
  conv_geom g;
  TRY(conv_plan(c, &g));
  const tensor *x = c->in[0];
  if (x->rank < 0 || g.Kdim < 0 || !dim_known(g.N) || !dim_known(g.C) || !dim_known(g.M)) {
    snprintf(buf, n, "conv: the kernel is chosen when the shapes are known");
    return SMELT_OK;
  }
  char geo[160];
  int o = snprintf(geo, sizeof geo, "conv %lld->%lld ch, kernel", (long long)g.C, (long long)g.M);
  for (int i = 0; i < g.w.nsp && o < (int)sizeof geo; i++)
    o += snprintf(geo + o, sizeof geo - (size_t)o, "%s%lld", i ? "x" : " ", (long long)g.w.kernel[i]);
  for (int i = 0; i < g.w.nsp && o < (int)sizeof geo; i++)
    o += snprintf(geo + o, sizeof geo - (size_t)o, "%s%lld", i ? "," : " stride ", (long long)g.w.stride[i]);
  if (g.G > 1 && o < (int)sizeof geo) o += snprintf(geo + o, sizeof geo - (size_t)o, " group %lld", (long long)g.G);
  if (o < (int)sizeof geo) o += snprintf(geo + o, sizeof geo - (size_t)o, ", %lld positions", (long long)g.S_out);
  const ir_quant *wq = conv_weight_declared(c); /* W's declared element type (ir/quant.h) */
  char wt[96];
  if (wq && o < (int)sizeof geo)
    snprintf(geo + o, sizeof geo - (size_t)o, ", weight %s", ir_quant_describe(wq, c->in[1]->dtype, wt, sizeof wt));
  char how[256];
  conv_describe_geom(c, &g, how, sizeof how);
  const tensor *y = c->out[0];
  const char *io = "";
  char clbuf[96];
  if (conv_bf16_act_in(c) || (y->dtype == SMELT_BF16 && conv_bf16_acts_node(c->node))) {
    fused_act act = {FUSED_ACT_NONE, -INFINITY, INFINITY, NULL};
    if (!strcmp(c->node->op_type, "Conv") && !strcmp(c->node->domain, "smelt")) TRY(fused_act_read(c->node, &act));
    bool xh = x->dtype == SMELT_BF16, yh = y->dtype == SMELT_BF16;
    unsigned cl = conv_cl_of(c->node);
    bool dw = conv_dw_cl_marks(cl) && conv_dw_cl_applies(c, &g, &act);
    if (dw) snprintf(how, sizeof how, "bf16 depthwise on vdpbf16ps, fp32 sums (x86/conv_dw_cl.c)");
    io = dw                                   ? (cl & CB_CL_X ? ", bf16 in and out" : ", bf16 out")
         : !conv_bf16_io_applies(c, &g, &act, 0) ? " (via f32 copies)"
         : xh && yh                           ? ", bf16 in and out"
         : xh                                 ? ", bf16 in"
                                              : ", bf16 out";
    if (cl) {
      snprintf(clbuf, sizeof clbuf, "%s, channels-last%s%s%s", io, cl & CB_CL_X ? " in" : "",
               cl & CB_CL_R ? (cl & CB_CL_X ? ", residual" : " residual") : "",
               cl & CB_CL_Y ? (cl & (CB_CL_X | CB_CL_R) ? " and out" : " out") : "");
      io = clbuf;
    }
  } else if (x->dtype != SMELT_F32 && x->dtype != SMELT_F64)
    io = " (via f32 copies)";
  snprintf(buf, n, "%s%s: %s", geo, io, how);
  return SMELT_OK;
}

/* ---- f64 reference ---- */

static void conv_f64(const conv_geom *g, const double *X, const double *W, const double *B,
                     double *Y) {
  const nn_window *w = &g->w;
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t m = 0; m < g->M; m++) {
      int64_t gi = m / g->Mg;
      for (int64_t p = 0; p < g->S_out; p++) {
        int64_t oc[NN_MAX_SPATIAL], q = p;
        for (int i = w->nsp - 1; i >= 0; i--) {
          oc[i] = q % w->out[i];
          q /= w->out[i];
        }
        double acc = B ? B[m] : 0.0;
        for (int64_t r = 0; r < g->Kdim; r++) {
          int64_t rem = r % g->Kk, off = 0, mul = 1;
          bool valid = true;
          for (int i = w->nsp - 1; i >= 0; i--) {
            int64_t kc = rem % w->kernel[i];
            rem /= w->kernel[i];
            int64_t ic = oc[i] * w->stride[i] - w->pad_lo[i] + kc * w->dil[i];
            valid &= ic >= 0 && ic < w->in[i];
            off += ic * mul;
            mul *= w->in[i];
          }
          if (valid)
            acc += X[(n * g->C + gi * g->Cg + r / g->Kk) * g->S_in + off] * W[m * g->Kdim + r];
        }
        Y[(n * g->M + m) * g->S_out + p] = acc;
      }
    }
}

smelt_status conv_route_f64_run(const conv_kernel *k, const conv_query *q, const conv_call *a, bool *taken) {
  (void)k, (void)q;
  op_ctx *c = a->c;
  const tensor *b = op_in(c, 2);
  *taken = true;
  conv_f64(a->g, c->in[0]->data, c->in[1]->data, b ? b->data : NULL, c->out[0]->data);
  return SMELT_OK;
}

void conv_route_f64_describe(const conv_kernel *k, const conv_query *q, const conv_call *a, char *buf, size_t n) {
  (void)k, (void)q, (void)a;
  snprintf(buf, n, "float64 reference loop (ops/conv.c)");
}

/* ---- channels-last bf16 operands (passes/bf16_acts.c) on another kernel ---- */

/* [N][S][C] bf16 -> [N][C][S] fp32, and back rounded to nearest even */
static void cl_to_planes(const uint16_t *x, int64_t N, int64_t C, int64_t S, float *y) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t p = 0; p < S; p++)
      for (int64_t ch = 0; ch < C; ch++) y[(n * C + ch) * S + p] = bf16_to_f32(x[(n * S + p) * C + ch]);
}
static void planes_to_cl(const float *x, int64_t N, int64_t C, int64_t S, uint16_t *y) {
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++)
      for (int64_t p = 0; p < S; p++) y[(n * S + p) * C + ch] = f32_to_bf16(x[(n * C + ch) * S + p]);
}

static smelt_status conv_op_run_cl(op_ctx *c, const conv_epilogue *e, unsigned cl);

/* c with the channels-last operands in cl as fp32 planes: copies in, the
 * run on whatever kernel the registry picks, the output copied back.  Taken
 * where the bf16 kernel does not run c (another thread count or ISA than the
 * compile saw, SMELT_CONV forcing): slower, never wrong. */
static smelt_status conv_cl_via_planes(op_ctx *c, const conv_geom *g, const conv_epilogue *e, unsigned cl) {
  const tensor *x = c->in[0];
  tensor *y = c->out[0];
  int64_t ny = g->N * g->M * g->S_out, nx = g->N * g->C * g->S_in;
  float *xf = NULL, *rf = NULL, *yf = NULL;
  smelt_status st = SMELT_OK;
  if (cl & CB_CL_X) st = nn_alloc((void **)&xf, nx, sizeof(float), "fp32 planes of a channels-last input");
  if (!st && (cl & CB_CL_R)) st = nn_alloc((void **)&rf, ny, sizeof(float), "fp32 planes of a channels-last residual");
  if (!st && (cl & CB_CL_Y)) st = nn_alloc((void **)&yf, ny, sizeof(float), "fp32 planes of a channels-last output");
  if (!st) {
    tensor xt, yt, *ins[8], *outs[1];
    op_ctx c2 = *c;
    for (int i = 0; i < c->n_in && i < 8; i++) ins[i] = c->in[i];
    outs[0] = y;
    conv_epilogue e2 = *e;
    e2.rec = NULL;
    if (xf) {
      cl_to_planes(x->data, g->N, g->C, g->S_in, xf);
      tensor_view(&xt, SMELT_F32, x->rank, x->dims, xf);
      ins[0] = &xt;
    }
    if (rf) {
      cl_to_planes(e->residual_h, g->N, g->M, g->S_out, rf);
      e2.residual = rf, e2.residual_h = NULL;
    }
    if (yf) {
      tensor_view(&yt, SMELT_F32, y->rank, y->dims, yf);
      outs[0] = &yt;
    }
    c2.in = ins, c2.out = outs;
    st = c->n_in > 8 ? err_set(SMELT_ERR_INTERNAL, "conv: too many inputs") : conv_op_run_cl(&c2, &e2, 0);
    if (!st && yf) planes_to_cl(yf, g->N, g->M, g->S_out, y->data);
  }
  free(xf), free(rf), free(yf);
  return st;
}

smelt_status conv_op_run(op_ctx *c, const conv_epilogue *e) { return conv_op_run_cl(c, e, conv_cl_of(c->node)); }

static smelt_status conv_op_run_cl(op_ctx *c, const conv_epilogue *e, unsigned cl) {
  conv_geom g;
  TRY(conv_plan(c, &g));
  tensor *y = c->out[0];
  if (tensor_numel(y) == 0) return SMELT_OK;
  if (g.Kdim < 0) return err_set(SMELT_ERR_INVALID_ARGUMENT, "kernel size overflows");
  if (((cl & CB_CL_X) && c->in[0]->dtype != SMELT_BF16) || ((cl & CB_CL_Y) && y->dtype != SMELT_BF16) ||
      ((cl & CB_CL_R) && !e->residual_h))
    return err_set(SMELT_ERR_INTERNAL, "conv: a channels-last operand that is not bf16");
  bool plain = !e->residual && !e->residual_h && e->act.kind == FUSED_ACT_NONE;
  if (y->dtype != SMELT_F64 && (conv_bf16_act_in(c) || (y->dtype == SMELT_BF16 && conv_bf16_acts_node(c->node)))) {
    bool done; /* bf16 activations: on the bf16 kernel as they are, else through f32 copies below */
    TRY(conv_bf16_io_run(c, &g, e, cl, &done));
    if (done) return SMELT_OK;
  }
  if (conv_dw_cl_marks(cl)) { /* a depthwise convolution into channels-last activations */
    bool done;
    TRY(conv_dw_cl_try(c, &g, e, cl, &done));
    if (done) return SMELT_OK;
  }
  if (cl) return conv_cl_via_planes(c, &g, e, cl);
  if (e->residual_h) { /* a bf16 residual on another kernel: an f32 copy of it */
    int64_t n = tensor_numel(y);
    float *r = NULL;
    TRY(nn_alloc((void **)&r, n, sizeof(float), "f32 copy of the residual"));
    nn_load_f32(SMELT_BF16, e->residual_h, 0, 1, n, r);
    conv_epilogue e2 = *e;
    e2.residual = r, e2.residual_h = NULL, e2.rec = NULL;
    smelt_status st = conv_op_run_cl(c, &e2, 0);
    free(r);
    return st;
  }
  if (!plain && y->dtype != SMELT_F32 && !(y->dtype == SMELT_BF16 && conv_bf16_acts_node(c->node)))
    return err_set(SMELT_ERR_UNSUPPORTED, "a fused conv epilogue needs float32, not %s", dtype_name(y->dtype));
  if (y->dtype == SMELT_F64) { /* the registry's float64 entry */
    conv_query q;
    conv_query_of(c, &g, &q);
    const conv_kernel *k = conv_select(&q, 0);
    if (!k) return no_kernel(&q);
    conv_call a = {.c = c, .g = &g};
    bool taken;
    return k->run(k, &q, &a, &taken);
  }
  const tensor *x = c->in[0], *w = c->in[1], *b = op_in(c, 2);
  float *X = NULL, *W = NULL, *B = NULL, *Y = NULL;
  smelt_status st = nn_f32_acquire(x, &X);
  if (!st) st = nn_f32_acquire(w, &W);
  if (!st && b) st = nn_f32_acquire(b, &B);
  if (!st) st = nn_f32_out(y, &Y);
  if (!st) {
    st = conv_f32(c, &g, X, W, B, Y, e);
    nn_f32_commit(y, Y);
  }
  if (X) nn_f32_release(x, X);
  if (W) nn_f32_release(w, W);
  if (B) nn_f32_release(b, B);
  return st;
}

static smelt_status conv_run(op_ctx *c) {
  bool hit;
  TRY(conv_memo_run(c, &hit));
  if (hit) return SMELT_OK;
  conv_epilogue none = {0};
  return conv_memo_record_run(c, &none);
}

const op_def op_family_conv[] = {
    {"Conv", "", 2, 3, 1, 1, conv_op_infer, conv_run, false},
    {0}};
