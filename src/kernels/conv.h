/* Fast f32 2-D convolution (1-D runs as H = 1), NCHW in and out.
 *
 * Algorithms, chosen per shape by the kernel registry (ops/conv_registry.h;
 * SMELT_CONV=auto|im2col|
 * direct|chanvec|winograd|winograd2|winograd4 forces one where it applies):
 *  - direct:   im2col-free implicit GEMM.  The input is copied once into a
 *              zero-padded, stride-phase-split buffer, in which every tap of
 *              every output position is one flat offset, so a GEMM micro-
 *              kernel reads its B operand straight from that buffer through a
 *              per-K offset table.  Any stride, dilation, padding and group.
 *  - winograd: F(2x2,3x3) and F(4x4,3x3) for 3x3, stride 1, dilation 1.
 *              Fewer multiplies, less accuracy: see conv_winograd.c for the
 *              measured error and the test tolerance.
 *  - chanvec:  the direct kernel turned round: output channels along the
 *              vector, positions broadcast, a tile a run of one output row
 *              (kernels/conv_cvec.c).  No position outside Y is computed,
 *              where the direct kernel's vectors of positions cover the
 *              taps' reach columns and round a row up to whole tiles (a
 *              7x7 plane: 72 positions for 49).  Chosen for grouped
 *              convolutions of whole vectors of output channels per group
 *              over small planes (the registry says which).
 *  - depthwise: group == C == M (multiplier 1), a vectorized direct loop
 *              (kernels/conv_depthwise.c).
 *  - pointwise: 1x1, stride 1, unpadded, one group, few input channels
 *              or a small plane and weight (conv_pointwise_suits): W x X
 *              on X in place, the epilogue fused (kernels/conv_pointwise.c);
 *              W packed once into panels (CONV_ALGO_POINTWISE prepared
 *              weights), or read raw when it is not a constant.  7x7
 *              planes (conv_pointwise_t_suits):
 *              Y^T = X^T W^T on the GEMM over W^T packed by the caller,
 *              then transposed back (conv_pointwise_t_run).
 *  - bf16:     session precision bf16 only (kernels/conv_bf16.h): both
 *              operands in bf16 on AMX tiles, fp32 sums; one group.
 *  - im2col:   not here: the op's im2col + gemm_f32 path (ops/conv.c) is
 *              the fallback for everything else, and for the other 1x1
 *              convolutions, which are plain GEMMs.
 * Weights are packed/transformed by conv2d_prepare once; the op caches the
 * result per session node (ops/op_cache.h). */
#ifndef SMELT_KERNELS_CONV_H
#define SMELT_KERNELS_CONV_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

typedef enum conv_algo {
  CONV_ALGO_AUTO = 0,
  CONV_ALGO_IM2COL,
  CONV_ALGO_DIRECT,
  CONV_ALGO_DEPTHWISE,
  CONV_ALGO_WINO2, /* F(2x2, 3x3) */
  CONV_ALGO_WINO4, /* F(4x4, 3x3) */
  CONV_ALGO_WINOGRAD, /* request only: F(4,3) or F(2,3), whichever the cost model prefers */
  CONV_ALGO_POINTWISE, /* 1x1 stride-1 unpadded, one group: conv_pointwise_run_packed over W packed
                        * once; requested (SMELT_CONV=pointwise) it takes every such conv */
  CONV_ALGO_BF16, /* request only, by a node marked bf16 (ops/conv.c): bf16 on AMX
                   * (kernels/conv_bf16.h); never from SMELT_CONV (it changes the numerics) */
  CONV_ALGO_CHANVEC, /* direct, output channels along the vector (kernels/conv_cvec.c) */
  CONV_ALGO_DIRECT_CV, /* direct, one group, two vectors of output channels x positions of a row
                        * (kernels/conv_direct_cv.c) */
  CONV_ALGO_COUNT
} conv_algo;

