/* RotaryEmbedding (opset 23).  X is [B, H, S, D] or [B, S, H*D] (num_heads).
 * The first rotary_embedding_dim (default D) elements of each head vector are
 * rotated in pairs -- the two halves, or even/odd elements when interleaved --
 * by cos/sin from the caches: [B, S, rd/2] indexed by (b, s), or
 * [max_position, rd/2] indexed by position_ids[b, s].  The rest is copied.
 * Computed in double per head vector. */
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"

typedef struct rope_geom {
  bool is3d, interleaved;
  int64_t B, H, S, D, rd;
} rope_geom;

static smelt_status rope_plan(op_ctx *c, rope_geom *g) {
  const tensor *x = c->in[0], *pos = op_in(c, 3);
  TRY(nn_check_float(c, 0, "X"));
  TRY(nn_check_same_dtype(c, 1, "cos_cache", 0, "X"));
  TRY(nn_check_same_dtype(c, 2, "sin_cache", 0, "X"));
  if (pos && pos->dtype != SMELT_I64 && pos->dtype != SMELT_UNDEFINED)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 3 (position_ids) has type %s, expected int64",
                   dtype_name(pos->dtype));
  if (x->rank != 3 && x->rank != 4)
    return err_set(SMELT_ERR_INVALID_MODEL, "input 0 (X) has rank %d, expected 3 or 4", x->rank);
  memset(g, 0, sizeof *g);
  g->is3d = x->rank == 3;
  g->interleaved = op_attr_int(c, "interleaved", 0) != 0;
  g->B = x->dims[0];
  if (g->is3d) {
    g->H = op_attr_int(c, "num_heads", 0);
    if (g->H < 1) return err_set(SMELT_ERR_INVALID_MODEL, "3-D input needs num_heads >= 1");
    g->S = x->dims[1];
    if (dim_known(x->dims[2]) && x->dims[2] % g->H)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "hidden size %lld is not divisible by num_heads %lld",
                     (long long)x->dims[2], (long long)g->H);
    g->D = dim_known(x->dims[2]) ? x->dims[2] / g->H : DIM_UNKNOWN;
  } else {
    g->H = x->dims[1];
    g->S = x->dims[2];
    g->D = x->dims[3];
  }
  g->rd = op_attr_int(c, "rotary_embedding_dim", 0);
  if (g->rd == 0) g->rd = g->D;
  if (dim_known(g->D) && (g->rd < 0 || g->rd > g->D || g->rd % 2))
    return err_set(SMELT_ERR_INVALID_MODEL, "rotary_embedding_dim %lld must be even and at most the head size %lld",
                   (long long)g->rd, (long long)g->D);
  int want = pos ? 2 : 3;
  for (int i = 1; i <= 2; i++) {
    const tensor *t = c->in[i];
    if (t->rank != want)
      return err_set(SMELT_ERR_INVALID_MODEL, "input %d (%s) has rank %d, expected %d", i,
                     i == 1 ? "cos_cache" : "sin_cache", t->rank, want);
    int64_t last = t->dims[t->rank - 1];
    if (dim_known(last) && dim_known(g->rd) && last != g->rd / 2)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d's last dim %lld is not rotary_embedding_dim/2 = %lld",
                     i, (long long)last, (long long)(g->rd / 2));
  }
  return SMELT_OK;
}

static smelt_status rope_infer(op_ctx *c) {
  rope_geom g;
  TRY(rope_plan(c, &g));
  op_out_like(c, 0, 0);
  return SMELT_OK;
}

static smelt_status rope_run(op_ctx *c) {
  rope_geom g;
  TRY(rope_plan(c, &g));
  const tensor *x = c->in[0], *cs = c->in[1], *sn = c->in[2], *pos = op_in(c, 3);
  tensor *y = c->out[0];
  if (pos && (pos->rank != 2 || pos->dims[0] != g.B || pos->dims[1] != g.S))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "input 3 (position_ids) must be [%lld, %lld]",
                   (long long)g.B, (long long)g.S);
  if (!pos && (cs->dims[0] != g.B || cs->dims[1] != g.S || sn->dims[0] != g.B || sn->dims[1] != g.S))
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "without position_ids the caches must be [%lld, %lld, rd/2]",
                   (long long)g.B, (long long)g.S);
  int64_t half = g.rd / 2, npos = pos ? cs->dims[0] : 0;
  double *v = NULL, *cb = NULL, *sb = NULL;
  smelt_status st = nn_alloc((void **)&v, g.D, sizeof(double), "rotary row");
  if (!st) st = nn_alloc((void **)&cb, half, sizeof(double), "rotary row");
  if (!st) st = nn_alloc((void **)&sb, half, sizeof(double), "rotary row");
  for (int64_t b = 0; !st && b < g.B; b++)
    for (int64_t s = 0; !st && s < g.S; s++) {
      int64_t row = b * g.S + s;
      if (pos) {
        row = ((const int64_t *)pos->data)[b * g.S + s];
        if (row < 0 || row >= npos) {
          st = err_set(SMELT_ERR_RUNTIME, "position_ids[%lld][%lld] = %lld is outside the cache of %lld",
                       (long long)b, (long long)s, (long long)row, (long long)npos);
          break;
        }
      }
      nn_load_f64(cs->dtype, cs->data, row * half, 1, half, cb);
      nn_load_f64(sn->dtype, sn->data, row * half, 1, half, sb);
      for (int64_t h = 0; h < g.H; h++) {
        int64_t off = g.is3d ? ((b * g.S + s) * g.H + h) * g.D : ((b * g.H + h) * g.S + s) * g.D;
        nn_load_f64(x->dtype, x->data, off, 1, g.D, v);
        for (int64_t k = 0; k < half; k++) {
          int64_t i1 = g.interleaved ? 2 * k : k, i2 = g.interleaved ? 2 * k + 1 : k + half;
          double x1 = v[i1], x2 = v[i2];
          v[i1] = cb[k] * x1 - sb[k] * x2;
          v[i2] = sb[k] * x1 + cb[k] * x2;
        }
        nn_store_f64(y->dtype, y->data, off, 1, g.D, v);
      }
    }
  free(v);
  free(cb);
  free(sb);
  return st;
}

const op_def op_family_rotary[] = {
    {"RotaryEmbedding", "", 3, 4, 1, 1, rope_infer, rope_run, false},
    {0}};
