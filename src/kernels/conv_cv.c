/* The channel-vector tile (conv_kernels.h: pwc_tile, pwcx_tile) over one
 * packed panel of output channels, as the pointwise route
 * (conv_pointwise.c) and direct-cv (conv_direct_cv.c) both run it: K in
 * blocks, the sums of up to CONV_CV_GROUP tiles waiting vector-aligned
 * between blocks; and the shapes it is tried on. */
#include <stdlib.h>

#include "kernels/conv_internal.h"
#include "util/env.h"

/* Measured on the 2-core Emerald Rapids Xeon (conv_pointwise.c and
 * conv_select.c say what): planes past 14x14 were slower on this tile on
 * AVX-512, past 8x8 on AVX2 (the AVX2 kernels run on that machine). */
int64_t conv_cv_max_plane(isa_level isa) {
  return isa >= ISA_AVX512 ? CONV_POINTWISE_CV_S : isa >= ISA_AVX2 ? CONV_POINTWISE_CV_S_AVX2 : 0;
}

/* Blocks of K: a panel's block (kc x pmr floats) within 16 KiB, the blocks
 * even; SMELT_CV_KC sets the most (the tests run blocks of 5).  Measured
 * (1 thread, against one block): the pointwise 256 -> 1024 at 14x14 153
 * GFLOP/s against 113, 2048 -> 512 at 7x7 148 against 100; direct-cv 512 ->
 * 512 3x3/2 to 7x7 103 against 88, 3x3 at 7x7 128-134 against 120; 64 to
 * 256 floats a block all alike. */
int64_t conv_cv_kc(const conv_kernels *k, int64_t K) {
  int64_t kmax = env_get("SMELT_CV_KC") ? atoll(env_get("SMELT_CV_KC")) : 4096 / k->pmr;
  if (kmax < 1) kmax = 1;
  return conv_cdiv(K, conv_cdiv(K, kmax));
}

void conv_cv_panel(const conv_kernels *k, int64_t K, int64_t kc, const float *w, const float *next, const float *x,
                   int64_t ldx, const int64_t *xoff, int64_t t0, int64_t t1, conv_cv_at at, const void *ctx,
                   const float *bias, const float *res, float lo, float hi, float *y, int64_t ldy, int mc) {
  _Alignas(64) float acc[CONV_CV_GROUP * CONV_CV_TILE];
  int64_t pmr = k->pmr, nkb = conv_cdiv(K, kc), calls = (t1 - t0) * nkb, call = 0;
  /* the next panel (K x pmr floats, the weight not touched since the
   * previous run) streams into L2 spread over every call on this panel:
   * all of it during one tile of each block asked 41 GB/s a core, more
   * than the memory gives two cores at once */
  int64_t lines = conv_cdiv(K * pmr * (int64_t)sizeof(float), 64);
  for (int64_t g0 = t0; g0 < t1; g0 += CONV_CV_GROUP) {
    int64_t g1 = g0 + CONV_CV_GROUP < t1 ? g0 + CONV_CV_GROUP : t1;
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      int64_t kn = K - k0 < kc ? K - k0 : kc;
      bool first = k0 == 0, last = k0 + kn == K;
      for (int64_t t = g0; t < g1; t++, call++) {
        conv_cv_tile g = at(ctx, t);
        float *a = acc + (t - g0) * CONV_CV_TILE;
        const float *r = res ? res + g.yo : NULL;
        const float *pf;
        int64_t pfl = conv_pf_share(next, lines, calls, call, &pf);
        if (xoff)
          k->pwcx_tile(kn, w + k0 * pmr, x + g.xo, xoff + k0, g.np, bias, r, lo, hi, y + g.yo, ldy, mc, pf, pfl,
                       first ? NULL : a, last ? NULL : a);
        else
          k->pwc_tile(kn, w + k0 * pmr, x + k0 * ldx + g.xo, ldx, g.np, bias, r, lo, hi, y + g.yo, ldy, mc, pf, pfl,
                      first ? NULL : a, last ? NULL : a);
      }
    }
  }
}
