/* From ONNX nodes to the kernel IR: which nodes the compiler can generate
 * code for (classification) and what they compute (lowering).  The
 * expressions mirror the reference kernels' formulas (src/ops/), which are the
 * oracle: same NaN rules, same special cases.
 *
 * Complexity: classification O(1) per node (bounded rank and arity, the
 * op's table entry found once and kept in cn_info.def); lower_group
 * O(group nodes x operands), a group being at most FUSE_MAX_NODES nodes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compile/lower.h"
#include "ops/fused_act.h"
#include "ops/nn_util.h"
#include "ops/op.h"
#include "util/err.h"

/* ---- tables ---- */

typedef struct pw_def {
  const char *name;
  kir_fn fn;
  int arity; /* 1, 2; 0 = special-cased */
} pw_def;

static const pw_def pw_defs[] = {
    {"Neg", KF_NEG, 1},         {"Abs", KF_ABS, 1},           {"Sqrt", KF_SQRT, 1},
    {"Reciprocal", KF_RECIP, 1}, {"Exp", KF_EXP, 1},          {"Log", KF_LOG, 1},
    {"Erf", KF_ERF, 1},         {"Tanh", KF_TANH, 1},         {"Sigmoid", KF_SIGMOID, 1},
    {"Relu", KF_RELU, 1},       {"Floor", KF_FLOOR, 1},       {"Ceil", KF_CEIL, 1},
    {"Round", KF_ROUND, 1},     {"Sign", KF_SIGN, 1},         {"Sin", KF_SIN, 1},
    {"Cos", KF_COS, 1},         {"Softplus", KF_SOFTPLUS, 1}, {"Softsign", KF_SOFTSIGN, 1},
    {"Mish", KF_MISH, 1},       {"IsNaN", KF_ISNAN, 1},       {"Not", KF_NOT, 1},
    {"Gelu", KF_GELU, 0},       {"LeakyRelu", KF_LEAKY, 0},   {"Elu", KF_ELU, 0},
    {"Selu", KF_SELU, 0},       {"Celu", KF_CELU, 0},         {"HardSigmoid", KF_HARDSIG, 0},
    {"HardSwish", KF_HARDSWISH, 0}, {"ThresholdedRelu", KF_THRELU, 0}, {"Clip", KF_CLIP, 0},
    {"Add", KF_ADD, 2},         {"Sub", KF_SUB, 2},           {"Mul", KF_MUL, 2},
    {"Div", KF_DIV, 2},         {"Pow", KF_POW, 2},           {"PRelu", KF_PRELU, 2},
    {"Max", KF_MAX, -1},        {"Min", KF_MIN, -1},          {"Sum", KF_ADD, -1},
    {"Mean", KF_ADD, -1},       {"Equal", KF_EQ, 2},          {"Less", KF_LT, 2},
    {"Greater", KF_GT, 2},      {"LessOrEqual", KF_LE, 2},    {"GreaterOrEqual", KF_GE, 2},
    {"And", KF_AND, 2},         {"Or", KF_OR, 2},             {"Xor", KF_XOR, 2},
    {"Where", KF_COUNT, 3},     {"Cast", KF_COUNT, 0},
};

static const pw_def *pw_named(const char *name) {
  for (size_t i = 0; i < sizeof pw_defs / sizeof *pw_defs; i++)
    if (!strcmp(pw_defs[i].name, name)) return &pw_defs[i];
  return NULL;
}

static const pw_def *find_pw(const ir_node *nd) {
  if (*nd->domain && strcmp(nd->domain, "ai.onnx")) /* smelt.Gelu computes what ONNX Gelu does */
    return !strcmp(nd->domain, "smelt") && !strcmp(nd->op_type, "Gelu") ? pw_named("Gelu") : NULL;
  return pw_named(nd->op_type);
}

