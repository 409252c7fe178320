/* The exact integer matrix product on AVX512_VNNI (kernels/igemm.h, the
 * byte form): B packed once as s8 in the int8 GEMM's panels with its column
 * sums, A offset to u8 per call with its row sums, the raw sums from the
 * int8 GEMM's 8 x 32 vpdpbusd tile (kernels/qgemm.h), and the zero points
 * applied in the int32 epilogue, modulo 2^32 as the reference's cast.
 *
 * Complexity: O(M N K) multiply-adds, 64 per instruction; B packed once
 * (K N), A converted once per call (M K). */
#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "kernels/igemm.h"
#include "kernels/qgemm.h"
#include "util/err.h"

#define VN_NR QGEMM_NR  /* columns per panel */
#define VN_KG QGEMM_KG  /* k per group */
#define VN_MR 8         /* rows per tile */
#define VN_NP 4         /* panels per tile */
#define VN_ROWS (8 * VN_MR) /* rows per item: their bytes stay in cache across the item's panels */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

bool igemm_vnni_usable(isa_level isa) { return isa_avx512vnni_at(isa); }

size_t igemm_vnni_b_bytes(int64_t K, int64_t N) {
  int64_t Kp = round_up(K, VN_KG), Np = round_up(N, VN_NR);
  return sizeof(int32_t) * (size_t)Np + (size_t)(Kp * Np);
}

/* b' = B as s8: an unsigned B offset by -128 */
static int8_t b_byte(const igemm_args *a, int64_t k, int64_t n) {
  if (a->b_signed) return ((const int8_t *)a->B)[k * a->ldb + n];
  return (int8_t)((int32_t)((const uint8_t *)a->B)[k * a->ldb + n] - 128);
}

typedef struct vpack_job {
  const igemm_args *a;
  int32_t *colsum;
  int8_t *w;
  int64_t Kp;
} vpack_job;

static void pack_panels(void *ctx, int64_t p0, int64_t p1) {
  const vpack_job *j = ctx;
  const igemm_args *a = j->a;
  int64_t groups = j->Kp / VN_KG;
  for (int64_t p = p0; p < p1; p++) {
    int8_t *d = j->w + p * groups * VN_NR * VN_KG;
    int32_t cs[VN_NR] = {0};
    for (int64_t g = 0; g < groups; g++)
      for (int c = 0; c < VN_NR; c++)
        for (int h = 0; h < VN_KG; h++) {
          int64_t k = VN_KG * g + h, n = p * VN_NR + c;
          int8_t v = k < a->K && n < a->N ? b_byte(a, k, n) : 0;
          *d++ = v;
          cs[c] += v;
        }
    memcpy(j->colsum + p * VN_NR, cs, sizeof cs);
  }
}

void igemm_vnni_pack_b(smelt_pool *pool, const igemm_args *a, void *blob) {
  int64_t Np = round_up(a->N, VN_NR);
  vpack_job j = {a, blob, (int8_t *)blob + sizeof(int32_t) * (size_t)Np, round_up(a->K, VN_KG)};
  pool_parallel_for(pool, Np / VN_NR, 4, pack_panels, &j);
}

typedef struct vrun_job {
  const igemm_args *a;
  const int32_t *colsum;
  const int8_t *w;
  uint8_t *qa;     /* M rows of Kp bytes: a' (A offset to u8), K padded with 0 */
  int32_t *rowsum; /* sum over k of a' per row */
  int64_t Kp, n_groups; /* column groups of VN_NP panels */
  int32_t off_a, off_b; /* A = a' + off_a, B = b' + off_b */
} vrun_job;

static void convert_rows(void *ctx, int64_t m0, int64_t m1) {
  const vrun_job *j = ctx;
  const igemm_args *a = j->a;
  for (int64_t m = m0; m < m1; m++) {
    uint8_t *q = j->qa + m * j->Kp;
    uint32_t s = 0;
    if (a->a_signed) {
      const int8_t *r = (const int8_t *)a->A + m * a->lda;
      for (int64_t k = 0; k < a->K; k++) q[k] = (uint8_t)(r[k] + 128), s += q[k];
    } else {
      memcpy(q, (const uint8_t *)a->A + m * a->lda, (size_t)a->K);
      for (int64_t k = 0; k < a->K; k++) s += q[k];
    }
    memset(q + a->K, 0, (size_t)(j->Kp - a->K));
    j->rowsum[m] = (int32_t)s;
  }
}

