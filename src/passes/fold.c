/* Constant folding: a node whose inputs all have known values is evaluated
 * now (with the eager kernel, node_run) and replaced by initializers.
 *
 * Shape and Size need only their input's dims, not its value: once shapes are
 * concrete (specialized, or concrete in the model) they fold even though their
 * input is computed at run time, and the Shape -> Gather -> Unsqueeze -> Concat
 * arithmetic exporters write folds away behind them.  Concrete dims are safe
 * to rely on: sessions reject inputs whose shape differs from a concrete dim.
 * Gather and Slice of a Shape fold when the dims they pick are concrete,
 * even when others are not (ops/infer_shape_values.h's shape_values_fold).
 *
 * Not folded: a Transpose of a 2-D weight that only a MatMul reads as B
 * (rw_transposed_weight: fuse_epilogue makes it smelt.Gemm with transB),
 * a node nothing reads (dce removes it; a fusion may have left it),
 * random ops, nodes with subgraphs, sequence or string outputs,
 * and outputs over FOLD_MAX_BYTES, or over FOLD_GROW_BYTES when they are more
 * than twice the inputs' size and have more elements than every input
 * (Expand/Tile/ConstantOfShape materializing a broadcast costs memory and
 * saves no work; a DequantizeLinear or Cast of a weight is a conversion).  A node that fails to evaluate
 * stays: the executor will report the problem at run time.
 *
 * Complexity: O(n + v) per run plus evaluating the folded nodes. */
#include <stdlib.h>
#include <string.h>

#include "ops/infer.h"
#include "ops/infer_shape_values.h"
#include "passes/rewrite.h"
#include "ops/node_run.h"
#include "util/err.h"

#define FOLD_MAX_BYTES ((size_t)16 << 20)
#define FOLD_GROW_BYTES ((size_t)1 << 20)
#define FOLD_MAX_IO 64

static bool is_random(const char *op) {
  return !strncmp(op, "Random", 6) || !strcmp(op, "Bernoulli") || !strcmp(op, "Multinomial") ||
         !strcmp(op, "Dropout");
}

static size_t value_bytes(const ir_value *v) {
  int64_t n = shape_numel(v->rank, v->dims);
  size_t nb; /* packed sub-byte types: ceil(n * bits / 8) */
  return n >= 0 && dtype_nbytes(v->dtype, n, &nb) ? nb : SIZE_MAX;
}

typedef struct fold_in {
  tensor *in[FOLD_MAX_IO];
  tensor headers[FOLD_MAX_IO];
  size_t bytes;
  int64_t max_elems; /* of any input with a value */
} fold_in;

/* Collects the inputs' known values (or, for Shape/Size, a header with the
 * dims); false when the node cannot fold. */
static bool gather_inputs(rewriter *w, int id, fold_in *f) {
  const ir_node *nd = rw_node(w, id);
  bool dims_only = !strcmp(nd->op_type, "Shape") || !strcmp(nd->op_type, "Size");
  f->bytes = 0;
  f->max_elems = 0;
  for (int i = 0; i < nd->n_inputs; i++) {
    f->in[i] = NULL;
    int v = nd->inputs[i];
    if (v < 0) continue;
    const ir_value *val = rw_val(w, v);
    if (dims_only && infer_dims_suffice(nd, val)) {
      tensor *h = &f->headers[i];
      memset(h, 0, sizeof *h);
      h->dtype = val->dtype;
      h->rank = val->rank;
      memcpy(h->dims, val->dims, sizeof h->dims);
      f->in[i] = h;
      continue;
    }
    const tensor *t = rw_const(w, v);
    if (!t) return false;
    f->in[i] = (tensor *)t; /* kernels never write their inputs */
    f->bytes += t->nbytes;
    if (tensor_numel(t) > f->max_elems) f->max_elems = tensor_numel(t);
  }
  return true;
}

/* in_elems: the most elements of any input.  An output with no more
 * elements than an input is a conversion, not a broadcast (a quantized
 * weight dequantized to float32: four times the bytes, the same values,
 * and the convolution or GEMM behind it then gets a constant weight to
 * prepare), so it may grow up to FOLD_MAX_BYTES. */
static bool output_ok(const tensor *t, size_t in_bytes, int64_t in_elems) {
  if (t->kind != TENSOR_KIND_TENSOR || !dtype_size(t->dtype) || t->dtype == SMELT_STRING) return false;
  if (t->nbytes > FOLD_MAX_BYTES) return false;
  return t->nbytes <= FOLD_GROW_BYTES || t->nbytes <= 2 * in_bytes || tensor_numel(t) <= in_elems;
}

/* Statically known output sizes that are too big: skip without evaluating. */
static bool outputs_too_big(rewriter *w, const ir_node *nd) {
  for (int k = 0; k < nd->n_outputs; k++) {
    if (nd->outputs[k] < 0) continue;
    size_t b = value_bytes(rw_val(w, nd->outputs[k]));
    if (b != SIZE_MAX && b > FOLD_MAX_BYTES) return true;
  }
  return false;
}