static const char *const view_ops[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", NULL};

typedef enum rk { RK_NONE, RK_SOFTMAX, RK_LOGSOFTMAX, RK_LN, RK_RMS, RK_IN, RK_RSUM, RK_RMEAN, RK_RMAX,
                  RK_RMIN, RK_RSUMSQ, RK_RL1, RK_RL2, RK_RLSE, RK_GAP, RK_GMP } rk;

static rk find_red(const ir_node *nd) {
  static const struct {
    const char *name;
    rk kind;
  } t[] = {{"Softmax", RK_SOFTMAX}, {"LogSoftmax", RK_LOGSOFTMAX}, {"LayerNormalization", RK_LN},
           {"RMSNormalization", RK_RMS}, {"InstanceNormalization", RK_IN}, {"ReduceSum", RK_RSUM}, {"ReduceMean", RK_RMEAN},
           {"ReduceMax", RK_RMAX}, {"ReduceMin", RK_RMIN}, {"ReduceSumSquare", RK_RSUMSQ},
           {"ReduceL1", RK_RL1}, {"ReduceL2", RK_RL2}, {"ReduceLogSumExp", RK_RLSE},
           {"GlobalAveragePool", RK_GAP}, {"GlobalMaxPool", RK_GMP}};
  if (*nd->domain && strcmp(nd->domain, "ai.onnx")) return RK_NONE;
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (!strcmp(t[i].name, nd->op_type)) return t[i].kind;
  return RK_NONE;
}

/* ---- classification ---- */

static const ir_value *in_val(const cgraph *cg, const ir_node *nd, int i) {
  return i < nd->n_inputs && nd->inputs[i] >= 0 ? &cg->g->values[nd->inputs[i]] : NULL;
}

static bool all_dtypes(const cgraph *cg, const ir_node *nd, bool (*ok)(smelt_dtype)) {
  for (int i = 0; i < nd->n_inputs; i++) {
    const ir_value *v = in_val(cg, nd, i);
    if (v && !ok(v->dtype)) return false;
  }
  for (int o = 0; o < nd->n_outputs; o++)
    if (nd->outputs[o] >= 0 && !ok(cg->g->values[nd->outputs[o]].dtype)) return false;
  return true;
}

static bool is_f32(smelt_dtype t) { return t == SMELT_F32; }

/* The trailing reduced dims of a reduction node, or -1 if not of that form. */
static int red_axes_k(const cgraph *cg, const ir_node *nd, rk kind, int rank) {
  if (kind == RK_GAP || kind == RK_GMP) return rank >= 2 ? 2 : -1;
  if (kind == RK_IN) return rank >= 3 ? 2 : -1;
  if (kind == RK_SOFTMAX || kind == RK_LOGSOFTMAX) {
    int64_t axis = ir_attr_int(nd, "axis", nd->opset >= 13 ? -1 : 1);
    if (rank == 0) return nd->opset >= 13 ? -1 : 0;
    if (axis < -rank || axis >= rank) return -1;
    if (axis < 0) axis += rank;
    if (nd->opset < 13) return (int)axis;
    const ir_value *x = in_val(cg, nd, 0);
    for (int d = (int)axis + 1; d < rank; d++)
      if (x->dims[d] != 1) return -1;
    return (int)axis;
  }
  if (kind == RK_LN || kind == RK_RMS) {
    int64_t axis = ir_attr_int(nd, "axis", -1);
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
  }
  /* Reduce*: axes from the attribute or a constant input 1 */
  bool mask[SMELT_MAX_RANK] = {false};
  int n = 0;
  const int64_t *axes = ir_attr_ints(nd, "axes", &n);
  const ir_value *av = in_val(cg, nd, 1);
  if (av) {
    if (!av->constant || av->constant->dtype != SMELT_I64) return -1;
    axes = av->constant->data;
    n = (int)tensor_numel(av->constant);
  }
  if (n == 0) {
    if (ir_attr_int(nd, "noop_with_empty_axes", 0)) return -1;
    return 0;
  }
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return -1;
    mask[a] = true;
  }
  int k = rank;
  while (k > 0 && mask[k - 1]) k--;
  for (int d = 0; d < k; d++)
    if (mask[d]) return -1; /* a reduced dim before a kept one */
  return k;
}

static void set_lib(cn_info *in, const char *why) {
  in->kind = CN_LIB;
  in->why = why;
}

static bool clip_ok(const cgraph *cg, const ir_node *nd) {
  for (int i = 1; i < 3; i++) {
    const ir_value *b = in_val(cg, nd, i);
    if (b && (!b->constant || tensor_numel(b->constant) != 1)) return false;
  }
  return true;
}

static bool dims_eq(int r, const int64_t *a, const int64_t *b) {
  return !r || !memcmp(a, b, sizeof(int64_t) * (size_t)r);
}

/* 2-D MaxPool (no Indices), AveragePool and depthwise Conv / smelt.Conv on
 * float32 NCHW: geometry from the op's own window rules (nn_util). */
