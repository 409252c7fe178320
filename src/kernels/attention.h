/* Scaled dot-product attention, flash style, float32:
 *
 *   O[b,h,i,:] = sum_j softmax_j(scale * Q[b,h,i,:].K[b,h,j,:] (+ mask)) V[b,h,j,:]
 *
 * Blocks of queries meet blocks of keys/values with an online softmax (a
 * running max and sum per query row), so the Sq x Sk score matrix is never
 * materialized: memory stays O(block) per thread.  Threaded over
 * batch x heads x query blocks.
 *
 * Operands are strided views in the canonical [B, H, S, D] axis order
 * (stride 0 broadcasts a dim of size 1), so transposed inputs and outputs
 * ([B, S, H, D] from a QKV projection) need no copy. */
#ifndef SMELT_KERNELS_ATTENTION_H
#define SMELT_KERNELS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "parallel/pool.h"

typedef enum attn_mask_kind {
  ATTN_MASK_NONE = 0,
  ATTN_MASK_ADD,  /* float32, added to the scaled scores */
  ATTN_MASK_BOOL  /* bool (one byte): false replaces the score by mask_fill */
} attn_mask_kind;

typedef struct attn_params {
  int64_t B, H, Sq, Sk, D, Dv;
  int64_t kv_group;  /* > 1: query head h reads K/V head h / kv_group (grouped-query attention) */
  const float *q, *k, *v;                 /* borrowed */
  int64_t q_str[4], k_str[4], v_str[4];   /* q [B,H,Sq,D], k [B,H,Sk,D], v [B,H,Sk,Dv] */
  float *o;                               /* borrowed, written: [B,H,Sq,Dv] */
  int64_t o_str[4];
  float scale;
  bool causal; /* key j visible to query i iff j <= i + Sk - Sq (aligned at the end, as with a KV cache) */
  attn_mask_kind mask_kind;
  const void *mask;       /* borrowed; [B,H,Sq,Sk] view */
  int64_t mask_str[4];
  float mask_fill;
  bool zero_empty_rows; /* a row whose every key is masked yields zeros, not NaN (the graph's
                           Where(IsNaN(P), 0, P) guard after the softmax) */
  bool bf16; /* Q.K^T and P.V in bf16 with fp32 sums (kernels/attention_bf16.h) where the CPU has
                AVX512_BF16 (bf16dp_hw) and the tiled path runs; else ignored */
} attn_params;

/* Like the unfused graph: a query row whose every key is masked by -inf
 * yields NaN (zeros with zero_empty_rows); Sk == 0 yields zeros.  The tiled
 * path (Sq at least a vector's lanes) gives a key weighing under 2^-125 of
 * the row's best (a score some 87 below it) exactly 0, as a -inf mask would.
 * Fails only if scratch memory cannot be allocated or a size is negative. */
smelt_status attention_f32(smelt_pool *pool, const attn_params *p);

/* Query rows per task for bh = batch x heads, sq queries and `threads`
 * threads (64, down to 16 while there are under 4 tasks per thread). */
int64_t attn_query_block(int64_t bh, int64_t sq, int threads);

#endif
