/* Exact 8-bit integer matrix product (kernels/igemm.h): the driver (packing,
 * the split over threads) and the scalar tile.
 *
 * Complexity: O(M N K) multiply-adds; B packed once per call or ahead
 * (K N), A widened once per call (M K). */
#include "kernels/igemm.h"

#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "util/err.h"

void igemm_tile_scalar(int64_t kpairs, const int16_t *a, int64_t lda2, const int16_t *p, int32_t *c, int64_t ldc,
                       int mr, int nr) {
  if (nr > IGEMM_NR) { /* the second panel */
    igemm_tile_scalar(kpairs, a, lda2, p + kpairs * IGEMM_NR * 2, c + IGEMM_NR, ldc, mr, nr - IGEMM_NR);
    nr = IGEMM_NR;
  }
  for (int r = 0; r < mr; r++) {
    uint32_t acc[IGEMM_NR] = {0}; /* wraps modulo 2^32, as the reference's cast */
    const int16_t *ar = a + r * lda2;
    for (int64_t kp = 0; kp < kpairs; kp++) {
      const int16_t *pk = p + kp * IGEMM_NR * 2;
      for (int j = 0; j < IGEMM_NR; j++)
        acc[j] += (uint32_t)((int32_t)ar[2 * kp] * pk[2 * j]) + (uint32_t)((int32_t)ar[2 * kp + 1] * pk[2 * j + 1]);
    }
    for (int j = 0; j < nr; j++) c[r * ldc + j] = (int32_t)acc[j];
  }
}

