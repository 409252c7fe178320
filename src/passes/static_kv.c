/* The static KV cache rewrite (see static_kv.h).
 *
 * Matches, per layer cache (past input P, present output R):
 *   R = Concat(P', new, axis = 2 | -2)     rank 4, P' = P through one-input
 *                                          Concat / Identity nodes
 * where every other reader of P (or of P') is a Shape node.  Rewrites it as
 *   P                 now [T, B, H, D]: the cache's valid prefix, time-major
 *   R = smelt.KVAppend(P, new)             [T + n, B, H, D], a view of P's
 *                                          buffer with new's rows written in
 *   R' = Transpose(R, [1, 2, 0, 3])        what R's readers read instead
 *   Shape(P) -> Gather([1, 2, 0, 3])       Shape readers see the old dims
 *   Shape(R') -> Shape(R) -> Gather(...)
 * R' is then only read by attention: fuse_attention folds the Transpose into
 * smelt.Attention's k_perm / v_perm and it disappears -- attention reads the
 * cache in place, with B*H*D as its row stride, and the step neither
 * allocates nor copies the cache.  What else reads R' (a repeat_kv Expand)
 * still gets the Transpose, a copy: the generator says so in the log.
 *
 * Complexity: O(nodes + uses). */
#include "passes/static_kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/quote.h"

static const int64_t TO_TIME_MAJOR[4] = {2, 0, 1, 3}; /* [B,H,T,D] -> [T,B,H,D] */
static const int64_t FROM_TIME_MAJOR[4] = {1, 2, 0, 3};

static bool is_alias_node(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  return (rw_is_op(w, id, "Identity") || (rw_is_op(w, id, "Concat") && nd->n_inputs == 1)) && nd->n_outputs == 1;
}

static bool plain_shape(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  return rw_is_op(w, id, "Shape") && !ir_attr_find(nd, "start") && !ir_attr_find(nd, "end");
}

/* The Concat writing R, when it matches; else -1 with why set. */
static int match_one(rewriter *w, int P, int R, char *why, size_t why_n) {
  const ir_value *pv = rw_val(w, P);
  int c = rw_producer(w, R);
  if (pv->rank != 4 || rw_is_output(w, P)) {
    snprintf(why, why_n, "%s is not a rank-4 input read by the graph only", q(pv->name));
    return -1;
  }
  if (c < 0 || !rw_is_op(w, c, "Concat") || rw_node(w, c)->n_inputs != 2) {
    snprintf(why, why_n, "%s is not written by a two-input Concat", q(rw_val(w, R)->name));
    return -1;
  }
  int64_t axis = ir_attr_int(rw_node(w, c), "axis", 0);
  if (axis != 2 && axis != -2) {
    snprintf(why, why_n, "the Concat writing %s joins axis %lld, not the sequence axis 2", q(rw_val(w, R)->name),
             (long long)axis);
    return -1;
  }
  int v = rw_node(w, c)->inputs[0];
  for (int guard = 0; guard < 8 && v != P; guard++) {
    int p = rw_producer(w, v);
    if (p < 0 || !is_alias_node(w, p)) break;
    v = rw_node(w, p)->inputs[0];
  }
  if (v != P) {
    snprintf(why, why_n, "the Concat writing %s does not start from %s", q(rw_val(w, R)->name), q(pv->name));
    return -1;
  }
  /* every reader of P and its aliases: an alias, a Shape or the Concat */
  int stack[16], n = 0;
  stack[n++] = P;
  while (n > 0) {
    int a = stack[--n];
    if (a != P && rw_is_output(w, a)) {
      snprintf(why, why_n, "%s (the past) is a graph output", q(rw_val(w, a)->name));
      return -1;
    }
    for (int u = 0; u < w->uses[a].n; u++) {
      int id = w->uses[a].node[u];
      if (id == c || plain_shape(w, id)) continue;
      if (is_alias_node(w, id) && n < 16) {
        stack[n++] = rw_node(w, id)->outputs[0];
        continue;
      }
      char b[160];
      snprintf(why, why_n, "%s reads the past %s itself (only Shape and the Concat may)", rw_name(w, id, b, sizeof b),
               q(pv->name));
      return -1;
    }
  }
  return c;
}

static smelt_status add_perm_const(rewriter *w, int *id) {
  tensor *t;
  int64_t four = 4;
  TRY(rw_tensor(&t, SMELT_I64, 1, &four));
  memcpy(t->data, FROM_TIME_MAJOR, sizeof FROM_TIME_MAJOR);
  return rw_add_constant(w, "smelt_kv_perm", t, id);
}

