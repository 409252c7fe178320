/* The bf16 products of attention_f32's tiled path (kernels/attention.c,
 * attn_params.bf16): Q.K^T and P.V on vdpbf16ps, with Q, K, the
 * probabilities P and V rounded to bf16 (nearest even) and every sum in
 * fp32; the masks and the online softmax stay fp32 (attention_tile.h).
 * AVX-512 BF16 only (x86/attention_bf16.c): call only where bf16dp_hw.
 *
 * Layouts are attention_tile.h's with pairs of bf16 in 32-bit words along
 * each product's reduction axis: Q^T as qtp [ceil(D/2)][nqp] (word = Q^T
 * rows 2d and 2d + 1 of one query), K as kw [n][ldkw] (a key's row, pairs
 * of consecutive d), P^T as ptp in panels of 2 vl queries, [ceil(n/2)][pw]
 * at ptp + p ceil(n/2) (keys 2j and 2j + 1), V as vp [ceil(n/2)][ldvp]
 * (keys 2j and 2j + 1 of one column). */
#ifndef SMELT_KERNELS_ATTENTION_BF16_H
#define SMELT_KERNELS_ATTENTION_BF16_H

#include <stdint.h>

/* out[k] = pair(lo[k], hi[k]) for k < n (hi NULL: 0 in the high halves). */
void attn_bf16_pairs_rows(const float *lo, const float *hi, int64_t n, uint32_t *out);
/* out[d] = pair(x[2d], x[2d + 1]) for d < ceil(D/2) (0 past D). */
void attn_bf16_pairs_seq(const float *x, int64_t D, uint32_t *out);
/* st (attention_tile.h's panels) = K Q^T over dpn pairs: st[j][i] for j < n, i < nqp. */
void attn_bf16_qk(const uint32_t *qtp, int64_t nqp, int64_t dpn, const uint32_t *kw, int64_t ldkw, int64_t n,
                  float *st);
/* ot[c][i] = ot[c][i] corr[i] + sum over njp key pairs of P V, c < Dv, i < nqp. */
void attn_bf16_pv(const uint32_t *ptp, int64_t nqp, int64_t njp, const uint32_t *vp, int64_t ldvp, int64_t Dv,
                  const float *corr, float *ot);

#endif
