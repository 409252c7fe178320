/* The runtime tensor: dtype, shape and a dense row-major buffer.
 *
 * Invariant: a tensor with a known value has data != NULL, even when empty.
 * During static shape inference a tensor may carry only dtype and shape
 * (data == NULL: value unknown), and dims may be symbolic (< 0, see dim_*).
 *
 * Ownership: if owns_data, tensor_release frees data; otherwise data is a view
 * (into the mmapped model, another tensor, or the caller's buffer). */
#ifndef SMELT_IR_TENSOR_H
#define SMELT_IR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "smelt.h"

/* A dimension: >= 0 is a concrete size; DIM_UNKNOWN is unknown; values at or
 * below DIM_SYM_BASE name a symbol (graph->syms[DIM_SYM_BASE - d]). */
#define DIM_UNKNOWN ((int64_t)-1)
#define DIM_SYM_BASE ((int64_t)-2)
static inline bool dim_known(int64_t d) { return d >= 0; }
static inline int64_t dim_sym(int sym_index) { return DIM_SYM_BASE - sym_index; }
static inline int dim_sym_index(int64_t d) { return (int)(DIM_SYM_BASE - d); }

typedef enum tensor_kind {
  TENSOR_KIND_TENSOR = 0,
  TENSOR_KIND_SEQUENCE, /* seq[0..seq_len) of tensors; dtype is the element type */
  TENSOR_KIND_OPTIONAL_NONE /* an optional with no value */
} tensor_kind;

typedef struct tensor {
  smelt_dtype dtype;
  int rank;
  int64_t dims[SMELT_MAX_RANK];
  void *data;
  size_t nbytes;
  bool owns_data;
  tensor_kind kind;
  struct tensor **seq;
  int seq_len;
  /* The device whose buffer functions allocated data (backend/backend.h);
   * NULL: host memory from the buffer cache, or not allocated by smelt. */
  const struct backend *device;
} tensor;

/* ---- dtypes ---- */
size_t dtype_size(smelt_dtype t); /* bytes per element; 0 for string/sub-byte/unknown */
const char *dtype_name(smelt_dtype t);
/* Sub-byte types (int4 uint4 float4e2m1: 4 bits; int2 uint2: 2 bits) are
 * packed, first element in the low bits (ONNX's layout; src/ir/subbyte.h has
 * the accessors).  The predicates below are about byte-addressed types only,
 * so code that indexes elements by dtype_size never meets a packed type
 * through them: packed types are recognised by dtype_is_subbyte. */
int dtype_bits(smelt_dtype t);        /* storage bits per element; 0 for string/unknown */
bool dtype_is_subbyte(smelt_dtype t); /* packed: fewer than 8 bits per element */
/* Bytes that n elements of t occupy (packed types rounded up to a whole
 * byte); false for types without fixed-width storage, n < 0 or overflow. */
bool dtype_nbytes(smelt_dtype t, int64_t n, size_t *out);
bool dtype_is_float(smelt_dtype t);   /* f16 bf16 f32 f64 and the float8 kinds (incl. e8m0) */
bool dtype_is_signed_int(smelt_dtype t);   /* int8..int64 */
bool dtype_is_unsigned_int(smelt_dtype t); /* uint8..uint64 */
bool dtype_is_int(smelt_dtype t);
/* Parses "float32"/"f32"/"int64"... ; SMELT_UNDEFINED if unknown. */
smelt_dtype dtype_from_name(const char *s);

/* f16/bf16 conversions (round to nearest even). */
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
/* bf16 inline: the bf16 kernels' packing and scalar paths convert per element. */
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* NaN stays NaN (made quiet). */
static inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

/* ---- shapes ---- */
/* Product of dims; -1 if any dim is not concrete; -2 on overflow. */
int64_t shape_numel(int rank, const int64_t *dims);
static inline int64_t tensor_numel(const tensor *t) { return shape_numel(t->rank, t->dims); }
/* "[2,3,batch,?]" into buf (syms may be NULL). */
const char *shape_str(char *buf, size_t n, int rank, const int64_t *dims, const char *const *syms);

/* ---- lifetime ---- */
/* Allocates a zeroed tensor of the given shape (all dims concrete).  64-byte
 * aligned data.  On failure returns a status with a message. */
smelt_status tensor_alloc(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims);
/* Same, heap-allocating the tensor header too (free with tensor_free). */
smelt_status tensor_new(tensor **out, smelt_dtype dtype, int rank, const int64_t *dims);
/* Makes t a non-owning view of data with the given type and shape. */
void tensor_view(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims, void *data);
/* Deep copy into a newly allocated dst (owning). */
smelt_status tensor_clone(tensor *dst, const tensor *src);
/* Frees owned data (and sequence elements); leaves t zeroed. */
void tensor_release(tensor *t);
void tensor_free(tensor *t); /* release + free(t) */

/* Element i of a numeric tensor as double / int64 (any dtype); for shape
 * arithmetic and tests, not hot loops. */
double tensor_get_f64(const tensor *t, int64_t i);
int64_t tensor_get_i64(const tensor *t, int64_t i);
void tensor_set_f64(tensor *t, int64_t i, double v);

/* 64-byte aligned allocation for tensor data; never returns NULL for n == 0. */
void *tensor_data_alloc(size_t n);
/* tensor_alloc without clearing the data: for outputs a kernel writes in
 * full (operator outputs).  SMELT_POISON=1 fills it with 0xff bytes. */
smelt_status tensor_alloc_uninit(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims);
/* tensor_alloc_uninit in fresh small pages (bufcache_alloc_small_pages)
 * when no device's buffer functions are current and the data is at least
 * BUFCACHE_MIN bytes (smaller: as tensor_alloc_uninit): for a large tensor
 * written once and read rarely (an initializer's aligned copy). */
smelt_status tensor_alloc_uninit_small_pages(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims);
void tensor_data_free(void *p);

/* Where tensor data comes from on this thread: a device's buffer functions
 * (backend/backend.h), entered by a session for its run; none entered:
 * host memory through the current buffer cache (util/bufcache.h).
 * tensor_data_alloc/free and every tensor allocation go through them, and a
 * tensor allocated so records the device.  Threads of the session's pool do
 * not inherit them: a device whose memory is not the host's runs its kernels
 * on the calling thread (cpu-ref does). */
struct backend;
typedef struct buffer_fns {
  const struct backend *device;
  void *(*alloc)(size_t n); /* 64-byte aligned; NULL when out of memory or over budget */
  void (*free)(void *p);    /* NULL ok */
} buffer_fns;
/* Makes b current on this thread (NULL: none); returns the one it replaces. */
const buffer_fns *tensor_buffers_enter(const buffer_fns *b);

#endif
