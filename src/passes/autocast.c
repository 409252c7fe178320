/* Autocast: which nodes run in the session's reduced precision, as AMP
 * decides.  Under BF16, one-group Conv / smelt.Conv nodes with a constant
 * float32 weight and at least CONV_BF16_MIN_C input channels get
 * precision = "bf16" too, where the bf16 convolution runs (AMX or
 * AVX512_BF16: kernels/conv_bf16.h); the log names why any other stays fp32.
 * Under BF16 on a CPU with AVX512_BF16, smelt.Attention nodes get precision
 * = "bf16": their Q.K^T and P.V on vdpbf16ps with Q, K, the probabilities
 * and V rounded to bf16 and fp32 sums, masks and softmax fp32
 * (kernels/attention_bf16.h); elsewhere they stay fp32.  With
 * pass_options.precision INT8, BF16, FP16 or INT4 (fp32: the
 * pass does nothing).  BF16 is weight-only: the same allow-list and
 * keep-list, the node gets precision = "bf16" (weight rounded to bf16 once,
 * activations, sums and outputs fp32: kernels/wbf16.h; no K limit).  FP16
 * likewise, precision = "fp16" (weight rounded to IEEE fp16), except that a
 * weight with a value past fp16's range (|w| > 65504, or NaN / inf already)
 * stays fp32 rather than turn into infinities.  INT4:
 * the same lists, precision = "int4" (weight in int4 groups of 32 along K
 * with an fp32 scale, made once; activations quantized per row in int8
 * groups of 32 at run time for few rows: kernels/q4gemm.h; no K limit).
 * The LM head goes to int4 too: on GPT-2 124M keeping it in int8 or fp32
 * moved the logits' cosine against fp32 only from 0.970 to 0.973 (the
 * error comes from the layers), for 14-100 MB more per token (README).
 * For INT8:
 *
 * Runs in int8 (dynamic quantization) -- the allow-list:
 *   MatMul (A rank >= 2, B 2-D), Gemm (transA 0; C absent, a bias row with
 *   beta 1, or a residual of the output's shape with beta 1) and smelt.Gemm
 *   (transA 0), all float32, whose weight B is a constant of the graph (an
 *   initializer that is not a graph input) with K <= QGEMM_MAX_K.  MatMul
 *   and Gemm become smelt.Gemm; the node gets precision = "int8", which
 *   ops/fused_gemm.c reads (weights quantized per output channel once,
 *   activations per row at run time, fp32 out: kernels/qgemm.h), and its
 *   weight is declared int8 with per-channel scales (int4: int4 with
 *   scales per group of 32 along K; bf16 / fp16: bf16 / fp16 storage, as
 *   is the weight of a convolution marked bf16), ir/quant.h,
 *   ops/gemm_quant.h: the element type the compiled path's GEMM steps and
 *   the conv registry read.  A bf16 / fp16 declaration is kept only where
 *   every GEMM or convolution that reads the weight carries the same mark
 *   (a shared weight one of its readers keeps in fp32: dropped, logged), so
 *   that keying on it picks what the mark would.
 *
 * Stays fp32 -- the keep-list, with the reason logged per node for GEMMs:
 *   - products of two activations (attention's Q K^T and P V -- but for
 *     smelt.Attention under BF16 above --, any MatMul whose B is computed):
 *     both sides would need run-time quantization and attention scores are
 *     sensitive to it;
 *   - convolutions under int8, fp16 and int4 (no such convolution kernel
 *     yet; bf16 above);
 *   - Softmax, LayerNormalization / RMS norms and their statistics,
 *     reductions (ReduceMean, ReduceSum, ...), residual and bias Adds,
 *     activations and every other elementwise or data-movement node: they
 *     are memory-bound (no speed to win) or numerically sensitive (sums,
 *     exponentials, variances), so they keep fp32 and the GEMMs' outputs
 *     come back as fp32;
 *   - GEMMs whose weight is a graph input (it may change per run), whose
 *     A is transposed, or whose K passes QGEMM_MAX_K (the int32 sum could
 *     overflow).
 *
 * The log (smelt compile --explain) has one line per GEMM decision and a
 * count of the other ops kept in fp32.
 *
 * Complexity: O(n + v): one look at each node. */
