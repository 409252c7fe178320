/* The conv algorithms' facts for the kernel registry (ops/conv_registry.c,
 * which chooses): names, what each supports, the cost model per shape,
 * SMELT_CONV; and the prepare/run entry points that dispatch to the
 * drivers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ir/tensor.h"
#include "kernels/bf16dp.h"
#include "kernels/conv_bf16_impl.h" /* CB_VR */
#include "kernels/conv_internal.h"
#include "util/env.h"
#include "util/err.h"

static const char *const algo_names[CONV_ALGO_COUNT] = {
    [CONV_ALGO_AUTO] = "auto",           [CONV_ALGO_IM2COL] = "im2col",
    [CONV_ALGO_DIRECT] = "direct",       [CONV_ALGO_DEPTHWISE] = "depthwise",
    [CONV_ALGO_WINO2] = "winograd2",     [CONV_ALGO_WINO4] = "winograd4",
    [CONV_ALGO_WINOGRAD] = "winograd",   [CONV_ALGO_POINTWISE] = "pointwise",
    [CONV_ALGO_BF16] = "bf16",           [CONV_ALGO_CHANVEC] = "chanvec",
    [CONV_ALGO_DIRECT_CV] = "direct-cv"};

const char *conv_algo_name(conv_algo a) {
  return a >= 0 && a < CONV_ALGO_COUNT ? algo_names[a] : "?";
}

const char *conv_algo_desc(conv_algo a, isa_level isa) {
  switch (a) {
    case CONV_ALGO_IM2COL: return "f32 im2col + GEMM";
    case CONV_ALGO_DIRECT: return "f32 direct implicit GEMM (kernels/conv_direct.c)";
    case CONV_ALGO_DEPTHWISE: return "f32 depthwise (kernels/conv_depthwise.c)";
    case CONV_ALGO_WINO2: return "f32 Winograd F(2x2,3x3) (kernels/conv_winograd.c)";
    case CONV_ALGO_WINO4: return "f32 Winograd F(4x4,3x3) (kernels/conv_winograd.c)";
    case CONV_ALGO_CHANVEC: return "f32 direct, output channels along the vector (kernels/conv_cvec.c)";
    case CONV_ALGO_DIRECT_CV:
      return "f32 direct, two vectors of output channels x positions of a row (kernels/conv_direct_cv.c)";
    case CONV_ALGO_POINTWISE: return "f32 1x1 pointwise on X in place, W packed once (kernels/conv_pointwise.c)";
    case CONV_ALGO_BF16:
      return bf16dp_amx_hw(isa) ? "bf16 x bf16 -> f32 on AMX tiles (kernels/conv_bf16.c)"
             : bf16dp_hw(isa)   ? "bf16 x bf16 -> f32 with vdpbf16ps (kernels/conv_bf16.c)"
                                : "bf16 x bf16 -> f32, scalar block kernel, forced by SMELT_CONV_BF16=1 (kernels/conv_bf16.c)";
    default: return conv_algo_name(a);
  }
}

bool conv_algo_parse(const char *s, conv_algo *out) {
  for (int a = 0; s && a < CONV_ALGO_COUNT; a++)
    if (!strcasecmp(s, algo_names[a])) {
      *out = (conv_algo)a;
      return true;
    }
  return false;
}

conv_algo conv_algo_from_env(void) {
  conv_algo a = CONV_ALGO_AUTO;
  if (!conv_algo_parse(env_get("SMELT_CONV"), &a) || a == CONV_ALGO_BF16) a = CONV_ALGO_AUTO;
  return a;
}

static bool wino_shape(const conv2d_desc *d) {
  return d->KH == 3 && d->KW == 3 && d->sh == 1 && d->sw == 1 && d->dh == 1 && d->dw == 1 &&
         d->G == 1 && d->OH > 0 && d->OW > 0;
}

bool conv2d_supports(const conv2d_desc *d, conv_algo algo) {
  bool phases = conv_phases_sane(d->OH, d->OW, d->KH, d->KW, d->sh, d->sw, d->dh, d->dw);
  switch (algo) {
    case CONV_ALGO_IM2COL: return true;
    case CONV_ALGO_DIRECT:
    case CONV_ALGO_CHANVEC: return phases;
    case CONV_ALGO_DEPTHWISE: return phases && d->G > 1 && d->G == d->C && d->G == d->M;
    case CONV_ALGO_DIRECT_CV: return phases && d->G == 1;
    case CONV_ALGO_WINO2:
    case CONV_ALGO_WINO4:
    case CONV_ALGO_WINOGRAD: return wino_shape(d);
    case CONV_ALGO_BF16: return conv_bf16_shape(d);
    case CONV_ALGO_POINTWISE:
      return d->G == 1 && d->KH == 1 && d->KW == 1 && d->sh == 1 && d->sw == 1 && d->pt == 0 && d->pl == 0 &&
             d->OH == d->H && d->OW == d->W;
    default: return false;
  }
}

/* ---- cost model ----
 * Seconds, roughly: multiply-adds at a per-ISA rate per thread times an
 * efficiency per algorithm, plus the bytes each streams (weights, the
 * copies and transforms it makes) at a memory rate that more threads do
 * not raise.  Fitted to single-thread timings of the ResNet-18 layers on a
 * Zen 4/5 machine (bench-kernels); they only need to rank the algorithms. */
