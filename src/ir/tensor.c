#include "ir/tensor.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/subbyte.h"
#include "util/bufcache.h"
#include "util/err.h"
#include "util/quote.h"

int64_t shape_numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return -1;
    if (dims[i] && n > INT64_MAX / dims[i]) return -2;
    n *= dims[i];
  }
  return n;
}

const char *shape_str(char *buf, size_t n, int rank, const int64_t *dims, const char *const *syms) {
  size_t o = 0;
  if (rank < 0) {
    snprintf(buf, n, "[?rank]");
    return buf;
  }
  o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "[");
  for (int i = 0; i < rank; i++) {
    const char *sep = i ? "," : "";
    if (dims[i] >= 0)
      o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%lld", sep, (long long)dims[i]);
    else if (dims[i] <= DIM_SYM_BASE && syms)
      o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%s", sep, q_ident(syms[dim_sym_index(dims[i])]));
    else
      o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s?", sep);
  }
  snprintf(buf + (o < n ? o : n - 1), o < n ? n - o : 1, "]");
  return buf;
}

static _Thread_local const buffer_fns *cur_buffers;

const buffer_fns *tensor_buffers_enter(const buffer_fns *b) {
  const buffer_fns *prev = cur_buffers;
  cur_buffers = b;
  return prev;
}

void *tensor_data_alloc(size_t n) {
  const buffer_fns *b = cur_buffers;
  return b ? b->alloc(n) : bufcache_alloc(n);
}

void tensor_data_free(void *p) {
  const buffer_fns *b = cur_buffers;
  if (b) b->free(p);
  else bufcache_release(p);
}

enum { ALLOC_ZERO = 1, ALLOC_SMALL_PAGES = 2 };
static smelt_status alloc_shaped(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims, unsigned how);

smelt_status tensor_alloc(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims) {
  return alloc_shaped(t, dtype, rank, dims, ALLOC_ZERO);
}

/* SMELT_POISON=1 fills uninitialized tensors with 0xff bytes (NaN for
 * floats, -1 for integers), so a kernel that reads an output it did not
 * write shows up in tests instead of passing on memory that happened to be
 * zero. */
static bool poison_on(void) {
  /* Read once per process: getenv scans the environment, and a decode step
   * allocates a thousand outputs.  The same value is stored by whichever
   * thread gets here first. */
  static atomic_int cached = -1;
  int v = atomic_load_explicit(&cached, memory_order_relaxed);
  if (v < 0) {
    const char *poison = getenv("SMELT_POISON");
    v = poison && *poison && strcmp(poison, "0");
    atomic_store_explicit(&cached, v, memory_order_relaxed);
  }
  return v;
}

static smelt_status alloc_uninit(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims, unsigned how) {
  TRY(alloc_shaped(t, dtype, rank, dims, how));
  if (poison_on()) memset(t->data, 0xff, t->nbytes);
  return SMELT_OK;
}

smelt_status tensor_alloc_uninit(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims) {
  return alloc_uninit(t, dtype, rank, dims, 0);
}

smelt_status tensor_alloc_uninit_small_pages(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims) {
  return alloc_uninit(t, dtype, rank, dims, ALLOC_SMALL_PAGES);
}

static smelt_status alloc_shaped(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims, unsigned how) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_UNSUPPORTED, "rank %d is outside 0..%d", rank, SMELT_MAX_RANK);
  if (dtype_bits(dtype) == 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "tensors of type %s are not supported", dtype_name(dtype));
  int64_t n = shape_numel(rank, dims);
  if (n < 0) {
    char b[128];
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot allocate a tensor of shape %s",
                   shape_str(b, sizeof b, rank, dims, NULL));
  }
  size_t nb;
  /* Packed types round up to whole bytes (see ir/subbyte.h). */
  if (!dtype_nbytes(dtype, n, &nb) || nb > (SIZE_MAX >> 5)) return err_nomem("tensor", SIZE_MAX);
  /* small pages for the large only: a smaller block is never on huge pages
   * anyway, and a page-aligned block would waste most of a page on it */
  bool small_pages = (how & ALLOC_SMALL_PAGES) && !cur_buffers && nb >= BUFCACHE_MIN;
  void *p = small_pages ? bufcache_alloc_small_pages(nb) : tensor_data_alloc(nb);
  if (!p) {
    char what[192], b[128];
    snprintf(what, sizeof what, "tensor %s %s", dtype_name(dtype), shape_str(b, sizeof b, rank, dims, NULL));
    return err_nomem(what, nb);
  }
  if (how & ALLOC_ZERO) memset(p, 0, nb);
  t->dtype = dtype;
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  t->data = p;
  t->nbytes = nb;
  t->owns_data = true;
  t->device = cur_buffers ? cur_buffers->device : NULL;
  return SMELT_OK;
}

smelt_status tensor_new(tensor **out, smelt_dtype dtype, int rank, const int64_t *dims) {
  tensor *t = malloc(sizeof *t);
  if (!t) return err_nomem("tensor header", sizeof *t);
  smelt_status s = tensor_alloc(t, dtype, rank, dims);
  if (s) {
    free(t);
    return s;
  }
  *out = t;
  return SMELT_OK;
}

