/* Pointwise (1x1, stride 1, unpadded, one group) convolution on X in
 * place: per image Y[M, S] = W[M, C] x X[C, S] with the bias, residual and
 * clamp applied while each tile is still in registers.  X is not packed:
 * the micro-kernel (conv_kernels.h: pw_tile, pwp_tile) reads pmr rows of W
 * -- raw, or a panel packed once per session (conv_pointwise_pack: one
 * sequential stream) -- and rows of pmax_nv*vl contiguous pixels of X
 * straight from the tensor, so a
 * conv with few input channels over a large plane spends its time on the
 * multiply-adds rather than on copying the B panel and a second pass over
 * Y for the epilogue.  Work items are (image, block of pixels, chunk of
 * output-channel panels): a block's K x PB slice of X stays in L1 while
 * every panel of W passes over it (in L2 for an expansion, whose longer
 * blocks stream Y better: pw_run). */
#include <math.h>
#include <stdlib.h>

#include "ir/tensor.h"
#include "kernels/conv.h"
#include "kernels/conv_internal.h"
#include "kernels/gemm.h"
#include "kernels/gemm_kernels.h"
#include "util/env.h"
#include "util/err.h"

#define CONV_PW_BLOCK_FLOATS 6144 /* the row-group tile's slice of X per block (24 KiB) */

typedef struct pw_job {
  const conv_kernels *k;
  int64_t pw; /* W as conv_pointwise_pack lays it out, panels of pw channels; 0: W as stored */
  int64_t C, M, S, PB, nb, np, ppc, nmc;
  int64_t nt, tpb, kc; /* the channel-vector tile: tiles of the plane, tiles per block, K block */
  const float *X, *W, *B, *res;
  float lo, hi;
  float *Y;
} pw_job;

/* The row-group tile (pw_tile, pwp_tile): items of (image, block of PB
 * pixels, chunk of ppc groups of prows output channels). */
static void pw_items(void *vctx, int64_t i0, int64_t i1) {
  const pw_job *j = vctx;
  const conv_kernels *k = j->k;
  int64_t NR = (int64_t)k->pmax_nv * k->vl, C = j->C;
  for (int64_t it = i0; it < i1; it++) {
    int64_t mc = it % j->nmc, rest = it / j->nmc, b = rest % j->nb, n = rest / j->nb;
    int64_t q0 = b * j->PB, q1 = q0 + j->PB < j->S ? q0 + j->PB : j->S;
    int64_t p0 = mc * j->ppc, p1 = p0 + j->ppc < j->np ? p0 + j->ppc : j->np;
    const float *x = j->X + n * C * j->S;
    for (int64_t p = p0; p < p1; p++) {
      int64_t m0 = p * k->prows, s = j->pw ? m0 % j->pw : 0;
      int mr = (int)(j->M - m0 < k->prows ? j->M - m0 : k->prows);
      int64_t yoff = (n * j->M + m0) * j->S;
      const float *w = j->pw ? j->W + (m0 - s) * C + s : j->W + m0 * C, *bias = j->B ? j->B + m0 : NULL;
      /* weight rows to come stream in while this group's first tile runs
       * (a weight is cold, untouched since the previous run, and rows of
       * the model file in 4 KiB pages stop the hardware prefetchers at
       * every page): the next group's rows, or in a packed W the group's
       * share (prows*C floats) of the next panel */
      const float *pf = m0 + k->prows >= j->M ? NULL
                        : j->pw          ? (m0 - s + j->pw < j->M ? j->W + (m0 - s + j->pw) * C + s * C : NULL)
                                         : j->W + (m0 + k->prows) * C;
      for (int64_t q = q0; q < q1; q += NR, pf = NULL)
        (j->pw ? k->pwp_tile : k->pw_tile)(C, w, j->pw ? j->pw : C, x + q, j->S,
                                               q1 - q < NR ? q1 - q : NR, bias, j->res ? j->res + yoff + q : NULL,
                                               j->lo, j->hi, j->Y + yoff + q, j->S, mr, pf);
    }
  }
}

/* The channel-vector tile (pwc_tile, packed W only): items of (image,
 * block of tpb tiles, panel); the plane in nt tiles of S/nt positions
 * (give or take one), so no tile is a sliver. */
static conv_cv_tile pwc_at(const void *vctx, int64_t t) {
  const pw_job *j = vctx;
  int64_t q = t * j->S / j->nt, q1 = (t + 1) * j->S / j->nt;
  return (conv_cv_tile){q, q, (int)(q1 - q)};
}

