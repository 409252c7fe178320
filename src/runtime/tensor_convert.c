#include "runtime/tensor_convert.h"

#include <stdio.h>
#include <string.h>

#include "util/err.h"
#include "util/quote.h"

/* Stands in for the data of an empty tensor given with data == NULL, keeping the
 * invariant that a tensor with a value has data != NULL.  Zero bytes of it are
 * ever read or written. */
static const max_align_t empty_data;

static smelt_status public_err(const smelt_tensor *in, const char *what, const char *detail) {
  if (in->name) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor %s: %s%s", q(in->name), what, detail);
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor: %s%s", what, detail);
}

smelt_status tensor_from_public(const smelt_tensor *in, tensor *out) {
  memset(out, 0, sizeof *out);
  if (!in) return err_set(SMELT_ERR_INVALID_ARGUMENT, "tensor: NULL descriptor");
  char b[256];
  size_t es = dtype_size(in->dtype);
  int bits = dtype_bits(in->dtype);
  if (bits == 0) {
    snprintf(b, sizeof b, "%s (%d)", dtype_name(in->dtype), (int)in->dtype);
    return public_err(in, "unsupported element type ", b);
  }
  if (in->rank < 0 || in->rank > SMELT_MAX_RANK) {
    snprintf(b, sizeof b, "%d, expected 0..%d", in->rank, SMELT_MAX_RANK);
    return public_err(in, "rank is ", b);
  }
  int64_t n = shape_numel(in->rank, in->dims);
  shape_str(b, sizeof b, in->rank, in->dims, NULL);
  if (n < 0) return public_err(in, "invalid shape ", b);
  size_t need;
  if (!dtype_nbytes(in->dtype, n, &need) || need != in->nbytes) {
    char m[384];
    if (es)
      snprintf(m, sizeof m, "nbytes is %zu, but %s %s needs %llu x %zu", in->nbytes,
               dtype_name(in->dtype), b, (unsigned long long)n, es);
    else /* packed (see smelt_dtype_size) */
      snprintf(m, sizeof m, "nbytes is %zu, but %s %s needs ceil(%llu x %d / 8)", in->nbytes,
               dtype_name(in->dtype), b, (unsigned long long)n, bits);
    return public_err(in, m, "");
  }
  if (!in->data && in->nbytes) return public_err(in, "data is NULL", "");
  tensor_view(out, in->dtype, in->rank, in->dims, in->data ? in->data : (void *)&empty_data);
  return SMELT_OK;
}

smelt_status tensor_to_public(tensor *t, smelt_tensor *out) {
  if (t->kind != TENSOR_KIND_TENSOR)
    return err_set(SMELT_ERR_UNSUPPORTED, "a %s cannot be returned as a smelt_tensor",
                   t->kind == TENSOR_KIND_SEQUENCE ? "sequence" : "missing optional value");
  if (t->rank < 0 || t->rank > SMELT_MAX_RANK)
    return err_set(SMELT_ERR_INTERNAL, "tensor_to_public: rank %d", t->rank);
  void *data = t->data;
  if (!t->owns_data || !data) {
    data = tensor_data_alloc(t->nbytes);
    if (!data) return err_nomem("tensor data", t->nbytes);
    if (t->nbytes) memcpy(data, t->data, t->nbytes);
  }
  memset(out, 0, sizeof *out);
  out->dtype = t->dtype;
  out->rank = t->rank;
  if (t->rank) memcpy(out->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  out->data = data;
  out->nbytes = t->nbytes;
  out->owner = SMELT_OWNER_SMELT;
  if (t->owns_data) t->data = NULL; /* moved */
  tensor_release(t);
  return SMELT_OK;
}
