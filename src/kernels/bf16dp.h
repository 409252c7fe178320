/* bf16 compute GEMM (session precision bf16, AVX512_BF16's vdpbf16ps):
 * both operands rounded to bf16, products and sums in fp32, AMP-like.
 *
 *   C = alpha * bf16(A) bf16(B) + bias (+ C when accumulating)
 *
 * bf16(x) rounds to nearest even (f32_to_bf16; NaN stays NaN).  A product of
 * two bf16 (8 significant bits each) is exact in fp32, so the only errors are
 * the two roundings, |bf16(x) - x| <= 2^-8 |x| each, and the fp32 sums:
 *   |C - ref| <= alpha * (2^-8 + 2^-8 + 2^-16) sum_k |a b| (+ fp32 sums)
 *             ~= alpha * 2^-7 sum_k |a b|.
 * The weight-only path (wbf16.h) has half of it (only B is rounded).
 *
 * Layout (made once per session, like the other prepared weights): K in
 * pairs, Kp = ceil(K/2); N padded to a multiple of BF16DP_NR = 32; Np/32
 * panels one after another, each Kp rows of 32 pairs: pair j of row p is
 * the uint32 b[2p][j] | b[2p+1][j] << 16 (K odd: the last pair's high half
 * is 0), which is what vdpbf16ps multiplies lane-wise: two zmm per row.
 *
 * A is converted per call, a block of rows at a time, into tiles of
 * BF16DP_MR rows: Kp x MR pairs, pair r of row p a[r][2p] | a[r][2p+1] << 16
 * (rows past M and the last pair's high half when K is odd: 0).
 *
 * A tile kernel computes one MR x 32 tile over all of K, pair by pair,
 *   acc += a_hi * b_hi;  acc += a_lo * b_lo   (each rounded to fp32)
 * in the order of the SDM's VDPBF16PS pseudocode, so the scalar kernel and
 * the AVX-512 one give the same sums (the instruction also flushes denormal
 * inputs and results to zero, which the scalar one does not), then the
 * epilogue c = (alpha * acc + bias) (+ c), only the first cols columns.
 *
 * Selection (bf16dp_wanted): on a CPU with AVX512_BF16 and the active ISA
 * at avx512; SMELT_BF16DP=0 turns it off, SMELT_BF16DP=1 turns it on
 * everywhere (with the scalar tile kernel where the CPU lacks
 * AVX512_BF16: slow, for tests). */
#ifndef SMELT_KERNELS_BF16DP_H
#define SMELT_KERNELS_BF16DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"
#include "smelt.h"

#define BF16DP_NR 32
#define BF16DP_MR 12

typedef struct bf16dp_weights {
  int64_t K, N, Kp, Np;
  const uint32_t *w; /* Np/32 panels of Kp x 32 pairs */
} bf16dp_weights;

/* Bytes for op(B) K x N; 0 when K or N is out of range. */
size_t bf16dp_weights_bytes(int64_t K, int64_t N);
/* Rounds and packs op(B) (trans_b: B is N x K, else K x N, dense) into blob
 * (bf16dp_weights_bytes(K, N) bytes), on pool. */
void bf16dp_pack_b(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
void bf16dp_weights_view(int64_t K, int64_t N, const void *blob, bf16dp_weights *out);

/* Rows [0, rows) (rows <= MR) of A (row stride lda, K columns) as one tile
 * of Kp x MR pairs; rows past `rows` are 0. */
void bf16dp_pack_a_tile(int rows, int64_t K, const float *A, int64_t lda, uint32_t *tile);

/* The tile epilogue's terms. */
typedef struct bf16dp_epi {
  float alpha;
  const float *bias; /* the tile's first column's bias, or NULL */
  bool accumulate;   /* add to what C holds */
} bf16dp_epi;

/* C rows [0, rows), columns [0, cols) (rows <= MR, cols <= 32), row stride
 * ldc = the epilogue of sum over kp pairs of tile a x panel b. */
typedef void (*bf16dp_tile_fn)(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                               const bf16dp_epi *e, float *C, int64_t ldc);
void bf16dp_tile_scalar(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b, const bf16dp_epi *e,
                        float *C, int64_t ldc);
/* AVX-512F + AVX512_BF16 (x86/bf16dp_avx512.c); call only where
 * bf16dp_hw says so. */
void bf16dp_tile_avx512(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b, const bf16dp_epi *e,
                        float *C, int64_t ldc);
/* bf16dp_tile_avx512 that also asks for kp cache lines from pf on into L2
 * (a line a pair row: the next panel while this one runs). */
void bf16dp_tile_avx512_pf(int rows, int cols, int64_t kp, const uint32_t *a, const uint32_t *b,
                           const bf16dp_epi *e, float *C, int64_t ldc, const void *pf);
/* bf16dp_pack_a_tile on AVX-512 BF16 (where bf16dp_hw), for that kernel
 * (a denormal float becomes 0, which its vdpbf16ps makes of it anyway). */
void bf16dp_pack_a_tile_avx512(int rows, int64_t K, const float *A, int64_t lda, uint32_t *tile);

/* The CPU has AVX512_BF16 and isa (the active level) allows AVX-512. */
bool bf16dp_hw(isa_level isa);
/* The bf16 compute path is to be used at this level: bf16dp_hw, unless
 * SMELT_BF16DP says otherwise ("0": never; "1": everywhere). */
bool bf16dp_wanted(isa_level isa);
/* The tile kernel for isa: AVX-512 where bf16dp_hw, else scalar. */
bf16dp_tile_fn bf16dp_tile_for(isa_level isa);

typedef struct bf16dp_args {
  int64_t M;
  const float *A; /* M x K, row stride lda */
  int64_t lda;
  const bf16dp_weights *w;
  float alpha;
  const float *bias; /* N values added to every row, or NULL */
  bool accumulate;   /* add to what C holds */
  float *C;          /* M x N, row stride ldc */
  int64_t ldc;
  bf16dp_tile_fn tile; /* NULL: bf16dp_tile_for(isa) */
} bf16dp_args;

/* Intel AMX (x86/bf16dp_amx.c): the CPU has AMX-BF16, AMX-TILE and
 * AVX512_BF16, the OS enabled the tile state and granted it to this process
 * (asked once), isa allows AVX-512 and SMELT_AMX is not "0". */
bool bf16dp_amx_hw(isa_level isa);
/* ... and w's Kp is a multiple of 16 (the AMX driver's K step): bf16dp_run
 * then takes the AMX driver unless a tile kernel is named in its args. */
bool bf16dp_amx_suits(isa_level isa, const bf16dp_weights *w);
/* The product through AMX tiles (call only where bf16dp_amx_suits). */
smelt_status bf16dp_amx_run(smelt_pool *pool, const bf16dp_args *a) __attribute__((warn_unused_result));

/* Runs the product on pool: A converted a block of rows at a time into
 * scratch (tensor_data_alloc), tiles spread over the threads.  SMELT_OK, or
 * SMELT_ERR_NOMEM when the scratch is refused (nothing written to C). */
smelt_status bf16dp_run(smelt_pool *pool, isa_level isa, const bf16dp_args *a) __attribute__((warn_unused_result));

#endif