#define CM_BW 25e9     /* bytes/s of one or two threads; grows by threads/2 up to 16 (cm_ctx.bw) */
#define CM_CALL 20e-6  /* fixed cost of a call (scratch, threads) */

typedef struct cm_ctx {
  const conv_kernels *k;
  double rate; /* flop/s of all threads */
  double bw;   /* bytes/s of all threads */
  int threads;
  bool fma256; /* isa_fma_256bit(): 256-bit FMA units (cm_wino) */
} cm_ctx;

static double cm_direct(const conv2d_desc *d, const cm_ctx *c) {
  const conv_kernels *k = c->k;
  int64_t Wq = d->OW + (d->KW - 1) * d->dw / d->sw, Q = d->OH * Wq;
  int64_t nr = k->dmax_nv * k->vl, mg = d->M / d->G;
  double flops = 2.0 * d->N * d->G * conv_cdiv(mg, k->dmr) * k->dmr * conv_cdiv(Q, nr) * nr *
                 (double)(d->C / d->G) * d->KH * d->KW;
  double bytes = 4.0 * (d->M * (d->C / d->G) * d->KH * d->KW +
                        d->N * d->C * (d->OH * d->sh + d->KH) * Wq * d->sw);
  /* the fill of each chunk's plane rows (conv_direct_chunking), beyond the
   * one pass over the input counted above: a row wider than the cache is
   * filled again for every chunk of tiles */
  int64_t fit_tiles, row_bytes, extra_rows;
  conv_direct_chunking(d, nr, &fit_tiles, &row_bytes, &extra_rows);
  int64_t tiles = conv_cdiv(Q, nr), per = fit_tiles < tiles ? fit_tiles : tiles;
  double rows = (double)conv_cdiv(tiles, per) * (conv_cdiv(per * nr, Wq) + extra_rows);
  if (tiles > per && rows > d->OH) bytes += 2.0 * d->N * d->G * (rows - d->OH) * (double)row_bytes; /* write + read */
  return flops / (c->rate * 0.85) + bytes / c->bw + CM_CALL;
}

/* Direct-cv (kernels/conv_direct_cv.c) computes no position that is not
 * in Y and no channel past M's last panel; its input is one phase-split
 * copy.  The AVX-512 direct kernel at 7x7 computes 96 lanes per 49 outputs
 * (Wq 8 or 9), at 14x14 240 per 196; measured on the 2-core Emerald Rapids
 * Xeon at 2 threads (resnet50's layers, the algorithms taking turns):
 * 512 -> 512 3x3/2 to 7x7 1.25 ms against the direct kernel's 1.8, 256 ->
 * 256 3x3/2 to 14x14 1.17 against 1.41, 512 -> 512 3x3 at 7x7 1.0-1.25
 * against Winograd F(2)'s 1.3-1.8; 128 -> 128 3x3/2 to 28x28 even with the
 * direct kernel, and on planes past 14x14 the pointwise form of the same
 * tile lost (conv_pointwise.c), so it is priced only on small planes:
 * dcv_suits. */
static bool dcv_suits(const conv2d_desc *d, const conv_kernels *k) {
  return d->G == 1 && d->OH * d->OW <= conv_cv_max_plane(k->isa) && d->C * d->KH * d->KW >= CONV_POINTWISE_CV_C &&
         conv2d_supports(d, CONV_ALGO_DIRECT_CV);
}

static double cm_dcv(const conv2d_desc *d, const cm_ctx *c) {
  const conv_kernels *k = c->k;
  if (!dcv_suits(d, k)) return INFINITY;
  double flops = 2.0 * d->N * conv_cdiv(d->M, k->pmr) * k->pmr * d->OH * d->OW * (double)d->C * d->KH * d->KW;
  double bytes = 4.0 * (conv_cdiv(d->M, k->pmr) * k->pmr * d->C * d->KH * d->KW +
                        2.0 * d->N * d->C * (d->OH * d->sh + d->KH) * (d->OW * d->sw + d->KW));
  return flops / (c->rate * 0.85) + bytes / c->bw + CM_CALL;
}

static double cm_im2col(const conv2d_desc *d, const cm_ctx *c) {
  double flops = 2.0 * d->N * d->M * d->OH * d->OW * (double)(d->C / d->G) * d->KH * d->KW;
  bool pointwise = d->KH == 1 && d->KW == 1 && d->sh == 1 && d->sw == 1 && d->pt == 0 &&
                   d->pl == 0 && d->OH == d->H && d->OW == d->W;
  double col = pointwise ? 0 : 8.0 * d->N * d->C * d->KH * d->KW * d->OH * d->OW;
  double bytes = 4.0 * d->M * (d->C / d->G) * d->KH * d->KW + col;
  /* AVX-512 (measured on a 16-core Xeon, every resnet50 3x3 layer, 1 and 16
   * threads): the im2col GEMM ran at 64-75 GFLOP/s of a 179 GFLOP/s core
   * (~0.4) while the direct kernel reached 68-127, 1.1-1.9x faster at 1
   * thread and up to 2.4x at 16 (7x7 and stride-2 planes); at 0.75 the
   * model picked im2col for the 7x7 and 14x14 stride-2 layers. */
  double eff = pointwise ? 0.85 : c->k->isa == ISA_AVX512 && !(c->fma256 && d->G == 1) ? 0.4 : 0.75;
  return flops / (c->rate * eff) + bytes / c->bw + CM_CALL;
}

