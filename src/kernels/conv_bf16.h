/* bf16 convolution (session precision bf16) on Intel AMX tiles, or with
 * AVX512_BF16's vdpbf16ps where there is no AMX: a direct implicit GEMM with
 * no im2col, NCHW in and out, fp32 sums.
 *
 *   Y[m][p] = sum_{tap, c} bf16(W[m][c][tap]) bf16(X[c][p + tap]) + B[m]
 *             (then + residual, then clamped: conv2d_epilogue)
 *
 * Both operands are rounded to bf16 (round to nearest even); products and
 * sums are fp32, so |Y - ref| <= (2^-8 + 2^-8 + 2^-16) sum |w x| plus the
 * fp32 sums, ~2^-7 of the sum of the products' magnitudes, as the bf16
 * compute GEMM (kernels/bf16dp.h).  Grouped convolutions stay fp32, and so
 * do 1x1 ones with fewer than CONV_BF16_MIN_C input channels.
 *
 * A convolution with fewer than CONV_BF16_MIN_C channels but more taps (a
 * network's first: 3 channels, 7x7 or 3x3) runs in a gathered form: its
 * (channel, tap) pairs are the channels of a 1x1 convolution over the
 * output plane, filled from the shifted input rows (C*KH*KW padded to 32,
 * not C padded to 32 per tap).
 *
 * Layout.  The input is converted once per image into a zero-padded,
 * stride-phase-split copy (as the direct fp32 kernel's, kernels/
 * conv_internal.h), in bf16 with the channels in pairs: for channel pair q
 * and phase (ph, pw), a plane of L uint32 words, word i*Wq + j holding
 * x[2q] | x[2q+1] << 16 of padded input row i*sh + ph, column j*sw + pw.
 * An output position (oh, ow) is the flat index f = oh*Wq + ow (columns ow
 * >= OW are computed and dropped), and tap (kh, kw) reads it at f +
 * (kh*dh/sh)*Wq + kw*dw/sw in the phase ((kh*dh) % sh, (kw*dw) % sw).  So a
 * run of 16 flat positions of 16 channel pairs is one AMX tile load (rows a
 * channel pair apart), for every tap: the tile B of TDPBF16PS straight from
 * the copy.  Weights, made once per session, are [tap][Mp][Cp/2] pairs
 * (M padded to 32 rows, C to 32 channels, zeros): a tile A is 16 output
 * channels x 16 channel pairs of one tap.  An item is 32 output channels x
 * 32 flat positions (four accumulator tiles) over all taps and channels;
 * items run output-channel-block-major so consecutive items share their
 * weights; the epilogue (bias, residual, clamp) stores each row's valid
 * positions from the tiles.
 *
 * Where the CPU has AVX512_BF16 but no AMX (bf16dp_hw without
 * bf16dp_amx_hw: AMD Zen 4/5, Cooper Lake) a vdpbf16ps kernel runs the same
 * layout: items of CB_VR = 12 output channels x 32 positions in 24 zmm, per
 * channel pair and tap two loads of the converted input, a broadcast weight
 * pair per channel; or, where that kernel's 32 flat positions per item
 * pad much of a small plane, the channel-vector kernel of
 * x86/conv_bf16_mv.c over its own weight layout, C in pairs only; or for a
 * 3x3 stride-1 layer a bf16 Winograd F(2x2) (x86/conv_bf16_wino.c): the
 * kernel is conv_bf16_form's pick.
 * Elsewhere a scalar block kernel, only when forced
 * (SMELT_CONV_BF16=1, for tests): the op keeps fp32 convolution there. */
#ifndef SMELT_KERNELS_CONV_BF16_H
#define SMELT_KERNELS_CONV_BF16_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/conv.h"

#define CONV_BF16_MIN_C 16

/* Enough channels for the kernel: C >= CONV_BF16_MIN_C, or more than one
 * tap and C * taps >= CONV_BF16_MIN_C (the gathered form). */
bool conv_bf16_channels(int64_t C, int64_t taps);
/* One group, conv_bf16_channels, and phase planes of a sane size
 * (conv_phases_sane). */
bool conv_bf16_shape(const conv2d_desc *d);
/* Whether bf16 convolutions run at this level: on AMX (bf16dp_amx_hw) or
 * AVX512_BF16 (bf16dp_hw), or everywhere with SMELT_CONV_BF16=1 (scalar
 * where neither is); never with SMELT_CONV_BF16=0. */