static bool classify_window(const cgraph *cg, const ir_node *nd, cn_info *info) {
  bool onnx = !*nd->domain || !strcmp(nd->domain, "ai.onnx"), fused = !strcmp(nd->domain, "smelt");
  win_geom *w = &info->win;
  memset(w, 0, sizeof *w);
  if (onnx && !strcmp(nd->op_type, "MaxPool")) w->kind = WK_MAX;
  else if (onnx && !strcmp(nd->op_type, "AveragePool")) w->kind = WK_AVG;
  else if ((onnx || fused) && !strcmp(nd->op_type, "Conv")) w->kind = WK_DWCONV;
  else return false;
  /* the library's kernels (kernels/pool2d.c, conv_depthwise.c: a padded
   * copy per plane, whole vectors along the rows) are usually faster than
   * the generated loops: those are max-autotune candidates only */
  if (cg->dynamic || !cg->tune || !all_dtypes(cg, nd, is_f32)) return false;
  const ir_value *x = in_val(cg, nd, 0), *y = &cg->g->values[nd->outputs[0]];
  if (x->rank != 4 || y->rank != 4) return false;
  for (int o = 1; o < nd->n_outputs; o++)
    if (nd->outputs[o] >= 0) return false; /* MaxPool Indices */
  const ir_value *wv = NULL;
  if (w->kind == WK_DWCONV) {
    wv = in_val(cg, nd, 1);
    int64_t C = x->dims[1];
    if (ir_attr_int(nd, "group", 1) != C || y->dims[1] != C || !wv || wv->rank != 4 || wv->dims[0] != C ||
        wv->dims[1] != 1)
      return false;
    fused_act a = {FUSED_ACT_NONE, -INFINITY, INFINITY, NULL};
    if (fused && fused_act_read(nd, &a)) {
      err_clear();
      return false;
    }
    w->act = (int)a.kind;
    w->lo = a.lo;
    w->hi = a.hi;
    w->has_bias = in_val(cg, nd, 2) != NULL;
    w->has_res = fused && in_val(cg, nd, 3) != NULL;
    if (w->has_res && !dims_eq(4, in_val(cg, nd, 3)->dims, y->dims)) return false;
  }
  op_ctx c = {.graph = cg->g, .node = nd, .opset = nd->opset};
  nn_window nw;
  if (nn_window_attrs(&c, 2, wv ? wv->dims + 2 : NULL, &nw) ||
      nn_window_out(&nw, x->dims + 2, ir_attr_int(nd, "ceil_mode", 0) != 0)) {
    err_clear();
    return false;
  }
  if (nw.out[0] != y->dims[2] || nw.out[1] != y->dims[3] || y->dims[0] != x->dims[0]) return false;
  w->N = x->dims[0], w->C = x->dims[1], w->IH = x->dims[2], w->IW = x->dims[3];
  w->OH = y->dims[2], w->OW = y->dims[3], w->KH = nw.kernel[0], w->KW = nw.kernel[1];
  w->SH = nw.stride[0], w->SW = nw.stride[1], w->DH = nw.dil[0], w->DW = nw.dil[1];
  w->PH0 = nw.pad_lo[0], w->PW0 = nw.pad_lo[1], w->PH1 = nw.pad_hi[0], w->PW1 = nw.pad_hi[1];
  w->count_pad = ir_attr_int(nd, "count_include_pad", 0) != 0;
  if (w->OW > 4096 || w->KH * w->KW > 1024) return false; /* row buffers live on the stack */
  info->kind = CN_WIN;
  return true;
}

