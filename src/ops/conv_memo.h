/* Conv's run memo (ops/op_memo.h): the first run of a plan step that ends
 * on one of the routes below records what it ran -- the kernel's
 * descriptor, the prepared weights the session's op cache holds, the
 * epilogue's clamp and the activation left after it -- and later runs with
 * the same operands (types, shapes, constant weight and bias, residual,
 * pool, ISA) call that kernel straight away.  Routes:
 *   CM_BF16IO  the bf16 kernels over bf16 or fp32 activations (conv_bf16_io_run)
 *   CM_DWCL    the channels-last bf16 depthwise (conv_dw_cl_try)
 *   CM_FAST    the fast fp32 kernels over prepared weights (conv_route_fast_run),
 *              X, W, B and Y fp32 as they are
 * Runs through copies (channels-last operands on another kernel, a bf16
 * residual as fp32, the subsampled 1x1, an output over its residual on a
 * kernel that cannot) and weights not held by the cache record nothing. */
#ifndef SMELT_OPS_CONV_MEMO_H
#define SMELT_OPS_CONV_MEMO_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/tensor.h"
#include "kernels/conv.h"
#include "kernels/conv_bf16.h"
#include "kernels/isa.h"
#include "ops/conv_core.h"

typedef struct conv_memo conv_memo;

typedef enum conv_memo_route { CM_NONE, CM_BF16IO, CM_DWCL, CM_FAST } conv_memo_route;

/* What a run saw, compared bytewise: zero-filled, then set (conv_memo.c's
 * key_of), the 4-byte fields first so there is no padding */
typedef struct conv_memo_key {
  int n_in, xrank;
  smelt_dtype xt, wt, bt, rt, yt;
  isa_level isa;
  int64_t xdims[SMELT_MAX_RANK];
  int64_t rn, yn; /* elements of the residual (-1: none) and of Y */
  const void *w, *b;
  const smelt_pool *pool;
} conv_memo_key;
_Static_assert(sizeof(conv_memo_key) == 8 * 4 + 8 * (SMELT_MAX_RANK + 5), "conv_memo_key has padding");

struct conv_memo {
  conv_memo_key key;
  /* what it ran */
  conv_memo_route route;
  conv2d_desc d;
  const void *wts;      /* conv2d_weights (BF16IO, FAST) or the bf16 pairs (DWCL), the op cache's */
  conv2d_epilogue kep;  /* residual NULL: each run's */
  fused_act rest;       /* FAST: the activation after the kernel */
  unsigned cl;          /* BF16IO: the channels-last operands */
  bool planes;          /* DWCL: an fp32 planes input */
  bool residual_in_place; /* FAST: the kernel may write Y over its residual */
};

/* Runs c from its step's memo when there is one and this run matches it
 * (*hit true); else nothing (*hit false). */
smelt_status conv_memo_run(op_ctx *c, bool *hit);

/* conv_op_run(c, e), recorded as c's step's memo where its slot is still
 * empty (e->rec set for the routes to note themselves in). */
smelt_status conv_memo_record_run(op_ctx *c, conv_epilogue *e);

/* Runs conv_memo_run found a matching memo for, in this process (tests). */
size_t conv_memo_hits(void);

/* A route's note of what it ran (rec NULL: nothing). */
void conv_memo_note(conv_memo *rec, conv_memo_route route, const conv2d_desc *d, const void *wts,
                    const conv2d_epilogue *kep);

#endif