bool conv_bf16_wanted(isa_level isa);
/* Whether a convolution marked bf16 runs in bf16 only where the cost model
 * (kernels/conv_select.c) prices it below the fp32 algorithm: on the
 * vdpbf16ps kernel (no AMX, SMELT_CONV_BF16 not 1).  There bf16 does at
 * most twice the fp32 FMA's multiply-adds (isa_bf16_dot_fast) and pays for
 * converting the input, so fp32 Winograd (2.25-4x fewer products), the
 * direct fp32 stem and layers whose channels padded to 32 (and output
 * channels to CB_VR) leave under 1.3x of that rate beat it: 2-core Zen 4,
 * 1 thread, resnet50's 3x3/1 layers 0.55-0.82x in bf16, the 3-channel
 * 7x7/2 stem 0.65x, the other layers 1.3-2.3x; squeezenet (16-channel
 * expand layers) 0.92x its fp32 before the padding rule, 1.1x after.  On AMX (3.8x over those layers) and when forced, every marked
 * convolution runs in bf16. */
bool conv_bf16_by_cost(isa_level isa);
/* The gathered form (C < CONV_BF16_MIN_C, kernels/conv_bf16.c; see also
 * conv_bf16_colpair). */
bool conv_bf16_gathered(const conv2d_desc *d);
/* The kernel, and so the prepared weights' layout, d runs on at isa
 * (conv2d_prepared_layout keys it).  On vdpbf16ps (bf16dp_hw, no AMX):
 *   - CB_FORM_WINO, Winograd F(2x2, 3x3) (x86/conv_bf16_wino.c), for 3x3
 *     stride-1 undilated layers: V and U rounded to bf16, so 16 products a
 *     2x2 tile for 36 (kernels/conv_bf16.c has its error);
 *   - CB_FORM_MV, the channel-vector kernel (x86/conv_bf16_mv.c), where it
 *     computes fewer padded positions and channels than
 *   - CB_FORM_PV, the position-vector kernel (x86/conv_bf16_avx512.c), the
 *     only form on AMX and the scalar kernel.
 * Each where it costs least per output (conv_bf16.c's per_output_*).
 * SMELT_CONV_BF16_WINO=0 / 1 and SMELT_CONV_BF16_MV=0 / 1 force them (for
 * tests and benches; MV=0 or 1 also turns Winograd off). */
typedef enum { CB_FORM_PV = 0, CB_FORM_MV = 1, CB_FORM_WINO = 2 } cb_form;
cb_form conv_bf16_form(const conv2d_desc *d, isa_level isa);
/* The paired-columns form of a gathered-form layer on the channel-vector kernel
 * (form CB_FORM_MV), for a horizontal stride of 2, undilated (a network's
 * 7x7/2 or 3x3/2 stem): a word holds one channel's two adjacent input
 * columns, which taps kw = 2k and 2k + 1 read at every output position
 * (column 2 ow + kw of the padded row), so the layer is a stride-(sh, 1)
 * convolution over 2C virtual channels of word columns with ceil(KW/2)
 * taps a row, the weight of tap KW (odd KW) zero.  Its converted copy is
 * the input itself in bf16, split into sh row phases (no gather of
 * C*KH*KW shifted rows a position), at the price of that zero tap (7x7:
 * 84 pairs a position against 74).  SMELT_CONV_BF16_COLPAIR=0 turns it
 * off (benches, tests). */
bool conv_bf16_colpair(const conv2d_desc *d, cb_form form);
/* Whether a bf16 layer whose weights are `rows` channel rows (M x taps)
 * over `positions` output positions runs its items by bands of positions
 * on 2+ threads (kernels/conv_bf16.c: each thread then reads every
 * weight, which pays where they are no larger than the input), and so
 * whether a channels-last depthwise reading such a layer's output of
 * `rows` channels runs its items rows outer (x86/conv_dw_cl.c): the two
 * split alike.  SMELT_CONV_BF16_BANDS=0: never. */
bool conv_bf16_bands(int64_t rows, int64_t positions);
/* Winograd's U = G g G^T at point xi (0..15, row-major 4x4) of one 3x3
 * kernel g (row-major), in double, rounded to bf16 once. */
uint16_t conv_bf16_wino_u(const float *g, int xi);
/* The channel-vector kernel's positions per item for S output positions:
 * the np in [4, 8] with the fewest padded positions, the largest on ties. */
int64_t conv_bf16_mv_np(int64_t S);
/* 32-bit words of the prepared weights for d in form's layout. */
int64_t conv_bf16_words(const conv2d_desc *d, cb_form form);
/* W [M, C, KH, KW] into form's layout (conv_bf16_words words), on pool. */
void conv_bf16_pack(smelt_pool *pool, const conv2d_desc *d, cb_form form, const float *W, uint32_t *out);
/* Y = conv(X, W) + B, then ep (NULL: none), with wts from conv_bf16_pack
 * in form's layout (the channel-vector and Winograd forms run only where
 * conv_bf16_form(d, isa) may pick them); AMX where bf16dp_amx_hw(isa), else
 * vdpbf16ps where bf16dp_hw(isa), else the scalar block kernel.  Scratch: the
 * converted copy of one image, per call.  SMELT_ERR_NOMEM when it is refused. */