static void classify_compute(const cgraph *cg, const ir_node *nd, cn_info *info) {
  const ir_value *out = &cg->g->values[nd->outputs[0]];
  const pw_def *pw = find_pw(nd);
  if (pw && nd->n_outputs == 1) {
    bool ok = all_dtypes(cg, nd, kir_dtype_ok);
    if (pw->fn == KF_COUNT && !strcmp(pw->name, "Where")) {
      ok = ok && in_val(cg, nd, 0)->dtype == SMELT_BOOL;
    } else if (pw->fn == KF_COUNT) { /* Cast */
    } else if (pw->fn == KF_EQ || (pw->fn >= KF_LT && pw->fn <= KF_GE)) {
      ok = ok && (in_val(cg, nd, 0)->dtype != SMELT_BOOL || pw->fn == KF_EQ);
    } else if (pw->fn == KF_AND || pw->fn == KF_OR || pw->fn == KF_XOR || pw->fn == KF_NOT) {
      ok = ok && in_val(cg, nd, 0)->dtype == SMELT_BOOL;
    } else if (pw->fn == KF_ISNAN) {
      ok = ok && kir_dtype_float(in_val(cg, nd, 0)->dtype);
    } else { /* float arithmetic: f32, or f16/bf16 computed in f32 (codegen/kir.h) */
      ok = ok && kir_dtype_float(out->dtype) && all_dtypes(cg, nd, kir_dtype_float);
    }
    if (pw->fn == KF_CLIP) ok = ok && clip_ok(cg, nd);
    if (!strcmp(pw->name, "Gelu")) {
      const char *ap = ir_attr_string(nd, "approximate", "none");
      ok = ok && (!strcmp(ap, "none") || !strcmp(ap, "tanh"));
    }
    if (ok) {
      info->kind = CN_PW;
      info->def = (int)(pw - pw_defs); /* looked up once, not per lowering */
      info->rank = out->rank;
      memcpy(info->dims, out->dims, sizeof info->dims);
      return;
    }
    set_lib(info, "element types the code generator does not handle");
    return;
  }
  rk kind = find_red(nd);
  if (kind == RK_RLSE) { /* the reference's handling of infinities is not worth mirroring */
    set_lib(info, "library kernel");
    return;
  }
  if (kind != RK_NONE) {
    const ir_value *x = in_val(cg, nd, 0);
    int k = all_dtypes(cg, nd, kir_dtype_float) || (kind >= RK_RSUM && kind <= RK_RLSE &&
                                                    kir_dtype_float(x->dtype) && kir_dtype_float(out->dtype))
                ? red_axes_k(cg, nd, kind, x->rank)
                : -1;
    int64_t L = k >= 0 ? shape_numel(x->rank - k, x->dims + k) : 0;
    if (k >= 0 && L > 0 && kir_dtype_float(x->dtype)) {
      info->kind = CN_RED;
      info->def = (int)kind;
      info->rank = x->rank;
      info->k = k;
      memcpy(info->dims, x->dims, sizeof info->dims);
      return;
    }
    set_lib(info, "reduction over non-trailing or empty axes");
    return;
  }
  if (classify_window(cg, nd, info)) return;
  set_lib(info, "library kernel");
}

void lower_classify(const cgraph *cg, int node, cn_info *info) {
  const ir_graph *g = cg->g;
  const ir_node *nd = &g->nodes[node];
  memset(info, 0, sizeof *info);
  bool all_const = nd->n_outputs > 0;
  for (int o = 0; o < nd->n_outputs; o++)
    if (nd->outputs[o] >= 0 && !g->values[nd->outputs[o]].constant) all_const = false;
  if (all_const) {
    info->kind = CN_CONST;
    return;
  }
  info->kind = CN_BREAK;
  if (!nd->op) {
    info->why = "no kernel";
    return;
  }
  if (nd->op->alloc_outputs_in_run) {
    info->why = "its output shape depends on the data";
    return;
  }
  for (int i = 0; i < nd->n_inputs; i++) {
    const ir_value *v = in_val(cg, nd, i);
    if (v && !value_concrete(v)) {
      info->why = "an input's shape is only known at run time";
      return;
    }
  }
  for (int o = 0; o < nd->n_outputs; o++)
    if (nd->outputs[o] >= 0 && !value_concrete(&g->values[nd->outputs[o]])) {
      info->why = "its output shape is only known at run time";
      return;
    }
  if (nd->n_outputs == 0 || nd->outputs[0] < 0) {
    set_lib(info, "no first output");
    return;
  }
  if (!*nd->domain || !strcmp(nd->domain, "ai.onnx")) {
    for (int i = 0; view_ops[i]; i++)
      if (!strcmp(nd->op_type, view_ops[i]) && nd->n_outputs == 1 && in_val(cg, nd, 0) &&
          in_val(cg, nd, 0)->dtype == g->values[nd->outputs[0]].dtype) {
        info->kind = CN_VIEW;
        return;
      }
  }
  classify_compute(cg, nd, info);
}

/* ---- lowering ---- */