static void pwc_items(void *vctx, int64_t i0, int64_t i1) {
  const pw_job *j = vctx;
  int64_t C = j->C, S = j->S, pmr = j->k->pmr;
  for (int64_t it = i0; it < i1; it++) {
    int64_t p = it % j->np, rest = it / j->np, b = rest % j->nb, n = rest / j->nb, m0 = p * pmr;
    int64_t t0 = b * j->tpb, t1 = t0 + j->tpb < j->nt ? t0 + j->tpb : j->nt, yoff = (n * j->M + m0) * S;
    const float *w = j->W + m0 * C;
    conv_cv_panel(j->k, C, j->kc, w, m0 + pmr < j->M ? w + pmr * C : NULL, j->X + n * C * S, S, NULL, t0, t1,
                  pwc_at, j, j->B ? j->B + m0 : NULL, j->res ? j->res + yoff : NULL, j->lo, j->hi, j->Y + yoff, S,
                  (int)(j->M - m0 < pmr ? j->M - m0 : pmr));
  }
}

/* Measured per layer against the im2col GEMM (AVX2, 1 and 2 threads):
 * 1.4-3x faster for C <= 24 over a large plane, 1.1-1.2x up to C = 64 and
 * for projections (C <= 192 down to M <= C/4, mobilenet_v2's 96 -> 24 at
 * 112x112 is 1.8x); for larger C the gains shrink to noise in whole models
 * (resnet50 lost 1-3%) and C = 256 over 56x56 is 1.1x slower, where the
 * GEMM's K blocking and packed weights pay off, so those stay on the GEMM.
 * Small planes with a small weight are the exception (CONV_POINTWISE_SMALL_S,
 * CONV_POINTWISE_SMALL_W): over 14x14 the GEMM's 16-wide panels and per-call
 * B packing cost more than the unpacked weight rows, which stay in L2
 * (mobilenet_v2's 96 -> 576, 576 -> 96, 384 -> 64/96 at 14x14: 1.02-1.1x,
 * squeezenet's 256 -> 32 at 27x27: 1.1-1.2x, hot, 1 thread), while a 7x7
 * plane (49 = 24 + 24 + 1 pixels: 0.94x) and weights past L2 (512 -> 1000
 * at 13x13: 0.8x; resnet50's 512 -> 128 at 28x28: 0.75-0.85x) stay on the
 * GEMM. */
bool conv_pointwise_suits(int64_t C, int64_t M, int64_t S) {
  if (C < 1) return false;
  if (C <= CONV_POINTWISE_MAX_C || (C <= CONV_POINTWISE_MAX_CP && 4 * M <= C)) return true;
  double w = (double)C * (double)M;
  return S > 64 && ((S <= CONV_POINTWISE_SMALL_S && w <= CONV_POINTWISE_SMALL_W) ||
                    (S <= 4 * CONV_POINTWISE_SMALL_S && 4 * w <= CONV_POINTWISE_SMALL_W));
}

/* AVX-512 doubles the multiply-add rate while the GEMM's per-call packing of
 * X (its B) costs the same bytes, so the balance above moves.  Measured on a
 * 16-core Xeon (resnet50's 1x1 layers, SMELT_CONV=pointwise against the
 * default, ORT/smelt per layer in the same run): every plane of 14x14 and
 * up ran faster on this kernel whatever C and M -- 0.66-0.77 -> 0.84-1.14
 * at 1 thread, 0.54-0.85 -> 0.77-1.09 at 16 (1024 -> 256 at 14x14: 0.73 ->
 * 1.06; 512 -> 128 at 28x28: 0.67 -> 1.05).  7x7 planes were mixed (2048 ->
 * 512 better, 512 -> 2048 worse than the transposed route) and stay as they
 * are; squeezenet's 13x13 layers were neutral.  The bench_gemm figures
 * there: the AVX-512 GEMM with B packed per call at 54-66% of peak on these
 * shapes.  AVX2 keeps conv_pointwise_suits (measured above).
 * 7x7 planes followed on an Emerald Rapids Xeon (AVX-512, no AMX;
 * bench_conv_pw --cold, 1 and 2 threads): the packed pointwise kernel
 * 7-20% faster than the transposed route on every 7x7 layer of
 * mobilenet_v2 and resnet50 (960 -> 320: 0.287 / 0.350 ms at 1 thread,
 * 0.214 / 0.268 at 2; 512 -> 2048: 0.97 / 1.11, 0.60 / 0.66), and on the
 * 16-core Xeon whole models at 16 threads (mobilenet_v2 15%, resnet50 8%
 * faster, one process against the transposed route). */
