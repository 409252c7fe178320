/* Shared by the conv drivers (kernels/conv_*.c): the prepared-weights
 * object and each algorithm's prepare/run pair. */
#ifndef SMELT_KERNELS_CONV_INTERNAL_H
#define SMELT_KERNELS_CONV_INTERNAL_H

#include "kernels/conv.h"
#include "kernels/conv_kernels.h"

struct conv2d_weights {
  conv_algo algo;
  const conv_kernels *k;
  conv2d_desc d;   /* the geometry it was prepared for */
  float *data;     /* packed or transformed weights (64-byte aligned) */
  bool owns_data;  /* false: a view of memory someone else keeps (a mapped cache entry) */
  int64_t n_data;  /* floats */
  int64_t cp, mp;  /* winograd: channels padded to the vector width, outputs to the panel width */
  float *blk;      /* depthwise: the weights as [C/vl blocks][taps][vl], 0-padded, for the
                    * blocked form (made from data at prepare/wrap, not saved); NULL: none */
  int pw;          /* pointwise: output channels per packed panel (conv_pointwise_panel for d) */
  int form;        /* bf16: the layout it was packed in (a cb_form: conv_bf16_form for d,
                    * decided where the size is) */
};

/* Makes w->blk for a depthwise w (nothing for other algorithms or vl 1). */
smelt_status conv_dw_blk_weights(conv2d_weights *w);

/* An allocated, unfilled weights object with room for n floats. */
smelt_status conv_weights_new(const conv2d_desc *d, conv_algo algo, isa_level isa, int64_t n,
                              conv2d_weights **out);

/* W [M, C/G, KH, KW] into w->data as [G][panel][K][width] (K = C/G*KH*KW in
 * W's order, output channels past a group's M/G zero), split over (group,
 * panel) pairs: the direct kernel's panels (width dmr) and chanvec's (vl). */
void conv_pack_panels(smelt_pool *pool, conv2d_weights *w, const float *W, int width);
smelt_status conv_direct_prepare(smelt_pool *pool, conv2d_weights *w, const float *W);
smelt_status conv_direct_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                             const float *B, const conv2d_epilogue *ep, float *Y);
/* The channel-vector tile (conv_kernels.h: pwc_tile, pwcx_tile) over one
 * packed panel (conv_cv.c): K in blocks of conv_cv_kc(k, K) (a panel's
 * block, kc x pmr floats, stays in L1 while CONV_CV_GROUP tiles pass over
 * it; their sums wait between blocks in a scratch of CONV_CV_GROUP *
 * CONV_CV_TILE floats).  conv_cv_panel runs tiles [t0, t1): `at` gives
 * tile t's input (x + xo; with xoff the k-th input row at + xoff[k],
 * otherwise at + k*ldx), its outputs (y + yo, res + yo; channel rows ldy
 * apart) and its np positions; w: the panel (K x pmr), next: the panel
 * after it (NULL: none), mc: its output channels.  conv_cv_max_plane: the
 * most output positions the tile is tried on at isa (0: none). */
#define CONV_CV_GROUP 8
#define CONV_CV_TILE 448 /* pcp * pmr floats at most: 14 x 32 */
typedef struct conv_cv_tile {
  int64_t xo, yo;
  int np;
} conv_cv_tile;
typedef conv_cv_tile (*conv_cv_at)(const void *ctx, int64_t t);
int64_t conv_cv_kc(const conv_kernels *k, int64_t K);
int64_t conv_cv_max_plane(isa_level isa);
void conv_cv_panel(const conv_kernels *k, int64_t K, int64_t kc, const float *w, const float *next, const float *x,
                   int64_t ldx, const int64_t *xoff, int64_t t0, int64_t t1, conv_cv_at at, const void *ctx,
                   const float *bias, const float *res, float lo, float hi, float *y, int64_t ldy, int mc);
smelt_status conv_dcv_prepare(smelt_pool *pool, conv2d_weights *w, const float *W);
smelt_status conv_dcv_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                          const float *B, const conv2d_epilogue *ep, float *Y);
smelt_status conv_cvec_prepare(smelt_pool *pool, conv2d_weights *w, const float *W);
smelt_status conv_cvec_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                           const float *B, const conv2d_epilogue *ep, float *Y);
smelt_status conv_wino_prepare(smelt_pool *pool, conv2d_weights *w, const float *W);
/* Sets the padded sizes (cp, mp) the transformed layout uses. */
void conv_wino_layout(conv2d_weights *w);
/* The bytes of U a thread keeps in its L2 beside its scratch (conv_wino_run). */
#define CONV_WINO_L2_U (1024.0 * 1024.0)
/* How conv_wino_run splits a convolution into items (the cost model
 * prices the same split): chunks of rc tile rows x pc output panels of
 * wnr channels, in panel-chunk-major order (pmajor: each thread a chunk
 * of the panels over every tile row) or tile-row-major. */