typedef struct lower_state {
  const cgraph *cg;
  kir_group *kg;
  const bool *in_group;
  int *vexpr; /* per value: its expression in this group, -1 */
} lower_state;

/* Maps the dims of a node's output shape (out) onto I: the non-1 dims of out
 * pair, in order, with the non-1 dims of I (row domain) or of I[0..k)
 * (scalar domain).  map[d] = dim of I, or -1 for a size-1 dim.  false if the
 * layouts differ. */
static bool map_dims(const kir_group *kg, int rout, const int64_t *out, bool scalar, int *map) {
  int lim = scalar ? kg->k : kg->rank, t = 0;
  for (int d = 0; d < rout; d++) {
    map[d] = -1;
    if (out[d] == 1) continue;
    while (t < lim && kg->I[t] == 1) t++;
    if (t >= lim || kg->I[t] != out[d]) return false;
    map[d] = t++;
  }
  while (t < lim && kg->I[t] == 1) t++;
  return t == lim;
}

/* Which domain a node output of this shape has in the group: 0 row, 1
 * scalar (per row), -1 neither. */
static int out_domain(const kir_group *kg, int rout, const int64_t *out) {
  int map[SMELT_MAX_RANK];
  if (map_dims(kg, rout, out, false, map)) return 0;
  if (kg->k < kg->rank && map_dims(kg, rout, out, true, map)) return 1;
  return -1;
}

/* Strides over I of a tensor of shape a (broadcast to the node output out). */
static bool operand_strides(const kir_group *kg, int rout, const int64_t *out, int dom, int ra,
                            const int64_t *a, int64_t *stride) {
  int map[SMELT_MAX_RANK];
  if (ra > rout || !map_dims(kg, rout, out, dom == 1, map)) return false;
  int64_t ast[SMELT_MAX_RANK];
  shape_strides(ra, a, ast);
  for (int d = 0; d < kg->rank; d++) stride[d] = 0;
  for (int i = 0; i < ra; i++) {
    int d = i + rout - ra;
    if (a[i] == 1) continue;
    if (a[i] != out[d] || map[d] < 0) return false;
    stride[map[d]] = ast[i];
  }
  return true;
}

/* Expression for input i of node nd (whose output has shape out, domain dom). */
static int operand(lower_state *ls, const ir_node *nd, int i, int rout, const int64_t *out, int dom) {
  int v = nd->inputs[i];
  if (v < 0) return -1;
  const ir_value *val = &ls->cg->g->values[v];
  if (ls->vexpr[v] >= 0) {
    /* made in the group: this use must index it exactly as it was made */
    int vd = out_domain(ls->kg, val->rank, val->dims);
    int64_t s_use[SMELT_MAX_RANK], s_own[SMELT_MAX_RANK];
    if (vd < 0 || (vd == 0 && dom == 1)) return -1;
    if (!operand_strides(ls->kg, rout, out, dom, val->rank, val->dims, s_use) ||
        !operand_strides(ls->kg, val->rank, val->dims, vd, val->rank, val->dims, s_own) ||
        memcmp(s_use, s_own, sizeof(int64_t) * (size_t)ls->kg->rank))
      return -1;
    return ls->vexpr[v];
  }
  if (!kir_dtype_ok(val->dtype)) return -1;
  if (val->constant && tensor_numel(val->constant) == 1 && val->rank <= rout) {
    if (kir_dtype_float(val->dtype) || val->dtype == SMELT_BOOL)
      return kir_const(ls->kg, val->dtype, tensor_get_f64(val->constant, 0));
    int64_t iv = tensor_get_i64(val->constant, 0);
    if (iv >= -(INT64_C(1) << 53) && iv <= (INT64_C(1) << 53)) return kir_const(ls->kg, val->dtype, (double)iv);
  }
  int64_t stride[SMELT_MAX_RANK];
  if (!operand_strides(ls->kg, rout, out, dom, val->rank, val->dims, stride)) return -1;
  return kir_load(ls->kg, v, val->dtype, stride);
}

static float attr_f(const ir_node *nd, const char *name, float d) { return ir_attr_float(nd, name, d); }

