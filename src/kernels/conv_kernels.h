/* Internal interface between the conv/pool drivers (kernels/conv_*.c,
 * kernels/pool.c) and their per-ISA micro-kernels, which are one template
 * (kernels/conv_impl.h) compiled per ISA (kernels/x86/conv_avx512.c,
 * kernels/x86/conv_avx2.c, kernels/conv_scalar.c).  Not for op code. */
#ifndef SMELT_KERNELS_CONV_KERNELS_H
#define SMELT_KERNELS_CONV_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"

struct conv_phases;

/* A max pool's row geometry for max_pool_row (kernels/pool2d.c makes it). */
typedef struct pool_row_geom {
  int64_t W, pl, sw, Wq, KW, OW;
  const int64_t *lo, *hi; /* per column phase: the columns holding values */
  const int64_t *off;     /* per tap: its offset in the phase rows */
} pool_row_geom;

#define CONV_DIRECT_MAX_NV 4
/* dw3d_plane: output rows of at most this many vectors */
#define CONV_DW3D_MAX_NV 8
/* max_pool_plane_k3s2 keeps an output row's column maxes in registers up to
 * this many output vectors (AVX-512) */
#define CONV_POOL_PLANE_NV 3

/* The runs of Y a direct tile's vectors land in (kernels/conv_direct.c
 * makes them): vector v's lanes [lo, hi) of run k go to Y offset off + lane
 * (off: the offset of lane 0, which may lie before Y's start) */
#define CONV_DIRECT_SEGS 4
typedef struct conv_direct_segs {
  int n[CONV_DIRECT_MAX_NV];
  int lo[CONV_DIRECT_MAX_NV][CONV_DIRECT_SEGS], hi[CONV_DIRECT_MAX_NV][CONV_DIRECT_SEGS];
  int64_t off[CONV_DIRECT_MAX_NV][CONV_DIRECT_SEGS];
} conv_direct_segs;

