/* Last-position logits (see last_logits.h).
 *
 * Matches, from the logits output back:
 *   logits = E_k(... E_1(MatMul(A, W)))      A rank 3 [batch, seq, hidden],
 *                                            W rank 2 (a weight: the same
 *                                            for every position)
 * where each E_i is Add / Sub / Mul / Div with an operand of rank <= 1 (a
 * bias or a scale: nothing that varies along seq) or Tanh (soft-capping),
 * each value in the chain is read only by the next node and the logits by
 * nothing in the graph (their shape changes).  Rewrites it as
 *   A1 = Slice(A, starts [-1], ends [INT64_MAX], axes [1])   [batch, 1, hidden]
 *   logits = E_k(... E_1(MatMul(A1, W)))                     [batch, 1, vocab]
 * Every op in the chain is position-wise, so the one row each sequence keeps
 * holds exactly what the last row of the full logits held; a prefill of n
 * tokens then runs the LM head (GPT-2: 768 x 50257) over one row instead of
 * n.  The chain's values (the logits output too) get 1 as their seq dim.
 *
 * Complexity: O(nodes + uses) (the rewriter's use lists; the chain is
 * bounded). */
#include "passes/last_logits.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "passes/rewrite.h"
#include "util/err.h"
#include "util/quote.h"

#define LAST_LOGITS_MAX_CHAIN 8

static bool per_position(rewriter *w, int id, int from) {
  const ir_node *nd = rw_node(w, id);
  if (rw_is_op(w, id, "Tanh")) return nd->n_inputs == 1;
  if (!rw_is_op(w, id, "Add") && !rw_is_op(w, id, "Sub") && !rw_is_op(w, id, "Mul") && !rw_is_op(w, id, "Div"))
    return false;
  if (nd->n_inputs != 2) return false;
  int other = nd->inputs[0] == from ? nd->inputs[1] : nd->inputs[0];
  if (nd->inputs[0] == from && nd->inputs[1] == from) return true; /* x * x */
  const ir_value *ov = rw_val(w, other);
  return ov->rank >= 0 && ov->rank <= 1;
}

static smelt_status i64_const(rewriter *w, const char *base, int64_t x, int *id) {
  tensor *t;
  int64_t one = 1;
  TRY(rw_tensor(&t, SMELT_I64, 1, &one));
  ((int64_t *)t->data)[0] = x;
  return rw_add_constant(w, base, t, id);
}

smelt_status pass_last_logits(ir_graph *g, const pass_options *o, pass_report *r, int logits, bool *done, char *why,
                              size_t why_n) {
  *done = false;
  if (ir_graph_opset(g, "") < 10) {
    snprintf(why, why_n, "opset %lld has no Slice with inputs", (long long)ir_graph_opset(g, ""));
    return SMELT_OK;
  }
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  if (rw_n_uses(&w, logits) > 0) {
    snprintf(why, why_n, "%s is read inside the graph too", q(rw_val(&w, logits)->name));
    return rw_end(&w, SMELT_OK, &(int){0});
  }
  int chain[LAST_LOGITS_MAX_CHAIN + 1], n = 0, v = logits, mm = -1;
  while (n <= LAST_LOGITS_MAX_CHAIN) {
    int p = rw_producer(&w, v);
    if (p < 0) break;
    if (rw_is_op(&w, p, "MatMul")) {
      mm = p;
      break;
    }
    const ir_node *nd = rw_node(&w, p);
    int from = -1;
    for (int k = 0; k < nd->n_inputs && from < 0; k++) {
      const ir_value *iv = rw_val(&w, nd->inputs[k]);
      if (iv->rank == 3) from = nd->inputs[k];
    }
    if (from < 0 || !per_position(&w, p, from) || (v != logits && rw_sole_user(&w, v) < 0)) break;
    chain[n++] = v;
    v = from;
  }
  smelt_status s = SMELT_OK;
  const ir_node *m = mm >= 0 ? rw_node(&w, mm) : NULL;
  if (!m || m->n_inputs != 2 || rw_val(&w, m->inputs[0])->rank != 3 || rw_val(&w, m->inputs[1])->rank != 2 ||
      rw_val(&w, logits)->rank != 3 || (v != logits && rw_sole_user(&w, v) < 0)) {
    snprintf(why, why_n, "%s is not a MatMul of [batch, seq, hidden] by a 2-D weight, through position-wise ops",
             q(rw_val(&w, logits)->name));
    return rw_end(&w, s, &(int){0});
  }
  chain[n++] = v;
  int a = m->inputs[0], sl = -1, a1 = -1, starts = -1, ends = -1, axes = -1;
  s = i64_const(&w, "smelt_last_start", -1, &starts);
  if (!s) s = i64_const(&w, "smelt_last_end", INT64_MAX, &ends);
  if (!s) s = i64_const(&w, "smelt_last_axis", 1, &axes);
  if (!s) s = rw_add_value(&w, "smelt_last_row", a, &a1);
  if (!s) s = rw_add_node(&w, "smelt_last_row", "Slice", "", 4, 1, 0, &sl);
  if (!s) s = rw_set_input(&w, sl, 0, a);
  if (!s) s = rw_set_input(&w, sl, 1, starts);
  if (!s) s = rw_set_input(&w, sl, 2, ends);
  if (!s) s = rw_set_input(&w, sl, 3, axes);
  if (!s) {
    rw_set_output(&w, sl, 0, a1);
    s = rw_set_input(&w, mm, 0, a1);
  }
  if (!s) {
    rw_val(&w, a1)->dims[1] = 1;
    for (int i = 0; i < n; i++)
      if (rw_val(&w, chain[i])->rank == 3) rw_val(&w, chain[i])->dims[1] = 1;
    pass_log(r, "last-position logits: %s computed for the last position only (%d op(s) after its MatMul)",
             q(rw_val(&w, logits)->name), n - 1);
    w.changes++;
    *done = true;
  }
  int changes = 0;
  return rw_end(&w, s, &changes);
}
