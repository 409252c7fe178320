/* The fusion passes on small graphs: conv_bn, fuse_epilogue (smelt.Gemm,
 * smelt.Conv), fuse_norm (LayerNormalization, Gelu), fuse_attention
 * (smelt.Attention).  Each rewritten graph must give eager's results; shapes
 * are chosen to cross the kernels' block sizes. */
#include "check.h"
#include "passes_util.h"

static const ir_graph *rewrite(ir_graph *g, pass_fn fn, passes_equiv *e) {
  CHECK_OK(gb_finish(g));
  check_opts co = {.pass = fn};
  smelt_status s = check_rewrite(g, NULL, &co, e);
  CHECK_OK(s);
  CHECK(e->ok);
  return s ? NULL : e->rewritten;
}

static const char *attr_s(const ir_graph *g, const char *op, const char *name) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].domain, "smelt") && !strcmp(g->nodes[i].op_type, op))
      return ir_attr_string(&g->nodes[i], name, "");
  return "";
}

static int64_t attr_i(const ir_graph *g, const char *op, const char *name) {
  for (int i = 0; i < g->n_nodes; i++)
    if (!strcmp(g->nodes[i].domain, "smelt") && !strcmp(g->nodes[i].op_type, op))
      return ir_attr_int(&g->nodes[i], name, -1);
  return -1;
}

/* ---- conv_bn ---- */

static void add_bn(ir_graph *g, const char *in, const char *out, int64_t M) {
  gb_const(g, "bn_scale", 1, &M, 11);
  gb_const(g, "bn_bias", 1, &M, 12);
  gb_const(g, "bn_mean", 1, &M, 13);
  float var[64];
  for (int i = 0; i < M; i++) var[i] = 0.5f + 0.1f * (float)i;
  gb_const_t(g, "bn_var", SMELT_F32, 1, &M, var, 0);
  char ins[256];
  snprintf(ins, sizeof ins, "%s,bn_scale,bn_bias,bn_mean,bn_var", in);
  int bn = gb_node(g, "BatchNormalization", ins, out, 1);
  gb_attr_float(g, bn, 0, "epsilon", 1e-3f);
}