/* Geometry of one 2-D convolution.  Output sizes and begin pads are final
 * (auto_pad already resolved); end pads are implied by OH/OW. */
typedef struct conv2d_desc {
  int64_t N, C, H, W;   /* input */
  int64_t M, G;         /* output channels, groups */
  int64_t KH, KW, OH, OW;
  int64_t sh, sw, dh, dw; /* strides, dilations */
  int64_t pt, pl;         /* begin pads (top, left) */
  int64_t x_cl;           /* 1: X arrives channels-last in bf16 (passes/bf16_acts.c), which the bf16
                           * channel-vector 1x1 reads as it lies (kernels/conv_bf16.h:
                           * conv_bf16_form, conv2d_bf16_pays count no conversion); else 0 */
  int64_t y_cl;           /* 1: Y leaves channels-last in bf16, which the bf16 channel-vector and
                           * Winograd forms store as they compute it (conv_bf16_form takes the
                           * channel-vector form over the position-vector one); else 0 */
} conv2d_desc;

const char *conv_algo_name(conv_algo a);
/* One line for --explain: element type, algorithm and file ("f32 Winograd
 * F(4x4,3x3) (kernels/conv_winograd.c)"); bf16 says AMX or the forced
 * scalar kernel, as it would run at isa. */
const char *conv_algo_desc(conv_algo a, isa_level isa);
/* Parses SMELT_CONV values; false if unknown. */
bool conv_algo_parse(const char *s, conv_algo *out);

/* Whether algo can run desc (WINOGRAD means either Winograd variant). */
bool conv2d_supports(const conv2d_desc *d, conv_algo algo);
/* The cost model (kernels/conv_select.c): seconds, roughly, for algo
 * (IM2COL, DIRECT, WINO2, WINO4, DIRECT_CV, BF16; 0 for the others) to run
 * desc on isa with `threads` threads; it only ranks the algorithms.  The
 * choice is the kernel registry's (ops/conv_registry.h), which filters by
 * element type, weight form, ISA and shape class and takes the cheapest. */
double conv2d_cost(const conv2d_desc *d, isa_level isa, int threads, conv_algo algo);
/* The level the conv kernels run at for isa (the cost model's). */
isa_level conv2d_kernel_isa(isa_level isa);
/* Whether the cost model prefers chanvec over the direct kernel (a grouped
 * conv of whole vectors of output channels per group over short rows, AVX2). */
bool conv2d_chanvec_suits(const conv2d_desc *d, isa_level isa);
/* Whether a convolution marked bf16 runs in bf16 on the vdpbf16ps kernel
 * (kernels/conv_bf16.h: conv_bf16_by_cost) rather than on f, the fp32
 * algorithm the registry picks for it: twice the rate of the FMA
 * (isa_bf16_dot_fast), not the gathered stem, a gain of 1.3x after the
 * padding of C to 32 and M to CB_VR, and f not a Winograd priced cheaper. */
bool conv2d_bf16_pays(const conv2d_desc *d, isa_level isa, int threads, conv_algo f);
/* SMELT_CONV's value (AUTO when unset or not understood). */
conv_algo conv_algo_from_env(void);

/* Weights prepared for one algorithm and ISA (opaque). */
typedef struct conv2d_weights conv2d_weights;

/* Packs/transforms W ([M, C/G, KH, KW]) for algo (not IM2COL) on isa,
 * split over pool's threads (NULL: the calling thread).
 * On success *out is owned by the caller: free with conv2d_weights_free. */
smelt_status conv2d_prepare(smelt_pool *pool, const conv2d_desc *d, conv_algo algo, isa_level isa,
                            const float *W, conv2d_weights **out);
void conv2d_weights_free(conv2d_weights *w);
/* Floats conv2d_prepare makes for (d, algo, isa). */
smelt_status conv2d_prepared_floats(const conv2d_desc *d, conv_algo algo, isa_level isa, int64_t *n);
/* What sets the layout of algo's prepared weights for d on isa beside the
 * weight's shape (panel widths, which may follow the plane; a revision of
 * the layout): a saved copy is keyed by it, so
 * one made by a build that laid the weights out otherwise is never read. */