#include <stdio.h>
#include <string.h>

#include "kernels/bf16dp.h"
#include "kernels/conv_bf16.h"
#include "kernels/isa.h"
#include "kernels/qgemm.h"
#include "ops/gemm_quant.h"
#include "passes/rewrite.h"
#include "util/err.h"

static bool is_f32(rewriter *w, int v) { return v >= 0 && rw_val(w, v)->dtype == SMELT_F32; }

/* v is a constant for the session's lifetime (op_input_is_constant's rule). */
static bool constant_weight(rewriter *w, int v) {
  if (v < 0) return false;
  const ir_value *val = rw_val(w, v);
  return (val->flags & IR_VALUE_INITIALIZER) && !(val->flags & IR_VALUE_INPUT) && rw_const(w, v);
}

typedef struct ac_plan {
  int bias, residual; /* Gemm's C, as one of them; -1: none */
  int64_t K;
} ac_plan;

/* NULL when the node can run in the reduced precision (p filled), else why it cannot. */
/* The constant weight v fits fp16's finite range (|x| <= 65504). */
static bool fits_f16(rewriter *w, int v) {
  const tensor *t = rw_const(w, v);
  if (!t || t->dtype != SMELT_F32 || !t->data) return false;
  const float *x = t->data;
  int64_t n = (int64_t)(t->nbytes / sizeof(float));
  for (int64_t i = 0; i < n; i++)
    if (!(x[i] >= -65504.f && x[i] <= 65504.f)) return false;
  return true;
}

static const char *check(rewriter *w, int id, bool int8, bool f16, ac_plan *p) {
  const ir_node *nd = rw_node(w, id);
  bool fused = !strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Gemm");
  bool gemm = rw_is_op(w, id, "Gemm");
  p->bias = p->residual = -1;
  if (nd->n_outputs != 1 || !is_f32(w, nd->outputs[0]) || !is_f32(w, nd->inputs[0]) || !is_f32(w, nd->inputs[1]))
    return "not float32";
  const ir_value *a = rw_val(w, nd->inputs[0]), *b = rw_val(w, nd->inputs[1]), *y = rw_val(w, nd->outputs[0]);
  if (!constant_weight(w, nd->inputs[1])) return "its weight is not a constant (a product of activations)";
  if (b->rank != 2) return "its weight is not 2-D";
  if (f16 && !fits_f16(w, nd->inputs[1])) return "its weight has values past fp16's range (|w| > 65504)";
  if ((fused || gemm) && ir_attr_int(nd, "transA", 0)) return "A is transposed";
  if (a->rank < 2) return "A is 1-D";
  bool tb = (fused || gemm) && ir_attr_int(nd, "transB", 0);
  p->K = b->dims[tb ? 1 : 0];
  if (!dim_known(p->K) || (int8 && p->K > QGEMM_MAX_K)) return "K is past the int8 kernel's exact range";
  if (gemm && nd->n_inputs > 2 && nd->inputs[2] >= 0) {
    int c = nd->inputs[2];
    const ir_value *cv = rw_val(w, c);
    int64_t N = b->dims[tb ? 0 : 1];
    if (!is_f32(w, c) || ir_attr_float(nd, "beta", 1.f) != 1.f) return "Gemm's C is scaled (beta != 1)";
    if (cv->rank == 1 && cv->dims[0] == N && dim_known(N)) p->bias = c;
    else if (rw_same_shape(cv, y)) p->residual = c;
    else return "Gemm's C is neither a bias row nor the output's shape";
  }
  return NULL;
}

/* MatMul / Gemm -> smelt.Gemm(A, B, bias, residual) with precision pname;
 * smelt.Gemm: the same node again with the attribute added. */