bool conv_pointwise_route(isa_level isa, int64_t C, int64_t M, int64_t S) {
  if (conv_pointwise_suits(C, M, S)) return true;
  return isa == ISA_AVX512 && C >= 1 && M >= 1 && S >= CONV_POINTWISE_AVX512_S;
}

/* Measured on the 2-core Emerald Rapids Xeon (AVX-512; 1 thread hot, 2
 * threads with the caches evicted before each run, the two tiles taking
 * turns): the channel-vector tile 1.1-1.26x faster than the row-group tile
 * on resnet50's 14x14 layers (C or M 1024), 1.13-1.69x on 7x7 layers
 * (mobilenet_v2's 960 -> 160 and 160 -> 960, resnet50's 2048 -> 512),
 * 1.14-1.25x on 13x13 ones with C 256 and up, even (0.93-1.06x) on
 * mobilenet_v2's small 14x14 layers (96 <-> 576).  On 28x28 and larger
 * planes it lost (0.66-0.91x: the row-group tile wastes few lanes there,
 * and the channel-vector tile reads its panel from L2 for every 14
 * positions), and a 16x16 plane was 0.9x; under 64 input channels its
 * transposes cost more than the lanes saved (C 16-32 at 14x14: 0.76-0.91x;
 * 48-64: 0.96-0.99x).  The AVX2 kernels (run on the same machine): 7x7
 * 1.1-1.31x, 14x14 0.95-1.04x.  SMELT_PW_CV=0/1 forces the row-group /
 * channel-vector panels for every shape (measurements). */
int conv_pointwise_panel(isa_level isa, int64_t C, int64_t M, int64_t S) {
  const conv_kernels *k = conv_kernels_get(isa);
  const char *e = env_get("SMELT_PW_CV");
  if (e && (e[0] == '0' || e[0] == '1') && !e[1]) return e[0] == '1' ? k->pmr : k->prows;
  if (S > conv_cv_max_plane(isa) || C < CONV_POINTWISE_CV_C || M < 1) return k->prows;
  /* the share of each tile's multiply-adds that land in Y: the row-group
   * tile wastes lanes past the plane's end, its last tile of one or two
   * vectors costing 0.62 / 0.75 of a whole one (measured); the
   * channel-vector tile wastes channels past M in its last panel and pays
   * for its transposes (the 0.07 margin: squeezenet's 13x13 layers, 0.94
   * of the row tile's lanes used, ran alike or slower on it, and 48 output
   * channels in panels of 32 ran 1.4x slower) */
  int64_t NR = (int64_t)k->pmax_nv * k->vl, tail = S % NR, nv = conv_cdiv(tail, k->vl);
  double tiles = (double)(S / NR) + (tail == 0 ? 0 : nv == 1 ? 0.62 : nv == 2 ? 0.75 : 1.0);
  double rows = (double)S / ((double)NR * tiles);
  double cv = (double)M / (double)(conv_cdiv(M, k->pmr) * k->pmr);
  return cv >= rows + 0.07 ? k->pmr : k->prows;
}

/* W (M x C) packed in panels of pw output channels, each K x pw
 * (w[k*pw + i] = W[m0 + i][k]), the last one's rows past M zero. */
int64_t conv_pointwise_packed_floats(int pw, int64_t C, int64_t M) {
  return conv_cdiv(M, pw) * pw * C;
}

void conv_pointwise_pack(int pw, int64_t C, int64_t M, const float *W, float *out) {
  for (int64_t m0 = 0; m0 < M; m0 += pw)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < pw; i++) *out++ = m0 + i < M ? W[(m0 + i) * C + c] : 0.f;
}