static double cm_wino(const conv2d_desc *d, const cm_ctx *c, int m) {
  const conv_kernels *k = c->k;
  int a = m + 2;
  double T = (double)d->N * conv_cdiv(d->OH, m) * conv_cdiv(d->OW, m);
  double cp = (double)conv_cdiv(d->C, k->vl) * k->vl, mp = (double)conv_cdiv(d->M, k->wnr) * k->wnr;
  double flops = 2.0 * a * a * T * cp * mp;
  /* transforms, vectorized adds; where the driver splits the panels
   * (conv_wino_plan_of's pmajor, or more threads than tile rows) each panel
   * chunk transforms its tile rows' input again */
  conv_wino_plan plan;
  conv_wino_plan_of(d, k, m, c->threads, &plan);
  bool pmajor = plan.pmajor;
  double rows = (double)d->N * (double)plan.TH;
  double redo = pmajor ? c->threads : c->threads > rows ? c->threads / rows : 1;
  double tf = T * (cp * a * a * 4.0 * redo + mp * a * a * 3.0);
  /* U streams from memory, into every thread that takes a chunk of tile
   * rows over all of it (split by rows, not panels: 2-core Zen 4, 2
   * threads, squeezenet's 64 -> 256 at 13x13 on F(4x4) in two row chunks
   * 0.25-0.26 ms, on F(2x2) split by panels 0.21-0.24); the transformed
   * tiles V and products O are each item's scratch, sized to stay in its
   * core's L2 (conv_wino_run), so their traffic grows with the threads as
   * the multiply-adds do */
  double n_tc = (double)conv_cdiv(plan.TH, plan.rc);
  double readers = pmajor ? 1 : c->threads < n_tc ? c->threads : n_tc;
  double bytes = 4.0 * a * a * cp * mp * readers, scratch = 8.0 * T * a * a * (cp + mp);
  /* Tiles are the rows of the batched products: under 4 a thread leave
   * them short.  16-core Xeon, resnet50's 512 -> 512 3x3 at 7x7 (16 tiles
   * of F(2x2)) at 16 threads: 0.42-0.49 ms on Winograd, 0.35-0.40 direct;
   * its 14x14 layers (49 tiles) were faster on Winograd. */
  double per = pmajor ? 1 : c->threads; /* split by panels, a thread's products run over every tile */
  double eff = T < 4.0 * per ? T / (4.0 * per) : 1;
  /* and under 24 tiles the products are too short for the kernel even on
   * one thread: 2-core Emerald Rapids, 1 thread, resnet50's 512 -> 512 3x3
   * at 7x7 (16 tiles of F(2x2)) 2.1-2.6 ms against direct-cv's 1.7-2.0, its
   * 256 -> 256 at 14x14 on F(4x4) (16 tiles) 1.46 ms against F(2x2)'s (49)
   * 1.25.  Not on cores whose FMA units are 256 bits wide, where the direct
   * kernels' multiply-adds take twice the cycles and short products still
   * win: 2-core Zen 4, 1 thread, in resnet18 (`bench/layer_profile.py
   * --env SMELT_CONV=...`), 512 -> 512 at 7x7 1.32 ms on F(4x4) (4 tiles),
   * 1.50 on F(2x2), 2.36 direct-cv (the pick with this penalty); 256 ->
   * 256 at 14x14 0.91-0.94 on F(4x4), 1.08-1.14 on F(2x2); squeezenet's
   * 48 -> 192 at 13x13 alone 0.12 ms on F(4x4) (16 tiles), 0.26 direct-cv. */
  if (T < 24 && !c->fma256) eff *= T / 24.0;
  /* and the busiest thread's share of the driver's items: 2-core Zen 4, 2
   * threads, resnet50's 256 -> 256 at 14x14, F(2x2)'s 7 tile rows in two
   * items of 4 and 3 per panel chunk ran 0.62 ms, F(4x4) split by panels
   * 0.54-0.60 (since then a row split gives each thread an even share of
   * the rows' panels, conv_wino_piece_of, and the share is about even
   * wherever the units divide) */
  eff *= conv_wino_balance(&plan, d->N, c->threads);
  return (flops / (c->rate * 0.8) + tf / (c->rate * 0.25)) / eff + bytes / c->bw + scratch / (CM_BW * c->threads) +
         CM_CALL;
}

/* bf16 on the vdpbf16ps kernels (kernels/conv_bf16.c), at twice the fp32
 * rate (the registry prices it only where isa_bf16_dot_fast), plus the
 * bf16 weights and the converted input (written, then read back).  The
 * position-vector kernel computes blocks of CB_VR output channels x 32
 * flat positions (row padding Wq included) over the channels padded to
 * 32; the channel-vector one (CB_FORM_MV) 16-channel vectors x blocks of
 * np positions over channel pairs; Winograd F(2x2) (CB_FORM_WINO) 16
 * products a 2x2 tile on the same tile, plus its transforms. */