smelt_status conv_bf16_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form, const uint32_t *wts,
                           const float *X, const float *B, const conv2d_epilogue *ep, float *Y)
    __attribute__((warn_unused_result));
/* Whether the kernels at isa read a bf16 input and write a bf16 output
 * (conv_bf16_run_io): the vdpbf16ps forms (bf16dp_hw without AMX). */
bool conv_bf16_io_native(isa_level isa);
/* conv_bf16_run with the input in bf16 (Xh, X NULL), the residual in bf16
 * (Rh, ep->residual NULL; NULL: ep's), and / or the output written in bf16
 * (Yh, Y NULL; each value rounded to nearest even after bias, residual and
 * clamp, which are fp32), where conv_bf16_io_native.  Yh may be Rh (each
 * residual value is read just before its output is written over it).
 * A bf16 input gives the same result as its values widened to fp32: the
 * kernels round their input to bf16 anyway.  Passes (passes/bf16_acts.c)
 * keep an activation in bf16 between convolutions that run here, so the
 * producer writes half the bytes and the consumer reads half. */
smelt_status conv_bf16_run_io(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form,
                              const uint32_t *wts, const float *X, const uint16_t *Xh, const float *B,
                              const conv2d_epilogue *ep, const uint16_t *Rh, float *Y, uint16_t *Yh)
    __attribute__((warn_unused_result));

/* Channels-last bf16 operands (conv_bf16_run_cl's cl, any of them): the
 * tensor is [N][H][W][C] bf16 instead of [N][C][H][W], C even.  Only bf16
 * operands lie so (passes/bf16_acts.c keeps an activation channels-last
 * between convolutions whose kernels read and write it so).  The fills
 * read a channels-last input by gathers of channel pairs; the
 * channel-vector 1x1 (stride 1, unpadded) reads it as it lies, with no
 * converted copy at all; the channel-vector and Winograd stores write a
 * position's 16 channels as one vector instead of transposing them. */
#define CB_CL_X 1u /* Xh */
#define CB_CL_Y 2u /* Yh */
#define CB_CL_R 4u /* Rh */
/* Whether form reads a channels-last input of d as it lies, with no
 * converted copy (the channel-vector 1x1, unpadded, any stride, C even) */
bool conv_bf16_cl_direct(const conv2d_desc *d, cb_form form);
/* conv_bf16_run_io with the bf16 operands named in cl channels-last
 * (CB_CL_*; 0: conv_bf16_run_io).  Each one named must be given in bf16
 * and have an even channel count. */
smelt_status conv_bf16_run_cl(smelt_pool *pool, isa_level isa, const conv2d_desc *d, cb_form form,
                              const uint32_t *wts, const float *X, const uint16_t *Xh, const float *B,
                              const conv2d_epilogue *ep, const uint16_t *Rh, float *Y, uint16_t *Yh, unsigned cl)
    __attribute__((warn_unused_result));

/* The depthwise convolution (G == C == M) into channels-last bf16
 * activations (x86/conv_dw_cl.c; where conv_bf16_io_native): Y
 * [N][H][W][C] bf16; X the same (Xh, x_planes false), or as the model lays
 * it, [N][C][H][W], in fp32 (Xp) or bf16 (Xh, x_planes true: rounded to
 * bf16 as each item stages its rows channels-last); W rounded to bf16
 * (conv_dw_cl_pack), B fp32; the
 * products exact, fp32 sums (vdpbf16ps), then bias and the clamp, then Y
 * rounded to nearest even.  Positions along a row, 32 channels per vector
 * of pairs.  conv_dw_cl_shape: the shapes it takes (any kernel of at most
 * 25 taps, stride, dilation and pads; C even). */
bool conv_dw_cl_shape(const conv2d_desc *d);
/* W laid out for it: conv_dw_cl_packed_words 32-bit words at Wt, on a
 * 64-byte line (per 32 channels and tap, the bf16 pairs (w, 0) of the
 * even channels and (0, w) of the odd ones) */
int64_t conv_dw_cl_packed_words(const conv2d_desc *d);
void conv_dw_cl_pack(const conv2d_desc *d, const float *W, uint32_t *Wt);
smelt_status conv_dw_cl_run(smelt_pool *pool, isa_level isa, const conv2d_desc *d, const uint32_t *Wt,
                            const float *B, const conv2d_epilogue *ep, const float *Xp, const uint16_t *Xh,
                            bool x_planes, uint16_t *Yh) __attribute__((warn_unused_result));

#endif
