/* What kernels/conv_bf16.c shares with its AMX driver (x86/conv_bf16_amx.c):
 * one image's job and its geometry (kernels/conv_bf16.h has the layout). */
#ifndef SMELT_KERNELS_CONV_BF16_IMPL_H
#define SMELT_KERNELS_CONV_BF16_IMPL_H

#include "kernels/conv_bf16.h"

#define CB_BLOCK 32 /* output channels and flat positions per item */

typedef struct cb_job {
  const conv2d_desc *d; /* as the kernels see it (the paired-columns form: conv_bf16_colpair's) */
  const conv2d_desc *d0; /* the layer as given (its input's geometry, for the fills) */
  int64_t Cq, Mp;      /* channel pairs (C padded to 32, halved; the channel-vector and Winograd
                        * kernels: C padded to 2), output channels padded to 32 */
  int64_t P, L;        /* phase planes per channel pair, words per plane */
  int64_t Hq, Wq;      /* rows and columns of a phase plane */
  int64_t F, nfb, nmb; /* flat positions OH*Wq, their blocks, output-channel blocks
                        * (channel-vector kernel: blocks of np positions, of CB_MV_BLOCK channels) */
  int64_t gfb;         /* position blocks per group (cb_item) */
  int64_t taps, S;     /* KH*KW (1 in the gathered form), OH*OW */
  int64_t taps_v;      /* the gathered form (kernels/conv_bf16.c): KH*KW; else 0 */
  int64_t np;          /* the channel-vector kernel (CB_FORM_MV): positions per item; Winograd:
                        * tiles per item; else 0 */
  int64_t TW, tbr;     /* Winograd: tile columns, item blocks per tile row */
  const int64_t *toff; /* per tap: its word offset in a channel pair's P*L words */
  const uint32_t *w;   /* [taps][Mp][Cq]; the channel-vector and Winograd kernels: blocks of
                        * output channels (cb_mv_block), each [taps or 16 points][Cq][width] */
  const uint8_t *used; /* per phase: some tap reads it (the others are left unfilled) */
  uint32_t *xp;        /* [Cq][P][L]: this image, converted */
  const float *X;      /* this image, [C][H][W] */
  const uint16_t *Xh;  /* or the image in bf16 (conv_bf16_run_io; X unused then), NULL: X */
  const float *B, *res; /* bias (M) or NULL; residual of Y's shape (this image) or NULL */
  const uint16_t *resh; /* or the residual in bf16 (conv_bf16_run_io; res NULL then) */
  float lo, hi;
  float *Y;            /* this image, [M][OH*OW] */
  uint16_t *Yh;        /* or the image's output in bf16, rounded to nearest even after the
                        * epilogue (conv_bf16_run_io; Y unused then), NULL: Y */
  bool xcl, ycl, rcl;  /* Xh, Yh, resh channels-last ([H][W][C], conv_bf16_run_cl) */
  bool xdirect;        /* the channel-vector 1x1 reading a channels-last Xh as it lies: xp is
                        * Xh's words (never written), pair q of position y at y * C/2 + q */
  bool wcl;            /* Winograd over a channels-last Xh: xp is [16 points][item blocks][np
                        * tiles][Cq] (a tile's pairs together), filled by cb_fill_wino_cl */
  bool mcl;            /* the channel-vector form over a channels-last Xh it cannot read as it
                        * lies: xp is [P][L][Cq] (a position's pairs together), cb_fill_mv_cl */
  bool bands;          /* groups of position blocks capped at a thread's share (conv_bf16.c); the
                        * paired-columns fill then runs its rows outer too */
} cb_job;

/* Item `it` of nvb output-channel blocks x nfb position blocks: the
 * position blocks run in groups of gfb, and within a group every
 * output-channel block goes over the group's position blocks before the
 * next one starts.  A group's slice of the converted input (gfb blocks of
 * every channel pair: kernels/conv_bf16.c sizes it for L2) is so read from
 * memory once and reused from the cache by each output-channel block,
 * while the weights are read once per group. */
/* Position blocks in the group starting at block f0: gfb, the last group may be short */
static inline int64_t cb_group_blocks(const cb_job *j, int64_t f0) {
  return j->nfb - f0 < j->gfb ? j->nfb - f0 : j->gfb;
}
static inline void cb_item(const cb_job *j, int64_t it, int64_t nvb, int64_t *vb, int64_t *fb) {
  int64_t g = it / (nvb * j->gfb), r = it - g * nvb * j->gfb, f0 = g * j->gfb;
  int64_t gn = cb_group_blocks(j, f0);
  *vb = r / gn, *fb = f0 + r % gn;
}

/* A run of an item's flat positions that are outputs: acc columns c ..
 * c + len - 1 are Y positions y0 .. y0 + len - 1 (columns past OW and rows
 * past OH are dropped). */
typedef struct cb_seg {
  int64_t c, len, y0;
} cb_seg;
/* Item column block fb's runs into segs (at most CB_BLOCK); their count. */
int cb_segments(const cb_job *j, int64_t fb, cb_seg *segs);

