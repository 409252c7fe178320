/* Small-M GEMM over B packed ahead (a constant weight, gemm_pack_b_prepare):
 * the decode step's GEMVs.  The small-M path proper reads B in place, rows a
 * page or more apart, so the hardware prefetchers restart at every row and
 * one row of A (M = 1) waits on memory; the packed copy holds the same
 * numbers as kc x NR panels, NR-wide panels of one K block one after another
 * (gemm_kernels.h, struct gemm_packed).  Here each unit of work is a run of
 * panels of one N chunk: for every K block, the unit's panels are one
 * contiguous stretch of memory, read front to back into partial sums that
 * stay in L1; the epilogue is applied once, after the last K block.  Units
 * are sized so each thread gets a few and they split N evenly: the threads
 * stream disjoint parts of the weight. */
#include <stdalign.h>

#include "kernels/gemm_kernels.h"

#define SPK_MAX_PANELS 32 /* panels per unit: 32 x 16 columns of partial sums (12 KB at 6 rows) */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

typedef struct spk_ctx {
  const gemm_params *p;
  const gemm_layout *l;
  const float *pre;
  gemm_smallm_packed_fn fn;
  gemm_smallm_store_fn store;
  int64_t panels_total;  /* ceil(N / NR) */
  int64_t chunk_panels;  /* panels of a full N chunk */
  int64_t unit_panels;   /* panels per unit */
  int64_t units_per_chunk;
} spk_ctx;

/* Columns [n0, n0 + cols) = panels [jp0, jp0 + np) of chunk c, rows [m0, m0 + R). */
static void spk_rows(const spk_ctx *x, int64_t c, int64_t jp0, int64_t np, int64_t m0, int R, float *acc,
                     int64_t ldacc) {
  const gemm_params *p = x->p;
  const gemm_layout *l = x->l;
  const int64_t sam = p->trans_a ? 1 : p->lda, sak = p->trans_a ? p->lda : 1;
  const int64_t panel = l->kc * l->nr;
  int64_t n_jr = c * x->chunk_panels + x->chunk_panels <= x->panels_total ? x->chunk_panels
                                                                           : x->panels_total - c * x->chunk_panels;
  int64_t off_q = 0;
  for (int64_t q0 = 0; q0 < p->K; q0 += l->qk_max) {
    int64_t qk = p->K - q0 < l->qk_max ? p->K - q0 : l->qk_max, n_pc = ceil_div(qk, l->kc);
    const float *base = x->pre + off_q + n_pc * c * x->chunk_panels * panel;
    for (int64_t pc = 0; pc < n_pc; pc++) {
      int64_t p0 = q0 + pc * l->kc, kc = q0 + qk - p0 < l->kc ? q0 + qk - p0 : l->kc;
      x->fn(R, kc, p->A + m0 * sam + p0 * sak, sam, sak, base + (pc * n_jr + jp0) * panel, np, panel, acc,
            ldacc, q0 == 0 && pc == 0);
    }
    off_q += n_pc * x->panels_total * panel;
  }
}

static void spk_units(void *vctx, int64_t u0, int64_t u1) {
  const spk_ctx *x = vctx;
  const gemm_params *p = x->p;
  const int64_t NR = x->l->nr, ldacc = SPK_MAX_PANELS * 32; /* room for NR up to 32 */
  alignas(64) float acc[6 * SPK_MAX_PANELS * 32];
  for (int64_t u = u0; u < u1; u++) {
    if (pool_stopping()) return;
    int64_t c = u / x->units_per_chunk, jp0 = u % x->units_per_chunk * x->unit_panels;
    int64_t n_jr = c * x->chunk_panels + x->chunk_panels <= x->panels_total ? x->chunk_panels
                                                                             : x->panels_total - c * x->chunk_panels;
    if (jp0 >= n_jr) continue; /* the last chunk is narrower: fewer units */
    int64_t np = n_jr - jp0 < x->unit_panels ? n_jr - jp0 : x->unit_panels;
    int64_t n0 = (c * x->chunk_panels + jp0) * NR, n1 = n0 + np * NR < p->N ? n0 + np * NR : p->N;
    /* rows in groups of at most 6 (12 accumulators), as even as they split */
    int64_t groups = ceil_div(p->M, 6);
    for (int64_t g = 0, m0 = 0; g < groups; g++) {
      int R = (int)((p->M - m0) / (groups - g));
      spk_rows(x, c, jp0, np, m0, R, acc, ldacc);
      x->store(p, m0, R, n0, n1 - n0, acc, ldacc);
      m0 += R;
    }
  }
}

void gemm_smallm_packed(smelt_pool *pool, const gemm_params *p, const gemm_layout *l, const float *pre,
                        gemm_smallm_packed_fn fn, gemm_smallm_store_fn store, int threads) {
  spk_ctx x = {p, l, pre, fn, store, 0, 0, 0, 0};
  x.panels_total = ceil_div(p->N, l->nr);
  x.chunk_panels = l->chunk / l->nr;
  /* about four units per thread, at most SPK_MAX_PANELS panels each */
  x.unit_panels = ceil_div(x.panels_total, 4 * (int64_t)threads);
  if (x.unit_panels > SPK_MAX_PANELS) x.unit_panels = SPK_MAX_PANELS;
  if (x.unit_panels > x.chunk_panels) x.unit_panels = x.chunk_panels;
  x.units_per_chunk = ceil_div(x.chunk_panels, x.unit_panels);
  int64_t units = ceil_div(x.panels_total, x.chunk_panels) * x.units_per_chunk;
  if (threads <= 1 || units < 2) {
    spk_units(&x, 0, units);
    return;
  }
  pool_parallel_for(pool, units, 1, spk_units, &x);
}