static smelt_status pw_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M, int64_t S,
                           const float *X, const float *W, int pw, const float *B,
                           const conv2d_epilogue *ep, float *Y) {
  const conv_kernels *k = conv_kernels_get(isa);
  if (pw && pw != k->pmr && pw != k->prows)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "pointwise conv: panels of %d channels (%s takes %d or %d)", pw,
                   isa_name(isa), k->pmr, k->prows);
  if (N < 0 || C < 1 || M < 0 || S < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "pointwise conv: bad geometry N=%lld C=%lld M=%lld S=%lld",
                   (long long)N, (long long)C, (long long)M, (long long)S);
  if (N * M * S == 0) return SMELT_OK;
  int64_t NR = (int64_t)k->pmax_nv * k->vl;
  pw_job j = {.k = k, .pw = pw, .C = C, .M = M, .S = S, .X = X, .W = W, .B = B, .Y = Y,
              .res = ep ? ep->residual : NULL, .lo = ep ? ep->lo : -INFINITY,
              .hi = ep ? ep->hi : INFINITY};
  int threads = pool_threads(pool);
  /* at least 8 items per thread, so the last one to finish waits for at
   * most an eighth of a share (a 14x14 plane at C = 576 is 9 blocks: 5 + 4
   * over 2 threads) */
  int64_t want = threads > 1 ? 8 * (int64_t)threads : 4;
  if (pw == k->pmr && k->pmr != k->prows) {
    if (k->pcp * k->pmr > CONV_CV_TILE)
      return err_set(SMELT_ERR_INTERNAL, "pointwise conv: tiles of %d x %d", k->pcp, k->pmr);
    j.kc = conv_cv_kc(k, C);
    /* one panel per item before the plane is cut, so a panel's weight is
     * read by as few items as can keep the threads busy */
    j.np = conv_cdiv(M, k->pmr);
    j.nt = conv_cdiv(S, k->pcp);
    j.nb = N * j.np >= want ? 1 : conv_cdiv(want, N * j.np);
    if (j.nb > j.nt) j.nb = j.nt;
    j.tpb = conv_cdiv(j.nt, j.nb);
    j.nb = conv_cdiv(j.nt, j.tpb);
    pool_parallel_for(pool, N * j.nb * j.np, 1, pwc_items, &j);
    return SMELT_OK;
  }
  /* a block's slice of X: ~24 KiB, whole tiles; an expansion (M >= 2C)
   * takes blocks 8x as long: each group of output rows then streams a
   * longer run of its rows of Y, whose writes are most of the layer's
   * traffic (resnet50's 64 -> 256 at 56x56, alone, caches evicted: 0.853
   * -> 0.753 ms at 1 thread, 0.570 -> 0.477 at 2; 16 -> 96 at 112x112
   * 0.520 -> 0.482, 0.337 -> 0.315); where M <= C (64 -> 64, 256 -> 64 at
   * 56x56) the longer blocks ran level or up to 9% slower at 2 threads */
  int64_t budget = M >= 2 * C ? CONV_PW_BLOCK_FLOATS * 8 : CONV_PW_BLOCK_FLOATS;
  j.PB = (budget / C) / NR * NR;
  if (j.PB < NR) j.PB = NR;
  if (j.PB > conv_cdiv(S, NR) * NR) j.PB = conv_cdiv(S, NR) * NR;
  j.nb = conv_cdiv(S, j.PB);
  /* blocks of even length (whole tiles): a short last block left the
   * thread whose home range it was idle (mobilenet_v2's 24 -> 144 at
   * 56x56, 2-core Zen 4, 2 threads: blocks of 2048 and 1088 pixels, one
   * thread's items 26 us each, the other's 14; after, the worker's idle
   * time in the layer 0.027 -> 0.006 ms of 0.11-0.14) */
  j.PB = conv_cdiv(conv_cdiv(S, j.nb), NR) * NR;
  j.nb = conv_cdiv(S, j.PB);
  j.np = conv_cdiv(M, k->prows);
  /* split the row groups too when there are few pixel blocks */
  int64_t nmc = 1;
  while (N * j.nb * nmc < want && nmc < j.np) nmc *= 2;
  j.ppc = conv_cdiv(j.np, nmc);
  j.nmc = conv_cdiv(j.np, j.ppc);
  pool_parallel_for(pool, N * j.nb * j.nmc, 1, pw_items, &j);
  return SMELT_OK;
}

smelt_status conv_pointwise_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M,
                                int64_t S, const float *X, const float *W, const float *B,
                                const conv2d_epilogue *ep, float *Y) {
  return pw_run(pool, isa, N, C, M, S, X, W, 0, B, ep, Y);
}

smelt_status conv_pointwise_run_packed(smelt_pool *pool, isa_level isa, int pw, int64_t N, int64_t C, int64_t M,
                                       int64_t S, const float *X, const float *Wp, const float *B,
                                       const conv2d_epilogue *ep, float *Y) {
  if (pw < 1) return err_set(SMELT_ERR_INVALID_ARGUMENT, "pointwise conv: panels of %d channels", pw);
  return pw_run(pool, isa, N, C, M, S, X, Wp, pw, B, ep, Y);
}