static smelt_status to_lowp(rewriter *w, int id, const ac_plan *p, const char *pname) {
  const ir_node *nd = rw_node(w, id);
  bool fused = !strcmp(nd->domain, "smelt");
  int a = nd->inputs[0], b = nd->inputs[1];
  int bias = fused && nd->n_inputs > 2 ? nd->inputs[2] : p->bias;
  int res = fused && nd->n_inputs > 3 ? nd->inputs[3] : p->residual;
  int n_attrs = fused ? nd->n_attrs + 1 : 9, nid;
  int64_t tb = rw_is_op(w, id, "MatMul") ? 0 : ir_attr_int(nd, "transB", 0);
  float alpha = rw_is_op(w, id, "MatMul") ? 1.f : ir_attr_float(nd, "alpha", 1.f);
  TRY(rw_replace_node(w, id, "Gemm", "smelt", 4, n_attrs, &nid));
  nd = rw_node(w, id); /* the node array may have moved */
  if (fused) {
    for (int k = 0; k < nd->n_attrs; k++) TRY(rw_attr_copy(w, nid, k, &nd->attrs[k]));
  } else {
    TRY(rw_attr_int(w, nid, 0, "transA", 0));
    TRY(rw_attr_int(w, nid, 1, "transB", tb));
    TRY(rw_attr_float(w, nid, 2, "alpha", alpha));
    TRY(rw_attr_string(w, nid, 3, "activation", "none"));
    TRY(rw_attr_float(w, nid, 4, "clip_min", 0.f));
    TRY(rw_attr_float(w, nid, 5, "clip_max", 0.f));
    TRY(rw_attr_int(w, nid, 6, "has_bias", bias >= 0));
    TRY(rw_attr_int(w, nid, 7, "has_residual", res >= 0));
  }
  TRY(rw_attr_string(w, nid, n_attrs - 1, "precision", pname));
  TRY(rw_set_input(w, nid, 0, a));
  TRY(rw_set_input(w, nid, 1, b));
  TRY(rw_set_input(w, nid, 2, bias));
  return rw_set_input(w, nid, 3, res);
}

/* Declares the weight b of a GEMM lowered to int8 / int4 / bf16 / fp16 (or
 * of a convolution marked bf16) as q; a weight another node declared
 * otherwise (shared, other transB) keeps the first declaration and this
 * node its mark (logged). */
static void declare_weight(rewriter *w, int id, int b, ir_quant q) {
  ir_value *v = rw_val(w, b);
  char nb[160], qb[96];
  if (v->quant.scheme && memcmp(&v->quant, &q, sizeof q)) {
    pass_log(w->r, "autocast: %s: its weight is declared %s already (shared); the node's mark says %s",
             rw_name(w, id, nb, sizeof nb), ir_quant_describe(&v->quant, v->dtype, qb, sizeof qb),
             ir_quant_type_name((ir_quant_scheme)q.scheme));
    return;
  }
  v->quant = q;
  pass_log(w->r, "autocast: %s: weight %s is %s", rw_name(w, id, nb, sizeof nb), v->name[0] ? v->name : "?",
           ir_quant_describe(&q, v->dtype, qb, sizeof qb));
}

/* Drops the bf16 / fp16 declaration of a weight that a GEMM or convolution
 * reads without the same mark (it stays fp32 there): the declaration says
 * how every keyed reader takes the weight (see the top). */
static void undeclare_mixed(rewriter *w) {
  for (int id = 0; id < w->g->n_nodes; id++) {
    if (!rw_live(w, id)) continue;
    const ir_node *nd = rw_node(w, id);
    if (nd->n_inputs < 2 || nd->inputs[1] < 0) continue;
    ir_value *v = rw_val(w, nd->inputs[1]);
    bool keyed = !strcmp(nd->op_type, "MatMul") || !strcmp(nd->op_type, "Gemm") || !strcmp(nd->op_type, "Conv");
    if (!keyed || !ir_quant_is_float((ir_quant_scheme)v->quant.scheme) || gemm_marked_scheme(nd) == v->quant.scheme)
      continue;
    char nb[160];
    pass_log(w->r, "autocast: %s reads weight %s without the %s mark: the declaration is dropped (the marks decide)",
             rw_name(w, id, nb, sizeof nb), v->name[0] ? v->name : "?",
             ir_quant_type_name((ir_quant_scheme)v->quant.scheme));
    memset(&v->quant, 0, sizeof v->quant);
  }
}

