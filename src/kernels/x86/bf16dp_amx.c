/* AMX driver of the bf16 compute GEMM (kernels/bf16dp.h): Intel AMX's tile
 * multiply (TDPBF16PS) instead of vdpbf16ps where the CPU and the OS offer
 * it.  One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 32 x 16 tile
 * of B (as 16 rows of 16 pairs) into a 16 x 16 fp32 tile: 8192 products,
 * against 32 for a vdpbf16ps.
 *
 * Layout: B is the bf16dp panels as they are -- Kp rows of 32 pairs (128
 * bytes), so a B tile is 16 pair rows of one half of a panel (64 bytes a
 * row, row stride 128).  A is converted per call into row-major pairs,
 * Kp pairs a row (a tile: 16 rows of 16 pairs, row stride 4 Kp bytes),
 * rows padded with zeros to a multiple of 32.  An item is a 32 x 32 block of
 * C: four accumulator tiles (tmm0-3), two A tiles (tmm4-5), two B tiles
 * (tmm6-7), over all of K 16 pairs at a time; the tiles are stored to a
 * per-thread 32 x 32 scratch and the epilogue (alpha * acc + bias (+ C),
 * only the block's rows and columns inside C) is applied from there.
 * Taken only when Kp is a multiple of 16 (K a multiple of 32, as in every
 * transformer's projections); otherwise the vdpbf16ps tiles run.
 *
 * TDPBF16PS sums each 16-pair dot product in fp32 with round to nearest
 * even and denormals flushed, in an order of its own: results agree with
 * the scalar tile kernel to fp32 rounding of the sums, not bit for bit.
 *
 * The OS must have enabled the tile state (XCR0 bits 17-18) and, on Linux,
 * granted this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM),
 * asked once.  SMELT_AMX=0 turns the path off. */
#include "kernels/bf16dp.h"

#include <stdlib.h>
#include <string.h>

#include "ir/tensor.h"
#include "kernels/gemm_kernels.h" /* SMELT_X86 */
#include "util/env.h"
#include "util/err.h"
#ifdef SMELT_X86
#include "kernels/x86/avx512_tile.h"
#endif

#if defined(SMELT_X86) && defined(__linux__) && defined(__x86_64__)
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_BUILT 1
#include "kernels/x86/amx.h"
#else
#define AMX_BUILT 0
#endif

#define AMX_ROWS 32 /* rows and columns of C per item */

#if AMX_BUILT

#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static bool amx_usable;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

/* The CPU and OS side is isa_has_amx_bf16; Linux also grants the tile data
 * per process, on request. */
static void amx_probe(void) {
  if (!isa_has_amx_bf16()) return;
  unsigned long perm = 0;
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) return;
  if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) || !(perm & (1ul << XFEATURE_XTILEDATA))) return;
  amx_usable = true;
}

bool bf16dp_amx_hw(isa_level isa) {
  if (isa < ISA_AVX512) return false;
  const char *e = env_get("SMELT_AMX");
  if (e && !strcmp(e, "0")) return false;
  pthread_once(&amx_once, amx_probe);
  return amx_usable;
}

typedef struct amx_job {
  const bf16dp_args *a;
  const uint32_t *ap; /* M padded to AMX_ROWS rows of Kp pairs */
  int64_t K, N, Kp, Mp, n_rb;
} amx_job;

#define AVX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* Rows [r0, r1) of A into pairs (zeros past M and past K): a row's pairs are
 * its bf16 values in order (pair q: a[2q] low, a[2q+1] high), 32 at a time
 * with vcvtne2ps2bf16 (round to nearest even, as f32_to_bf16; denormal
 * inputs become 0, which TDPBF16PS would make of them anyway). */