static double cm_bf16(const conv2d_desc *d, const cm_ctx *c) {
  int64_t Wq = d->OW + (d->KW - 1) * d->dw / d->sw, Hq = d->OH + (d->KH - 1) * d->dh / d->sh;
  int64_t cp = conv_cdiv(d->C, 32) * 32, taps = d->KH * d->KW, S = d->OH * d->OW;
  cb_form form = conv_bf16_form(d, c->k->isa);
  if (form == CB_FORM_WINO) {
    int64_t TH = conv_cdiv(d->OH, 2), TW = conv_cdiv(d->OW, 2), np = conv_bf16_mv_np(TW);
    double cp2 = (double)(conv_cdiv(d->C, 2) * 2), mp = (double)(conv_cdiv(d->M, 16) * 16), T = (double)(TH * TW);
    double flops = 2.0 * d->N * 16 * (double)(TH * conv_cdiv(TW, np) * np) * cp2 * mp;
    /* the input and output transforms: ~8 ns a tile and input or output
     * channel on a 2-core Zen 4 (kernels/conv_bf16.c: per_output_wino) */
    double tf = (double)d->N * T * (cp2 + mp) * 100;
    double bytes = 2.0 * 16 * mp * cp2 + 2.0 * 2 * d->N * 16 * T * cp2 + 4.0 * d->N * d->C * d->H * d->W;
    return flops / (c->rate * 2.0 * 0.8) + tf / (c->rate * 0.25) + bytes / c->bw + CM_CALL;
  }
  bool mv = form == CB_FORM_MV;
  double mp = mv ? (double)(conv_cdiv(d->M, 16) * 16) : (double)(conv_cdiv(d->M, CB_VR) * CB_VR);
  int64_t np = conv_bf16_mv_np(S);
  double pos = mv ? (double)(conv_cdiv(S, np) * np) : (double)(conv_cdiv(d->OH * Wq, 32) * 32);
  if (mv) cp = conv_cdiv(d->C, 2) * 2;
  double flops = 2.0 * d->N * mp * pos * (double)cp * taps;
  double bytes = 2.0 * taps * mp * cp + 4.0 * d->N * cp * d->sh * d->sw * Hq * Wq;
  /* 0.75 (the fp32 kernels' 0.85 less the stores from the accumulator
   * block): 2-core Zen 4, 1 thread, resnet50's 256 -> 256 3x3 at 14x14 ran
   * 1.28 ms in bf16 against Winograd F(2x2)'s 1.09.  The channel-vector
   * kernel keeps its sums in registers through a transposed store: 0.85
   * (512 -> 512 3x3 at 7x7 1.08-1.10 ms, 212 GFLOP/s; 2048 -> 512 1x1 at
   * 7x7 0.53, 194) */
  return flops / (c->rate * 2.0 * (mv ? 0.85 : 0.75)) + bytes / c->bw + CM_CALL;
}

static double cm_cost(const conv2d_desc *d, const cm_ctx *c, conv_algo a) {
  switch (a) {
    case CONV_ALGO_DIRECT: return cm_direct(d, c);
    case CONV_ALGO_IM2COL: return cm_im2col(d, c);
    case CONV_ALGO_WINO2: return cm_wino(d, c, 2);
    case CONV_ALGO_WINO4: return cm_wino(d, c, 4);
    case CONV_ALGO_DIRECT_CV: return cm_dcv(d, c);
    case CONV_ALGO_BF16: return cm_bf16(d, c);
    default: return 0;
  }
}

/* Chanvec (kernels/conv_cvec.c) over the direct kernel, AVX2: grouped
 * convolutions of whole vectors of output channels per group whose output
 * rows are under two vectors wide, where the direct kernel's position
 * vectors straddle rows and cover the taps' reach columns.  Measured one
 * thread, AVX2, chanvec vs direct (best of 7 runs): regnet_y_400mf's 440ch
 * G55 3x3 at 7x7 1.33x, 208ch G26 3x3/2 to 14x14 1.1x (2 threads 1.35x),
 * 104ch G13 3x3/2 to 28x28 1.0x; resnext50's 1024ch G32 3x3/2 to 14x14
 * 1.28x, 1024ch G32 at 7x7 1.23x; 208ch G26 at 14x14 and 2048ch G32 3x3/2
 * to 7x7 even; wider rows 0.9x (256ch G32 at 28x28) and at 4 channels a
 * group 0.5x (128ch G32 at 56x56: half of each vector idle).  AVX-512 keeps
 * the direct kernel (not measured there). */
static bool chanvec_suits(const conv2d_desc *d, const conv_kernels *k) {
  int64_t Mg = d->M / d->G;
  if (k->isa != ISA_AVX2 || d->G < 2 || (d->G == d->C && d->G == d->M) || Mg % k->vl || d->OW >= 2 * k->vl ||
      !conv2d_supports(d, CONV_ALGO_CHANVEC))
    return false;
  /* an item's copy of its group's input (every phase row it reads) within
   * 1 Mi floats: chanvec does not cut a tall plane into chunks as the
   * direct driver does */
  double rows = (double)d->OH + (double)(d->KH - 1) * d->dh / d->sh;
  double cols = (double)d->OW + (double)(d->KW - 1) * d->dw / d->sw;
  return (double)(d->C / d->G) * d->sh * d->sw * rows * cols <= (double)(1 << 20);
}