/* C[m][n] = raw + be sum a' + al sum b' + K al be, modulo 2^32. */
static void store(const vrun_job *j, int64_t m0, int rows, int64_t n0, int cols, int32_t acc[QGEMM_MR][QGEMM_TILE_N]) {
  const igemm_args *a = j->a;
  uint32_t K = (uint32_t)a->K;
  for (int r = 0; r < rows; r++) {
    int64_t m = m0 + r;
    uint32_t al = (uint32_t)(j->off_a - a->za[a->za_per ? m : 0]), ra = (uint32_t)j->rowsum[m];
    int32_t *c = a->C + m * a->ldc + n0;
    for (int t = 0; t < cols; t++) {
      int64_t n = n0 + t;
      uint32_t be = (uint32_t)(j->off_b - a->zb[a->zb_per ? n : 0]);
      c[t] = (int32_t)((uint32_t)acc[r][t] + be * ra + al * (uint32_t)j->colsum[n] + K * al * be);
    }
  }
}

static void run_items(void *ctx, int64_t i0, int64_t i1) {
  const vrun_job *j = ctx;
  const igemm_args *a = j->a;
  int64_t groups = j->Kp / VN_KG, panel = groups * VN_NR * VN_KG;
  int32_t acc[QGEMM_MR][QGEMM_TILE_N];
  for (int64_t it = i0; it < i1; it++) {
    int64_t rb = it / j->n_groups, n0 = it % j->n_groups * VN_NP * VN_NR;
    int64_t m_lo = rb * VN_ROWS, m_hi = m_lo + VN_ROWS < a->M ? m_lo + VN_ROWS : a->M;
    int cols = (int)(a->N - n0 < VN_NP * VN_NR ? a->N - n0 : VN_NP * VN_NR);
    int panels = (cols + VN_NR - 1) / VN_NR;
    const int8_t *p = j->w + n0 / VN_NR * panel;
    for (int64_t m = m_lo; m < m_hi; m += VN_MR) {
      int rows = (int)(m_hi - m < VN_MR ? m_hi - m : VN_MR);
#ifdef SMELT_X86
      qgemm_tile_vnni(rows, panels, j->qa + m * j->Kp, j->Kp, p, panel, groups, acc);
#else
      qgemm_tile_scalar(rows, panels, j->qa + m * j->Kp, j->Kp, p, panel, groups, acc);
#endif
      store(j, m, rows, n0, cols, acc);
    }
  }
}

smelt_status igemm_s32_vnni(smelt_pool *pool, const igemm_args *a, const void *blob) {
  bool trivial;
  TRY(igemm_check(a, &trivial));
  if (trivial) return SMELT_OK;
  void *own = NULL;
  if (!blob) {
    size_t nb = igemm_vnni_b_bytes(a->K, a->N);
    blob = own = tensor_data_alloc(nb);
    if (!own) return err_nomem("integer matmul: packed B", nb);
    igemm_vnni_pack_b(pool, a, own);
  }
  int64_t Kp = round_up(a->K, VN_KG), Np = round_up(a->N, VN_NR);
  size_t qbytes = (size_t)(a->M * Kp), bytes = round_up((int64_t)qbytes, 64) + sizeof(int32_t) * (size_t)a->M;
  uint8_t *qa = tensor_data_alloc(bytes);
  if (!qa) {
    tensor_data_free(own);
    return err_nomem("integer matmul: converted rows", bytes);
  }
  vrun_job j = {.a = a, .colsum = blob, .w = (const int8_t *)blob + sizeof(int32_t) * (size_t)Np, .qa = qa,
                .rowsum = (int32_t *)(qa + round_up((int64_t)qbytes, 64)), .Kp = Kp,
                .n_groups = (a->N + VN_NP * VN_NR - 1) / (VN_NP * VN_NR), .off_a = a->a_signed ? -128 : 0,
                .off_b = a->b_signed ? 0 : 128};
  pool_parallel_for(pool, a->M, 16, convert_rows, &j);
  pool_parallel_for(pool, (a->M + VN_ROWS - 1) / VN_ROWS * j.n_groups, 1, run_items, &j);
  tensor_data_free(qa);
  tensor_data_free(own);
  return SMELT_OK;
}
