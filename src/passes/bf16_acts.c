/* bf16 activations between convolutions: under precision bf16, the output
 * of a convolution that runs on the bf16 kernels is kept in bf16 when every
 * node that reads it is such a convolution too, reading it as its input X
 * (never as a residual, never a graph output).  The producer then rounds
 * each value once after its epilogue (bias, residual, clamp in fp32) and
 * writes 2 bytes, and each consumer reads 2 where it read 4 -- the rounding
 * is the one its kernel did anyway when it converted its input to bf16,
 * so the numbers are the same but for bf16 Winograd, whose input transform
 * now starts from the rounded values (kernels/conv_bf16.h).
 *
 * "Runs on the bf16 kernels" is the registry's own pick for the node's
 * shape at the session's thread count (ops/conv_route.h:
 * conv_bf16_io_applies: the vdpbf16ps forms, which read and write bf16;
 * not AMX, not the fp32 kernels the cost model prefers for some shapes,
 * not an activation left for a pass after the kernel).  If the pick at run
 * time differs (another thread count, SMELT_CONV forcing), the op converts
 * through f32 copies: slower, never wrong.
 *
 * The one exception to rewrite.h's rule that a value's dtype never changes
 * under its consumers: each of them takes both (ops/conv.c, conv_plan).
 * The producer gets bf16_out = 1 (its inference then gives bf16).
 * SMELT_BF16_ACTS=0 turns the pass off (for benches and diagnosis).
 *
 * Complexity: O(n + v), one look at each convolution and its readers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv_bf16.h" /* cb_form */
#include "ops/conv_core.h"
#include "passes/rewrite.h"
#include "util/err.h"

static bool is_conv(const ir_node *nd) {
  return !strcmp(nd->op_type, "Conv") && (!strcmp(nd->domain, "smelt") || !nd->domain[0]);
}

/* Every live reader of v is a convolution on the bf16 kernels reading v as
 * X or as the residual of a smelt.Conv, not as a weight or bias */
static bool readers_take_bf16(rewriter *w, int v, int threads) {
  const rw_uses *u = &w->uses[v];
  if (u->n == 0 || rw_is_output(w, v)) return false;
  for (int k = 0; k < u->n; k++) {
    const ir_node *nd = rw_node(w, u->node[k]);
    if (!rw_live(w, u->node[k]) || !is_conv(nd) || rw_has_subgraph(nd)) return false;
    bool fused = !strcmp(nd->domain, "smelt"), reads = false;
    for (int i = 0; i < nd->n_inputs; i++) {
      if (nd->inputs[i] != v) continue;
      if (i == 1 || i == 2 || (i == 3 && !fused) || i > 3) return false;
      reads = true;
    }
    if (!reads || !conv_node_bf16_io(w->g, nd, threads)) return false;
  }
  return true;
}

/* The same node again with bf16_out = 1 added */
static smelt_status mark_out(rewriter *w, int id) {
  int nid, slot;
  TRY(rw_with_attr(w, id, &nid, &slot));
  return rw_attr_int(w, nid, slot, "bf16_out", 1);
}

/* ---- channels-last ---- */

/* Whether bf16 activation v (produced by a conv node the first half of
 * the pass marked) should lie channels-last: its producer's kernel writes
 * a position's channels as one vector (the channel-vector and Winograd
 * forms), its channel count is even, and every reader gains or loses
 * nothing: X of a channel-vector 1x1 that reads it as it lies (no
 * converted copy), or the residual of a channel-vector or Winograd form
 * (added before the transposed store).  With `any` (SMELT_BF16_CL=all,
 * for measuring), X of any bf16-kernel form (gathered by its fill). */
static bool cl_wanted(rewriter *w, int v, int threads, bool any) {
  const ir_value *val = rw_val(w, v);
  int p = rw_producer(w, v);
  if (val->dtype != SMELT_BF16 || val->rank != 4 || !dim_known(val->dims[1]) || val->dims[1] % 2 || p < 0) return false;
  int fp = conv_node_bf16_form(w->g, rw_node(w, p), threads, NULL);
  if (fp != CB_FORM_MV && fp != CB_FORM_WINO) return false;
  const rw_uses *u = &w->uses[v];
  for (int k = 0; k < u->n; k++) {
    const ir_node *nd = rw_node(w, u->node[k]);
    bool direct;
    int f = conv_node_bf16_form(w->g, nd, threads, &direct);
    if (f < 0) return false;
    for (int i = 0; i < nd->n_inputs; i++) {
      if (nd->inputs[i] != v) continue;
      if (i == 0 && !direct && !any) return false;
      if (i == 3 && f != CB_FORM_MV && f != CB_FORM_WINO) return false;
    }
  }
  return true;
}