/* The cost model's context for isa (as the kernels run it) and threads. */
static cm_ctx cm_ctx_of(isa_level isa, int threads) {
  cm_ctx c = {conv_kernels_get(isa), 0, 0, threads > 1 ? threads : 1, isa_fma_256bit()};
  isa = c.k->isa;
  /* AVX-512 on 256-bit FMA units (Zen 4) multiply-adds at AVX2's rate */
  c.rate = (isa == ISA_AVX512 && !c.fma256 ? 200e9 : isa >= ISA_AVX2 ? 100e9 : 8e9) * c.threads;
  /* Each thread streams its own part from its own L2 and the shared L3, so
   * the bandwidth grows with the threads too.  Held at the two-thread rate
   * (as the model was fitted), 16 threads priced the bytes at 8x their
   * cost next to the multiply-adds and picked the direct kernel over
   * Winograd for every 3x3 layer of resnet50, which the two-thread model
   * picks Winograd for: 16-core Xeon, one process taking turns with the
   * library before the change, resnet50 7-18%, resnet18 13-28%, squeezenet 5-16%
   * faster at 4, 8 and 16 threads (docs/PARALLEL.md). */
  c.bw = CM_BW * (c.threads > 2 ? (c.threads < 16 ? c.threads : 16) / 2.0 : 1);
  return c;
}

isa_level conv2d_kernel_isa(isa_level isa) { return conv_kernels_get(isa)->isa; }

double conv2d_cost(const conv2d_desc *d, isa_level isa, int threads, conv_algo algo) {
  cm_ctx c = cm_ctx_of(isa, threads);
  return cm_cost(d, &c, algo);
}

bool conv2d_chanvec_suits(const conv2d_desc *d, isa_level isa) { return chanvec_suits(d, conv_kernels_get(isa)); }