static void test_conv_bn(void) {
  for (int with_bias = 0; with_bias < 2; with_bias++) {
    ir_graph *g = gb_new();
    int64_t M = 5;
    gb_input(g, "x", SMELT_F32, 4, (int64_t[]){2, 3, 9, 9});
    gb_const(g, "w", 4, (int64_t[]){M, 3, 3, 3}, 1);
    gb_const(g, "b", 1, &M, 2);
    int c = gb_node(g, "Conv", with_bias ? "x,w,b" : "x,w", "y", 1);
    gb_attr_ints(g, c, 0, "pads", 4, (int64_t[]){1, 1, 1, 1});
    add_bn(g, "y", "z", M);
    gb_output(g, "z");
    passes_equiv e;
    const ir_graph *r = rewrite(g, pass_conv_bn, &e);
    CHECK(e.changes == 1 && r && r->n_nodes == 1 && count_op(r, "Conv") == 1);
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

/* ---- fuse_epilogue ---- */

static void test_matmul_bias_relu(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){2, 5, 8});
  gb_const(g, "w", 2, (int64_t[]){8, 6}, 1);
  gb_const(g, "b", 1, (int64_t[]){6}, 2);
  gb_const(g, "wb", 3, (int64_t[]){2, 8, 6}, 3);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Add", "b,m", "a", 0);
  gb_node(g, "Relu", "a", "y", 0);
  gb_node(g, "MatMul", "x,wb", "batched", 0); /* B of rank 3: not a GEMM with an epilogue */
  gb_node(g, "Relu", "batched", "y2", 0);
  gb_output(g, "y");
  gb_output(g, "y2");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes == 1 && r && count_op(r, "smelt.Gemm") == 1 && count_op(r, "MatMul") == 1);
  CHECK(r && !strcmp(attr_s(r, "Gemm", "activation"), "relu") && attr_i(r, "Gemm", "has_bias") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* MatMul(x, Transpose(W)) of a constant W (nn.Linear exported with its weight
 * as an input bound to a constant): fold leaves the Transpose alone and the
 * product becomes smelt.Gemm reading W with transB, even with nothing else to
 * fuse.  A Transpose read twice, or with another perm, is not taken. */
static void test_matmul_transposed_weight(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){2, 5, 80});
  gb_const(g, "w", 2, (int64_t[]){64, 80}, 1);
  gb_const(g, "w2", 2, (int64_t[]){64, 80}, 2);
  int t = gb_node(g, "Transpose", "w", "wt", 1);
  gb_attr_ints(g, t, 0, "perm", 2, (int64_t[]){1, 0});
  gb_node(g, "MatMul", "x,wt", "y", 0);
  gb_node(g, "Transpose", "w2", "w2t", 0); /* default perm: reversed */
  gb_node(g, "MatMul", "x,w2t", "y2", 0);
  gb_node(g, "Relu", "w2t", "y3", 0); /* w2t read twice: folded, not taken */
  gb_output(g, "y");
  gb_output(g, "y2");
  gb_output(g, "y3");
  passes_equiv e;
  CHECK_OK(check_passes(g, NULL, &e));
  CHECK(e.ok);
  const ir_graph *r = e.rewritten;
  CHECK(r && count_op(r, "smelt.Gemm") == 1 && count_op(r, "Transpose") == 0 && count_op(r, "MatMul") == 1);
  CHECK(r && attr_i(r, "Gemm", "transB") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_gemm_beta_residual_sigmoid(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){7, 9});
  gb_input(g, "res", SMELT_F32, 2, (int64_t[]){7, 4});
  gb_const(g, "w", 2, (int64_t[]){4, 9}, 1);
  gb_const(g, "c", 1, (int64_t[]){4}, 2);
  int gm = gb_node(g, "Gemm", "x,w,c", "m", 3);
  gb_attr_int(g, gm, 0, "transB", 1);
  gb_attr_float(g, gm, 1, "alpha", 0.5f);
  gb_attr_float(g, gm, 2, "beta", 2.f);
  gb_node(g, "Add", "m,res", "a", 0);
  gb_node(g, "Sigmoid", "a", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes == 1 && r && r->n_nodes == 1 && count_op(r, "smelt.Gemm") == 1);
  CHECK(r && attr_i(r, "Gemm", "has_residual") == 1 && !strcmp(attr_s(r, "Gemm", "activation"), "sigmoid"));
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* Enough rows for the row-blocked path (activation applied per block). */
static void test_gemm_blocked_tanh(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4099, 16});
  gb_const(g, "w", 2, (int64_t[]){16, 64}, 1);
  gb_const(g, "b", 3, (int64_t[]){1, 1, 64}, 2);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Unsqueeze", "m,zero", "u", 0);
  gb_ints(g, "zero", 1, (int64_t[]){0});
  gb_node(g, "Tanh", "m", "y", 0);
  gb_node(g, "Add", "u,b", "ub", 0); /* m has two users: no fusion through it */
  gb_output(g, "y");
  gb_output(g, "ub");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes == 0 && r && count_op(r, "smelt.Gemm") == 0);
  passes_equiv_free(&e);
  ir_graph_free(g);
  g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4099, 16});
  gb_const(g, "w", 2, (int64_t[]){16, 64}, 1);
  gb_const(g, "b", 1, (int64_t[]){64}, 2);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Add", "m,b", "a", 0);
  gb_node(g, "Tanh", "a", "y", 0);
  gb_output(g, "y");
  r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes == 1 && r && r->n_nodes == 1 && !strcmp(attr_s(r, "Gemm", "activation"), "tanh"));
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_conv_residual_clip(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 4, (int64_t[]){2, 4, 11, 13});
  gb_const(g, "w", 4, (int64_t[]){6, 4, 3, 3}, 1);
  gb_const(g, "b", 1, (int64_t[]){6}, 2);
  gb_const(g, "w2", 4, (int64_t[]){6, 4, 1, 1}, 3);
  gb_scalar(g, "lo", 0.f);
  gb_scalar(g, "hi", 0.3f);
  int c1 = gb_node(g, "Conv", "x,w,b", "c1", 1);
  gb_attr_ints(g, c1, 0, "pads", 4, (int64_t[]){1, 1, 1, 1});
  gb_node(g, "Conv", "x,w2", "c2", 0);
  gb_node(g, "Add", "c1,c2", "a", 0);
  gb_node(g, "Clip", "a,lo,hi", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  /* one of the two convs takes the other as its residual, and the Clip */
  CHECK(e.changes == 1 && r && r->n_nodes == 2 && count_op(r, "smelt.Conv") == 1 && count_op(r, "Conv") == 1);
  CHECK(r && !strcmp(attr_s(r, "Conv", "activation"), "clip") && attr_i(r, "Conv", "has_residual") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

static void test_conv_channel_bias_gelu(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 4, (int64_t[]){1, 6, 10, 10});
  gb_const(g, "w", 4, (int64_t[]){6, 1, 3, 3}, 1); /* depthwise: the direct-loop path */
  gb_const(g, "cb", 3, (int64_t[]){6, 1, 1}, 2);
  gb_const(g, "w2", 4, (int64_t[]){3, 6, 2, 2}, 3);
  int c = gb_node(g, "Conv", "x,w", "c", 1);
  gb_attr_int(g, c, 0, "group", 6);
  gb_node(g, "Add", "c,cb", "a", 0);
  gb_node(g, "Relu", "a", "r", 0);
  int c2 = gb_node(g, "Conv", "r,w2", "c2", 1);
  gb_attr_ints(g, c2, 0, "strides", 2, (int64_t[]){2, 2});
  gb_node(g, "Gelu", "c2", "y", 0);
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes == 2 && r && r->n_nodes == 2 && count_op(r, "smelt.Conv") == 2);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* SiLU (Sigmoid + Mul, as ONNX exports it) after a conv, in both operand
 * orders: a depthwise 5x5 stride-2 conv with a bias Add, and a full conv
 * with a residual; then one that must not fuse (the conv's output has a
 * third reader). */
static void test_conv_silu(void) {
  for (int order = 0; order < 2; order++) {
    ir_graph *g = gb_new();
    gb_input(g, "x", SMELT_F32, 4, (int64_t[]){1, 10, 15, 13});
    gb_const(g, "w", 4, (int64_t[]){10, 1, 5, 5}, 1);
    gb_const(g, "cb", 3, (int64_t[]){10, 1, 1}, 2);
    gb_const(g, "w2", 4, (int64_t[]){10, 10, 3, 3}, 3);
    int c = gb_node(g, "Conv", "x,w", "c", 3);
    gb_attr_int(g, c, 0, "group", 10);
    gb_attr_ints(g, c, 1, "strides", 2, (int64_t[]){2, 2});
    gb_attr_ints(g, c, 2, "pads", 4, (int64_t[]){2, 2, 2, 2});
    gb_node(g, "Add", "c,cb", "a", 0);
    gb_node(g, "Sigmoid", "a", "s", 0);
    gb_node(g, "Mul", order ? "s,a" : "a,s", "h", 0);
    int c2 = gb_node(g, "Conv", "h,w2", "c2", 1);
    gb_attr_ints(g, c2, 0, "pads", 4, (int64_t[]){1, 1, 1, 1});
    gb_node(g, "Add", "c2,h", "r", 0);
    gb_node(g, "Sigmoid", "r", "s2", 0);
    gb_node(g, "Mul", order ? "r,s2" : "s2,r", "y", 0);
    gb_output(g, "y");
    passes_equiv e;
    const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
    CHECK(e.changes == 2 && r && r->n_nodes == 2 && count_op(r, "smelt.Conv") == 2);
    CHECK(r && count_op(r, "Sigmoid") == 0 && count_op(r, "Mul") == 0);
    CHECK(r && !strcmp(attr_s(r, "Conv", "activation"), "silu"));
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 4, (int64_t[]){1, 4, 9, 9});
  gb_const(g, "w", 4, (int64_t[]){6, 4, 3, 3}, 1);
  gb_node(g, "Conv", "x,w", "c", 0);
  gb_node(g, "Sigmoid", "c", "s", 0);
  gb_node(g, "Mul", "c,s", "h", 0);
  gb_node(g, "Add", "h,c", "y", 0); /* c read a third time: no SiLU epilogue */
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(r && count_op(r, "Sigmoid") == 1 && count_op(r, "Mul") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
  /* a MatMul's SiLU (SwiGLU's gate) is not taken */
  g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){3, 8});
  gb_const(g, "w", 2, (int64_t[]){8, 5}, 1);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Sigmoid", "m", "s", 0);
  gb_node(g, "Mul", "m,s", "y", 0);
  gb_output(g, "y");
  r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(r && count_op(r, "Sigmoid") == 1 && count_op(r, "Mul") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- fuse_norm ---- */

static void build_ln(ir_graph *g, bool pow_form, bool affine) {
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){2, 5, 24});
  gb_ints(g, "axes", 1, (int64_t[]){-1});
  gb_scalar(g, "two", 2.f);
  gb_scalar(g, "eps", 1e-5f);
  gb_const(g, "gamma", 1, (int64_t[]){24}, 3);
  gb_const(g, "beta", 1, (int64_t[]){24}, 4);
  int m1 = gb_node(g, "ReduceMean", "x", "mean", 1);
  gb_attr_ints(g, m1, 0, "axes", 1, (int64_t[]){-1});
  gb_node(g, "Sub", "x,mean", "d", 0);
  if (pow_form) gb_node(g, "Pow", "d,two", "sq", 0);
  else gb_node(g, "Mul", "d,d", "sq", 0);
  int m2 = gb_node(g, "ReduceMean", "sq", "var", 1);
  gb_attr_ints(g, m2, 0, "axes", 1, (int64_t[]){2});
  gb_node(g, "Add", "var,eps", "ve", 0);
  gb_node(g, "Sqrt", "ve", "sd", 0);
  gb_node(g, "Div", "d,sd", affine ? "n" : "y", 0);
  if (affine) {
    gb_node(g, "Mul", "n,gamma", "ng", 0);
    gb_node(g, "Add", "beta,ng", "y", 0);
  }
  gb_output(g, "y");
}