/* Node id again with the attribute name = 1; *id becomes the new node */
static smelt_status mark(rewriter *w, int *id, const char *name) {
  int nid, slot;
  TRY(rw_with_attr(w, *id, &nid, &slot));
  *id = nid;
  return rw_attr_int(w, nid, slot, name, 1);
}

/* The bf16 activations cl_wanted picks: their producers get cl_out = 1,
 * each reader cl_in = 1 (X) and / or cl_res = 1 (the residual) */
static smelt_status channels_last(rewriter *w, int threads, int *kept) {
  const char *env = getenv("SMELT_BF16_CL"); /* 0: off; all: every bf16-kernel reader */
  if (env && !strcmp(env, "0")) return SMELT_OK;
  bool any = env && !strcmp(env, "all");
  ir_graph *g = w->g;
  int nv = g->n_values, n = g->n_nodes;
  bool *cl = calloc((size_t)nv + 1, 1);
  if (!cl) return err_nomem("bf16_acts: channels-last marks", (size_t)nv + 1);
  for (int id = 0; id < n; id++) {
    if (!rw_live(w, id)) continue;
    const ir_node *nd = rw_node(w, id);
    if (!is_conv(nd) || !ir_attr_int(nd, "bf16_out", 0) || nd->n_outputs != 1 || nd->outputs[0] < 0) continue;
    int v = nd->outputs[0];
    if (cl_wanted(w, v, threads, any)) cl[v] = true, (*kept)++;
  }
  smelt_status s = SMELT_OK;
  for (int id0 = 0; !s && id0 < n; id0++) {
    if (!rw_live(w, id0) || !is_conv(rw_node(w, id0))) continue;
    const ir_node *nd = rw_node(w, id0);
    bool out = nd->n_outputs == 1 && nd->outputs[0] >= 0 && cl[nd->outputs[0]];
    bool in = nd->n_inputs > 0 && nd->inputs[0] >= 0 && cl[nd->inputs[0]];
    bool res = nd->n_inputs > 3 && nd->inputs[3] >= 0 && cl[nd->inputs[3]];
    if (!out && !in && !res) continue;
    char nb[160];
    pass_log(w->r, "bf16_acts: %s reads%s%s and writes %s channels-last", rw_name(w, id0, nb, sizeof nb),
             in ? " X" : "", res ? (in ? " and the residual" : " the residual") : (in ? "" : " nothing"),
             out ? "its output" : "nothing");
    int id = id0;
    if (out) s = mark(w, &id, "cl_out");
    if (!s && in) s = mark(w, &id, "cl_in");
    if (!s && res) s = mark(w, &id, "cl_res");
    if (!s) w->changes++;
  }
  free(cl);
  return s;
}

smelt_status pass_bf16_acts(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  if (o->precision != SMELT_PRECISION_BF16 || o->mode == SMELT_MODE_EAGER) return SMELT_OK;
  const char *env = getenv("SMELT_BF16_ACTS"); /* 0: off (benches, diagnosis) */
  if (env && !strcmp(env, "0")) return SMELT_OK;
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  int n = g->n_nodes, kept = 0;
  for (int id = 0; !s && id < n; id++) {
    if (!rw_live(&w, id)) continue;
    const ir_node *nd = rw_node(&w, id);
    if (!is_conv(nd) || nd->n_outputs != 1 || nd->outputs[0] < 0 || ir_attr_int(nd, "bf16_out", 0)) continue;
    int v = nd->outputs[0];
    if (rw_val(&w, v)->dtype != SMELT_F32 || !conv_node_bf16_io(g, nd, o->threads) ||
        !readers_take_bf16(&w, v, o->threads))
      continue;
    char nb[160];
    pass_log(r, "bf16_acts: %s writes its output in bf16 for the %d bf16 convolution(s) reading it",
             rw_name(&w, id, nb, sizeof nb), w.uses[v].n);
    s = mark_out(&w, id);
    if (!s) rw_val(&w, v)->dtype = SMELT_BF16, kept++, w.changes++;
  }
  if (!s && kept) pass_log(r, "bf16_acts: %d activation(s) kept in bf16 between convolutions", kept);
  int cl = 0;
  if (!s && kept) s = channels_last(&w, o->threads, &cl);
  if (!s && cl) pass_log(r, "bf16_acts: %d of them channels-last", cl);
  return rw_end(&w, s, changes);
}