typedef struct conv_wino_plan {
  int64_t TH, np; /* tile rows, output panels */
  int64_t rc, pc;
  bool pmajor;
} conv_wino_plan;
/* F(2x2, 3x3)'s G (u = G g G^T), for the fp32 kernel and the bf16 one
 * (kernels/conv_bf16.c) alike. */
extern const double conv_wino_g2[4][3];
void conv_wino_plan_of(const conv2d_desc *d, const conv_kernels *k, int m, int threads, conv_wino_plan *p);
/* One item of the plan: image n, tile rows [r0, r1), output panels
 * [p0, p1). */
typedef struct conv_wino_piece {
  int64_t n, r0, r1, p0, p1;
} conv_wino_piece;
/* The items come kmax to a thread (conv_wino_kmax; kmax * threads items,
 * pool_parallel_for's home ranges).  Split by panels: the plan's chunks
 * in panel-chunk-major order.  Split by tile rows: each thread's even
 * share of the (image, tile row, panel) units, cut into pieces of at most
 * rc rows x pc panels, a row shared by two threads split by its panels
 * (7 tile rows, 2 panels, 2 threads: 3.5 rows each), padded with empty
 * items to kmax.  conv_wino_piece_of: item it into *out, or false for a
 * padding item. */
int64_t conv_wino_kmax(const conv_wino_plan *p, int64_t N, int threads);
bool conv_wino_piece_of(const conv_wino_plan *p, int64_t N, int threads, int64_t kmax, int64_t it,
                        conv_wino_piece *out);
/* The plan's balance over threads, 0-1: the even share of the work over
 * the busiest thread's home range of items (pool_parallel_for's split,
 * before any stealing) -- by panels, 3 panel chunks over 2 threads: 3/4. */
double conv_wino_balance(const conv_wino_plan *p, int64_t N, int threads);
smelt_status conv_wino_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                           const float *B, const conv2d_epilogue *ep, float *Y);
smelt_status conv_dw_run(smelt_pool *pool, const conv2d_weights *w, const float *X,
                         const float *B, const conv2d_epilogue *ep, float *Y);

/* The zero-padded input split into stride phases, as the direct,
 * depthwise and pooling kernels read it: for each channel and phase
 * (ph, pw), Hl rows of Wq values, row i col j holding padded input row
 * (r0 + i)*sh + ph, col j*sw + pw (pad outside the input).  buf layout:
 * [channel][ph][pw][Hl][Wq]. */
typedef struct conv_phases {
  int64_t H, W, sh, sw, pt, pl; /* input plane, strides, begin pads */
  int64_t Hl, Wq;               /* rows and columns per phase plane */
  const conv_kernels *k;        /* whose fill_phases fills it; NULL: the scalar table's */
} conv_phases;
void conv_fill_phases(const conv_phases *p, const float *x, int64_t channels, int64_t r0,
                      float pad, float *buf);
/* The same into a buf that already holds a fill for this geometry, r0 and
 * channel count with pad 0 (the previous plane's): only the values read from
 * x are rewritten, the padding is left as it is. */
void conv_refill_phases(const conv_phases *p, const float *x, int64_t channels, int64_t r0,
                        float *buf);
/* Every tap's flat offset into such a buffer (Hl rows, Wq columns per
 * phase plane) for `channels` channels of d's kernel, in W's order
 * (channel, kh, kw): malloc'ed, the caller frees; NULL when memory runs
 * out (err_nomem set). */
int64_t *conv_tap_offsets(const conv2d_desc *d, int64_t channels, int64_t Hl, int64_t Wq);

/* A number for one parallel run of a kernel, never 0 and never reused:
 * what a thread keeps (thread-locally) to know whether it has taken part
 * in that run yet (the Winograd driver's scratch slots, conv_warm). */
uint64_t conv_run_number(void);

/* An input the other threads wrote (the layer before's output, a copy
 * filled by all threads), which a kernel then reads through gathers --
 * a line at a time, each first touch of another core's line waited on
 * alone -- brought into the calling thread's L2 in one sequential pass, once
 * a run: conv_warm_run() numbers a run (0 on one thread: nothing to warm),
 * conv_warm(run, p, bytes) prefetches [p, p + bytes) unless this thread
 * already did for that run.  Measured in conv_direct_cv.c. */
uint64_t conv_warm_run(int threads);
void conv_warm(uint64_t run, const void *p, size_t bytes);

/* Call c of the `calls` a panel takes prefetches its share of the next
 * panel's `lines` 64-byte lines (from next; none when next is NULL): its
 * first line into *pf (NULL when the share is empty), the count returned,
 * which the tile spreads over its K steps (conv_kernels.h: pwc_tile's and
 * wgemm's pf, pfl).  All of a panel in one tile asked more of the memory
 * than two cores get (conv_cv.c). */
