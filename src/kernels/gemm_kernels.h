/* Internal interface between the GEMM driver (gemm.c), the portable path
 * (gemm_scalar.c) and the per-ISA micro-kernels (x86/).  Not for op code:
 * ops call gemm_f32 / gemm_f32_ex. */
#ifndef SMELT_KERNELS_GEMM_KERNELS_H
#define SMELT_KERNELS_GEMM_KERNELS_H

#include "kernels/gemm.h"
#include "kernels/isa.h"

/* How a micro-kernel finishes its tile:  c = act(alpha*acc + beta*c + bias). */
typedef struct gemm_store {
  float alpha, beta;   /* beta: the caller's on the first K block, 1 after it */
  gemm_bias bias_kind; /* NONE and act NONE except on the last K block */
  const float *bias;   /* at the tile's first column (COL) or first row (ROW) */
  gemm_act act;
  float lo, hi;
  /* Lines to fetch into L2 while the tile runs, one per K step from the
   * first (the next packed B panel's share; gemm.c run_panel): pf_lines
   * 64-byte lines from pf.  Kernels without it leave them to the caller. */
  const float *pf;
  int64_t pf_lines;
} gemm_store;

/* C tile (mr x nr, mr <= MR, nr <= NR) from packed panels: a holds kc groups
 * of MR floats (rows of op(A), zero padded), b holds kc groups of NR floats. */
typedef void (*gemm_ukernel_fn)(int64_t kc, const float *a, const float *b, float *c,
                                int64_t ldc, int mr, int nr, const gemm_store *st);

/* The same tile with A read in place, not packed: row i of the tile at
 * a + i*lda, K contiguous (rows past mr are never read). */
typedef void (*gemm_ukernel_ia_fn)(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                                   int64_t ldc, int mr, int nr, const gemm_store *st);

/* Direct (unpacked) kernel for small problems: a C tile from op(A)[i][k] =
 * a[i*rsa + k*csa] and B not transposed (row k at b + k*ldb), full K. */
typedef void (*gemm_direct_fn)(int64_t K, const float *a, int64_t rsa, int64_t csa,
                               const float *b, int64_t ldb, float *c, int64_t ldc, int mr,
                               int nr, const gemm_store *st);

/* Packing into those layouts, K range [p0, p0+kc): mc rows of op(A) from
 * row i0 (MR-row micro-panels one after another, rows past mc zero); cols
 * columns of op(B) from column j0 into ceil(cols/NR) micro-panels, panel i
 * at dst + i*stride (columns past cols zero). */
typedef void (*gemm_pack_a_fn)(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0,
                               int64_t kc, float *dst);
typedef void (*gemm_pack_b_fn)(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0,
                               int64_t kc, float *dst, int64_t stride);

/* Small-M path: columns [n0, n1) of C for all M rows, A and B read in place,
 * epilogue included.  M <= GEMM_SMALL_M with B not transposed; with B
 * transposed (dot products) M <= GEMM_SMALL_M_NT and A not transposed. */
typedef void (*gemm_smallm_fn)(const gemm_params *p, int64_t n0, int64_t n1);
#define GEMM_SMALL_M 16
#define GEMM_SMALL_M_NT 4

/* Small-M path over B packed ahead (gemm_smallm_packed.c), M below
 * GEMM_PREPACKED_MIN_M.  The kernel: rows (1..6) of op(A) at a (element
 * [r][k] at a[r*sam + k*sak]) times n_panels packed panels (kc x NR floats
 * each, panel i at b + i*panel_stride), into partial sums acc[r*ldacc + i*NR
 * + j] (32-byte aligned), which it starts from zero when `first`, else adds
 * to.  The store: C = act(alpha*acc + beta*C + bias) for rows [m0, m0+rows)
 * and columns [n0, n0+cols). */
typedef void (*gemm_smallm_packed_fn)(int rows, int64_t kc, const float *a, int64_t sam, int64_t sak,
                                      const float *b, int64_t n_panels, int64_t panel_stride, float *acc,
                                      int64_t ldacc, bool first);
typedef void (*gemm_smallm_store_fn)(const gemm_params *p, int64_t m0, int rows, int64_t n0, int64_t cols,
                                     const float *acc, int64_t ldacc);

#if defined(__x86_64__) || defined(__i386__)
#define SMELT_X86 1
#define SMELT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define SMELT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