static void test_layernorm(void) {
  for (int form = 0; form < 2; form++) {
    ir_graph *g = gb_new();
    build_ln(g, form == 0, form == 0);
    passes_equiv e;
    const ir_graph *r = rewrite(g, pass_fuse_norm, &e);
    CHECK(e.changes == 1 && r && r->n_nodes == 1 && count_op(r, "LayerNormalization") == 1);
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

/* GELU written three ways; and a look-alike with / 2 that is not GELU. */
static void test_gelu(void) {
  for (int form = 0; form < 4; form++) {
    ir_graph *g = gb_new();
    gb_input(g, "x", SMELT_F32, 2, (int64_t[]){3, 33});
    gb_scalar(g, "rt2", form == 3 ? 2.f : 1.4142135f);
    gb_scalar(g, "irt2", 0.70710678f);
    gb_scalar(g, "one", 1.f);
    gb_scalar(g, "half", 0.5f);
    if (form == 1) gb_node(g, "Mul", "x,irt2", "u", 0);
    else gb_node(g, "Div", "x,rt2", "u", 0);
    gb_node(g, "Erf", "u", "e", 0);
    gb_node(g, "Add", "one,e", "s", 0);
    if (form == 0 || form == 3) {
      gb_node(g, "Mul", "x,s", "m", 0);
      gb_node(g, "Mul", "m,half", "y", 0);
    } else if (form == 1) {
      gb_node(g, "Mul", "x,half", "h", 0);
      gb_node(g, "Mul", "h,s", "y", 0);
    } else {
      gb_node(g, "Mul", "half,s", "m", 0);
      gb_node(g, "Mul", "m,x", "y", 0);
    }
    gb_output(g, "y");
    passes_equiv e;
    const ir_graph *r = rewrite(g, pass_fuse_norm, &e);
    if (form < 3) CHECK(e.changes == 1 && r && r->n_nodes == 1 && count_op(r, "Gelu") == 1);
    else CHECK(e.changes == 0 && r && count_op(r, "Gelu") == 0);
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

/* The tanh form (GPT-2's gelu_new) with x^3 as Pow or two Muls and the
 * tail's three shapes; look-alikes that are not it: a wrong coefficient, a
 * cube read elsewhere too.  Then MatMul + bias + that Gelu becomes one
 * smelt.Gemm whose epilogue applies gelu_tanh. */
static void test_gelu_tanh(void) {
  for (int form = 0; form < 5; form++) {
    ir_graph *g = gb_new();
    gb_input(g, "x", SMELT_F32, 2, (int64_t[]){3, 37});
    gb_scalar(g, "three", 3.f);
    gb_scalar(g, "k", form == 3 ? 0.05f : 0.044715f);
    gb_scalar(g, "c", 0.7978845608f);
    gb_scalar(g, "one", 1.f);
    gb_scalar(g, "half", 0.5f);
    if (form == 0 || form == 3 || form == 4) {
      gb_node(g, "Pow", "x,three", "x3", 0);
    } else if (form == 1) {
      gb_node(g, "Mul", "x,x", "x2", 0);
      gb_node(g, "Mul", "x2,x", "x3", 0);
    } else {
      gb_node(g, "Mul", "x,x", "x2", 0);
      gb_node(g, "Mul", "x,x2", "x3", 0);
    }
    gb_node(g, "Mul", form == 1 ? "k,x3" : "x3,k", "q", 0);
    gb_node(g, "Add", form == 2 ? "q,x" : "x,q", "r", 0);
    gb_node(g, "Mul", form == 1 ? "c,r" : "r,c", "u", 0);
    gb_node(g, "Tanh", "u", "t", 0);
    gb_node(g, "Add", "t,one", "s", 0);
    if (form == 0 || form >= 3) {
      gb_node(g, "Mul", "x,half", "h", 0);
      gb_node(g, "Mul", "h,s", "y", 0);
    } else if (form == 1) {
      gb_node(g, "Mul", "x,s", "m", 0);
      gb_node(g, "Mul", "m,half", "y", 0);
    } else {
      gb_node(g, "Mul", "s,half", "m", 0);
      gb_node(g, "Mul", "x,m", "y", 0);
    }
    gb_output(g, "y");
    if (form == 4) gb_output(g, "x3");
    passes_equiv e;
    const ir_graph *r = rewrite(g, pass_fuse_norm, &e);
    if (form < 3) {
      CHECK(e.changes == 1 && r && r->n_nodes == 1 && count_op(r, "Gelu") == 1);
      CHECK(r && r->n_nodes == 1 && !strcmp(ir_attr_string(&r->nodes[0], "approximate", ""), "tanh"));
    } else {
      CHECK(e.changes == 0 && r && count_op(r, "Gelu") == 0);
    }
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){7, 40});
  gb_const(g, "w", 2, (int64_t[]){40, 50}, 1);
  gb_const(g, "b", 1, (int64_t[]){50}, 2);
  gb_node(g, "MatMul", "x,w", "m", 0);
  gb_node(g, "Add", "m,b", "a", 0);
  int ge = gb_node(g, "Gelu", "a", "y", 1);
  gb_attr_string(g, ge, 0, "approximate", "tanh");
  g->nodes[ge].opset = 20;
  gb_output(g, "y");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_epilogue, &e);
  CHECK(e.changes >= 1 && r && r->n_nodes == 1 && !strcmp(attr_s(r, "Gemm", "activation"), "gelu_tanh"));
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* ---- fuse_attention ---- */

typedef struct attn_case {
  int64_t B, Sq, Sk, H, Dh;
  int mask;      /* 0 none, 1 additive input [B,1,1,Sk], 2 constant causal [Sq,Sk], 3 bool Where input,
                    4 constant additive [B,1,1,Sk] hiding every key of batch 0 */
  bool scale_q;  /* scale applied to Q before the product (Mul), else scores / sqrt(Dh) */
  bool nan_guard; /* Where(IsNaN(P), 0, P) after the softmax, as transformers exports it */
} attn_case;

/* x [B,Sq,E] (queries) and kv [B,Sk,E] -> projections -> heads [B,S,H,Dh] ->
 * attention -> [B,Sq,E], as torch exports a hand-written block. */
static void build_attention(ir_graph *g, const attn_case *c) {
  int64_t E = c->H * c->Dh;
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){c->B, c->Sq, E});
  gb_input(g, "kv", SMELT_F32, 3, (int64_t[]){c->B, c->Sk, E});
  gb_const(g, "wq", 2, (int64_t[]){E, E}, 1);
  gb_const(g, "wk", 2, (int64_t[]){E, E}, 2);
  gb_const(g, "wv", 2, (int64_t[]){E, E}, 3);
  gb_ints(g, "qshape", 4, (int64_t[]){c->B, c->Sq, c->H, c->Dh});
  gb_ints(g, "kshape", 4, (int64_t[]){c->B, c->Sk, c->H, c->Dh});
  gb_ints(g, "oshape", 3, (int64_t[]){c->B, c->Sq, E});
  gb_scalar(g, "scale", c->scale_q ? 1.f / sqrtf((float)c->Dh) : sqrtf((float)c->Dh));
  gb_node(g, "MatMul", "x,wq", "q", 0);
  gb_node(g, "MatMul", "kv,wk", "k", 0);
  gb_node(g, "MatMul", "kv,wv", "v", 0);
  gb_node(g, "Reshape", "q,qshape", "q4", 0);
  gb_node(g, "Reshape", "k,kshape", "k4", 0);
  gb_node(g, "Reshape", "v,kshape", "v4", 0);
  int tq = gb_node(g, "Transpose", "q4", "qt", 1);
  int tk = gb_node(g, "Transpose", "k4", "kt", 1);
  int tv = gb_node(g, "Transpose", "v4", "vt", 1);
  gb_attr_ints(g, tq, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  gb_attr_ints(g, tk, 0, "perm", 4, (int64_t[]){0, 2, 3, 1});
  gb_attr_ints(g, tv, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  if (c->scale_q) {
    gb_node(g, "Mul", "qt,scale", "qs", 0);
    gb_node(g, "MatMul", "qs,kt", "s", 0);
  } else {
    gb_node(g, "MatMul", "qt,kt", "raw", 0);
    gb_node(g, "Div", "raw,scale", "s", 0);
  }
  const char *sm_in = "s";
  if (c->mask == 1) {
    gb_input(g, "mask", SMELT_F32, 4, (int64_t[]){c->B, 1, 1, c->Sk});
    gb_node(g, "Add", "s,mask", "sm", 0);
    sm_in = "sm";
  } else if (c->mask == 2) {
    float *m = calloc((size_t)(c->Sq * c->Sk), sizeof(float));
    for (int64_t i = 0; i < c->Sq; i++)
      for (int64_t j = 0; j < c->Sk; j++) m[i * c->Sk + j] = j > i + c->Sk - c->Sq ? -INFINITY : 0.f;
    gb_const_t(g, "causal", SMELT_F32, 2, (int64_t[]){c->Sq, c->Sk}, m, 0);
    free(m);
    gb_node(g, "Add", "causal,s", "sm", 0);
    sm_in = "sm";
  } else if (c->mask == 4) {
    float *m = calloc((size_t)(c->B * c->Sk), sizeof(float));
    for (int64_t j = 0; j < c->Sk; j++) m[j] = -INFINITY; /* batch 0: no key visible */
    gb_const_t(g, "hide", SMELT_F32, 4, (int64_t[]){c->B, 1, 1, c->Sk}, m, 0);
    free(m);
    gb_node(g, "Add", "s,hide", "sm", 0);
    sm_in = "sm";
  } else if (c->mask == 3) {
    gb_input(g, "keep", SMELT_BOOL, 4, (int64_t[]){1, 1, c->Sq, c->Sk});
    gb_scalar(g, "fill", -1e4f);
    gb_node(g, "Where", "keep,s,fill", "sm", 0);
    sm_in = "sm";
  }
  char ins[64];
  snprintf(ins, sizeof ins, "%s", sm_in);
  int sm = gb_node(g, "Softmax", ins, "p", 1);
  gb_attr_int(g, sm, 0, "axis", -1);
  if (c->nan_guard) {
    gb_scalar(g, "zero", 0.f);
    gb_node(g, "IsNaN", "p", "pnan", 0);
    gb_node(g, "Where", "pnan,zero,p", "pg", 0);
    gb_node(g, "MatMul", "pg,vt", "o", 0);
  } else {
    gb_node(g, "MatMul", "p,vt", "o", 0);
  }
  int to = gb_node(g, "Transpose", "o", "ot", 1);
  gb_attr_ints(g, to, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  gb_node(g, "Reshape", "ot,oshape", "y", 0);
  gb_output(g, "y");
}

static void test_attention(void) {
  static const attn_case cases[] = {
      {2, 37, 37, 4, 8, 1, false, false},  /* BERT-like: padding mask */
      {1, 70, 70, 2, 16, 2, false, false}, /* GPT-like: causal, partial key and query blocks */
      {2, 5, 77, 2, 8, 2, false, false},   /* with a KV cache: causal aligned at the end */
      {1, 33, 33, 3, 4, 3, true, false},   /* bool mask via Where; scale on Q */
      {3, 1, 65, 1, 64, 0, true, false},   /* one query (decode), no mask */
      {2, 1, 9, 2, 8, 1, false, true}, /* the NaN guard transformers exports */
      {2, 3, 9, 2, 8, 4, false, true}, /* ... where it matters: batch 0 sees no key (zeros, not NaN) */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ir_graph *g = gb_new();
    build_attention(g, &cases[i]);
    passes_equiv e;
    CHECK_OK(gb_finish(g));
    CHECK_OK(check_passes(g, NULL, &e));
    const ir_graph *r = e.rewritten;
    if (!e.ok || !r || count_op(r, "smelt.Attention") != 1) fprintf(stderr, "attention case %zu\n", i);
    CHECK(e.ok && r && count_op(r, "smelt.Attention") == 1 && count_op(r, "Softmax") == 0);
    /* no transposes left: the kernel reads and writes the projections' layout */
    CHECK(r && count_op(r, "Transpose") == 0);
    CHECK(r && attr_i(r, "Attention", "causal") == (cases[i].mask == 2));
    CHECK(r && attr_i(r, "Attention", "has_mask") == (cases[i].mask == 1 || cases[i].mask == 3 || cases[i].mask == 4));
    CHECK(r && attr_i(r, "Attention", "zero_empty_rows") == cases[i].nan_guard);
    CHECK(r && count_op(r, "IsNaN") == 0);
    passes_equiv_free(&e);
    ir_graph_free(g);
  }
}

/* A Softmax over another axis, or a product that feeds something else too,
 * is not attention. */
static void test_attention_rejects(void) {
  ir_graph *g = gb_new();
  gb_input(g, "q", SMELT_F32, 4, (int64_t[]){1, 2, 8, 4});
  gb_input(g, "kt", SMELT_F32, 4, (int64_t[]){1, 2, 4, 8});
  gb_input(g, "v", SMELT_F32, 4, (int64_t[]){1, 2, 8, 4});
  gb_node(g, "MatMul", "q,kt", "s", 0);
  int sm = gb_node(g, "Softmax", "s", "p", 1);
  gb_attr_int(g, sm, 0, "axis", 2);
  gb_node(g, "MatMul", "p,v", "o", 0);
  gb_node(g, "MatMul", "q,kt", "s2", 0);
  gb_node(g, "Softmax", "s2", "p2", 0);
  gb_node(g, "MatMul", "p2,v", "o2", 0);
  gb_output(g, "o");
  gb_output(g, "o2");
  gb_output(g, "p2");
  passes_equiv e;
  const ir_graph *r = rewrite(g, pass_fuse_attention, &e);
  CHECK(e.changes == 0 && r && count_op(r, "Softmax") == 2);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* fuse_attention in a generator's decode graph (static_kv). */
static smelt_status fuse_attention_static(ir_graph *g, const pass_options *o, pass_report *r, int *changes) {
  pass_options so = *o;
  so.static_kv = true;
  return pass_fuse_attention(g, &so, r, changes);
}

/* Grouped-query attention as transformers exports it: K and V [1, 2, 5, 8]
 * repeated for 4 query heads by Reshape(Expand(Unsqueeze(x, 2))), the V
 * repeat's shape read too.  axis 2: read through (kv_group, no Expand left,
 * the Shape still right); axis 1 (another head order): left alone. */
static void test_attention_shared_kv(int axis) {
  ir_graph *g = gb_new();
  gb_input(g, "q", SMELT_F32, 4, (int64_t[]){1, 4, 3, 8});
  gb_input(g, "k", SMELT_F32, 4, (int64_t[]){1, 2, 5, 8});
  gb_input(g, "v", SMELT_F32, 4, (int64_t[]){1, 2, 5, 8});
  gb_ints(g, "axes", 1, (int64_t[]){axis});
  gb_ints(g, "eshape", 5, axis == 2 ? (int64_t[]){1, 2, 2, 5, 8} : (int64_t[]){1, 2, 2, 5, 8});
  /* axis 1: [1, 1, 2, 5, 8] expanded to [1, 2, 2, 5, 8]: heads in another order */
  gb_ints(g, "rshape", 4, (int64_t[]){0, 4, -1, 8});
  gb_scalar(g, "scale", 0.35f);
  gb_node(g, "Unsqueeze", "k,axes", "ku", 0);
  gb_node(g, "Expand", "ku,eshape", "ke", 0);
  gb_node(g, "Reshape", "ke,rshape", "kr", 0);
  int t = gb_node(g, "Transpose", "kr", "kt", 1);
  gb_attr_ints(g, t, 0, "perm", 4, (int64_t[]){0, 1, 3, 2});
  gb_node(g, "Unsqueeze", "v,axes", "vu", 0);
  gb_node(g, "Expand", "vu,eshape", "ve", 0);
  gb_node(g, "Reshape", "ve,rshape", "vr", 0);
  gb_node(g, "MatMul", "q,kt", "s", 0);
  gb_node(g, "Mul", "s,scale", "ss", 0);
  int sm = gb_node(g, "Softmax", "ss", "p", 1);
  gb_attr_int(g, sm, 0, "axis", -1);
  gb_node(g, "MatMul", "p,vr", "o", 0);
  gb_node(g, "Shape", "vr", "vshape", 0);
  gb_output(g, "o");
  gb_output(g, "vshape");
  passes_equiv e;
  const ir_graph *r = rewrite(g, fuse_attention_static, &e);
  const char *kin = "", *vin = "";
  for (int i = 0; r && i < r->n_nodes; i++)
    if (!strcmp(r->nodes[i].op_type, "Attention")) {
      kin = r->values[r->nodes[i].inputs[1]].name;
      vin = r->values[r->nodes[i].inputs[2]].name;
    }
  if (axis == 2) { /* reads k and v themselves: the repeats are left for dce */
    CHECK(r && count_op(r, "smelt.Attention") == 1 && !strcmp(kin, "k") && !strcmp(vin, "v"));
    CHECK(r && attr_i(r, "Attention", "kv_group") == 1);
  } else {
    CHECK(r && strcmp(kin, "k") && strcmp(vin, "v") && attr_i(r, "Attention", "kv_group") <= 0);
  }
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* torch.nn.MultiheadAttention (batch_first = False) as torch.onnx.export
 * writes it: one packed projection [S, B, 3E], Reshape [S, B, 3, E],
 * Unsqueeze, Transpose [3, 1, 2, 0, 4], Squeeze, Gather 0 / 1 / 2, then per
 * operand Reshape [S, B*H, Dh], Transpose [1, 0, 2], Reshape [B, H, S, Dh];
 * the output back through Transpose [2, 0, 1, 3].  The layout ops between
 * the projection and the attention must all go: the op reads the projection
 * in place (X_view).  With x given [B, S, E] and moved to [S, B, E] by a
 * Transpose, as the exporter does -- a real transpose for B > 1, a Reshape
 * (simplify) for B = 1. */
static void test_attention_packed_mha(int64_t B, bool q_elsewhere) {
  const int64_t S = 37, H = 3, Dh = 8, E = H * Dh;
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){B, S, E});
  gb_const(g, "w", 2, (int64_t[]){E, 3 * E}, 1);
  gb_const(g, "bias", 1, (int64_t[]){3 * E}, 2);
  int t0 = gb_node(g, "Transpose", "x", "xs", 1);
  gb_attr_ints(g, t0, 0, "perm", 3, (int64_t[]){1, 0, 2});
  gb_node(g, "MatMul", "xs,w", "proj", 0);
  gb_node(g, "Add", "bias,proj", "pb", 0);
  gb_ints(g, "s5", 4, (int64_t[]){S, B, 3, E});
  gb_node(g, "Reshape", "pb,s5", "p4", 0);
  gb_ints(g, "ax0", 1, (int64_t[]){0});
  gb_node(g, "Unsqueeze", "p4,ax0", "p5", 0);
  int t1 = gb_node(g, "Transpose", "p5", "p5t", 1);
  gb_attr_ints(g, t1, 0, "perm", 5, (int64_t[]){3, 1, 2, 0, 4});
  gb_ints(g, "ax3", 1, (int64_t[]){3});
  gb_node(g, "Squeeze", "p5t,ax3", "qkv", 0);
  int64_t idx[3] = {0, 1, 2};
  gb_const_t(g, "i0", SMELT_I64, 0, NULL, &idx[0], 0);
  gb_const_t(g, "i1", SMELT_I64, 0, NULL, &idx[1], 0);
  gb_const_t(g, "i2", SMELT_I64, 0, NULL, &idx[2], 0);
  gb_node(g, "Gather", "qkv,i0", "q0", 0);
  gb_node(g, "Gather", "qkv,i1", "k0", 0);
  gb_node(g, "Gather", "qkv,i2", "v0", 0);
  gb_ints(g, "sh3", 3, (int64_t[]){S, B * H, Dh});
  gb_ints(g, "sh4", 4, (int64_t[]){B, H, S, Dh});
  const char *names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    char a[48], b[16], c[16], d[16];
    snprintf(a, sizeof a, "%s0,sh3", names[i]);
    snprintf(b, sizeof b, "%s1", names[i]);
    gb_node(g, "Reshape", a, b, 0);
    snprintf(c, sizeof c, "%s2", names[i]);
    int t = gb_node(g, "Transpose", b, c, 1);
    gb_attr_ints(g, t, 0, "perm", 3, (int64_t[]){1, 0, 2});
    snprintf(a, sizeof a, "%s,sh4", c);
    snprintf(d, sizeof d, "%s4", names[i]);
    gb_node(g, "Reshape", a, d, 0);
  }
  gb_scalar(g, "scale", 0.5f);
  gb_node(g, "Mul", "q4,scale", "qs", 0);
  int tk = gb_node(g, "Transpose", "k4", "kt", 1);
  gb_attr_ints(g, tk, 0, "perm", 4, (int64_t[]){0, 1, 3, 2});
  gb_node(g, "MatMul", "qs,kt", "sc", 0);
  int sm = gb_node(g, "Softmax", "sc", "pr", 1);
  gb_attr_int(g, sm, 0, "axis", -1);
  gb_node(g, "MatMul", "pr,v4", "o", 0);
  int to = gb_node(g, "Transpose", "o", "ot", 1);
  gb_attr_ints(g, to, 0, "perm", 4, (int64_t[]){2, 0, 1, 3});
  gb_ints(g, "osh", 2, (int64_t[]){S * B, E});
  gb_node(g, "Reshape", "ot,osh", "y", 0);
  gb_output(g, "y");
  if (q_elsewhere) gb_output(g, "q2"); /* Q's head transpose also read outside: it stays */
  passes_equiv e;
  CHECK_OK(gb_finish(g));
  CHECK_OK(check_passes(g, NULL, &e));
  const ir_graph *r = e.rewritten;
  CHECK(e.ok && r && count_op(r, "smelt.Attention") == 1 && count_op(r, "Softmax") == 0);
  CHECK(r && count_op(r, "Gather") == (q_elsewhere ? 1 : 0));
  CHECK(r && count_op(r, "Transpose") == (B > 1) + (q_elsewhere ? 2 : 0));
  if (r && !q_elsewhere) CHECK(attr_i(r, "Attention", "q_view") == -1); /* an ints attribute, not an int */
  int views = 0;
  for (int i = 0; r && i < r->n_nodes; i++)
    if (!strcmp(r->nodes[i].op_type, "Attention"))
      for (int k = 0; k < 3; k++) {
        static const char *const vn[3] = {"q_view", "k_view", "v_view"};
        int n = 0;
        views += ir_attr_ints(&r->nodes[i], vn[k], &n) != NULL && n == 9;
      }
  CHECK(views == 3);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

/* GPT-2's block: one projection [B, S, 3E] split in three on the last axis,
 * each Reshape [B, S, H, Dh] and Transpose; the Split must go. */
static void test_attention_split_qkv(void) {
  const int64_t B = 2, S = 19, H = 2, Dh = 16, E = H * Dh;
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){B, S, E});
  gb_const(g, "w", 2, (int64_t[]){E, 3 * E}, 3);
  gb_node(g, "MatMul", "x,w", "proj", 0);
  gb_ints(g, "parts", 3, (int64_t[]){E, E, E});
  int sp = gb_node(g, "Split", "proj,parts", "q0,k0,v0", 1);
  gb_attr_int(g, sp, 0, "axis", 2);
  gb_ints(g, "sh4", 4, (int64_t[]){B, S, H, Dh});
  gb_node(g, "Reshape", "q0,sh4", "q1", 0);
  gb_node(g, "Reshape", "k0,sh4", "k1", 0);
  gb_node(g, "Reshape", "v0,sh4", "v1", 0);
  int tq = gb_node(g, "Transpose", "q1", "qt", 1);
  int tk = gb_node(g, "Transpose", "k1", "kt", 1);
  int tv = gb_node(g, "Transpose", "v1", "vt", 1);
  gb_attr_ints(g, tq, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  gb_attr_ints(g, tk, 0, "perm", 4, (int64_t[]){0, 2, 3, 1});
  gb_attr_ints(g, tv, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  gb_node(g, "MatMul", "qt,kt", "sc", 0);
  gb_scalar(g, "div", 4.f);
  gb_node(g, "Div", "sc,div", "ss", 0);
  float *m = calloc((size_t)(S * S), sizeof(float));
  for (int64_t i = 0; i < S; i++)
    for (int64_t j = 0; j < S; j++) m[i * S + j] = j > i ? -INFINITY : 0.f;
  gb_const_t(g, "causal", SMELT_F32, 2, (int64_t[]){S, S}, m, 0);
  free(m);
  gb_node(g, "Add", "ss,causal", "sm", 0);
  int sm = gb_node(g, "Softmax", "sm", "pr", 1);
  gb_attr_int(g, sm, 0, "axis", -1);
  gb_node(g, "MatMul", "pr,vt", "o", 0);
  int to = gb_node(g, "Transpose", "o", "y", 1);
  gb_attr_ints(g, to, 0, "perm", 4, (int64_t[]){0, 2, 1, 3});
  gb_output(g, "y");
  passes_equiv e;
  CHECK_OK(gb_finish(g));
  CHECK_OK(check_passes(g, NULL, &e));
  const ir_graph *r = e.rewritten;
  CHECK(e.ok && r && count_op(r, "smelt.Attention") == 1 && count_op(r, "Split") == 0 && count_op(r, "Transpose") == 0);
  CHECK(r && attr_i(r, "Attention", "causal") == 1);
  passes_equiv_free(&e);
  ir_graph_free(g);
}

int main(void) {
  test_conv_bn();
  test_matmul_bias_relu();
  test_matmul_transposed_weight();
  test_gemm_beta_residual_sigmoid();
  test_gemm_blocked_tanh();
  test_conv_residual_clip();
  test_conv_channel_bias_gelu();
  test_conv_silu();
  test_layernorm();
  test_gelu();
  test_gelu_tanh();
  test_attention();
  test_attention_rejects();
  test_attention_shared_kv(2);
  test_attention_shared_kv(1);
  test_attention_packed_mha(1, false);
  test_attention_packed_mha(2, false);
  test_attention_packed_mha(2, true);
  test_attention_split_qkv();
  return test_report("test_passes_fusion");
}