/* Outputs that shape inference already evaluated: nothing to compute. */
static bool outputs_known(rewriter *w, const ir_node *nd) {
  for (int k = 0; k < nd->n_outputs; k++)
    if (nd->outputs[k] >= 0 && !rw_const(w, nd->outputs[k])) return false;
  return nd->n_outputs > 0;
}

/* A Constant node's tensor attribute becomes the initializer as is (no copy,
 * no size cap: the bytes exist already). */
static bool take_constant(rewriter *w, int id) {
  ir_node *nd = rw_node(w, id);
  if (!rw_is_op(w, id, "Constant") || nd->n_outputs != 1 || nd->outputs[0] < 0) return false;
  for (int a = 0; a < nd->n_attrs; a++) {
    ir_attr *at = &nd->attrs[a];
    if (at->type != IR_ATTR_TENSOR || strcmp(at->name, "value") || !at->t ||
        at->t->kind != TENSOR_KIND_TENSOR || (!at->t->data && at->t->nbytes))
      continue;
    tensor *t = at->t;
    at->t = NULL;
    rw_kill(w, id);
    rw_make_constant(w, nd->outputs[0], t);
    return true;
  }
  return false;
}

static smelt_status fold_node(rewriter *w, int id, bool live, bool *folded) {
  *folded = false;
  ir_node *nd = rw_node(w, id);
  if ((*folded = take_constant(w, id))) return SMELT_OK;
  if (!nd->op || rw_has_subgraph(nd) || is_random(nd->op_type) || nd->n_inputs > FOLD_MAX_IO ||
      nd->n_outputs > FOLD_MAX_IO)
    return SMELT_OK;
  if (outputs_known(w, nd)) {
    rw_kill(w, id);
    for (int k = 0; k < nd->n_outputs; k++)
      if (nd->outputs[k] >= 0) rw_make_constant(w, nd->outputs[k], NULL);
    *folded = true;
    return SMELT_OK;
  }
  /* a transposed weight that fuse_epilogue reads with transB: no copy */
  if (nd->n_outputs == 1 && rw_transposed_weight(w, nd->outputs[0]) >= 0) return SMELT_OK;
  /* it reaches no graph output (a fusion rewired its readers; dce removes it):
   * evaluating it would only copy -- for the transposed weights fuse_epilogue
   * leaves behind, every weight of a model once over (BERT-base: 340 MB) */
  if (!live) return SMELT_OK;
  /* Gather / Slice picking concrete dims of a Shape whose others are
   * symbolic (a decode step's batch and sequence, not its cache length) */
  tensor *piece = NULL;
  if (rw_is_op(w, id, "Gather") || rw_is_op(w, id, "Slice")) TRY(shape_values_fold(w->g, id, &piece));
  if (piece) {
    rw_kill(w, id);
    rw_make_constant(w, nd->outputs[0], piece);
    *folded = true;
    return SMELT_OK;
  }
  fold_in f;
  if (!gather_inputs(w, id, &f) || outputs_too_big(w, nd)) return SMELT_OK;
  tensor outs[FOLD_MAX_IO], *out[FOLD_MAX_IO];
  memset(outs, 0, sizeof outs);
  for (int k = 0; k < nd->n_outputs; k++) out[k] = &outs[k];
  bool ok = !node_run(w->g, id, f.in, out, NULL, NULL, NULL);
  for (int k = 0; ok && k < nd->n_outputs; k++) ok = output_ok(&outs[k], f.bytes, f.max_elems);
  if (!ok) {
    err_clear();
    for (int k = 0; k < nd->n_outputs; k++) tensor_release(&outs[k]);
    return SMELT_OK;
  }
  rw_kill(w, id);
  smelt_status s = SMELT_OK;
  for (int k = 0; k < nd->n_outputs; k++) {
    tensor *t = NULL;
    if (nd->outputs[k] < 0 || s) {
      tensor_release(&outs[k]);
      continue;
    }
    if (!(t = malloc(sizeof *t))) {
      tensor_release(&outs[k]);
      s = err_nomem("folded constant", sizeof *t);
      continue;
    }
    *t = outs[k];
    rw_make_constant(w, nd->outputs[k], t);
  }
  *folded = !s;
  return s;
}

smelt_status pass_fold(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  int *order = NULL;
  smelt_status s = ir_graph_toposort(g, &order);
  bool *live = s ? NULL : rw_live_nodes(&w, order);
  for (int k = 0; !s && k < g->n_nodes; k++) {
    bool folded;
    s = fold_node(&w, order[k], !live || live[order[k]], &folded);
    w.changes += folded;
  }
  free(live);
  free(order);
  int c = 0;
  s = rw_end(&w, s, &c);
  /* values behind the folded shape arithmetic may now have concrete shapes,
   * and the Shape nodes reading them concrete values: one sweep carries that
   * through every layer (not one layer per cleanup round) */
  if (!s && c) s = ir_graph_infer_dims(g);
  *changes += c;
  return s;
}