static int32_t load8(const void *p, bool is_signed, int64_t i) {
  return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

typedef struct ig_job {
  const igemm_args *a;
  igemm_tile_fn tile;
  const int16_t *aw; /* A widened: M rows of 2 * kpairs int16, zero point subtracted, K padded with 0 */
  const int16_t *bp; /* panels: n_panels x kpairs x IGEMM_NR x 2 */
  int64_t kpairs, n_panels, rows_per_block;
} ig_job;

static void widen_rows(void *vctx, int64_t m0, int64_t m1) {
  const ig_job *j = vctx;
  const igemm_args *a = j->a;
  int64_t lda2 = 2 * j->kpairs;
  for (int64_t m = m0; m < m1; m++) {
    int16_t *row = (int16_t *)j->aw + m * lda2;
    int32_t z = a->za[a->za_per ? m : 0];
    for (int64_t k = 0; k < a->K; k++) row[k] = (int16_t)(load8(a->A, a->a_signed, m * a->lda + k) - z);
    for (int64_t k = a->K; k < lda2; k++) row[k] = 0;
  }
}

/* Items: (row block, pair of panels). */
static void ig_items(void *vctx, int64_t i0, int64_t i1) {
  const ig_job *j = vctx;
  const igemm_args *a = j->a;
  int64_t lda2 = 2 * j->kpairs;
  for (int64_t it = i0; it < i1; it++) {
    int64_t n_pairs = (j->n_panels + 1) / 2, rb = it / n_pairs, pn = 2 * (it % n_pairs);
    int64_t m0 = rb * j->rows_per_block, m1 = m0 + j->rows_per_block < a->M ? m0 + j->rows_per_block : a->M;
    int64_t n0 = pn * IGEMM_NR;
    int nr = (int)(a->N - n0 < 2 * IGEMM_NR ? a->N - n0 : 2 * IGEMM_NR);
    const int16_t *p = j->bp + pn * j->kpairs * IGEMM_NR * 2;
    for (int64_t m = m0; m < m1; m += IGEMM_MR) {
      int mr = (int)(m1 - m < IGEMM_MR ? m1 - m : IGEMM_MR);
      j->tile(j->kpairs, j->aw + m * lda2, lda2, p, a->C + m * a->ldc + n0, a->ldc, mr, nr);
    }
  }
}

typedef struct pack_job {
  const igemm_args *a;
  int16_t *bp;
  int64_t kpairs;
} pack_job;

static void pack_panels(void *vctx, int64_t p0, int64_t p1) {
  const pack_job *j = vctx;
  const igemm_args *a = j->a;
  for (int64_t pn = p0; pn < p1; pn++) {
    int16_t *dst = j->bp + pn * j->kpairs * IGEMM_NR * 2;
    for (int64_t k = 0; k < 2 * j->kpairs; k++)
      for (int c = 0; c < IGEMM_NR; c++) {
        int64_t n = pn * IGEMM_NR + c;
        int16_t v = 0;
        if (k < a->K && n < a->N) v = (int16_t)(load8(a->B, a->b_signed, k * a->ldb + n) - a->zb[a->zb_per ? n : 0]);
        dst[(k / 2) * IGEMM_NR * 2 + c * 2 + (k & 1)] = v;
      }
  }
}

int64_t igemm_packed_b_len(int64_t K, int64_t N) {
  return (N + IGEMM_NR - 1) / IGEMM_NR * ((K + 1) / 2) * IGEMM_NR * 2;
}

void igemm_pack_b(smelt_pool *pool, const igemm_args *a, int16_t *packed) {
  pack_job pj = {a, packed, (a->K + 1) / 2};
  pool_parallel_for(pool, (a->N + IGEMM_NR - 1) / IGEMM_NR, 4, pack_panels, &pj);
}

static smelt_status run(smelt_pool *pool, isa_level isa, const igemm_args *a, const int16_t *bp) {
  int64_t kpairs = (a->K + 1) / 2, n_panels = (a->N + IGEMM_NR - 1) / IGEMM_NR;
  size_t abytes = sizeof(int16_t) * (size_t)(a->M * 2 * kpairs);
  int16_t *aw = tensor_data_alloc(abytes);
  if (!aw) return err_nomem("integer matmul: widened rows", abytes);
  igemm_tile_fn tile = igemm_tile_scalar;
#if defined(__x86_64__) || defined(__i386__)
  if (isa >= ISA_AVX2) tile = igemm_tile_avx2;
#else
  (void)isa;
#endif
  int64_t rows = 16 * IGEMM_MR; /* a row block: its widened rows stay in cache across the item's panel */
  ig_job j = {a, tile, aw, bp, kpairs, n_panels, rows};
  pool_parallel_for(pool, a->M, 16, widen_rows, &j);
  pool_parallel_for(pool, (a->M + rows - 1) / rows * ((n_panels + 1) / 2), 1, ig_items, &j);
  tensor_data_free(aw);
  return SMELT_OK;
}

smelt_status igemm_check(const igemm_args *a, bool *trivial) {
  *trivial = false;
  if (a->M < 0 || a->N < 0 || a->K < 0 || a->lda < a->K || a->ldb < a->N || a->ldc < a->N)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "integer matmul: bad sizes M=%lld N=%lld K=%lld", (long long)a->M,
                   (long long)a->N, (long long)a->K);
  if (a->M == 0 || a->N == 0) {
    *trivial = true;
  } else if (a->K == 0) {
    for (int64_t m = 0; m < a->M; m++) memset(a->C + m * a->ldc, 0, sizeof(int32_t) * (size_t)a->N);
    *trivial = true;
  }
  return SMELT_OK;
}

smelt_status igemm_s32_packed(smelt_pool *pool, isa_level isa, const igemm_args *a, const int16_t *packed) {
  bool trivial;
  TRY(igemm_check(a, &trivial));
  return trivial ? SMELT_OK : run(pool, isa, a, packed);
}

smelt_status igemm_s32(smelt_pool *pool, isa_level isa, const igemm_args *a) {
  bool trivial;
  TRY(igemm_check(a, &trivial));
  if (trivial) return SMELT_OK;
  size_t bbytes = sizeof(int16_t) * (size_t)igemm_packed_b_len(a->K, a->N);
  int16_t *bp = tensor_data_alloc(bbytes);
  if (!bp) return err_nomem("integer matmul: packed B", bbytes);
  igemm_pack_b(pool, a, bp);
  smelt_status st = run(pool, isa, a, bp);
  tensor_data_free(bp);
  return st;
}