static inline int64_t conv_pf_share(const float *next, int64_t lines, int64_t calls, int64_t c, const float **pf) {
  int64_t l0 = next ? c * lines / calls : 0, l1 = next ? (c + 1) * lines / calls : 0;
  *pf = l1 > l0 ? next + l0 * 16 : NULL;
  return l1 - l0;
}

/* The padded blocked copy that the blocked depthwise convolution
 * (conv_depthwise.c) and max pooling (pool2d.c) read: vl planes as one
 * pixel-major plane (a pixel is vl floats: rows_to_blk), the input at
 * (pt, pl), the copy out to the last window's reach. */
typedef struct conv_blk {
  int64_t H, W, pt, pl; /* the input planes and their begin pads */
  int64_t Hp, Wp;       /* the copy, in pixels */
  int vl;
} conv_blk;
/* The copy for a KH x KW window at strides (sh, sw), dilations (dh, dw)
 * over OH x OW outputs, and each tap's offset in it (floats) into off. */
conv_blk conv_blk_make(int64_t H, int64_t W, int64_t pt, int64_t pl, int64_t OH, int64_t OW, int64_t KH,
                       int64_t KW, int64_t sh, int64_t sw, int64_t dh, int64_t dw, int vl, int64_t *off);
/* The padding around the input (conv_blk_fill never writes it) set to
 * value (depthwise 0, max -inf); once per buffer, not per block: a full
 * fill of the copy was a quarter of a stride-2 depthwise layer's time
 * (112x112 input, 56x56 out). */
void conv_blk_border(const conv_blk *b, float value, float *buf);
/* nch (<= vl) planes H*W floats apart from x into the copy; lanes past
 * nch 0. */
void conv_blk_fill(const conv_kernels *k, const conv_blk *b, const float *x, int nch, float *buf);
/* Whether one channel's phase planes for this geometry stay a sane size
 * (2^28 floats) and the kernel's taps fit an offset table; huge strides or
 * dilations go to the im2col / reference paths instead. */
bool conv_phases_sane(int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t sh, int64_t sw,
                      int64_t dh, int64_t dw);

/* How to cut a convolution into work items: R rows of work (position
 * tiles, tile rows) into chunks of *rc (at least enough chunks that one fits
 * the cache: min_r) and np weight panels into chunks of *pc, for `per`
 * independent (batch, group) pairs.  Every row chunk reads all the weights
 * of its panels (w_bytes per pair for all panels) and every panel chunk
 * redoes its rows' input work (in_bytes per pair for all rows).  Picks the
 * least estimated time: the busiest thread's share of work_s (the whole
 * job's compute seconds on one thread; items are handed out dynamically,
 * so at most an even share plus one item), plus the re-read traffic, plus
 * a fixed cost per item, those two at rates that grow with the threads
 * kept busy beyond two. */
void conv_split(int threads, int64_t per, int64_t R, int64_t min_r, int64_t np, double work_s,
                double w_bytes, double in_bytes, int64_t *rc, int64_t *pc);

/* How the direct driver cuts the positions for the cache: each chunk of at
 * most *fit_tiles position tiles (NR positions each) fills its own copy of
 * the plane rows it reads, *row_bytes per row of all the group's channels
 * and phases, plus *extra_rows rows (the taps' reach and a chunk's ragged
 * start).  The cost model charges that fill: a plane whose one row is
 * larger than the cache (a long 1-D signal, W in the thousands) is filled
 * again for every tile. */
void conv_direct_chunking(const conv2d_desc *d, int64_t NR, int64_t *fit_tiles, int64_t *row_bytes,
                          int64_t *extra_rows);

/* The number of work items (batch x group x position chunks x panel
 * chunks) the direct driver cuts d into on isa for `threads` threads (for
 * tests of the split). */
int64_t conv_direct_items(const conv2d_desc *d, isa_level isa, int threads);

/* The winograd output tile size m (2 or 4) of an algorithm. */
static inline int conv_wino_m(conv_algo a) { return a == CONV_ALGO_WINO4 ? 4 : 2; }

static inline int64_t conv_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Depthwise 3x3 from rows (dw3_plane): floats of one padded row copy, for
 * the vectors of an output row of OW at stride s (1 or 2): the last one
 * reads up to VL + 2 (stride 1) or 2 VL + 2 (stride 2) floats from its
 * first column, (vectors - 1) * vl * s. */
static inline int64_t conv_dw3_row_floats(int64_t OW, int64_t s, int vl) {
  return (conv_cdiv(OW, vl) - 1) * vl * s + (s == 1 ? vl + 2 : 2 * vl + 2);
}

#endif