void f32_gemm_6x16_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                        int mr, int nr, const gemm_store *st);
void f32_gemm_8x32_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          int mr, int nr, const gemm_store *st);
void f32_gemm_6x16_ia_avx2(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                           int mr, int nr, const gemm_store *st);
void f32_gemm_8x32_ia_avx512(int64_t kc, const float *a, int64_t lda, const float *b, float *c, int64_t ldc,
                             int mr, int nr, const gemm_store *st);
void f32_gemm_direct_8x32_avx512(int64_t K, const float *a, int64_t rsa, int64_t csa,
                                 const float *b, int64_t ldb, float *c, int64_t ldc, int mr,
                                 int nr, const gemm_store *st);
void f32_gemm_direct_6x16_avx2(int64_t K, const float *a, int64_t rsa, int64_t csa,
                               const float *b, int64_t ldb, float *c, int64_t ldc, int mr, int nr,
                               const gemm_store *st);
void f32_pack_a_8_avx512(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                         float *dst);
void f32_pack_b_32_avx512(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                          float *dst, int64_t stride);
void f32_pack_a_6_avx2(const gemm_params *p, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                       float *dst);
void f32_pack_b_16_avx2(const gemm_params *p, int64_t j0, int64_t cols, int64_t p0, int64_t kc,
                        float *dst, int64_t stride);
void f32_gemm_smallm_avx2(const gemm_params *p, int64_t n0, int64_t n1);
void f32_gemm_smallm_avx512(const gemm_params *p, int64_t n0, int64_t n1);
void f32_gemm_smallm_packed_avx2(int rows, int64_t kc, const float *a, int64_t sam, int64_t sak, const float *b,
                                 int64_t n_panels, int64_t panel_stride, float *acc, int64_t ldacc, bool first);
void f32_gemm_smallm_store_avx2(const gemm_params *p, int64_t m0, int rows, int64_t n0, int64_t cols,
                                const float *acc, int64_t ldacc);
void f32_gemm_smallm_packed_avx512(int rows, int64_t kc, const float *a, int64_t sam, int64_t sak, const float *b,
                                   int64_t n_panels, int64_t panel_stride, float *acc, int64_t ldacc, bool first);
void f32_gemm_smallm_store_avx512(const gemm_params *p, int64_t m0, int rows, int64_t n0, int64_t cols,
                                  const float *acc, int64_t ldacc);
#endif

/* The portable path (the reference the fast paths are tested against).
 * Arguments already validated; alpha != 0, K > 0. */
void gemm_f32_scalar(smelt_pool *pool, const gemm_params *p);

/* gemm_f32_ex on a given ISA level (clamped to what the machine has): lets
 * tests and benchmarks run every path in one process without SMELT_ISA. */
smelt_status gemm_f32_isa(smelt_pool *pool, const gemm_params *p, isa_level isa);

/* Which algorithm: AUTO picks by shape.  A forced path that does not apply
 * (SMALL_M: see gemm_smallm_fn; DIRECT needs B not transposed) falls back to
 * PACKED. */
typedef enum gemm_path {
  GEMM_PATH_AUTO = 0,
  GEMM_PATH_SMALL_M,
  GEMM_PATH_DIRECT,
  GEMM_PATH_PACKED,
  GEMM_PATH_SMALL_M_PACKED /* small-M over p->packed_b (AUTO's choice for M < GEMM_PREPACKED_MIN_M when it
                              matches); without a matching one, or on an ISA without the kernel: SMALL_M */
} gemm_path;

/* Packed-path block sizes and threading; 0 keeps the ISA's default.  Tests shrink them to
 * reach every blocking branch with small matrices; benchmarks tune them. */
typedef struct gemm_blocking {
  int64_t kc;          /* K block: a B micro-panel (kc x NR) should sit in L1 */
  int64_t mc;          /* M block: an A block (mc x kc) should sit in L2 */
  int64_t bbuf_floats; /* packed B per N chunk (all K blocks): ~L3 */
  int64_t k_super;     /* K blocks per pass (bounds packed B for huge K) */
  int64_t thread_flops; /* work that earns one more thread (packed/direct) */
  int panels_outer;      /* 0: the packed path's own choice of order (gemm.c, GEMM_C_ITEM_BYTES); 1: every
                            item's panels finished one at a time over all K blocks wherever A's row block
                            for them fits L2; -1: never (K blocks outer) */
} gemm_blocking;

/* Everything explicit.  blk may be NULL. */
smelt_status gemm_f32_run(smelt_pool *pool, const gemm_params *p, isa_level isa, gemm_path path,
                          const gemm_blocking *blk);