bool conv2d_bf16_pays(const conv2d_desc *d, isa_level isa, int threads, conv_algo f) {
  /* vdpbf16ps (kernels/conv_bf16.h, conv_bf16_by_cost): fp32 where it
   * does no more multiply-adds per cycle, for the gathered stem, and
   * where fp32 Winograd is cheaper; bf16 over the other fp32 kernels
   * (1.3-2.7x faster on resnet50's other layers, 1 and 2 threads) */
  if (!isa_bf16_dot_fast()) return false;
  /* The gathered form (a 1x1 over the C*KH*KW (channel, tap) pairs of a
   * first layer) only on the channel-vector kernel, which pads those to
   * pairs, not 32, and only by the 1x1 rule below at any thread count (its
   * fill pass writes every virtual channel): 2-core Zen 4, in the model,
   * resnet50's 3 -> 64 7x7/2 stem (147 virtual channels) 1.95 ms in bf16
   * against 2.48-2.50 in fp32 (position vectors 2.64), mobilenet_v2's 3 ->
   * 32 3x3/2 (27) 0.53 against 0.37 at 1 thread, 0.33 against 0.24 at 2 */
  cb_form form = conv_bf16_form(d, conv2d_kernel_isa(isa));
  /* the paired-columns form (conv_bf16_colpair) fills the input itself,
   * as a KxK layer's kernels do: not the gathered form's fill here */
  bool colpair = conv_bf16_colpair(d, form);
  bool gathered = !colpair && conv_bf16_gathered(d), mv = form == CB_FORM_MV || form == CB_FORM_WINO;
  if (gathered && !mv) return false;
  int64_t C = gathered ? d->C * d->KH * d->KW : d->C;
  /* twice the rate, less the zero channels (C padded to 32) and output
   * rows (M to CB_VR) it computes (paired columns: the zero tap of an odd
   * KW): under 1.3x it does not pay for the input's conversion
   * (squeezenet, whose expand layers read 16 channels: 5.33 ms in bf16
   * against 4.90 in fp32, 2 threads) */
  double m_share = d->M / (double)(conv_cdiv(d->M, mv ? 16 : CB_VR) * (mv ? 16 : CB_VR));
  double gain = colpair ? 2.0 * d->KW / (double)(conv_cdiv(d->KW, 2) * 2) * m_share
                : mv    ? 2.0 * C / (double)(conv_cdiv(C, 2) * 2) * m_share
                        : 2.0 * C / (double)(conv_cdiv(C, 32) * 32) * m_share;
  if (gain < 1.3) return false;
  /* A 1x1 convolution the fp32 pointwise kernels take (X read in place, no
   * conversion pass) pays bf16's fixed costs in full: an item's store of
   * its 12 x 32 block (about 220 cycles beside 24 vdpbf16ps a channel
   * pair; the channel-vector kernel's transposed 48 x 8, about 150) and
   * the positions past the plane in its last block.  On
   * one thread, under 1.5x by that count bf16 ran slower (in the model:
   * mobilenet_v2's 24 -> 144 and 144 -> 24 at 56x56 0.87-0.88x, 960 -> 160
   * at 7x7 0.96-0.99x, so the whole model 0.87x of fp32 in
   * bench/precision_peers.py; with the rule, four runs against the library
   * without it, two libraries in one process, from 0.93 to 1.14x: this VM
   * was noisy, no run slower by the fastest of 30-60) and over it faster (576 -> 96 at 14x14 1.17x, resnet50's
   * 1024 -> 256 1.3-1.5x).  At two threads too, since the input's fill
   * runs in one sweep and the channel-vector kernel takes the small planes
   * (2-core Zen 4, mobilenet_v2 in the model, bf16 against fp32 per layer:
   * 32 -> 16 at 112x112 0.53x, 16 -> 96 0.67x, 24 -> 144 at 56x56 0.80x,
   * 32 -> 192 at 28x28 0.79-0.85x; the rule keeps those fp32; earlier
   * kernels gained there from the fp32 kernels sharing the memory bus). */
  /* Where X arrives channels-last and is read as it lies there is no
   * conversion pass; the channel-vector store costs 100 cycles an item
   * through the transpose, and 50 wherever Y is channels-last (each
   * position's vectors stored as they are: bench/bench_conv_bf16 --cl 1,
   * 1 thread, mobilenet_v2's 16 -> 96 at 112x112 0.27 ms against the fp32
   * pointwise kernel's 0.38 in the model, 24 -> 144 at 56x56 0.13); with
   * no conversion to pay for, over 1.2x by that count it pays (96 -> 24
   * at 56x56: 1.44).  A channels-last Y alone takes mobilenet_v2's
   * gathered 3 -> 32 stem to bf16 (the model 1.04-1.05x at 1 and 2
   * threads: the stem writes what its depthwise reader takes as it lies). */
  /* The paired-columns stem likewise, with the light fill's 1.2 (2-core
   * Zen 5, in the model, 2 threads: mobilenet_v2's 3 -> 32 3x3/2 into
   * channels-last bf16 0.080 ms against fp32's 0.093, 18 pairs an output;
   * a planar Y's transposed store would leave it at 1.1 by this count). */
  bool in_place = d->x_cl && conv_bf16_cl_direct(d, form);
  if (in_place || gathered || colpair ||
      (d->KH == 1 && d->KW == 1 && d->sh == 1 && d->sw == 1 && d->pt == 0 && d->pl == 0)) {
    int64_t S = d->OH * d->OW, np = conv_bf16_mv_np(S);
    double pairs = colpair ? (double)(d->C * d->KH * conv_cdiv(d->KW, 2))
                   : mv    ? (double)conv_cdiv(C, 2)
                           : (double)(conv_cdiv(C, 32) * 16);
    double store = mv && d->y_cl ? 50.0 : in_place ? 100.0 : mv ? 150.0 : 220.0;
    double item = 24.0 * pairs / (24.0 * pairs + store);
    double pos = (double)S / (double)(mv ? conv_cdiv(S, np) * np : conv_cdiv(S, 32) * 32);
    if (gain * item * pos < (in_place || colpair ? 1.2 : 1.5)) return false;
  }
  cm_ctx c = cm_ctx_of(isa, threads);
  bool wino = f == CONV_ALGO_WINO2 || f == CONV_ALGO_WINO4;
  /* between channels-last activations the bf16 Winograd reads and writes
   * them as they lie, where fp32 Winograd would convert both ways: bf16
   * (resnet50's 64-channel 56x56 layers: the model 1.016x at 1 and 2
   * threads against fp32 F(4x4) there) */
  if (d->x_cl && d->y_cl && form == CB_FORM_WINO) return true;
  return !(wino && cm_cost(d, &c, f) < cm_bf16(d, &c));
}

/* ---- prepare / run ---- */

/* A weights object over data (n floats; owned or a view). */
static smelt_status weights_over(const conv2d_desc *d, conv_algo algo, isa_level isa, float *data, int64_t n,
                                 bool owns, conv2d_weights **out) {
  conv2d_weights *w = calloc(1, sizeof *w);
  if (!w) return err_nomem("conv weights", sizeof *w);
  *w = (conv2d_weights){.algo = algo, .k = conv_kernels_get(isa), .d = *d, .data = data, .n_data = n,
                        .owns_data = owns};
  if (algo == CONV_ALGO_POINTWISE) w->pw = conv_pointwise_panel(isa, d->C, d->M, d->OH * d->OW);
  if (algo == CONV_ALGO_BF16) { /* the layout the size was made for (the SMELT_CONV_BF16_* forcing read again) */
    w->form = (int)conv_bf16_form(d, w->k->isa);
    if (n != conv_bf16_words(d, (cb_form)w->form)) {
      free(w);
      return err_set(SMELT_ERR_INTERNAL, "bf16 conv: the weights' layout changed while they were prepared");
    }
  }
  *out = w;
  return SMELT_OK;
}

smelt_status conv_weights_new(const conv2d_desc *d, conv_algo algo, isa_level isa, int64_t n,
                              conv2d_weights **out) {
  float *data = n >= 0 && (uint64_t)n <= SIZE_MAX / 8 ? tensor_data_alloc(sizeof(float) * (size_t)n) : NULL;
  if (!data) return err_nomem("conv weights", n > 0 ? sizeof(float) * (size_t)n : 0);
  smelt_status st = weights_over(d, algo, isa, data, n, true, out);
  if (st) tensor_data_free(data);
  return st;
}