static int lower_unary_param(kir_group *kg, const ir_node *nd, kir_fn fn, int x, const cgraph *cg) {
  switch (fn) {
    case KF_GELU: {
      const char *ap = ir_attr_string(nd, "approximate", "none");
      return kir_unary(kg, strcmp(ap, "tanh") ? KF_GELU : KF_GELU_TANH, x);
    }
    case KF_LEAKY: return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 0.01f), 0, 0);
    case KF_ELU: return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 1.f), 0, 0);
    case KF_CELU: return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 1.f), 0, 0);
    case KF_SELU:
      return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 1.67326319217681884765625f),
                         attr_f(nd, "gamma", 1.05070102214813232421875f), 0);
    case KF_HARDSIG: return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 0.2f), attr_f(nd, "beta", 0.5f), 0);
    case KF_HARDSWISH: return kir_unary_p(kg, fn, x, (float)(1.0 / 6), 0.5f, 0);
    case KF_THRELU: return kir_unary_p(kg, fn, x, attr_f(nd, "alpha", 1.f), 0, 0);
    case KF_CLIP: {
      float lo = -INFINITY, hi = INFINITY;
      int flags = 0;
      if (nd->opset < 11) {
        if (ir_attr_find(nd, "min")) flags |= 1, lo = attr_f(nd, "min", 0);
        if (ir_attr_find(nd, "max")) flags |= 2, hi = attr_f(nd, "max", 0);
      } else {
        const ir_value *l = nd->n_inputs > 1 && nd->inputs[1] >= 0 ? &cg->g->values[nd->inputs[1]] : NULL;
        const ir_value *h = nd->n_inputs > 2 && nd->inputs[2] >= 0 ? &cg->g->values[nd->inputs[2]] : NULL;
        if (l) flags |= 1, lo = (float)tensor_get_f64(l->constant, 0);
        if (h) flags |= 2, hi = (float)tensor_get_f64(h->constant, 0);
      }
      return kir_unary_p(kg, fn, x, lo, hi, flags);
    }
    default: return -1;
  }
}

/* Pointwise node: fills vexpr of its output. */
static bool lower_pw(lower_state *ls, const ir_node *nd, int rout, const int64_t *out, int dom) {
  const pw_def *pw = &pw_defs[ls->cg->info[nd - ls->cg->g->nodes].def];
  kir_group *kg = ls->kg;
  int x = operand(ls, nd, 0, rout, out, dom), r = -1;
  if (x < 0) return false;
  if (!strcmp(pw->name, "Where")) {
    int a = operand(ls, nd, 1, rout, out, dom), b = operand(ls, nd, 2, rout, out, dom);
    if (a < 0 || b < 0 || kg->ex[a].dt != kg->ex[b].dt) return false;
    r = kir_select(kg, x, a, b);
  } else if (!strcmp(pw->name, "Cast")) {
    r = kir_cast(kg, x, ls->cg->g->values[nd->outputs[0]].dtype);
  } else if (pw->arity == 1) {
    r = kir_unary(kg, pw->fn, x);
  } else if (pw->arity == 0) {
    r = lower_unary_param(kg, nd, pw->fn, x, ls->cg);
  } else if (pw->arity == 2) {
    int y = operand(ls, nd, 1, rout, out, dom);
    if (y < 0) return false;
    if (pw->fn == KF_POW && kg->ex[y].op == KX_CONST && kg->ex[y].v == 1.0) r = x;
    /* small whole powers as products: vectorizable, where powf is a call per
     * element (tanh-GELU's x^3, RMSNorm's x^2); within 2 ulp of powf */
    else if (pw->fn == KF_POW && kg->ex[y].op == KX_CONST && kir_dtype_float(kg->ex[x].dt) &&
             (kg->ex[y].v == 2.0 || kg->ex[y].v == 3.0)) {
      r = kir_binary(kg, KF_MUL, x, x);
      if (r >= 0 && kg->ex[y].v == 3.0) r = kir_binary(kg, KF_MUL, r, x);
    } else r = kir_binary(kg, pw->fn, x, y);
  } else { /* variadic, folded left as the reference does */
    r = x;
    for (int i = 1; i < nd->n_inputs && r >= 0; i++) {
      int y = operand(ls, nd, i, rout, out, dom);
      r = y < 0 ? -1 : kir_binary(kg, pw->fn, r, y);
    }
    if (r >= 0 && !strcmp(pw->name, "Mean") && nd->n_inputs > 1)
      r = kir_binary(kg, KF_DIV, r, kir_const(kg, SMELT_F32, (double)(float)nd->n_inputs));
  }
  if (r < 0) return false;
  ls->vexpr[nd->outputs[0]] = r;
  return true;
}

