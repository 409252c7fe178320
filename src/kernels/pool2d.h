/* Fast f32 2-D pooling (1-D runs as H = 1), NCHW: MaxPool (without the
 * Indices output), AveragePool, GlobalAveragePool.  Same semantics as the
 * reference in ops/pool.c: max ignores NaN (keeps the first maximum) and a
 * window entirely in the padding gives -inf (max) or NaN (average); average
 * counts the taps inside the input, or with count_include_pad those inside
 * the padded extent (not the ceil_mode overhang). */
#ifndef SMELT_KERNELS_POOL2D_H
#define SMELT_KERNELS_POOL2D_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"

typedef struct pool2d_desc {
  int64_t N, C, H, W;
  int64_t KH, KW, OH, OW;
  int64_t sh, sw, dh, dw;
  int64_t pt, pl, pb, pr; /* begin and end pads */
  bool is_max;
  bool count_pad;         /* AveragePool count_include_pad */
} pool2d_desc;

/* Whether pool2d_f32 takes this geometry (huge strides or dilations do not). */
bool pool2d_supports(const pool2d_desc *d);
smelt_status pool2d_f32(smelt_pool *pool, const pool2d_desc *d, isa_level isa, const float *X,
                        float *Y);

/* MaxPool over channels-last bf16 ([N][H][W][C] in, [N][OH][OW][C] out;
 * kernels/pool_cl.c): exact (the max of bf16 values), NaN ignored as above;
 * AVX-512 where isa has it, else scalar.  d->is_max must be set. */
smelt_status pool2d_max_cl_bf16(smelt_pool *pool, const pool2d_desc *d, isa_level isa, const uint16_t *X,
                                uint16_t *Y) __attribute__((warn_unused_result));

/* Y[p] = mean of the S values of plane p, for `planes` planes (sum in double). */
void global_avg_f32(smelt_pool *pool, isa_level isa, int64_t planes, int64_t S, const float *X,
                    float *Y);

#endif