/* ---- the transposed route (kernels/conv.h: conv_pointwise_t_run) ---- */

bool conv_pointwise_t_suits(isa_level isa, int64_t C, int64_t M, int64_t S) {
  gemm_layout l;
  if (C < 1 || M < 1 || S < 1 || !gemm_layout_for(isa, NULL, C, M, &l)) return false;
  /* the share of the micro-kernel's lanes that hold outputs, either way round */
  double normal = (double)S / (double)(conv_cdiv(S, l.nr) * l.nr) * (double)M / (double)(conv_cdiv(M, l.mr) * l.mr);
  double t = (double)S / (double)(conv_cdiv(S, l.mr) * l.mr) * (double)M / (double)(conv_cdiv(M, l.nr) * l.nr);
  return t >= 1.1 * normal;
}

typedef struct pwt_job {
  const conv_kernels *k;
  const float *T, *res;
  float *Y;
  int64_t M, S;
  float lo, hi;
} pwt_job;

static void pwt_rows(void *vctx, int64_t b0, int64_t b1) {
  const pwt_job *j = vctx;
  int vl = j->k->vl;
  for (int64_t b = b0; b < b1; b++) {
    int64_t m0 = b * vl;
    int nl = (int)(j->M - m0 < vl ? j->M - m0 : vl);
    j->k->cols_to_rows(j->T + m0, j->M, j->S, nl, j->res ? j->res + m0 * j->S : NULL, j->lo, j->hi,
                       j->Y + m0 * j->S, j->S, j->S);
  }
}

smelt_status conv_pointwise_t_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M,
                                  int64_t S, const float *X, const float *W, const struct gemm_packed *wt,
                                  const float *B, const conv2d_epilogue *ep, float *Y) {
  if (N < 0 || C < 1 || M < 0 || S < 0 || !W)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "pointwise conv (transposed): bad geometry N=%lld C=%lld M=%lld S=%lld",
                   (long long)N, (long long)C, (long long)M, (long long)S);
  if (N * M * S == 0) return SMELT_OK;
  if ((double)S * (double)M > 1e9) return err_set(SMELT_ERR_NOMEM, "pointwise conv: %lld x %lld scratch", (long long)S, (long long)M);
  float *T = tensor_data_alloc(sizeof(float) * (size_t)(S * M));
  if (!T) return err_nomem("pointwise conv scratch", sizeof(float) * (size_t)(S * M));
  const float *res = ep ? ep->residual : NULL;
  float lo = ep ? ep->lo : -INFINITY, hi = ep ? ep->hi : INFINITY;
  gemm_params p = gemm_params_default();
  p.M = S, p.N = M, p.K = C;
  p.trans_a = true, p.lda = S; /* op(A) = X^T */
  p.trans_b = true, p.B = W, p.ldb = C, p.packed_b = wt; /* op(B) = W^T */
  p.C = T, p.ldc = M;
  if (B) p.epilogue.bias_kind = GEMM_BIAS_COL, p.epilogue.bias = B;
  bool clamp_after = res != NULL; /* the residual comes before the clamp */
  if (!clamp_after && (lo != -INFINITY || hi != INFINITY)) {
    if (lo == 0.f && hi == INFINITY) p.epilogue.act = GEMM_ACT_RELU;
    else if (lo <= hi) p.epilogue.act = GEMM_ACT_CLIP, p.epilogue.clip_lo = lo, p.epilogue.clip_hi = hi;
    else clamp_after = true;
  }
  const conv_kernels *k = conv_kernels_get(isa);
  pwt_job j = {.k = k, .T = T, .M = M, .S = S, .lo = clamp_after ? lo : -INFINITY,
               .hi = clamp_after ? hi : INFINITY};
  smelt_status st = SMELT_OK;
  for (int64_t n = 0; n < N && !st; n++) {
    p.A = X + n * C * S;
    st = gemm_f32_isa(pool, &p, isa);
    if (st) break;
    j.res = res ? res + n * M * S : NULL;
    j.Y = Y + n * M * S;
    int64_t blocks = conv_cdiv(M, k->vl);
    pool_parallel_for(pool, blocks, 1 + 16384 / (S * k->vl), pwt_rows, &j);
  }
  tensor_data_free(T);
  return st;
}