/* NULL when Conv / smelt.Conv node id can run in bf16 (kernels/conv_bf16.h:
 * both operands in bf16 on AMX tiles), else why it cannot. */
static const char *conv_check(rewriter *w, int id) {
  const ir_node *nd = rw_node(w, id);
  if (nd->n_outputs != 1 || nd->n_inputs < 2 || !is_f32(w, nd->outputs[0]) || !is_f32(w, nd->inputs[0]) ||
      !is_f32(w, nd->inputs[1]))
    return "not float32";
  if (!constant_weight(w, nd->inputs[1])) return "its weight is not a constant";
  const ir_value *b = rw_val(w, nd->inputs[1]);
  if (b->rank != 3 && b->rank != 4) return "not a 1-D or 2-D convolution";
  if (ir_attr_int(nd, "group", 1) != 1) return "grouped (depthwise and grouped convolutions are memory-bound)";
  int64_t taps = b->dims[2] * (b->rank == 4 ? b->dims[3] : 1);
  if (!dim_known(b->dims[1]) || !dim_known(b->dims[2]) || (b->rank == 4 && !dim_known(b->dims[3])) ||
      !conv_bf16_channels(b->dims[1], taps))
    return "fewer than 16 input channels x taps (a 1x1 over few channels is memory-bound)";
  if (!conv_bf16_wanted(isa_active()))
    return "this CPU has neither AMX nor AVX512_BF16 (SMELT_CONV_BF16=1 forces a slow scalar kernel)";
  if (conv_bf16_by_cost(isa_active()) && !isa_bf16_dot_fast())
    return "vdpbf16ps does no more multiply-adds per cycle than the fp32 FMA on this CPU (no AMX)";
  return NULL;
}

/* The same node again with precision = pname added. */
static smelt_status mark_precision(rewriter *w, int id, const char *pname) {
  int nid, slot;
  TRY(rw_with_attr(w, id, &nid, &slot));
  return rw_attr_string(w, nid, slot, "precision", pname);
}

/* Counts of the other ops kept in fp32, for one summary line. */
typedef struct kept_ops {
  const char *op[32];
  int count[32], n, other;
} kept_ops;

static void keep(kept_ops *k, const char *op) {
  for (int i = 0; i < k->n; i++)
    if (!strcmp(k->op[i], op)) {
      k->count[i]++;
      return;
    }
  if (k->n == 32) {
    k->other++;
    return;
  }
  k->op[k->n] = op;
  k->count[k->n++] = 1;
}

static void log_kept(rewriter *w, const kept_ops *k) {
  char line[1024];
  int n = snprintf(line, sizeof line, "autocast: fp32 (keep-list):");
  for (int i = 0; i < k->n && n < (int)sizeof line; i++)
    n += snprintf(line + n, sizeof line - (size_t)n, " %s x%d", k->op[i], k->count[i]);
  if (k->other && n < (int)sizeof line) snprintf(line + n, sizeof line - (size_t)n, " + %d others", k->other);
  if (k->n) pass_log(w->r, "%s", line);
}

