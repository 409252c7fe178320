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

/* Node *id again with the attribute name = 1; *id becomes the new node */
static smelt_status mark(rewriter *w, int *id, const char *name) {
  int nid, slot;
  TRY(rw_with_attr(w, *id, &nid, &slot));
  *id = nid;
  return rw_attr_int(w, nid, slot, name, 1);
}

/* ---- channels-last ---- */

/* The channels-last decision: cl[v] for every value, the greatest fixed
 * point of "v may lie so" (start with every candidate, drop one that breaks
 * a rule, again until none does -- dropping one never lets another in). */
typedef struct cl_state {
  rewriter *w;
  int threads;
  bool any; /* SMELT_BF16_CL=all: X of any bf16-kernel form, gathered by its fill */
  bool *cl;
} cl_state;

/* Whether node id's X (input 0) is marked channels-last */
static int x_cl_of(const cl_state *s, const ir_node *nd) {
  return nd->n_inputs > 0 && nd->inputs[0] >= 0 && s->cl[nd->inputs[0]];
}

/* The form node nd runs in with its X and Y as cl says (-1: not on the
 * bf16 kernels) */
static int form_of(const cl_state *s, const ir_node *nd) {
  int y_cl = nd->n_outputs == 1 && nd->outputs[0] >= 0 && s->cl[nd->outputs[0]];
  return conv_node_bf16_form(s->w->g, nd, s->threads, x_cl_of(s, nd), y_cl);
}

/* A 2-D MaxPool without Indices: channels-last in and out together
 * (kernels/pool2d.h: pool2d_max_cl_bf16, exact) */
static bool is_maxpool(const ir_node *nd) {
  return !strcmp(nd->op_type, "MaxPool") && !nd->domain[0] && !rw_has_subgraph(nd) &&
         (nd->n_outputs == 1 || nd->outputs[1] < 0);
}
static bool pool_cl_both(const cl_state *s, const ir_node *nd) {
  return is_maxpool(nd) && nd->n_inputs >= 1 && nd->inputs[0] >= 0 && nd->outputs[0] >= 0 && s->cl[nd->inputs[0]] &&
         s->cl[nd->outputs[0]];
}

/* A depthwise convolution writes its output channels-last whatever its X
 * (conv_dw_cl_run stages planes), and reads a channels-last X only when it
 * writes so too */
static bool dw_writes_cl(const cl_state *s, const ir_node *nd) {
  return is_conv(nd) && nd->n_outputs == 1 && nd->outputs[0] >= 0 && conv_node_dw_cl(s->w->g, nd);
}
static bool dw_reads_cl(const cl_state *s, const ir_node *nd) {
  return dw_writes_cl(s, nd) && s->cl[nd->outputs[0]];
}

/* v, marked, may stay channels-last: its producer writes a position's
 * channels as one vector (the channel-vector and Winograd forms' stores,
 * or a depthwise one, whatever its input); every reader takes it:
 * as X, a channel-vector form (a 1x1 reads it as it lies; others copy it
 * padded, a position's pairs together), a Winograd form (its input
 * transform on vectors of channels) or a depthwise one between such
 * activations; as the residual, a
 * channel-vector or Winograd form (added before its store). */
static bool cl_holds(const cl_state *s, int v) {
  rewriter *w = s->w;
  const ir_node *p = rw_node(w, rw_producer(w, v));
  int fp = form_of(s, p);
  if (fp != CB_FORM_MV && fp != CB_FORM_WINO && !dw_writes_cl(s, p) && !pool_cl_both(s, p)) return false;
  const rw_uses *u = &w->uses[v];
  for (int k = 0; k < u->n; k++) {
    const ir_node *nd = rw_node(w, u->node[k]);
    if (is_maxpool(nd)) {
      if (!pool_cl_both(s, nd)) return false;
      continue;
    }
    int f = form_of(s, nd);
    for (int i = 0; i < nd->n_inputs; i++) {
      if (nd->inputs[i] != v) continue;
      if (i == 0 && !(f == CB_FORM_MV || f == CB_FORM_WINO || (f >= 0 && s->any)) && !dw_reads_cl(s, nd)) return false;
      if (i == 3 && f != CB_FORM_MV && f != CB_FORM_WINO) return false;
    }
  }
  return true;
}