/* Shape node `sh` reads `from` (old layout): it reads `tm` (time-major)
 * instead and a Gather puts the dims back in the old order. */
static smelt_status reshape_shape(rewriter *w, int sh, int tm, int perm) {
  int out = rw_node(w, sh)->outputs[0], mid, g;
  TRY(rw_add_value(w, "smelt_kv_shape", out, &mid));
  TRY(rw_set_input(w, sh, 0, tm));
  rw_set_output(w, sh, 0, mid);
  TRY(rw_add_node(w, "smelt_kv_shape", "Gather", "", 2, 1, 1, &g));
  TRY(rw_set_input(w, g, 0, mid));
  TRY(rw_set_input(w, g, 1, perm));
  rw_set_output(w, g, 0, out);
  return rw_attr_int(w, g, 0, "axis", 0);
}

/* Every Shape reading v (directly or through aliases) reads tm instead. */
static smelt_status shapes_to(rewriter *w, int v, int tm, int perm) {
  int stack[16], n = 0, shapes[64], ns = 0;
  stack[n++] = v;
  while (n > 0) {
    int a = stack[--n];
    for (int u = 0; u < w->uses[a].n; u++) {
      int id = w->uses[a].node[u];
      if (!rw_live(w, id) || rw_node(w, id)->inputs[0] != a) continue;
      if (plain_shape(w, id) && ns < 64) shapes[ns++] = id;
      else if (is_alias_node(w, id) && n < 16) stack[n++] = rw_node(w, id)->outputs[0];
    }
  }
  for (int i = 0; i < ns; i++) TRY(reshape_shape(w, shapes[i], tm, perm));
  return SMELT_OK;
}

static smelt_status rewrite_one(rewriter *w, int P, int R, int c, int perm, int64_t total_dim) {
  int nw = rw_node(w, c)->inputs[1], rs, id;
  ir_value *pv = rw_val(w, P);
  int64_t old[4];
  memcpy(old, pv->dims, sizeof old);
  TRY(shapes_to(w, P, P, perm));
  pv = rw_val(w, P);
  for (int d = 0; d < 4; d++) pv->dims[d] = old[TO_TIME_MAJOR[d]];
  /* R's readers read R' = Transpose(R) */
  TRY(rw_add_value(w, "smelt_kv_view", R, &rs));
  TRY(rw_replace_uses(w, R, rs));
  TRY(rw_replace_node(w, c, "KVAppend", "smelt", 2, 1, &id));
  TRY(rw_set_input(w, id, 0, P));
  TRY(rw_set_input(w, id, 1, nw));
  TRY(rw_attr_int(w, id, 0, "total_dim", total_dim));
  ir_value *rv = rw_val(w, R), *sv = rw_val(w, rs);
  rv->dims[0] = sv->dims[2] = total_dim;
  rv->dims[1] = sv->dims[0];
  rv->dims[2] = sv->dims[1];
  rv->dims[3] = sv->dims[3];
  int t;
  TRY(rw_add_node(w, "smelt_kv_view", "Transpose", "", 1, 1, 1, &t));
  TRY(rw_set_input(w, t, 0, R));
  rw_set_output(w, t, 0, rs);
  TRY(rw_attr_ints(w, t, 0, "perm", FROM_TIME_MAJOR, 4));
  return shapes_to(w, rs, R, perm);
}

smelt_status pass_static_kv(ir_graph *g, const pass_options *o, pass_report *r, const int *past,
                            const int *present, int n, int64_t total_dim, bool *done, char *why, size_t why_n) {
  *done = false;
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  int *concat = calloc((size_t)n + 1, sizeof *concat);
  if (!concat) s = err_nomem("static KV cache", sizeof *concat * (size_t)n);
  bool ok = !s;
  for (int j = 0; ok && j < n; j++) ok = (concat[j] = match_one(&w, past[j], present[j], why, why_n)) >= 0;
  int perm = -1;
  if (ok) s = add_perm_const(&w, &perm);
  for (int j = 0; ok && !s && j < n; j++) {
    s = rewrite_one(&w, past[j], present[j], concat[j], perm, total_dim);
    w.changes++;
  }
  if (ok && !s) {
    pass_log(r, "static KV cache: %d past -> Concat -> present caches rewritten to smelt.KVAppend (in place)", n);
    *done = true;
  }
  free(concat);
  int changes = 0;
  return rw_end(&w, s, &changes);
}