/* Stores acc (CB_BLOCK x CB_BLOCK, row = output channel, column = flat
 * position) of item (mb, fb): bias, residual and clamp, valid rows and
 * positions only. */
void cb_store_scalar(const cb_job *j, const float *acc, int64_t mb, int64_t fb);
/* Fills channel pairs [q0, q1) of j->xp from j->X (scalar; pool_parallel_for body). */
void cb_fill_scalar(void *ctx, int64_t q0, int64_t q1);

/* Items [it0, it1) on the scalar block kernel (pool_parallel_for body). */
void cb_items_scalar(void *ctx, int64_t it0, int64_t it1);

/* AVX-512 (x86/conv_bf16_avx512.c; call only where bf16dp_hw): the fill,
 * the store of `rows` output channels from m0 (acc row r at r * ld), and
 * the vdpbf16ps kernel's items (CB_VR output channels each). */
#define CB_VR 12
void cb_fill_avx512(void *ctx, int64_t q0, int64_t q1);
/* The paired-columns form (conv_bf16_colpair): rows [i0, i1) of the Cq x P
 * phase planes (Hq rows each), word s of row i in phase ph holding input
 * channel q's padded columns 2 s, 2 s + 1 of row i sh + ph */
void cb_fill_colpair(void *ctx, int64_t i0, int64_t i1);
void cb_store_avx512(const cb_job *j, const float *acc, int64_t ld, int64_t m0, int64_t rows, int64_t fb);
void cb_items_vdp(void *ctx, int64_t it0, int64_t it1);
/* The channel-vector kernel (x86/conv_bf16_mv.c; call only where
 * bf16dp_hw): items of up to CB_MV_BLOCK output channels x np positions,
 * over the weights conv_bf16_pack lays out for it. */
#define CB_MV_BLOCK 48
/* Output-channel block b of the channel-vector and Winograd kernels over
 * Mp (M padded to 16) channels: CB_MV_BLOCK wide, the last one narrower,
 * but a last 16 (M = 64, 256, 1024, ...) is folded with the block before
 * into two of 32: a 16-channel block does one vdpbf16ps per broadcast and
 * runs at about half speed.  Blocks are laid out one after another, so
 * block b's weights start at m0 x (its per-channel words). */
static inline void cb_mv_block(int64_t Mp, int64_t b, int64_t *m0, int64_t *wd) {
  int64_t nb = (Mp + CB_MV_BLOCK - 1) / CB_MV_BLOCK, last = Mp - (nb - 1) * CB_MV_BLOCK;
  if (last == 16 && nb >= 2 && b >= nb - 2) {
    *m0 = (nb - 2) * CB_MV_BLOCK + (b - (nb - 2)) * 32, *wd = 32;
    return;
  }
  *m0 = b * CB_MV_BLOCK, *wd = Mp - *m0 < CB_MV_BLOCK ? Mp - *m0 : CB_MV_BLOCK;
}
void cb_items_mv(void *ctx, int64_t it0, int64_t it1);
/* Rows [i0, i1) of the P phase planes (P x Hq rows) of j->xp from a
 * channels-last Xh (j->mcl): each position's Cq pairs copied as they lie,
 * zeros in the padding */
void cb_fill_mv_cl(void *ctx, int64_t i0, int64_t i1);
/* Winograd F(2x2, 3x3) (x86/conv_bf16_wino.c; call only where bf16dp_hw):
 * the input transform of channel pairs [q0, q1) into j->xp ([16 points][nfb
 * blocks of np tiles][Cq][np] bf16 pairs), and items of up to CB_MV_BLOCK output channels x np tiles of
 * a tile row over the weights conv_bf16_pack lays out for it. */
void cb_fill_wino(void *ctx, int64_t q0, int64_t q1);
/* ... from a channels-last Xh (j->wcl): items are (tile row, 16 channel
 * pairs), each tile's V for those pairs computed as vectors of channels */
void cb_fill_wino_cl(void *ctx, int64_t i0, int64_t i1);
void cb_items_wino(void *ctx, int64_t it0, int64_t it1);
/* The fused form over a channels-last Xh (j->wcl, conv_bf16.c picks it
 * where the whole V would outweigh the weights: large planes, few
 * channels): an item is position block fb, whose V (16 points x np tiles
 * x Cq pairs, at most CB_WINO_FUSED_WORDS) it computes on its own stack
 * and every output-channel block then reads from L1 -- no pass writing
 * the whole V out and reading it back (at 56x56 over 64 channels, 1.6 MB:
 * from memory, as the buffer was last used a run before) */
#define CB_WINO_FUSED_WORDS (16 * 8 * 64)
void cb_items_wino_fused(void *ctx, int64_t fb0, int64_t fb1);

/* The AMX driver (x86/conv_bf16_amx.c; call only where bf16dp_amx_hw):
 * items of CB_BLOCK output channels. */
void cb_items_amx(void *ctx, int64_t it0, int64_t it1);

#endif