/* A candidate: a 4-D activation of an even channel count, written by a
 * convolution or a MaxPool (its first output), read only by live
 * convolutions (as X or as a smelt.Conv's residual) and MaxPools, not a
 * graph output */
static bool cl_candidate(rewriter *w, int v) {
  const ir_value *val = rw_val(w, v);
  int p = rw_producer(w, v);
  if (p < 0 || !rw_live(w, p) || (!is_conv(rw_node(w, p)) && !is_maxpool(rw_node(w, p))) ||
      rw_node(w, p)->outputs[0] != v)
    return false;
  if ((val->dtype != SMELT_F32 && val->dtype != SMELT_BF16) || val->rank != 4 || !dim_known(val->dims[1]) ||
      val->dims[1] % 2 || rw_is_output(w, v))
    return false;
  const rw_uses *u = &w->uses[v];
  if (u->n == 0) return false;
  for (int k = 0; k < u->n; k++) {
    const ir_node *nd = rw_node(w, u->node[k]);
    if (!rw_live(w, u->node[k]) || (!is_conv(nd) && !is_maxpool(nd)) || rw_has_subgraph(nd)) return false;
    bool fused = !strcmp(nd->domain, "smelt");
    for (int i = 0; i < nd->n_inputs; i++)
      if (nd->inputs[i] == v && i != 0 && !(i == 3 && fused)) return false;
  }
  return true;
}

/* The activations cl_holds keeps: bf16 (their producers bf16_out = 1)
 * and channels-last (cl_out = 1; each reader cl_in = 1 for X, cl_res = 1
 * for the residual) */
static smelt_status channels_last(rewriter *w, int threads, int *kept) {
  const char *env = getenv("SMELT_BF16_CL"); /* 0: off; all: every bf16-kernel reader */
  if (env && !strcmp(env, "0")) return SMELT_OK;
  ir_graph *g = w->g;
  int nv = g->n_values, n = g->n_nodes;
  cl_state s = {w, threads, env && !strcmp(env, "all"), calloc((size_t)nv + 1, 1)};
  if (!s.cl) return err_nomem("bf16_acts: channels-last marks", (size_t)nv + 1);
  for (int v = 0; v < nv; v++) s.cl[v] = cl_candidate(w, v);
  for (bool changed = true; changed;) {
    changed = false;
    for (int v = 0; v < nv; v++)
      if (s.cl[v] && !cl_holds(&s, v)) s.cl[v] = false, changed = true;
  }
  smelt_status st = SMELT_OK;
  for (int id0 = 0; !st && id0 < n; id0++) {
    if (!rw_live(w, id0) || (!is_conv(rw_node(w, id0)) && !is_maxpool(rw_node(w, id0)))) continue;
    const ir_node *nd = rw_node(w, id0);
    int v = nd->n_outputs >= 1 ? nd->outputs[0] : -1;
    bool out = v >= 0 && s.cl[v], in = x_cl_of(&s, nd);
    bool res = nd->n_inputs > 3 && nd->inputs[3] >= 0 && s.cl[nd->inputs[3]];
    if (!out && !in && !res) continue;
    char nb[160];
    pass_log(w->r, "bf16_acts: %s reads%s%s and writes %s channels-last", rw_name(w, id0, nb, sizeof nb),
             in ? " X" : "", res ? (in ? " and the residual" : " the residual") : (in ? "" : " nothing"),
             out ? "its output" : "nothing");
    int id = id0;
    if (out && is_conv(nd) && !ir_attr_int(nd, "bf16_out", 0)) st = mark(w, &id, "bf16_out");
    if (!st && out) st = mark(w, &id, "cl_out");
    if (!st && in) st = mark(w, &id, "cl_in");
    if (!st && res) st = mark(w, &id, "cl_res");
    if (!st && out) rw_val(w, v)->dtype = SMELT_BF16, (*kept)++;
    if (!st) w->changes++;
  }
  free(s.cl);
  return st;
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
    int nid = id;
    s = mark(&w, &nid, "bf16_out");
    if (!s) rw_val(&w, v)->dtype = SMELT_BF16, kept++, w.changes++;
  }
  if (!s && kept) pass_log(r, "bf16_acts: %d activation(s) kept in bf16 between convolutions", kept);
  int cl = 0;
  if (!s) s = channels_last(&w, o->threads, &cl);
  if (!s && cl) pass_log(r, "bf16_acts: %d activation(s) channels-last in bf16", cl);
  return rw_end(&w, s, changes);
}
