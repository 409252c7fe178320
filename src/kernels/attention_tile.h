/* The per-ISA inner kernels of attention_f32's tiled path (kernels/attention.c),
 * one template (kernels/attention_impl.h) compiled for AVX-512, AVX2 and
 * portable C.
 *
 * The tiled path works on a query block transposed: Q^T [D][nqp] (the block's
 * nq queries padded with zero columns to nqp, a multiple of `vl`), so every
 * vector runs along queries.  Scores are kept as S^T [n keys][nqp] in panels
 * of 2 vl queries (the last one narrower, nqp - p): the panel of queries
 * [p, p + pw) is [n][pw] at st + p n, so that the products read
 * whole cache lines, one after the other.  The output accumulates as O^T
 * [Dv][nqp].  K and V are read in place (rows of
 * unit-stride columns) through scalar broadcasts; nothing is transposed per
 * key block, and the softmax's max, exp, sum and the rescaling of O^T run
 * lane-wise, one query per lane, with no horizontal reductions. */
#ifndef SMELT_KERNELS_ATTENTION_TILE_H
#define SMELT_KERNELS_ATTENTION_TILE_H

#include <stdint.h>

#include "kernels/isa.h"

typedef struct attn_tile_kernels {
  isa_level isa;
  int vl; /* lanes: nqp and the leading dimensions below are multiples of it */
  /* st[j][i] = sum_d k[j][d] qt[d][i] for j < n, i < nqp (k rows ldk apart; qt
   * [D][nqp]; st in panels) */
  void (*qk)(const float *qt, int64_t nqp, int64_t D, const float *k, int64_t ldk, int64_t n,
             float *st);
  /* The online softmax over keys of st [n][nqp] (n > 0; scores in log2
   * units, scale log2 e folded into Q^T), lane-wise: with the column max over
   * the block, m[i] grows to m' = max(m[i], max_j st[j][i]), corr[i] =
   * 2^(m[i] - m'), st[j][i] = 2^(st[j][i] - m') (0 below 2^-125), l[i] = l[i]
   * corr[i] + sum_j st[j][i].  A column whose m' is still -inf (every key so far masked)
   * gets probabilities 0 and keeps l = 0.  NaN scores are passed over by the
   * max and propagate through exp into l and the output. */
  void (*softmax)(float *st, int64_t nqp, int64_t n, float *m, float *l, float *corr);
  /* ot[c][i] = ot[c][i] corr[i] + sum_j v[j][c] st[j][i], c < Dv, i < nqp */
  void (*pv)(const float *st, int64_t nqp, int64_t n, const float *v, int64_t ldv, int64_t Dv,
             const float *corr, float *ot);
  /* The row path (one query per head, a decode step), a key at a time over
   * the heads of a group, so that a time-major cache's rows are read front
   * to back: out[h os] = q_h . k_h for h < nh, q_h = q + h qs (D floats),
   * k_h = k + ((h0 + h) / group) ks (k: the kv head 0 of the key row) */
  void (*qk_row)(const float *q, int64_t qs, const float *k, int64_t ks, int64_t h0, int64_t nh,
                 int64_t group, int64_t D, float *out, int64_t os);
  /* acc[h Dv + c] += p[h ps] v_h[c], v_h = v + ((h0 + h) / group) vs, for
   * c < Dv, h < nh */
  void (*pv_row)(const float *p, int64_t ps, const float *v, int64_t vs, int64_t h0, int64_t nh,
                 int64_t group, int64_t Dv, float *acc);
} attn_tile_kernels;

/* The kernels for an ISA level, clamped to what the machine has. */
const attn_tile_kernels *attn_tile_get(isa_level isa);

extern const attn_tile_kernels attn_tile_scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const attn_tile_kernels attn_tile_avx2;
extern const attn_tile_kernels attn_tile_avx512;
#endif

#endif