static smelt_status prepared_size(const conv2d_desc *d, conv_algo algo, const conv_kernels *k,
                                  int64_t *n) {
  double kk = (double)d->KH * d->KW, cg = (double)(d->C / d->G);
  double est;
  switch (algo) {
    case CONV_ALGO_DIRECT:
      est = (double)d->G * conv_cdiv(d->M / d->G, k->dmr) * k->dmr * cg * kk;
      break;
    case CONV_ALGO_CHANVEC: est = (double)d->G * conv_cdiv(d->M / d->G, k->vl) * k->vl * cg * kk; break;
    case CONV_ALGO_DIRECT_CV: est = (double)conv_cdiv(d->M, k->pmr) * k->pmr * cg * kk; break;
    case CONV_ALGO_DEPTHWISE: est = (double)d->M * kk; break;
    case CONV_ALGO_WINO2:
    case CONV_ALGO_WINO4: {
      int a = conv_wino_m(algo) + 2;
      est = (double)a * a * conv_cdiv(d->C, k->vl) * k->vl * conv_cdiv(d->M, k->wnr) * k->wnr;
      break;
    }
    case CONV_ALGO_BF16: est = (double)conv_bf16_words(d, conv_bf16_form(d, k->isa)); break; /* 32-bit words */
    case CONV_ALGO_POINTWISE:
      est = (double)conv_pointwise_packed_floats(conv_pointwise_panel(k->isa, d->C, d->M, d->OH * d->OW), d->C, d->M);
      break;
    default: return err_set(SMELT_ERR_INTERNAL, "conv: no prepared form for %s", conv_algo_name(algo));
  }
  if (est > 4e9) return err_set(SMELT_ERR_NOMEM, "conv: %.3g prepared weights is implausible", est);
  *n = (int64_t)est;
  return SMELT_OK;
}

int64_t conv2d_prepared_layout(const conv2d_desc *d, conv_algo algo, isa_level isa) {
  const conv_kernels *k = conv_kernels_get(isa);
  switch (algo) {
    case CONV_ALGO_DIRECT: return k->dmr;
    case CONV_ALGO_CHANVEC: return k->vl;
    case CONV_ALGO_DIRECT_CV: return k->pmr;
    case CONV_ALGO_WINO2:
    case CONV_ALGO_WINO4: return (int64_t)k->vl << 16 | k->wnr;
    /* revision 2: the panel width follows the plane (conv_pointwise_panel) */
    case CONV_ALGO_POINTWISE: return (int64_t)2 << 32 | conv_pointwise_panel(isa, d->C, d->M, d->OH * d->OW);
    /* the form's layout (conv_bf16_form): position vectors 0; channel
     * vectors 3 and Winograd 4 since a last block of 16 channels became two
     * of 32 (cb_mv_block; 1 and 2 were laid out before); 5 the channel
     * vectors' paired-columns form (conv_bf16_colpair) */
    case CONV_ALGO_BF16: {
      cb_form f = conv_bf16_form(d, k->isa);
      return f == CB_FORM_MV ? (conv_bf16_colpair(d, f) ? 5 : 3) : f == CB_FORM_WINO ? 4 : 0;
    }
    default: return 0;
  }
}

static smelt_status check_desc(const conv2d_desc *d) {
  if (d->N < 0 || d->C < 0 || d->H < 0 || d->W < 0 || d->M < 0 || d->G < 1 || d->KH < 1 ||
      d->KW < 1 || d->OH < 0 || d->OW < 0 || d->sh < 1 || d->sw < 1 || d->dh < 1 || d->dw < 1 ||
      d->pt < 0 || d->pl < 0 || d->C % d->G || d->M % d->G)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "conv: bad geometry");
  return SMELT_OK;
}

smelt_status conv2d_prepared_floats(const conv2d_desc *d, conv_algo algo, isa_level isa, int64_t *n) {
  TRY(check_desc(d));
  if (!conv2d_supports(d, algo) || algo == CONV_ALGO_IM2COL || algo == CONV_ALGO_WINOGRAD)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "conv: %s cannot be prepared for this shape",
                   conv_algo_name(algo));
  return prepared_size(d, algo, conv_kernels_get(isa), n);
}

smelt_status conv2d_prepare(smelt_pool *pool, const conv2d_desc *d, conv_algo algo, isa_level isa,
                            const float *W, conv2d_weights **out) {
  int64_t n = 0;
  TRY(conv2d_prepared_floats(d, algo, isa, &n));
  conv2d_weights *w = NULL;
  TRY(conv_weights_new(d, algo, isa, n, &w));
  smelt_status st = SMELT_OK;
  if (algo == CONV_ALGO_DIRECT) st = conv_direct_prepare(pool, w, W);
  else if (algo == CONV_ALGO_CHANVEC) st = conv_cvec_prepare(pool, w, W);
  else if (algo == CONV_ALGO_DIRECT_CV) st = conv_dcv_prepare(pool, w, W);
  else if (algo == CONV_ALGO_DEPTHWISE) {
    memcpy(w->data, W, sizeof(float) * (size_t)n);
    st = conv_dw_blk_weights(w);
  } else if (algo == CONV_ALGO_BF16) conv_bf16_pack(pool, d, (cb_form)w->form, W, (uint32_t *)w->data);
  else if (algo == CONV_ALGO_POINTWISE)
    conv_pointwise_pack(w->pw, d->C, d->M, W, w->data);
  else st = conv_wino_prepare(pool, w, W);
  if (st) {
    conv2d_weights_free(w);
    return st;
  }
  *out = w;
  return SMELT_OK;
}

