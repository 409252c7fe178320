/* Reduced-precision GEMM weights made once per session (ops/gemm_int8.c,
 * ops/gemm_bf16.c): a constant 2-D float32 weight input converted by the
 * kind's pack function into one block, kept in the node's op cache and the
 * session's prep store (mapped from it on the next start), made outside the
 * run's stop control (op_cache_get_or_make), and described to the kernel by
 * the kind's view struct. */
#ifndef SMELT_OPS_GEMM_PREP_H
#define SMELT_OPS_GEMM_PREP_H

#include <stddef.h>

#include "ops/op.h"

typedef struct gemm_prep_kind {
  const char *store_kind; /* the prep store's name for the blocks ("gemm-u8s8") */
  int32_t which;          /* tells this kind's op-cache entries from others' */
  size_t view_size;       /* sizeof the view struct (at most GEMM_PREP_VIEW_MAX) */
  size_t (*bytes)(int64_t K, int64_t N); /* 0: not packable */
  void (*pack)(smelt_pool *pool, bool trans_b, int64_t K, int64_t N, const float *B, void *blob);
  void (*view)(int64_t K, int64_t N, const void *blob, void *out);
} gemm_prep_kind;

#define GEMM_PREP_VIEW_MAX 128

/* The view of input i as op(B) (K x N; trans_b: stored N x K) in kind k's
 * form: from the op cache or the prep store, else made now.  NULL (no
 * error) when input i is not a constant 2-D float32 weight of K*N elements,
 * there is no cache, or no memory for it: the caller then runs in fp32. */
const void *gemm_prep_weights(op_ctx *c, int i, const gemm_prep_kind *k, bool trans_b, int64_t K, int64_t N);

#endif