/* Input i of nd, a vector of C values (InstanceNormalization's scale and
 * B), read along axis 1 of x's shape: as if it were [C, 1, ..., 1]. */
static int channel_operand(lower_state *ls, const ir_node *nd, int i, const ir_value *xv) {
  int v = i < nd->n_inputs ? nd->inputs[i] : -1;
  if (v < 0 || ls->vexpr[v] >= 0) return -1;
  const ir_value *val = &ls->cg->g->values[v];
  if (val->rank != 1 || val->dims[0] != xv->dims[1] || !kir_dtype_ok(val->dtype)) return -1;
  int64_t dims[SMELT_MAX_RANK], stride[SMELT_MAX_RANK];
  dims[0] = val->dims[0];
  for (int d = 1; d < xv->rank - 1; d++) dims[d] = 1;
  if (!operand_strides(ls->kg, xv->rank, xv->dims, 0, xv->rank - 1, dims, stride)) return -1;
  return kir_load(ls->kg, v, val->dtype, stride);
}

/* Reduction node over its input x (row domain, shape I). */
static bool lower_red(lower_state *ls, const ir_node *nd) {
  kir_group *kg = ls->kg;
  const ir_value *xv = &ls->cg->g->values[nd->inputs[0]];
  if (out_domain(kg, xv->rank, xv->dims) != 0) return false;
  int x = operand(ls, nd, 0, xv->rank, xv->dims, 0);
  if (x < 0) return false;
  rk kind = (rk)ls->cg->info[nd - ls->cg->g->nodes].def;
  int64_t L = 1;
  for (int d = kg->k; d < kg->rank; d++) L *= kg->I[d];
  int invL = kir_const(kg, SMELT_F32, 1.0 / (double)L);
  int r = -1, o1 = -1, o2 = -1;
  switch (kind) {
    case RK_SOFTMAX:
    case RK_LOGSOFTMAX: {
      int m = kir_reduce(kg, KR_MAX, x);
      int d = kir_binary(kg, KF_SUB, x, m);
      int e = kir_unary(kg, KF_EXP, d);
      int s = kir_reduce(kg, KR_SUM, e);
      r = kind == RK_SOFTMAX ? kir_binary(kg, KF_DIV, e, s) : kir_binary(kg, KF_SUB, d, kir_unary(kg, KF_LOG, s));
      break;
    }
    case RK_LN:
    case RK_RMS: {
      int mean = kind == RK_LN ? kir_binary(kg, KF_MUL, kir_reduce(kg, KR_SUM, x), invL) : -1;
      int d = kind == RK_LN ? kir_binary(kg, KF_SUB, x, mean) : x;
      int var = kir_binary(kg, KF_MUL, kir_reduce(kg, KR_SUM, kir_binary(kg, KF_MUL, d, d)), invL);
      int eps = kir_const(kg, SMELT_F32, (double)ir_attr_float(nd, "epsilon", 1e-5f));
      int inv = kir_unary(kg, KF_RSQRT, kir_binary(kg, KF_ADD, var, eps));
      int sc = operand(ls, nd, 1, xv->rank, xv->dims, 0);
      r = kir_binary(kg, KF_MUL, kir_binary(kg, KF_MUL, d, inv), sc);
      if (kind == RK_LN && nd->n_inputs > 2 && nd->inputs[2] >= 0) {
        int b = operand(ls, nd, 2, xv->rank, xv->dims, 0);
        r = b < 0 ? -1 : kir_binary(kg, KF_ADD, r, b);
      }
      if (kind == RK_LN) o1 = mean, o2 = inv;
      else o1 = inv;
      break;
    }
    case RK_IN: { /* per (image, channel) row: (x - mean) / sqrt(var + eps) * scale[c] + B[c] */
      int mean = kir_binary(kg, KF_MUL, kir_reduce(kg, KR_SUM, x), invL);
      int d = kir_binary(kg, KF_SUB, x, mean);
      int var = kir_binary(kg, KF_MUL, kir_reduce(kg, KR_SUM, kir_binary(kg, KF_MUL, d, d)), invL);
      int eps = kir_const(kg, SMELT_F32, (double)ir_attr_float(nd, "epsilon", 1e-5f));
      int inv = kir_unary(kg, KF_RSQRT, kir_binary(kg, KF_ADD, var, eps));
      int sc = channel_operand(ls, nd, 1, xv), b = channel_operand(ls, nd, 2, xv);
      r = sc < 0 || b < 0 ? -1 : kir_binary(kg, KF_ADD, kir_binary(kg, KF_MUL, kir_binary(kg, KF_MUL, d, inv), sc), b);
      break;
    }
    case RK_RSUM: r = kir_reduce(kg, KR_SUM, x); break;
    case RK_RMEAN:
    case RK_GAP: r = kir_binary(kg, KF_MUL, kir_reduce(kg, KR_SUM, x), invL); break;
    case RK_RMAX:
    case RK_GMP: r = kir_reduce(kg, KR_MAX, x); break;
    case RK_RMIN: r = kir_reduce(kg, KR_MIN, x); break;
    case RK_RSUMSQ: r = kir_reduce(kg, KR_SUM, kir_binary(kg, KF_MUL, x, x)); break;
    case RK_RL1: r = kir_reduce(kg, KR_SUM, kir_unary(kg, KF_ABS, x)); break;
    case RK_RL2: r = kir_unary(kg, KF_SQRT, kir_reduce(kg, KR_SUM, kir_binary(kg, KF_MUL, x, x))); break;
    default: return false;
  }
  if (r < 0) return false;
  ls->vexpr[nd->outputs[0]] = r;
  if (nd->n_outputs > 1 && nd->outputs[1] >= 0) {
    if (o1 < 0) return false;
    ls->vexpr[nd->outputs[1]] = o1;
  }
  if (nd->n_outputs > 2 && nd->outputs[2] >= 0) {
    if (o2 < 0) return false;
    ls->vexpr[nd->outputs[2]] = o2;
  }
  return true;
}

