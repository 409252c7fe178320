#include "ops/seq_util.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

void seq_init(tensor *out, smelt_dtype dt) {
  memset(out, 0, sizeof *out);
  out->kind = TENSOR_KIND_SEQUENCE;
  out->dtype = dt;
}

static smelt_status seq_grow(tensor *seq) {
  int n = seq->seq_len;
  if (n >= (1 << 30)) return err_set(SMELT_ERR_UNSUPPORTED, "sequence longer than 2^30 elements");
  if (n && (n & (n - 1))) return SMELT_OK; /* capacity is the next power of two */
  size_t cap = n ? 2 * (size_t)n : 4;
  tensor **p = realloc(seq->seq, cap * sizeof *p);
  if (!p) return err_nomem("sequence", cap * sizeof *p);
  seq->seq = p;
  return SMELT_OK;
}

smelt_status seq_append_move(tensor *seq, tensor *e) {
  if (e->kind != TENSOR_KIND_OPTIONAL_NONE) {
    if (seq->dtype == SMELT_UNDEFINED) seq->dtype = e->dtype;
    else if (e->dtype != seq->dtype && e->dtype != SMELT_UNDEFINED)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "cannot add a %s tensor to a sequence of %s",
                     dtype_name(e->dtype), dtype_name(seq->dtype));
  }
  TRY(seq_grow(seq));
  tensor *h = malloc(sizeof *h);
  if (!h) return err_nomem("sequence element", sizeof *h);
  *h = *e;
  memset(e, 0, sizeof *e);
  seq->seq[seq->seq_len++] = h;
  return SMELT_OK;
}

smelt_status seq_append_clone(tensor *seq, const tensor *t) {
  tensor copy;
  TRY(tensor_clone(&copy, t));
  smelt_status s = seq_append_move(seq, &copy);
  tensor_release(&copy);
  return s;
}

smelt_status seq_check(const tensor *t, const char *what) {
  if (!t) return err_set(SMELT_ERR_INVALID_MODEL, "%s is missing", what);
  if (t->kind != TENSOR_KIND_SEQUENCE)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s is a %s, expected a sequence", what,
                   t->kind == TENSOR_KIND_OPTIONAL_NONE ? "missing optional" : "tensor");
  return SMELT_OK;
}

smelt_status seq_position(const tensor *pos, int n, bool allow_end, const char *what, int *out) {
  if (pos->kind != TENSOR_KIND_TENSOR || (pos->dtype != SMELT_I32 && pos->dtype != SMELT_I64))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must be an int32 or int64 tensor", what);
  if (tensor_numel(pos) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s must hold one value, it has %lld", what,
                   (long long)tensor_numel(pos));
  int64_t p = tensor_get_i64(pos, 0), hi = allow_end ? n : n - 1;
  if (p < -(int64_t)n || p > hi)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "%s %lld is out of range [%d, %lld] for a sequence "
                   "of %d", what, (long long)p, -n, (long long)hi, n);
  *out = (int)(p < 0 ? p + n : p);
  return SMELT_OK;
}