int64_t conv2d_prepared_layout(const conv2d_desc *d, conv_algo algo, isa_level isa);
/* Weights over data prepared earlier (n floats, as conv2d_prepare made them
 * for the same d, algo and isa: a saved copy).  data is not copied and must
 * outlive *out, which the caller frees with conv2d_weights_free. */
smelt_status conv2d_weights_wrap(const conv2d_desc *d, conv_algo algo, isa_level isa, const float *data,
                                 int64_t n, conv2d_weights **out);
/* The prepared floats (n of them), e.g. to save them. */
const float *conv2d_weights_data(const conv2d_weights *w, int64_t *n);
/* The value for op_cache_add's free_fn. */
void conv2d_weights_free_v(void *w);

/* Y = conv(X, W) + B with prepared weights (B may be NULL).  X: [N, C, H, W],
 * Y: [N, M, OH, OW], both dense.  Scratch is allocated per call. */
smelt_status conv2d_run(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w,
                        const float *X, const float *B, float *Y);

/* What conv2d_run_ep does to every output after the bias:
 *   Y = min(hi, max(lo, Y + residual))
 * (NaN passes through the clamp, as ONNX Clip; lo = -INFINITY, hi =
 * INFINITY: no clamp, so Relu is lo = 0 and Relu6 lo = 0, hi = 6). */
typedef struct conv2d_epilogue {
  const float *residual; /* Y's shape, not Y itself; NULL: none */
  float lo, hi;
} conv2d_epilogue;

/* conv2d_run with an epilogue (NULL: none).  Depthwise and direct apply it
 * while each output is still in registers; Winograd to each output row as
 * it is stored (still in cache). */
smelt_status conv2d_run_ep(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w,
                           const float *X, const float *B, const conv2d_epilogue *ep, float *Y);
/* conv2d_run_ep on bf16 prepared weights (CONV_ALGO_BF16) with the input in
 * bf16 (Xh, X NULL), the residual in bf16 (Rh, NULL: ep's) and / or the
 * output written in bf16 (Yh, Y NULL), where conv2d_bf16_io(w); the bf16
 * ones named in cl channels-last (kernels/conv_bf16.h: CB_CL_*, 0: none):
 * kernels/conv_bf16.h, conv_bf16_run_cl. */
smelt_status conv2d_run_bf16io(smelt_pool *pool, const conv2d_desc *d, const conv2d_weights *w, const float *X,
                               const uint16_t *Xh, const float *B, const conv2d_epilogue *ep, const uint16_t *Rh,
                               float *Y, uint16_t *Yh, unsigned cl);
/* Whether w's kernel takes a bf16 input and output (bf16 weights on the
 * vdpbf16ps kernels) */
bool conv2d_bf16_io(const conv2d_weights *w);

/* Pointwise route (kernels/conv_pointwise.c): a 1x1, stride-1, unpadded,
 * one-group conv as Y[n] = W[M, C] x X[n][C, S] (+ B, then ep), reading X
 * and the raw (unpacked) W in place.  S: pixels per plane.  It needs no
 * prepared weights (conv_pointwise_run_packed below is the same over W
 * packed once).  conv_pointwise_suits: whether it beats the im2col
 * GEMM for the shape: C <= CONV_POINTWISE_MAX_C, or a projection (M <=
 * C/4) with C <= CONV_POINTWISE_MAX_CP, or a small plane (64 < S <=
 * CONV_POINTWISE_SMALL_S) with a weight of at most CONV_POINTWISE_SMALL_W
 * floats (a quarter of that up to 4 * CONV_POINTWISE_SMALL_S pixels). */