smelt_status conv2d_weights_wrap(const conv2d_desc *d, conv_algo algo, isa_level isa, const float *data,
                                 int64_t n, conv2d_weights **out) {
  int64_t want = 0;
  TRY(conv2d_prepared_floats(d, algo, isa, &want));
  if (n != want)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "conv: %lld prepared floats given, %s needs %lld",
                   (long long)n, conv_algo_name(algo), (long long)want);
  TRY(weights_over(d, algo, isa, (float *)data, n, false, out));
  if (algo == CONV_ALGO_WINO2 || algo == CONV_ALGO_WINO4) conv_wino_layout(*out);
  smelt_status st = algo == CONV_ALGO_DEPTHWISE ? conv_dw_blk_weights(*out) : SMELT_OK;
  if (st) {
    conv2d_weights_free(*out);
    *out = NULL;
  }
  return st;
}

const float *conv2d_weights_data(const conv2d_weights *w, int64_t *n) {
  *n = w->n_data;
  return w->data;
}

void conv2d_weights_free(conv2d_weights *w) {
  if (!w) return;
  if (w->owns_data) tensor_data_free(w->data);
  tensor_data_free(w->blk);
  free(w);
}

void conv2d_weights_free_v(void *w) { conv2d_weights_free(w); }

smelt_status conv2d_run(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w,
                        const float *X, const float *B, float *Y) {
  return conv2d_run_ep(pool, d, w, X, B, NULL, Y);
}

/* d runs on w (the weights were prepared for its channels and taps) */
static smelt_status check_run(const conv2d_desc *d, const conv2d_weights *w) {
  TRY(check_desc(d));
  const conv2d_desc *p = &w->d;
  if (d->C != p->C || d->M != p->M || d->G != p->G || d->KH != p->KH || d->KW != p->KW)
    return err_set(SMELT_ERR_INTERNAL, "conv: weights prepared for another shape");
  return SMELT_OK;
}

bool conv2d_bf16_io(const conv2d_weights *w) { return w->algo == CONV_ALGO_BF16 && conv_bf16_io_native(w->k->isa); }

smelt_status conv2d_run_bf16io(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w, const float *X,
                               const uint16_t *Xh, const float *B, const conv2d_epilogue *ep, const uint16_t *Rh,
                               float *Y, uint16_t *Yh, unsigned cl) {
  TRY(check_run(d, w));
  if (!conv2d_bf16_io(w)) return err_set(SMELT_ERR_INTERNAL, "conv: %s takes no bf16 input or output", conv_algo_name(w->algo));
  if (d->N * d->M * d->OH * d->OW == 0) return SMELT_OK;
  return conv_bf16_run_cl(pool, w->k->isa, d, (cb_form)w->form, (const uint32_t *)w->data, X, Xh, B, ep, Rh, Y, Yh, cl);
}

smelt_status conv2d_run_ep(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w,
                           const float *X, const float *B, const conv2d_epilogue *ep, float *Y) {
  TRY(check_run(d, w));
  if (d->N * d->M * d->OH * d->OW == 0) return SMELT_OK;
  conv2d_weights run = *w;
  run.d = *d; /* the spatial geometry may change between runs; the weights do not */
  switch (w->algo) {
    case CONV_ALGO_DIRECT: return conv_direct_run(pool, &run, X, B, ep, Y);
    case CONV_ALGO_CHANVEC: return conv_cvec_run(pool, &run, X, B, ep, Y);
    case CONV_ALGO_DIRECT_CV: return conv_dcv_run(pool, &run, X, B, ep, Y);
    case CONV_ALGO_DEPTHWISE: return conv_dw_run(pool, &run, X, B, ep, Y);
    case CONV_ALGO_WINO2:
    case CONV_ALGO_WINO4:
      if (!wino_shape(d)) break;
      return conv_wino_run(pool, &run, X, B, ep, Y);
    case CONV_ALGO_BF16: return conv_bf16_run(pool, w->k->isa, d, (cb_form)w->form, (const uint32_t *)w->data, X, B, ep, Y);
    case CONV_ALGO_POINTWISE:
      if (!conv2d_supports(d, CONV_ALGO_POINTWISE)) break;
      /* the panels as prepared (for the plane of w->d), whatever the plane now */
      return conv_pointwise_run_packed(pool, w->k->isa, w->pw, d->N, d->C, d->M, d->OH * d->OW, X, w->data, B, ep, Y);
    default: break;
  }
  return err_set(SMELT_ERR_INTERNAL, "conv: %s cannot run this shape", conv_algo_name(w->algo));
}
