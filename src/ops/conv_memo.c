#include "ops/conv_memo.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ops/conv_route.h"
#include "ops/op_cache.h"
#include "ops/op_memo.h"
#include "util/err.h"

static const tensor *in_at(const op_ctx *c, int i) { return i < c->n_in ? c->in[i] : NULL; }

/* The operands' part of the memo: what a later run must match. */
static void key_of(const op_ctx *c, conv_memo_key *k) {
  memset(k, 0, sizeof *k);
  const tensor *x = c->in[0], *w = c->in[1], *b = in_at(c, 2), *r = in_at(c, 3), *y = c->out[0];
  k->n_in = c->n_in;
  k->xt = x->dtype, k->wt = w->dtype, k->bt = b ? b->dtype : SMELT_UNDEFINED, k->rt = r ? r->dtype : SMELT_UNDEFINED;
  k->yt = y->dtype;
  k->xrank = x->rank;
  if (x->rank > 0) memcpy(k->xdims, x->dims, sizeof(int64_t) * (size_t)x->rank);
  k->rn = r ? tensor_numel(r) : -1;
  k->yn = tensor_numel(y);
  k->w = w->data, k->b = b ? b->data : NULL;
  k->pool = c->pool;
  k->isa = isa_active();
}

/* Publishes rec as c's memo (route CM_NONE: this step takes the full path
 * without asking again). */
static void memo_end(op_ctx *c, const conv_memo *rec) {
  if (!rec) return;
  conv_memo *m = malloc(sizeof *m);
  if (!m) return; /* not remembered: later runs take the full path */
  *m = *rec;
  op_memo_put(c, m);
}

/* rec, keyed by this run's operands, where c's step has a memo slot still
 * empty; else NULL (then nothing is recorded). */
static conv_memo *memo_begin(op_ctx *c, conv_memo *rec) {
  if (!op_memo_open(c) || c->n_in < 2 || c->n_out != 1 || !c->in[0] || !c->in[1] || c->in[0]->rank < 0) return NULL;
  memset(rec, 0, sizeof *rec); /* route CM_NONE until a route notes itself */
  key_of(c, &rec->key);
  /* only weights and bias the session holds for good: their addresses name
   * them.  Others: a memo of no route, so later runs do not ask again */
  if (!c->cache || !op_input_is_constant(c, 1) || (in_at(c, 2) && !op_input_is_constant(c, 2))) {
    memo_end(c, rec);
    return NULL;
  }
  return rec;
}

smelt_status conv_memo_record_run(op_ctx *c, conv_epilogue *e) {
  conv_memo rec;
  e->rec = memo_begin(c, &rec);
  smelt_status st = conv_op_run(c, e);
  if (!st) memo_end(c, e->rec);
  e->rec = NULL; /* rec goes out of scope */
  return st;
}

void conv_memo_note(conv_memo *rec, conv_memo_route route, const conv2d_desc *d, const void *wts,
                    const conv2d_epilogue *kep) {
  if (!rec) return;
  rec->route = route, rec->d = *d, rec->wts = wts, rec->kep = *kep;
  rec->kep.residual = NULL;
}

static _Atomic size_t hits;

size_t conv_memo_hits(void) { return atomic_load_explicit(&hits, memory_order_relaxed); }
static void count_hit(void) { atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed); }

smelt_status conv_memo_run(op_ctx *c, bool *hit) {
  *hit = false;
  const conv_memo *m = op_memo_get(c);
  if (!m || m->route == CM_NONE || c->n_in < 2 || c->n_out != 1 || !c->in[0] || !c->in[1]) return SMELT_OK;
  conv_memo_key k;
  key_of(c, &k);
  if (memcmp(&m->key, &k, sizeof k)) return SMELT_OK;
  const tensor *x = c->in[0], *b = in_at(c, 2), *r = in_at(c, 3);
  tensor *y = c->out[0];
  conv2d_epilogue kep = m->kep;
  kep.residual = r && r->dtype == SMELT_F32 ? r->data : NULL;
  const uint16_t *rh = r && r->dtype == SMELT_BF16 ? r->data : NULL;
  const float *B = b ? b->data : NULL;
  bool xh = x->dtype == SMELT_BF16, yh = y->dtype == SMELT_BF16;
  switch (m->route) {
    case CM_BF16IO:
      *hit = true, count_hit();
      return conv2d_run_bf16io(c->pool, &m->d, m->wts, xh ? NULL : x->data, xh ? x->data : NULL, B, &kep, rh,
                               yh ? NULL : y->data, yh ? y->data : NULL, m->cl);
    case CM_DWCL:
      *hit = true, count_hit();
      return conv_dw_cl_run(c->pool, m->key.isa, &m->d, m->wts, B, &kep, xh ? NULL : x->data, xh ? x->data : NULL,
                            m->planes, y->data);
    case CM_FAST: {
      if (kep.residual == y->data && !m->residual_in_place) return SMELT_OK; /* the full path copies it */
      *hit = true, count_hit();
      TRY(conv2d_run_ep(c->pool, &m->d, m->wts, x->data, B, &kep, y->data));
      if (m->rest.kind != FUSED_ACT_NONE) {
        conv_epilogue rest = {.act = m->rest};
        conv_epilogue_after(c->pool, &rest, y->data, m->key.yn);
      }
      return SMELT_OK;
    }
    default: return SMELT_OK;
  }
}