smelt_status pass_autocast(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  if (o->precision != SMELT_PRECISION_INT8 && o->precision != SMELT_PRECISION_BF16 &&
      o->precision != SMELT_PRECISION_FP16 && o->precision != SMELT_PRECISION_INT4)
    return SMELT_OK;
  bool int8 = o->precision == SMELT_PRECISION_INT8, f16 = o->precision == SMELT_PRECISION_FP16;
  const char *pname = int8 ? "int8" : o->precision == SMELT_PRECISION_INT4 ? "int4" : f16 ? "fp16" : "bf16";
  ir_quant_scheme scheme = int8                                       ? IR_QUANT_INT8_CHANNEL
                           : o->precision == SMELT_PRECISION_INT4 ? IR_QUANT_INT4_GROUP
                           : f16                                  ? IR_QUANT_F16
                                                                  : IR_QUANT_BF16;
  rewriter w;
  TRY(rw_begin(&w, g, o, r));
  smelt_status s = SMELT_OK;
  kept_ops kept = {0};
  int n = g->n_nodes, n_int8 = 0, n_conv = 0, n_attn = 0;
  for (int id = 0; !s && id < n; id++) {
    if (!rw_live(&w, id)) continue;
    const ir_node *nd = rw_node(&w, id);
    bool fused = !strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Gemm");
    bool cand = fused || rw_is_op(&w, id, "MatMul") || rw_is_op(&w, id, "Gemm");
    bool conv = !strcmp(nd->op_type, "Conv") && (!strcmp(nd->domain, "smelt") || !nd->domain[0]);
    char nb[160];
    if (conv && o->precision == SMELT_PRECISION_BF16) {
      if (!strcmp(ir_attr_string(nd, "precision", "fp32"), pname)) continue; /* done before */
      const char *why = conv_check(&w, id);
      pass_log(r, "autocast: %s (%sConv) %s%s", rw_name(&w, id, nb, sizeof nb), nd->domain[0] ? "smelt." : "",
               why ? "stays fp32: " : "-> bf16: constant weight, ",
               why                          ? why
               : bf16dp_amx_hw(isa_active()) ? "AMX tiles"
               : bf16dp_hw(isa_active())     ? "vdpbf16ps"
                                             : "scalar kernel (SMELT_CONV_BF16=1)");
      if (why) continue;
      int b = nd->inputs[1];
      s = mark_precision(&w, id, pname);
      if (!s) declare_weight(&w, id, b, ir_quant_float(IR_QUANT_BF16));
      w.changes++;
      n_conv++;
      continue;
    }
    /* attention: its two products on vdpbf16ps (kernels/attention_bf16.h),
     * the masks and softmax in fp32; without AVX512_BF16 it stays fp32 */
    if (!strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Attention") &&
        o->precision == SMELT_PRECISION_BF16 && bf16dp_hw(isa_active())) {
      if (!strcmp(ir_attr_string(nd, "precision", "fp32"), pname)) continue; /* done before */
      pass_log(r, "autocast: %s (smelt.Attention) -> bf16: Q.K^T and P.V on vdpbf16ps, masks and softmax fp32",
               rw_name(&w, id, nb, sizeof nb));
      s = mark_precision(&w, id, pname);
      w.changes++;
      n_attn++;
      continue;
    }
    if (!cand) {
      keep(&kept, nd->op_type);
      continue;
    }
    if (fused && !strcmp(ir_attr_string(nd, "precision", "fp32"), pname)) continue; /* done before */
    ac_plan p;
    const char *why = check(&w, id, int8, f16, &p);
    if (why) {
      pass_log(r, "autocast: %s (%s%s) stays fp32: %s", rw_name(&w, id, nb, sizeof nb), fused ? "smelt." : "",
               nd->op_type, why);
      continue;
    }
    pass_log(r, "autocast: %s (%s%s) -> %s: constant weight, K %lld", rw_name(&w, id, nb, sizeof nb),
             fused ? "smelt." : "", nd->op_type, pname, (long long)p.K);
    bool tb = (fused || rw_is_op(&w, id, "Gemm")) && ir_attr_int(nd, "transB", 0);
    int b = nd->inputs[1];
    s = to_lowp(&w, id, &p, pname);
    if (!s) declare_weight(&w, id, b, gemm_weight_quant(scheme, tb));
    w.changes++;
    n_int8++;
  }
  if (!s) {
    undeclare_mixed(&w);
    log_kept(&w, &kept);
    pass_log(r, "autocast: %d GEMM node%s in %s", n_int8, n_int8 == 1 ? "" : "s", pname);
    if (o->precision == SMELT_PRECISION_BF16) {
      pass_log(r, "autocast: %d convolution%s in bf16", n_conv, n_conv == 1 ? "" : "s");
      pass_log(r, "autocast: %d attention%s with bf16 products", n_attn, n_attn == 1 ? "" : "s");
    }
  }
  return rw_end(&w, s, changes);
}