/* The packed path's layout for one call shape on one ISA: its tiles and
 * packers and how K and N are blocked (none of it depends on M or on the
 * thread count, so an operand packed ahead fits every call with the same
 * K and N).  K is cut into super-blocks of qk_max (the last shorter), each
 * into K blocks of kc (the last shorter); N into chunks of `chunk` columns
 * (the last narrower; 0 when N <= 0).  false: isa has no packed path. */
typedef struct gemm_layout {
  isa_level isa;
  int mr, nr;
  int64_t kc, qk_max, chunk;
  gemm_pack_a_fn pack_a;
  gemm_pack_b_fn pack_b;
} gemm_layout;
bool gemm_layout_for(isa_level isa, const gemm_blocking *blk, int64_t K, int64_t N, gemm_layout *out);

/* A pre-packed operand (gemm.h).  B: for each K super-block, for each N
 * chunk, for each K block pc, for each NR column panel jp, the panel of
 * kc*NR floats (the last K block's panels hold fewer rows, same stride) --
 * exactly the packed driver's per-chunk buffer, chunk after chunk.
 * A: for each K block (super-block after super-block), ceil(M/MR) MR-row
 * micro-panels of kb*MR floats (kb: that block's length), row i at
 * i*kb for every i that is a multiple of MR. */
struct gemm_packed {
  char which; /* 'a' or 'b' */
  bool trans; /* trans_a / trans_b of the source */
  isa_level isa;
  int64_t K, mn;             /* mn: M for A, N for B */
  int64_t kc, qk_max, chunk; /* the layout it was packed with */
  int64_t n;                 /* floats */
  const float *data;
  float *owned; /* data when the object owns it, else NULL (borrowed) */
};

/* AUTO takes the packed path for M >= this when the call's B is packed
 * ahead (and matches), over the small-M and direct paths: those exist to
 * not pack B per call, which no longer happens.  Measured with
 * bench_gemm --prepacked --best (AVX2, 2-core EPYC shared with other work,
 * B warm; GFLOP/s per call-time path vs packed with B packed ahead, 1
 * thread): 1x768x768 23.7 vs 13.5, 2x 29.9 vs 27.1, 4x 68.4 vs 54.2 (small-M
 * wins: an 6/8-row tile mostly empty), 8x 57.3 vs 56.1, 12x 81.6 vs 86.4,
 * 16x512x2048 39.5 vs 65.2, 17x768x768 67.8 vs 79.5, 32x768x1024 44.1 vs
 * 70.6, 48x512x512 73.1 vs 86.9, 32x256x1024 48.9 vs 76.9, 24x768x3072
 * 36.7 vs 73.0; the one loss above 8 rows: 16x128x512 81.9 vs 72.4.
 * Below it, a matching packed B is still used: the small-M path over its
 * panels (gemm_smallm_packed.c), which reads the weight as contiguous runs
 * -- with B cold (a decode step), bench_gemv: 1.5-2.2x the small-M path
 * reading B in place at 1-2 rows, 25-33 GB/s. */
#define GEMM_PREPACKED_MIN_M 8

/* Blocking given explicitly (tests shrink it to reach every branch with
 * small matrices).  blk may be NULL. */
smelt_status gemm_pack_b_prepare_blk(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_b,
                                     int64_t K, int64_t N, const float *B, int64_t ldb, gemm_packed **out);
smelt_status gemm_pack_a_prepare_blk(smelt_pool *pool, isa_level isa, const gemm_blocking *blk, bool trans_a,
                                     int64_t M, int64_t K, const float *A, int64_t lda, gemm_packed **out);
/* The small-M product over pre (op(B) packed with layout l, NR <= 32) on
 * `threads` threads of pool; p->M < GEMM_PREPACKED_MIN_M. */
void gemm_smallm_packed(smelt_pool *pool, const gemm_params *p, const gemm_layout *l, const float *pre,
                        gemm_smallm_packed_fn fn, gemm_smallm_store_fn store, int threads);
/* pk's data if it was packed for this call's operand with layout l, else NULL. */
const float *gemm_packed_b_for(const gemm_packed *pk, const gemm_layout *l, const gemm_params *p);
const float *gemm_packed_a_for(const gemm_packed *pk, const gemm_layout *l, const gemm_params *p);

/* The epilogue on one value (shared by the scalar paths and edge code). */
static inline float gemm_act_apply(float x, gemm_act act, float lo, float hi) {
  if (act == GEMM_ACT_RELU) return x < 0.f ? 0.f : x;
  if (act == GEMM_ACT_CLIP) return x < lo ? lo : (x > hi ? hi : x);
  return x;
}

#endif