#define CONV_POINTWISE_MAX_C 64
#define CONV_POINTWISE_MAX_CP 192
#define CONV_POINTWISE_SMALL_S 256
#define CONV_POINTWISE_SMALL_W 65536
bool conv_pointwise_suits(int64_t C, int64_t M, int64_t S);
/* conv_pointwise_suits, and on AVX-512 every plane of at least
 * CONV_POINTWISE_AVX512_S pixels (kernels/conv_pointwise.c says why). */
#define CONV_POINTWISE_AVX512_S 49
/* Planes of at most this many positions (AVX-512; AVX2: _AVX2) over at
 * least CONV_POINTWISE_CV_C input channels take the channel-vector tile
 * (conv_pointwise_panel). */
#define CONV_POINTWISE_CV_S 196
#define CONV_POINTWISE_CV_S_AVX2 64
#define CONV_POINTWISE_CV_C 64
bool conv_pointwise_route(isa_level isa, int64_t C, int64_t M, int64_t S);
smelt_status conv_pointwise_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M,
                                int64_t S, const float *X, const float *W, const float *B,
                                const conv2d_epilogue *ep, float *Y);
/* The pointwise route over W packed once (CONV_ALGO_POINTWISE prepared
 * weights: conv2d_prepare, or conv_pointwise_pack into
 * conv_pointwise_packed_floats(pw, C, M) floats): panels of pw output
 * channels, K x pw each (w[k*pw + i] = W[m0 + i][k], rows past M zero), one
 * sequential stream, where the unpacked route reads rows of W a row length
 * apart.  The panel width picks the tile: conv_pointwise_panel(isa, C, M, S)
 * is two vectors of channels for the shapes the channel-vector tile suits
 * (conv_kernels.h: pwc_tile; small planes, whose positions the row-group
 * tile's vectors cover badly, over enough input channels to pay for its
 * transposes), else the row-group tile's rows (pwp_tile).  conv_pointwise_run_packed takes either width on any plane
 * (SMELT_INVALID_ARGUMENT for another). */
int conv_pointwise_panel(isa_level isa, int64_t C, int64_t M, int64_t S);
int64_t conv_pointwise_packed_floats(int pw, int64_t C, int64_t M);
void conv_pointwise_pack(int pw, int64_t C, int64_t M, const float *W, float *out);
smelt_status conv_pointwise_run_packed(smelt_pool *pool, isa_level isa, int pw, int64_t N, int64_t C, int64_t M,
                                       int64_t S, const float *X, const float *Wp, const float *B,
                                       const conv2d_epilogue *ep, float *Y);

/* Pointwise route over the transposed GEMM (kernels/conv_pointwise.c):
 * per image Y^T[S, M] = X^T W^T with W^T packed ahead as the GEMM's B
 * (wt: gemm_pack_b_prepare(isa, trans_b = true, K = C, N = M, W, ldb = C),
 * e.g. from ops/gemm_weights.h), the bias (and the clamp, when there is no
 * residual) in the GEMM's epilogue, then Y^T transposed into Y with the
 * residual and clamp.  Pixels become the GEMM's rows, tiled by the
 * micro-kernel's MR, and output channels its columns: a 7x7 plane wastes
 * 5 of 54 rows at AVX2 instead of 15 of 64 columns.
 * conv_pointwise_t_suits: whether that tiling wastes at least 10% less of
 * the micro-kernel than the normal one (on isa; false where it has no
 * packed GEMM).  The GEMM's scratch for Y^T: S x M floats, per call. */
bool conv_pointwise_t_suits(isa_level isa, int64_t C, int64_t M, int64_t S);
struct gemm_packed;
smelt_status conv_pointwise_t_run(smelt_pool *pool, isa_level isa, int64_t N, int64_t C, int64_t M,
                                  int64_t S, const float *X, const float *W, const struct gemm_packed *wt,
                                  const float *B, const conv2d_epilogue *ep, float *Y);

#endif