/* True if v is read by a node outside the group or leaves the graph. */
static bool needed_outside(const cgraph *cg, const bool *in_group, int v) {
  if (cg->is_output[v]) return true;
  for (int u = cg->use_start[v]; u < cg->use_start[v + 1]; u++)
    if (!in_group[cg->use_node[u]]) return true;
  return false;
}

bool lower_group(const cgraph *cg, const int *nodes, int n, const bool *in_group, int r, int k,
                 const int64_t *I, kir_group *kg) {
  kir_init(kg, r, k, I);
  int *vexpr = cg->vexpr; /* all -1: only the group's outputs are set, and reset below */
  lower_state ls = {cg, kg, in_group, vexpr};
  bool ok = true;
  for (int i = 0; ok && i < n; i++) {
    const ir_node *nd = &cg->g->nodes[nodes[i]];
    const cn_info *info = &cg->info[nodes[i]];
    if (info->kind == CN_RED) {
      ok = info->rank == r && info->k == k && !memcmp(info->dims, I, sizeof(int64_t) * (size_t)r) &&
           lower_red(&ls, nd);
    } else if (info->kind == CN_PW) {
      const ir_value *ov = &cg->g->values[nd->outputs[0]];
      int dom = out_domain(kg, ov->rank, ov->dims);
      ok = dom >= 0 && lower_pw(&ls, nd, ov->rank, ov->dims, dom);
    } else {
      ok = false;
    }
  }
  /* stores: every value made here and needed elsewhere */
  for (int i = 0; ok && i < n; i++) {
    const ir_node *nd = &cg->g->nodes[nodes[i]];
    for (int o = 0; ok && o < nd->n_outputs; o++) {
      int v = nd->outputs[o];
      if (v < 0 || !needed_outside(cg, in_group, v)) continue;
      const ir_value *val = &cg->g->values[v];
      int dom = out_domain(kg, val->rank, val->dims);
      int64_t stride[SMELT_MAX_RANK];
      ok = vexpr[v] >= 0 && dom >= 0 &&
           operand_strides(kg, val->rank, val->dims, dom, val->rank, val->dims, stride) &&
           kg->ex[vexpr[v]].dt == val->dtype && kir_store_out(kg, vexpr[v], v, stride) >= 0;
    }
  }
  for (int i = 0; i < n; i++) {
    const ir_node *nd = &cg->g->nodes[nodes[i]];
    for (int o = 0; o < nd->n_outputs; o++)
      if (nd->outputs[o] >= 0) vexpr[nd->outputs[o]] = -1;
  }
  return ok && kg->n_st > 0 && kir_finish(kg);
}
