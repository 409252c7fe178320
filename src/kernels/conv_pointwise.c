/* Pointwise (1x1, stride 1, unpadded, one group) convolution on X in
 * place: per image Y[M, S] = W[M, C] x X[C, S] with the bias, residual and
 * clamp applied while each tile is still in registers.  No packing: the
 * micro-kernel (conv_kernels.h: pw_tile) reads pmr rows of the raw W and
 * rows of pmax_nv*vl contiguous pixels of X straight from the tensor, so a
 * conv with few input channels over a large plane spends its time on the
 * multiply-adds rather than on copying the B panel and a second pass over
 * Y for the epilogue.  Work items are (image, block of pixels, chunk of
 * output-channel panels): a block's K x PB slice of X stays in L1 while
 * every panel of W passes over it. */
#include <math.h>

#include "kernels/conv.h"
#include "kernels/conv_internal.h"
#include "util/err.h"

typedef struct pw_job {
  const conv_kernels *k;
  int64_t C, M, S, PB, nb, np, ppc, nmc;
  const float *X, *W, *B, *res;
  float lo, hi;
  float *Y;
} pw_job;

static void pw_items(void *vctx, int64_t i0, int64_t i1) {
  const pw_job *j = vctx;
  const conv_kernels *k = j->k;
  int64_t NR = (int64_t)k->pmax_nv * k->vl;
  for (int64_t it = i0; it < i1; it++) {
    int64_t mc = it % j->nmc, rest = it / j->nmc, b = rest % j->nb, n = rest / j->nb;
    int64_t q0 = b * j->PB, q1 = q0 + j->PB < j->S ? q0 + j->PB : j->S;
    int64_t p0 = mc * j->ppc, p1 = p0 + j->ppc < j->np ? p0 + j->ppc : j->np;
    const float *x = j->X + n * j->C * j->S;
    for (int64_t p = p0; p < p1; p++) {
      int64_t m0 = p * k->pmr;
      int mr = (int)(j->M - m0 < k->pmr ? j->M - m0 : k->pmr);
      int64_t yoff = (n * j->M + m0) * j->S;
      const float *w = j->W + m0 * j->C, *bias = j->B ? j->B + m0 : NULL;
      for (int64_t q = q0; q < q1; q += NR)
        k->pw_tile(j->C, w, j->C, x + q, j->S, q1 - q < NR ? q1 - q : NR, bias,
                   j->res ? j->res + yoff + q : NULL, j->lo, j->hi, j->Y + yoff + q, j->S, mr);
    }
  }
}

/* Measured per layer against the im2col GEMM (AVX2, 1 and 2 threads):
 * 1.4-3x faster for C <= 24 over a large plane, 1.1-1.2x up to C = 64 and
 * for projections (C <= 192 down to M <= C/4, mobilenet_v2's 96 -> 24 at
 * 112x112 is 1.8x); for larger C the gains shrink to noise in whole models
 * (resnet50 lost 1-3%) and C = 256 over 56x56 is 1.1x slower, where the
 * GEMM's K blocking and packed weights pay off, so those stay on the GEMM. */
bool conv_pointwise_suits(int64_t C, int64_t M, int64_t S) {
  (void)S;
  return C >= 1 && (C <= CONV_POINTWISE_MAX_C || (C <= CONV_POINTWISE_MAX_CP && 4 * M <= C));
}

smelt_status conv_pointwise_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M,
                                int64_t S, const float *X, const float *W, const float *B,
                                const conv2d_epilogue *ep, float *Y) {
  if (N < 0 || C < 1 || M < 0 || S < 0)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "pointwise conv: bad geometry N=%lld C=%lld M=%lld S=%lld",
                   (long long)N, (long long)C, (long long)M, (long long)S);
  if (N * M * S == 0) return SMELT_OK;
  const conv_kernels *k = conv_kernels_get(isa);
  int64_t NR = (int64_t)k->pmax_nv * k->vl;
  pw_job j = {.k = k, .C = C, .M = M, .S = S, .X = X, .W = W, .B = B, .Y = Y,
              .res = ep ? ep->residual : NULL, .lo = ep ? ep->lo : -INFINITY,
              .hi = ep ? ep->hi : INFINITY};
  /* a block's slice of X: ~24 KiB, whole tiles */
  j.PB = (6144 / C) / NR * NR;
  if (j.PB < NR) j.PB = NR;
  if (j.PB > conv_cdiv(S, NR) * NR) j.PB = conv_cdiv(S, NR) * NR;
  j.nb = conv_cdiv(S, j.PB);
  j.np = conv_cdiv(M, k->pmr);
  int threads = pool_threads(pool);
  int64_t nmc = 1; /* split the panels too when there are few pixel blocks */
  while (N * j.nb * nmc < 4 * (int64_t)threads && nmc < j.np) nmc *= 2;
  j.ppc = conv_cdiv(j.np, nmc);
  j.nmc = conv_cdiv(j.np, j.ppc);
  pool_parallel_for(pool, N * j.nb * j.nmc, 1, pw_items, &j);
  return SMELT_OK;
}
