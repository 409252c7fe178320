/* smelt.KVAppend: the static KV cache's write (made by passes/static_kv.c for
 * a generator's decode graph, never by a model).
 *
 * Inputs: cache, float32 [T, B, H, D] -- the cache's valid prefix, time-major,
 * a view whose buffer (nbytes) holds max_length positions; new, float32
 * [B, H, n, D] -- this run's keys or values, as the model computes them.
 * Output: [T + n, B, H, D], a view of the cache's own buffer after new's rows
 * were written at positions T..T+n-1: nothing is allocated and the T rows
 * already there are not copied.  Time-major is what makes the prefix of any
 * length one contiguous tensor; attention reads it through its k_perm/v_perm
 * (row stride B*H*D).  Unlike every other op it writes into an input's
 * buffer: the generator owns that buffer and hands it in for this.
 * Attribute total_dim (int, default -1): the output's first dim while
 * shapes are symbolic (the pass names a symbol for T + n).
 * Errors: shapes that do not agree, or a buffer too small for T + n
 * positions (max_length reached). */
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

static smelt_status kv_check(op_ctx *c) {
  static const smelt_dtype f32_only[] = {SMELT_F32, SMELT_UNDEFINED};
  for (int i = 0; i < 2; i++) {
    if (!(c->static_infer && c->in[i]->dtype == SMELT_UNDEFINED)) TRY(op_check_dtype(c, i, f32_only));
    if (c->in[i]->rank >= 0 && c->in[i]->rank != 4)
      return err_set(SMELT_ERR_INVALID_MODEL, "KVAppend input %d has rank %d, not 4", i, c->in[i]->rank);
  }
  const tensor *k = c->in[0], *n = c->in[1];
  if (k->rank < 0 || n->rank < 0) return SMELT_OK;
  /* cache [T, B, H, D] against new [B, H, n, D] */
  static const int pair[3][2] = {{1, 0}, {2, 1}, {3, 3}};
  for (int i = 0; i < 3; i++) {
    int64_t a = k->dims[pair[i][0]], b = n->dims[pair[i][1]];
    if (dim_known(a) && dim_known(b) && a != b)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "KVAppend: the cache [T, B, H, D] has %lld at dim %d, the new "
                     "rows [B, H, n, D] %lld at dim %d", (long long)a, pair[i][0], (long long)b, pair[i][1]);
  }
  return SMELT_OK;
}

static smelt_status kv_infer(op_ctx *c) {
  TRY(kv_check(c));
  const tensor *k = c->in[0], *n = c->in[1];
  if (k->rank < 0 || n->rank < 0) {
    nn_out_unknown(c, 0, SMELT_F32);
    return SMELT_OK;
  }
  int64_t dims[4] = {DIM_UNKNOWN, k->dims[1], k->dims[2], k->dims[3]};
  if (dim_known(k->dims[0]) && dim_known(n->dims[2])) dims[0] = k->dims[0] + n->dims[2];
  else if (c->static_infer) dims[0] = op_attr_int(c, "total_dim", DIM_UNKNOWN);
  for (int d = 1; d < 4; d++)
    if (!dim_known(dims[d])) dims[d] = n->dims[d == 3 ? 3 : d - 1];
  op_set_out(c, 0, SMELT_F32, 4, dims);
  return SMELT_OK;
}

static smelt_status kv_run(op_ctx *c) {
  TRY(kv_check(c));
  const tensor *k = c->in[0], *nw = c->in[1];
  int64_t T = k->dims[0], B = nw->dims[0], H = nw->dims[1], n = nw->dims[2], D = nw->dims[3];
  int64_t row = B * H * D, total = T + n;
  if (row > 0 && (size_t)total > k->nbytes / sizeof(float) / (size_t)row)
    return err_set(SMELT_ERR_INVALID_ARGUMENT,
                   "the static KV cache holds %zu positions; %lld needed (max_length reached)",
                   k->nbytes / sizeof(float) / (size_t)row, (long long)total);
  float *cache = k->data;
  const float *src = nw->data;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < n; i++)
        memcpy(cache + (T + i) * row + (b * H + h) * D, src + ((b * H + h) * n + i) * D, sizeof(float) * (size_t)D);
  tensor *y = c->out[0];
  memset(y, 0, sizeof *y);
  y->dtype = SMELT_F32;
  y->rank = 4;
  y->dims[0] = total;
  y->dims[1] = B;
  y->dims[2] = H;
  y->dims[3] = D;
  y->data = cache;
  y->nbytes = sizeof(float) * (size_t)(total * row);
  y->owns_data = false; /* the generator's buffer */
  return SMELT_OK;
}

const op_def op_family_kv_cache[] = {
    {"KVAppend", "smelt", 2, 2, 1, 1, kv_infer, kv_run, true},
    {0}};
