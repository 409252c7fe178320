/* Exact 8-bit integer matrix product (ONNX MatMulInteger's arithmetic):
 *
 *   C[m][n] = sum_k (A[m][k] - za[m]) * (B[k][n] - zb[n])   as int32
 *
 * A and B each uint8 or int8, zero points per row of A / per column of B
 * (or one value: za_per / zb_per false).  Both operands are widened to
 * int16 with their zero points subtracted (a difference of two 8-bit
 * values fits int16), and pairs of k are multiplied and summed into int32
 * (vpmaddwd on AVX2: two products of at most 255 * 255 never overflow
 * it); the int32 sums wrap modulo 2^32, which is exactly what the
 * reference's int64 sum cast to int32 gives, for any K.
 *
 * B is packed per call into panels of IGEMM_NR columns, K in pairs; A is
 * widened once per call (2 M K bytes).  Row blocks x panels in parallel on
 * pool.
 * Returns SMELT_ERR_INVALID_ARGUMENT for bad sizes, SMELT_ERR_NOMEM when
 * the packed operands cannot be allocated (C then untouched). */
#ifndef SMELT_KERNELS_IGEMM_H
#define SMELT_KERNELS_IGEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/isa.h"
#include "parallel/pool.h"
#include "smelt.h"

#define IGEMM_NR 8 /* columns per packed panel (one ymm of int32) */
#define IGEMM_MR 4 /* rows per tile */

typedef struct igemm_args {
  int64_t M, N, K;
  const void *A;   /* M x K, row stride lda elements */
  int64_t lda;
  bool a_signed;   /* int8, else uint8 */
  const int32_t *za; bool za_per; /* M values, or za[0] for all */
  const void *B;   /* K x N, row stride ldb elements */
  int64_t ldb;
  bool b_signed;
  const int32_t *zb; bool zb_per; /* N values, or zb[0] for all */
  int32_t *C;      /* M x N, row stride ldc */
  int64_t ldc;
} igemm_args;

smelt_status igemm_s32(smelt_pool *pool, isa_level isa, const igemm_args *a);
/* The sizes checked (SMELT_ERR_INVALID_ARGUMENT naming them); *trivial
 * when nothing is left to compute: M or N is 0, or K is 0 (C then zeroed). */
smelt_status igemm_check(const igemm_args *a, bool *trivial);

/* B packed ahead (a constant weight), for igemm_s32_packed with the same
 * B, ldb, b_signed, zb, zb_per, K and N: igemm_packed_b_len(K, N) int16,
 * written by igemm_pack_b. */
int64_t igemm_packed_b_len(int64_t K, int64_t N);
void igemm_pack_b(smelt_pool *pool, const igemm_args *a, int16_t *packed);
/* igemm_s32 over B packed ahead (a->B is not read). */
smelt_status igemm_s32_packed(smelt_pool *pool, isa_level isa, const igemm_args *a, const int16_t *packed);

/* The byte form, for CPUs with AVX512_VNNI (isa ISA_AVX512 and
 * isa_has_avx512vnni): A and B stay 8-bit and vpdpbusd sums four u8 x s8
 * products per lane (the int8 GEMM's tile, kernels/qgemm.h).  A signed A
 * is offset by +128 to u8, an unsigned B by -128 to s8, and the zero
 * points and offsets come back as row and column sums:
 *   sum (a' + al)(b' + be) = sum a'b' + be sum a' + al sum b' + K al be
 * (al = offset_a - za[m], be = offset_b - zb[n]), all modulo 2^32: the
 * same int32 as the widened form.  B's packed block (igemm_vnni_b_bytes):
 * Np int32 column sums of b', then the qgemm panels of b' (8 columns x
 * groups of 4 k).  It does not depend on zb. */
bool igemm_vnni_usable(isa_level isa);
size_t igemm_vnni_b_bytes(int64_t K, int64_t N);
void igemm_vnni_pack_b(smelt_pool *pool, const igemm_args *a, void *blob);
/* igemm_s32 on the byte form, over B packed ahead (blob) or, blob NULL,
 * packed for the call.  Only where igemm_vnni_usable. */
smelt_status igemm_s32_vnni(smelt_pool *pool, const igemm_args *a, const void *blob);

/* The tile kernels (kernels/igemm.c: scalar; x86/igemm_avx2.c): c[r][j]
 * (r < mr, j < nr <= 2 * IGEMM_NR) = sum over kp < kpairs of the pair
 * products of a + r*lda2 (int16 pairs, lda2 int16 per row) and the panels
 * from p (kpairs x IGEMM_NR x 2 int16 each, the second right after the
 * first), stored to c + r*ldc. */
typedef void (*igemm_tile_fn)(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c,
                              int64_t ldc, int mr, int nr);
void igemm_tile_scalar(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c, int64_t ldc,
                       int mr, int nr);
#if defined(__x86_64__) || defined(__i386__)
void igemm_tile_avx2(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c, int64_t ldc,
                     int mr, int nr);
#endif

#endif