typedef struct conv_kernels {
  isa_level isa;
  int vl; /* floats per vector */

  /* Direct conv tile: c[i][j] = sum_k a[k*dmr + i] * b[boff[k] + j] for
   * i < dmr, j < nv*vl, written densely (row stride nv*vl).  a: a packed
   * weight panel (K groups of dmr floats), b: the padded input at the
   * tile's first position.  direct[nv] for nv in 1..dmax_nv. */
  int dmr, dmax_nv;
  void (*direct[CONV_DIRECT_MAX_NV + 1])(int64_t K, const float *a, const float *b,
                                         const int64_t *boff, float *c);
  /* A direct tile out to Y, the epilogue applied: for i < mr and the n
   * wide positions p = q .. q + n - 1 (oh = p / Wq, ow = p % Wq; ow >= OW
   * dropped), y[i*ys + oh*OW + ow] = min(hi, max(lo, tile[i*nr + p - q] +
   * bias[i] + res[i*ys + oh*OW + ow])) (bias, res may be NULL).  Writes
   * nothing but those outputs (a whole-vector tail only over outputs of
   * the same row that a later segment of the tile rewrites). */
  void (*direct_out)(const float *tile, int64_t nr, int mr, int64_t q, int64_t n, int64_t Wq, int64_t OW,
                     const float *bias, const float *res, float lo, float hi, float *y, int64_t ys);
  /* The direct tile and direct_out in one: the sums leave the registers
   * through the epilogue into sg's runs of Y for rows i < mr, no tile in
   * memory.  NULL but at AVX-512 (its masked stores are single
   * instructions); direct_epi[nv] for nv in 1..dmax_nv. */
  void (*direct_epi[CONV_DIRECT_MAX_NV + 1])(int64_t K, const float *a, const float *b, const int64_t *boff,
                                             const conv_direct_segs *sg, int mr, const float *bias,
                                             const float *res, float lo, float hi, float *y, int64_t ys);

  /* Pointwise (1x1, stride 1) tile reading X in place: for i < mr, j < n
   * (1 <= n <= pmax_nv*vl, 1 <= mr <= prows): y[i*ldy + j] = min(hi,
   * max(lo, bias[i] + res[i*ldy + j] + sum_k w[i*ldw + k] * x[k*ldx + j]))
   * (bias, res may be NULL).  Reads and writes nothing past column n.  pf,
   * when not NULL: prows*K contiguous floats (weight rows of a panel to
   * come) prefetched into L2 while the tile runs.  pwp_tile: the same over
   * prows rows of a packed panel (conv_pointwise_pack: ldw output channels
   * per panel, prows or pmr, w[k*ldw + i]; rows past mr read but not
   * stored). */
  /* Direct conv with the output channels along the vector (kernels/
   * conv_cvec.c): c[p*vl + v] = bias[v] + sum_k w[k*vl + v] * x[xoff[k] + p]
   * for p < np (1 <= np <= cvp), v < vl: np positions of one output row,
   * contiguous in the phase-split buffer at x; w: a packed panel of vl
   * output channels (K vectors); bias: vl floats. */
  int cvp;
  void (*cvec)(int64_t K, const float *w, const float *x, const int64_t *xoff, const float *bias, float *c,
               int np);

  int pmr, prows, pmax_nv;
  void (*pw_tile)(int64_t K, const float *w, int64_t ldw, const float *x, int64_t ldx, int64_t n,
                  const float *bias, const float *res, float lo, float hi, float *y, int64_t ldy,
                  int mr, const float *pf);
  void (*pwp_tile)(int64_t K, const float *w, int64_t ldw, const float *x, int64_t ldx, int64_t n,
                   const float *bias, const float *res, float lo, float hi, float *y, int64_t ldy,
                   int mr, const float *pf);
  /* Pointwise tile with the output channels along the vector, over a whole
   * packed panel: for i < mc (<= pmr) output channels, j < np (1 <= np <=
   * pcp) positions, y[i*ldy + j] = min(hi, max(lo, bias[i] + res[i*ldy +
   * j] + sum_k w[k*pmr + i] * x[k*ldx + j])) (bias, res may be NULL): np
   * positions broadcast against the panel's pmr channels, the sums turned
   * back into channel rows at the end.  No lanes are spent on positions
   * past np, so it suits planes that are not whole tiles of pw_tile's
   * width (7x7, 14x14).  pf: pfl cache lines from pf (a share of the
   * next panel) prefetched into L2, spread over the K steps.  K in
   * blocks: acc_in (not NULL) starts the sums from the earlier blocks'
   * (np*pmr floats, position-major, vector-aligned), and
   * acc_out (not NULL) takes them there instead of Y (then bias, res and
   * the clamp are not applied). */
  int pcp;
  void (*pwc_tile)(int64_t K, const float *w, const float *x, int64_t ldx, int np, const float *bias,
                   const float *res, float lo, float hi, float *y, int64_t ldy, int mc, const float *pf,
                   int64_t pfl, const float *acc_in, float *acc_out);
  /* The same with the k-th input row at x + xoff[k] (a direct conv's taps
   * over a stride-phase-split padded input: conv_direct_cv.c). */
  void (*pwcx_tile)(int64_t K, const float *w, const float *x, const int64_t *xoff, int np, const float *bias,
                    const float *res, float lo, float hi, float *y, int64_t ldy, int mc, const float *pf,
                    int64_t pfl, const float *acc_in, float *acc_out);

  /* Winograd tuple GEMM: c[i*ldc + j] = sum_k a[i*lda + k] * b[k*wnr + j]
   * for i < mr (mr <= wmr), j < wnr (= wnv*vl); pfl cache lines from pf
   * (a share of the next panel of U) prefetched into L2 over the K steps. */
  int wmr, wnr;
  void (*wgemm)(int64_t K, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                const float *pf, int64_t pfl, int mr);

  /* Winograd transforms on vl channels at once (blocked layout: a pixel is
   * vl consecutive floats).  in: the alpha x alpha patch at x (row stride
   * xrs floats) -> alpha^2 vectors at v + xi*vs.  out: alpha^2 vectors at
   * o + xi*os -> the m x m outputs at y (row stride yrs). [0]: F(2,3), [1]: F(4,3). */
  void (*wino_in[2])(const float *x, int64_t xrs, float *v, int64_t vs);
  void (*wino_out[2])(const float *o, int64_t os, float *y, int64_t yrs);

  /* Layout changes for the blocked (pixel-major, vl channels per pixel)
   * copies: rows_to_blk: dst[p*vl + l] = src[l][p] (0 where src[l] is NULL);
   * blk_to_rows: dst[l][p] = src[p*vl + l] (+ bias[l]) where dst[l] is not
   * NULL; p < n, l < vl. */
  void (*rows_to_blk)(const float *const *src, int64_t n, float *dst);
  void (*blk_to_rows)(const float *src, int64_t n, float *const *dst, const float *bias);
  /* Columns of a pixel-major matrix back to channel rows, with the conv
   * epilogue: dst[l*ldd + p] = min(hi, max(lo, src[p*lds + l] + res[l*ldd
   * + p])) for l < nl (1..vl), p < n (res may be NULL).  Reads no column
   * of src past nl.  cap (>= n): floats writable from the start of each
   * row; a row's last partial vector is stored whole (junk past n) where
   * it fits, else value by value. */
  void (*cols_to_rows)(const float *src, int64_t lds, int64_t n, int nl, const float *res, float lo,
                       float hi, float *dst, int64_t ldd, int64_t cap);

  /* Depthwise: one output row of one channel from the phase-split padded
   * plane: y[j] = bias + sum_t w[t] * p[off[t] + j], j < n. */
  void (*dw_row)(const float *p, const int64_t *off, const float *w, int taps, float bias,
                 float *y, int64_t n);
  /* The same for exactly 9 taps (3x3), the weights held in registers, with
   * the epilogue: y[j] = min(hi, max(lo, bias + sum + res[j])) (res may be
   * NULL; NaN passes through the clamp as in the reference Clip). */
  void (*dw9_row)(const float *p, const int64_t *off, const float *w, float bias,
                  const float *res, float lo, float hi, float *y, int64_t n, int64_t cap);
  /* Depthwise on vl channels at once (blocked layout, see rows_to_blk),
   * for outputs (oh, ow) < (OH, OW): o[(oh*OW + ow)*vl + l] = min(hi,
   * max(lo, bias[l] + sum_t w[t*vl + l] * p[(oh*sh*Wp + ow*sw)*vl + off[t]
   * + l])): p the padded blocked input (row stride Wp pixels), off[t] in
   * floats. */
  void (*dw_blk)(const float *p, int64_t Wp, int64_t sh, int64_t sw, const int64_t *off, int taps,
                 const float *w, const float *bias, float lo, float hi, int64_t OH, int64_t OW, float *o);
  /* Depthwise 3x3 at stride s (1 or 2), dilation 1, on one channel from
   * its H x W plane x (taps outside it are 0: the padding pt, pl):
   * y[oh*OW + ow] = min(hi, max(lo, bias + sum_{kh,kw<3} w[kh*3 + kw] *
   * x[(oh*s - pt + kh)*W + ow*s - pl + kw] + res[oh*OW + ow])) (res may be
   * NULL).  ring: 8 * conv_dw3_row_floats(OW, s, vl) floats of scratch.
   * Rows are written in order; a row's last partial vector may spill junk
   * onto the next row, never past the plane. */
  void (*dw3_plane)(const float *x, int64_t H, int64_t W, int64_t s, int64_t pt, int64_t pl,
                    const float *w, float bias, const float *res, float lo, float hi, float *y,
                    int64_t OH, int64_t OW, float *ring);
  /* The same without the ring: the taps read from x in place, the lanes
   * on the padding masked; OW <= CONV_DW3D_MAX_NV * vl. */
  void (*dw3d_plane)(const float *x, int64_t H, int64_t W, int64_t s, int64_t pt, int64_t pl,
                     const float *w, float bias, const float *res, float lo, float hi, float *y,
                     int64_t OH, int64_t OW);
  /* Max pooling on vl channels at once, the same layout and geometry:
   * o[(oh*OW + ow)*vl + l] = max over t of p[(oh*sh*Wp + ow*sw)*vl +
   * off[t] + l] (a NaN tap is passed over, as v_max does; the padding
   * around the input holds -inf). */
  void (*max_blk)(const float *p, int64_t Wp, int64_t sh, int64_t sw, const int64_t *off, int taps,
                  int64_t OH, int64_t OW, float *o);
  /* rows of n: y[r*n + j] = min(hi, max(lo, x[r*xs + j] + res[r*n + j])),
   * j < n, r < rows (res may be NULL; x may be y when xs = n). */
  void (*epi_rows)(const float *x, int64_t xs, const float *res, float lo, float hi, float *y,
                   int64_t n, int64_t rows, int64_t cap);
  /* conv_fill_phases (kernels/conv_internal.h) */
  void (*fill_phases)(const struct conv_phases *p, const float *x, int64_t channels, int64_t r0,
                      float pad, float *buf, bool refill);

  /* cap (the row kernels above and below): floats writable at y, at
   * least n; a last partial vector is stored whole when it fits
   * in cap (junk past n), masked otherwise. */

  /* Pooling over the same kind of plane: y[j] = reduce_t p[off[t] + j]
   * (max, or sum times scale[j] when scale is given, else times s). */
  void (*pool_max_row)(const float *p, const int64_t *off, int taps, float *y, int64_t n,
                       int64_t cap);
  /* One output row of a max pool, separably (kernels/pool2d.c): t[j] =
   * max over r < rows of x[r*xs + j] (-inf when rows is 0; NaN ignored as
   * in pool_max_row) for j < g->W, then t's stride phases padded with -inf
   * into ph (g->sw rows of g->Wq: row pw, column i holds t[i*sw + pw - pl],
   * values for i in [lo[pw], hi[pw])), then pool_max_row over g->KW taps
   * at g->off into y.  t: room for W rounded up to whole vectors; ph:
   * sw*Wq floats and a vector more. */
  void (*max_pool_row)(const float *x, int64_t xs, int64_t rows, const struct pool_row_geom *g, float *t,
                       float *ph, float *y, int64_t cap);
  /* The same for g->KW == 3 taps at g->sw == 2, no dilation, without the
   * phase copy: tp holds the vertical max at offset g->pl with -inf around
   * it (room: g->pl + g->W + 2 * g->OW + 4 * vl floats, rounded up). */
  void (*max_pool_row_k3s2)(const float *x, int64_t xs, int64_t rows, const struct pool_row_geom *g,
                            float *tp, float *y, int64_t cap);
  /* max_pool_row_k3s2 over every output row of a plane (OH rows, H input
   * rows, top pad pt; rows 2 * oh - pt .. + 2 inside [0, H)), output rows
   * of at most CONV_POOL_PLANE_NV vectors; NULL where a level has none
   * (only AVX-512 does) */
  void (*max_pool_plane_k3s2)(const float *x, int64_t H, int64_t pt, const struct pool_row_geom *g, float *y,
                              int64_t OH);
  void (*pool_avg_row)(const float *p, const int64_t *off, int taps, const float *scale,
                       float s, float *y, int64_t n, int64_t cap);
  /* sum of x[0..n) in double (vector partial sums over short blocks) */
  double (*row_sum)(const float *x, int64_t n);
} conv_kernels;

/* The table for an ISA level, clamped to what the machine has. */
const conv_kernels *conv_kernels_get(isa_level isa);

extern const conv_kernels conv_kernels_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const conv_kernels conv_kernels_avx2;
extern const conv_kernels conv_kernels_avx512;
#endif

#endif