void tensor_view(tensor *t, smelt_dtype dtype, int rank, const int64_t *dims, void *data) {
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->rank = rank;
  if (rank > 0) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  t->data = data;
  int64_t n = shape_numel(rank, dims);
  size_t nb = 0;
  t->nbytes = n > 0 && dtype_nbytes(dtype, n, &nb) ? nb : 0;
}

smelt_status tensor_clone(tensor *dst, const tensor *src) {
  if (src->kind == TENSOR_KIND_SEQUENCE) {
    memset(dst, 0, sizeof *dst);
    dst->kind = TENSOR_KIND_SEQUENCE;
    dst->dtype = src->dtype;
    if (src->seq_len) {
      dst->seq = calloc((size_t)src->seq_len, sizeof *dst->seq);
      if (!dst->seq) return err_nomem("sequence", sizeof *dst->seq * (size_t)src->seq_len);
    }
    for (int i = 0; i < src->seq_len; i++) {
      dst->seq[i] = malloc(sizeof(tensor));
      smelt_status s = dst->seq[i] ? tensor_clone(dst->seq[i], src->seq[i])
                                   : err_nomem("sequence element", sizeof(tensor));
      dst->seq_len = i + 1;
      if (s) {
        if (!dst->seq[i]) dst->seq_len = i;
        tensor_release(dst);
        return s;
      }
    }
    return SMELT_OK;
  }
  if (src->kind == TENSOR_KIND_OPTIONAL_NONE) {
    memset(dst, 0, sizeof *dst);
    dst->kind = src->kind;
    dst->dtype = src->dtype;
    return SMELT_OK;
  }
  TRY(tensor_alloc(dst, src->dtype, src->rank, src->dims));
  if (src->nbytes) memcpy(dst->data, src->data, src->nbytes);
  return SMELT_OK;
}

void tensor_release(tensor *t) {
  if (!t) return;
  if (t->owns_data) tensor_data_free(t->data);
  for (int i = 0; i < t->seq_len; i++) tensor_free(t->seq[i]);
  free(t->seq);
  memset(t, 0, sizeof *t);
}

void tensor_free(tensor *t) {
  if (!t) return;
  tensor_release(t);
  free(t);
}

double tensor_get_f64(const tensor *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case SMELT_F32: return ((const float *)p)[i];
    case SMELT_F64: return ((const double *)p)[i];
    case SMELT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case SMELT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case SMELT_I8: return ((const int8_t *)p)[i];
    case SMELT_U8: return ((const uint8_t *)p)[i];
    case SMELT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case SMELT_I16: return ((const int16_t *)p)[i];
    case SMELT_U16: return ((const uint16_t *)p)[i];
    case SMELT_I32: return ((const int32_t *)p)[i];
    case SMELT_U32: return ((const uint32_t *)p)[i];
    case SMELT_I64: return (double)((const int64_t *)p)[i];
    case SMELT_U64: return (double)((const uint64_t *)p)[i];
    case SMELT_I4: case SMELT_U4: case SMELT_I2: case SMELT_U2:
      return sb_int_value(t->dtype, sb_get(p, dtype_bits(t->dtype), i));
    case SMELT_F4E2M1: return sb_f4e2m1_value(sb_get(p, 4, i));
    case SMELT_F8E8M0: {
      unsigned e = ((const uint8_t *)p)[i];
      return e == 0xff ? NAN : ldexp(1.0, (int)e - 127);
    }
    default: return 0;
  }
}

int64_t tensor_get_i64(const tensor *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case SMELT_I64: return ((const int64_t *)p)[i];
    case SMELT_U64: return (int64_t)((const uint64_t *)p)[i];
    case SMELT_I32: return ((const int32_t *)p)[i];
    case SMELT_U32: return ((const uint32_t *)p)[i];
    case SMELT_I16: return ((const int16_t *)p)[i];
    case SMELT_U16: return ((const uint16_t *)p)[i];
    case SMELT_I8: return ((const int8_t *)p)[i];
    case SMELT_U8: return ((const uint8_t *)p)[i];
    case SMELT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case SMELT_I4: case SMELT_U4: case SMELT_I2: case SMELT_U2:
      return sb_int_value(t->dtype, sb_get(p, dtype_bits(t->dtype), i));
    default: {
      double d = tensor_get_f64(t, i);
      if (!(d > -9.2e18 && d < 9.2e18)) return d > 0 ? INT64_MAX : INT64_MIN;
      return (int64_t)d;
    }
  }
}

void tensor_set_f64(tensor *t, int64_t i, double v) {
  void *p = t->data;
  switch (t->dtype) {
    case SMELT_F32: ((float *)p)[i] = (float)v; break;
    case SMELT_F64: ((double *)p)[i] = v; break;
    case SMELT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    case SMELT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case SMELT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case SMELT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case SMELT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case SMELT_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case SMELT_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case SMELT_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case SMELT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case SMELT_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case SMELT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case SMELT_I4: case SMELT_U4: case SMELT_I2: case SMELT_U2:
      /* The low bits of the integer part; NaN and out-of-int64 values give 0. */
      sb_set(p, dtype_bits(t->dtype), i,
             v > -9.2e18 && v < 9.2e18 ? (unsigned)((uint64_t)(int64_t)v & 0xf) : 0);
      break;
    default: break;
  }
}