AVX_TARGET static void convert_rows(void *ctx, int64_t r0, int64_t r1) {
  const amx_job *j = ctx;
  const bf16dp_args *a = j->a;
  for (int64_t r = r0; r < r1; r++) {
    uint32_t *d = (uint32_t *)j->ap + r * j->Kp;
    if (r >= a->M) {
      memset(d, 0, sizeof *d * (size_t)j->Kp);
      continue;
    }
    const float *x = a->A + r * a->lda;
    for (int64_t k = 0; k < 2 * j->Kp; k += 32) {
      __m512 lo = _mm512_maskz_loadu_ps(avx512_mask(j->K - k), x + k);
      __m512 hi = _mm512_maskz_loadu_ps(avx512_mask(j->K - k - 16), x + k + 16);
      _mm512_storeu_si512((void *)(d + k / 2), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

/* alpha * acc + bias (+ C), the block's rows and columns inside C. */
AVX_TARGET static void epilogue(const bf16dp_args *a, const float *acc, int64_t i0, int64_t j0, int64_t N) {
  int64_t rows = a->M - i0 < AMX_ROWS ? a->M - i0 : AMX_ROWS;
  __mmask16 m[2] = {avx512_mask(N - j0), avx512_mask(N - j0 - 16)};
  __m512 alpha = _mm512_set1_ps(a->alpha), bias[2];
  for (int h = 0; h < 2; h++)
    bias[h] = a->bias ? _mm512_maskz_loadu_ps(m[h], a->bias + j0 + 16 * h) : _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; r++) {
    float *c = a->C + (i0 + r) * a->ldc + j0;
    for (int h = 0; h < 2; h++)
      avx512_store_scaled(_mm512_load_ps(acc + r * AMX_ROWS + 16 * h), alpha, bias[h], a->accumulate, c + 16 * h,
                          m[h]);
  }
}

static void amx_items(void *ctx, int64_t it0, int64_t it1) {
  const amx_job *j = ctx;
  const bf16dp_args *a = j->a;
  amx_load_config();
  float acc[AMX_ROWS * AMX_ROWS] __attribute__((aligned(64)));
  const long a_stride = 4 * (long)j->Kp, b_stride = 4 * BF16DP_NR;
  for (int64_t it = it0; it < it1; it++) {
    /* panel-major: consecutive items share their B panel */
    int64_t p = it / j->n_rb, rb = it % j->n_rb;
    const uint32_t *A0 = j->ap + rb * AMX_ROWS * j->Kp, *A1 = A0 + 16 * j->Kp;
    const uint32_t *B = a->w->w + p * j->Kp * BF16DP_NR;
    amx_block_zero();
    for (int64_t q = 0; q < j->Kp; q += 16) amx_block_step(A0 + q, A1 + q, a_stride, B + q * BF16DP_NR, b_stride);
    amx_block_store(acc, AMX_ROWS);
    epilogue(a, acc, rb * AMX_ROWS, p * BF16DP_NR, j->N);
  }
  AMX_RELEASE();
}

bool bf16dp_amx_suits(isa_level isa, const bf16dp_weights *w) {
  return w->Kp > 0 && w->Kp % 16 == 0 && bf16dp_amx_hw(isa);
}

smelt_status bf16dp_amx_run(smelt_pool *pool, const bf16dp_args *a) {
  const bf16dp_weights *w = a->w;
  amx_job j = {.a = a, .K = w->K, .N = w->N, .Kp = w->Kp};
  j.Mp = (a->M + AMX_ROWS - 1) / AMX_ROWS * AMX_ROWS;
  j.n_rb = j.Mp / AMX_ROWS;
  if (a->M <= 0 || w->N <= 0) return SMELT_OK;
  size_t bytes = sizeof(uint32_t) * (size_t)(j.Mp * j.Kp);
  uint32_t *ap = tensor_data_alloc(bytes);
  if (!ap) return err_nomem("bf16 AMX GEMM: A as pairs", bytes);
  j.ap = ap;
  pool_parallel_for(pool, j.Mp, 8, convert_rows, &j);
  int64_t items = (w->Np / BF16DP_NR) * j.n_rb;
  /* an item is 32 x 32 x K multiply-adds; a few per thread balance */
  pool_parallel_for(pool, items, 1, amx_items, &j);
  tensor_data_free(ap);
  return SMELT_OK;
}

#else

bool bf16dp_amx_hw(isa_level isa) {
  (void)isa;
  return false;
}
bool bf16dp_amx_suits(isa_level isa, const bf16dp_weights *w) {
  (void)isa, (void)w;
  return false;
}
smelt_status bf16dp_amx_run(smelt_pool *pool, const bf16dp_args *a) {
  (void)pool, (void)a;
  return err_set(SMELT_ERR_UNSUPPORTED, "bf16 AMX GEMM: not built for this platform");
}

#endif
