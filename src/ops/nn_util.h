/* Shared pieces of the neural-network op families (conv, pool, norm, softmax,
 * reduce, einsum, attention, loss): working-precision conversion, infer-time
 * checks, conv/pool window geometry and reduction axes.  Each rule lives here
 * once so the families agree on it. */
#ifndef SMELT_OPS_NN_UTIL_H
#define SMELT_OPS_NN_UTIL_H

#include "ops/op.h"

/* ---- dtypes and infer-time checks ---- */
bool nn_is_float(smelt_dtype t); /* f16, bf16, f32, f64 */
/* Input i (called `name` in messages) must be f16/bf16/f32/f64.  An absent
 * input passes; an UNDEFINED dtype passes during static inference. */
smelt_status nn_check_float(op_ctx *c, int i, const char *name);
/* Input i must have input j's dtype (absent or undefined passes). */
smelt_status nn_check_same_dtype(op_ctx *c, int i, const char *ni, int j, const char *nj);
/* Input i must have the given rank (unknown rank passes). */
smelt_status nn_check_rank(op_ctx *c, int i, const char *name, int rank);
/* Output i gets dtype dt and unknown rank: for static inference without shapes. */
void nn_out_unknown(op_ctx *c, int i, smelt_dtype dt);
/* The product of dims[begin, end): -1 if one is not concrete, -2 on overflow. */
int64_t nn_prod(const int64_t *dims, int begin, int end);

/* ---- working precision ----
 * Strided conversion of n elements starting at element `off`, `stride`
 * elements apart, between a float-typed buffer (f16, bf16, f32, f64) and
 * double or float. */
void nn_load_f64(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 double *dst);
void nn_store_f64(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const double *src);
void nn_load_f32(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 float *dst);
void nn_store_f32(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const float *src);
/* The same between an integer or bool buffer and int64 (u64 values keep their
 * bits; stores wrap to the element width). */
void nn_load_i64(smelt_dtype dt, const void *base, int64_t off, int64_t stride, int64_t n,
                 int64_t *dst);
void nn_store_i64(smelt_dtype dt, void *base, int64_t off, int64_t stride, int64_t n,
                  const int64_t *src);
/* v rounded to the precision of float type dt (identity for f64): where the
 * ONNX definition computes a step in the element type. */
double nn_round_to(smelt_dtype dt, double v);
/* An f32 view of a float-typed tensor: its own data for f32, otherwise a
 * converted copy.  Release with nn_f32_release (frees only copies). */
smelt_status nn_f32_acquire(const tensor *t, float **p);
void nn_f32_release(const tensor *t, float *p);
/* An f32 buffer for an output: the tensor's data for f32, otherwise scratch
 * that nn_f32_commit converts into the tensor and frees. */
smelt_status nn_f32_out(tensor *t, float **p);
void nn_f32_commit(tensor *t, float *p);
/* malloc(count * size) with overflow and negative checks; the error names what. */
smelt_status nn_alloc(void **p, int64_t count, size_t size, const char *what);

/* ---- conv / pool windows ---- */
#define NN_MAX_SPATIAL (SMELT_MAX_RANK - 2)

typedef enum nn_auto_pad { NN_NOTSET, NN_SAME_UPPER, NN_SAME_LOWER, NN_VALID } nn_auto_pad;

typedef struct nn_window {
  int nsp; /* spatial dims */
  nn_auto_pad auto_pad;
  int64_t kernel[NN_MAX_SPATIAL], stride[NN_MAX_SPATIAL], dil[NN_MAX_SPATIAL];
  int64_t pad_lo[NN_MAX_SPATIAL], pad_hi[NN_MAX_SPATIAL];
  int64_t in[NN_MAX_SPATIAL], out[NN_MAX_SPATIAL];
} nn_window;

/* Reads kernel_shape, strides, dilations, pads and auto_pad for nsp spatial
 * dims.  kernel: the sizes implied by a weight tensor (Conv), or NULL when
 * kernel_shape is required (pools); both given must agree.  Kernel dims may
 * be unknown (< 0) during static inference. */
smelt_status nn_window_attrs(op_ctx *c, int nsp, const int64_t *kernel, nn_window *w);
/* Output sizes of a Conv/pool over spatial input sizes in[]: resolves SAME
 * pads, applies ceil_mode (a window starting in the end padding is dropped).
 * An unknown input or kernel size gives an unknown output size. */
smelt_status nn_window_out(nn_window *w, const int64_t *in, bool ceil_mode);
/* Number of spatial output positions / kernel taps (concrete windows only). */
int64_t nn_window_out_size(const nn_window *w);
int64_t nn_window_kernel_size(const nn_window *w);

/* ---- reductions ---- */
/* The reduced dims of a rank-`rank` input for Reduce-style ops: from input 1
 * when axes_from_input, else the `axes` attribute.  Axes absent or empty mean
 * all dims, or none with noop_with_empty_axes.  *known is false when the axes
 * input's value is unknown (static inference); mask is then unset. */
smelt_status nn_reduce_axes(op_ctx *c, int rank, bool axes_from_input, bool *mask, bool *known);
/* Splits a shape at `axis` into outer (dims before), n (dims[axis..end) when
 * to_end, else dims[axis]) and inner (the rest).  Concrete shapes only. */
void nn_split_axis(const tensor *t, int axis, bool to_end, int64_t *outer, int64_t *n,
                   int64_t *inner);

/* Checks X (input 0, a dtype in types, rank >= 3), W (same dtype, same rank)
 * and the optional B (same dtype, rank 1) of Conv-like ops, and reads the
 * group attribute (>= 1) into *group. */
smelt_status nn_check_conv_operands(op_ctx *c, const smelt_dtype *types, int64_t *group);

#endif
