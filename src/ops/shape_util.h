/* Helpers shared by the shape and data-movement op families: reading small
 * integer tensors (axes, shapes, pads), strided and transposing copies over
 * element bytes, index normalization, and a few typed element helpers
 * (compare, combine) for the ops that sort or reduce while moving data.
 *
 * The copies work on element size only (1, 2, 4, 8 or 16 bytes), so one code
 * path serves every dtype. */
#ifndef SMELT_OPS_SHAPE_UTIL_H
#define SMELT_OPS_SHAPE_UTIL_H

#include "ops/op.h"

/* Axes a strided copy may have: Tile views a rank-r tensor as 2r axes. */
#define SU_MAX_AXES (2 * SMELT_MAX_RANK)

/* Reads an int32/int64 tensor of rank 0 or 1 with at most max elements into
 * out[0..*n).  what names the tensor in errors ("input 'axes'"). */
smelt_status su_read_ints(const tensor *t, const char *what, int max, int64_t *out, int *n);
/* Element i of an int32 or int64 tensor (indices). */
static inline int64_t su_index_at(const tensor *t, int64_t i) {
  return t->dtype == SMELT_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
}
/* Checks t is an int32 or int64 tensor; what names it in the error. */
smelt_status su_check_index_type(const tensor *t, const char *what);
/* Checks t is int64 (shape-like inputs); what names it in the error. */
smelt_status su_check_i64(const tensor *t, const char *what);
/* Error unless the dtype has a fixed element size smelt can move (no strings,
 * no sub-byte types); i is the input index for the message. */
smelt_status su_check_movable(const tensor *t, int i);
/* Weaker: error unless the bytes of t can be copied whole (packed sub-byte
 * types pass: ops that keep the element order copy them unchanged). */
smelt_status su_check_copyable(const tensor *t, int i);

/* Normalizes each axis in axes[0..n) into [0, rank) in place; rejects
 * duplicates.  what names the attribute or input in errors. */
smelt_status su_norm_axes(int64_t *axes, int n, int rank, const char *what);

/* Dense row-major strides of dims, in elements. */
void su_dense_strides(int rank, const int64_t *dims, int64_t *strides);
/* Product of dims[b..e) with symbolic-aware result: the product when all are
 * known, the single symbolic dim when it is the only non-1 factor, else
 * DIM_UNKNOWN.  Zero wins over symbols. */
int64_t su_dims_product(const int64_t *dims, int b, int e);

/* Copies a strided view into dense dst: dst has shape dims[0..rank) in
 * row-major order; element (i0,..) of the view is at
 * src + sum(i_k * src_strides[k]) bytes.  Strides may be zero (broadcast) or
 * negative (reversed slices).  rank <= SU_MAX_AXES, es in {1,2,4,8,16} (other
 * sizes work element by element).  Transposed views are copied in tiles so
 * both sides stay in cache.  pool may be NULL. */
void su_copy_strided(void *dst, const void *src, size_t es, int rank, const int64_t *dims,
                     const int64_t *src_strides, smelt_pool *pool);
/* dst = src (dims in_dims) with axes permuted: out dim j is in dim perm[j]. */
void su_transpose(void *dst, const void *src, size_t es, int rank, const int64_t *in_dims,
                  const int *perm, smelt_pool *pool);

/* Sets output i to unknown rank with input j's dtype (static inference). */
void su_out_unknown(op_ctx *c, int i, smelt_dtype dt);

/* ---- typed element helpers ---- */
/* Three-way comparison of two elements of dtype dt (numeric or bool); NaN
 * sorts above every number and equal to NaN, so sorting stays consistent. */
int su_cmp_elem(smelt_dtype dt, const void *a, const void *b);
/* Reduction kinds for ScatterElements/ScatterND. */
typedef enum su_reduce { SU_RED_NONE, SU_RED_ADD, SU_RED_MUL, SU_RED_MAX, SU_RED_MIN } su_reduce;
/* Parses the "reduction" attribute; error on an unknown name. */
smelt_status su_parse_reduction(op_ctx *c, su_reduce *out);
/* Checks dt supports reduction r (numeric or bool); error otherwise. */
smelt_status su_check_reducible(smelt_dtype dt, su_reduce r);
/* *dst = reduce(*dst, *src) for one element of dtype dt. */
void su_combine(smelt_dtype dt, su_reduce r, void *dst, const void *src);

/* Stable merge sort of idx[0..n) by cmp(ctx, a, b) (< 0: a before b).
 * tmp has room for n entries. */
void su_sort_idx(int64_t *idx, int64_t *tmp, int64_t n,
                 int (*cmp)(const void *ctx, int64_t a, int64_t b), const void *ctx);

#endif
