/* The compiler against the eager executor on hand-built graphs: fusion of
 * elementwise chains with broadcasting, reductions with what feeds and
 * follows them (Softmax, LayerNorm, the ReduceMean form of variance), every
 * mode, dynamic kernels, in-place buffers, graph breaks, and what happens
 * without a C compiler. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/gemm_step.h"
#include "graph_builder.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

static ir_attr attr_i(const char *name, int64_t v) { return (ir_attr){.name = name, .type = IR_ATTR_INT, .i = v}; }
static ir_attr attr_f(const char *name, float v) { return (ir_attr){.name = name, .type = IR_ATTR_FLOAT, .f = v}; }

/* Inputs for every graph input: random data of its declared shape. */
static void make_inputs(const ir_graph *g, tensor *in, tensor **pin, unsigned seed) {
  for (int k = 0; k < g->n_inputs; k++) {
    const ir_value *v = &g->values[g->inputs[k]];
    gb_rand(&in[k], v->dtype, v->rank, v->dims, seed + 17u * (unsigned)k);
    pin[k] = &in[k];
  }
}

static double run_case(gb *b, smelt_mode mode, bool dynamic, compile_report *rep) {
  tensor in[8] = {0}, *pin[8];
  make_inputs(b->g, in, pin, 7);
  compile_options o = gb_opts(&env, mode);
  o.dynamic = dynamic;
  compile_report local;
  memset(&local, 0, sizeof local);
  double w = gb_compare(&env, b->g, pin, &o, rep ? rep : &local, NULL);
  compile_report_free(&local);
  for (int k = 0; k < b->g->n_inputs; k++) tensor_release(&in[k]);
  return w;
}

/* x [A,B,C] + b [B,1] -> * c [C] -> Relu -> Sigmoid, Tanh, Erf, Gelu on the way. */
static void test_elementwise_broadcast(void) {
  const int64_t shapes[][3] = {{2, 3, 5}, {1, 13, 17}, {3, 1, 7}, {1, 1, 1}, {4, 64, 33}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    gb b;
    gb_init(&b, 17);
    const int64_t *d = shapes[s];
    int x = gb_input(&b, "x", SMELT_F32, 3, d);
    int bias = gb_input(&b, "b", SMELT_F32, 2, I64(d[1], 1));
    int c = gb_input(&b, "c", SMELT_F32, 1, I64(d[2]));
    int a1 = gb_node(&b, "Add", 2, IDS(x, bias), NULL, 0);
    int m1 = gb_node(&b, "Mul", 2, IDS(a1, c), NULL, 0);
    int r = gb_node(&b, "Relu", 1, IDS(m1), NULL, 0);
    int sg = gb_node(&b, "Sigmoid", 1, IDS(r), NULL, 0);
    int th = gb_node(&b, "Tanh", 1, IDS(m1), NULL, 0);
    int er = gb_node(&b, "Erf", 1, IDS(th), NULL, 0);
    int sum = gb_node(&b, "Sum", 3, IDS(sg, er, a1), NULL, 0);
    gb_output(&b, sum);
    gb_output(&b, m1); /* used inside the group and returned */
    CHECK_OK(gb_finish(&b));
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    double w = run_case(&b, SMELT_MODE_DEFAULT, false, &rep);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "shape %zu: error %g\n", s, w);
    CHECK(rep.kernels == 1); /* one group for the whole chain */
    compile_report_free(&rep);
    gb_free(&b);
  }
}

/* Where, comparisons, Cast both ways, Clip, Not, with bool and int64 values. */
static void test_select_cast(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(7, 9));
  int y = gb_input(&b, "y", SMELT_F32, 2, I64(1, 9));
  int lt = gb_node(&b, "Less", 2, IDS(x, y), NULL, 0);
  int nt = gb_node(&b, "Not", 1, IDS(lt), NULL, 0);
  int w = gb_node(&b, "Where", 3, IDS(nt, x, y), NULL, 0);
  int lo = gb_scalar(&b, -0.5f), hi = gb_scalar(&b, 0.75f);
  int cl = gb_node(&b, "Clip", 3, IDS(w, lo, hi), NULL, 0);
  int scaled = gb_node(&b, "Mul", 2, IDS(cl, gb_scalar(&b, 10.f)), NULL, 0);
  ir_attr to_i64 = attr_i("to", SMELT_I64), to_f32 = attr_i("to", SMELT_F32);
  int ci = gb_node(&b, "Cast", 1, IDS(scaled), &to_i64, 1);
  int cf = gb_node(&b, "Cast", 1, IDS(ci), &to_f32, 1);
  int bf = gb_node(&b, "Cast", 1, IDS(lt), &to_f32, 1);
  int out = gb_node(&b, "Add", 2, IDS(cf, bf), NULL, 0);
  gb_output(&b, out);
  gb_output(&b, ci);
  CHECK_OK(gb_finish(&b));
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK(run_case(&b, SMELT_MODE_DEFAULT, false, &rep) <= 1);
  CHECK(rep.kernels == 1);
  compile_report_free(&rep);
  gb_free(&b);
}

/* Attention scores: (q k^T) / sqrt(d) + mask[B,1,1,S] -> Softmax, one row kernel. */
static void test_softmax_prologue(void) {
  const int64_t S[] = {1, 7, 16, 33};
  for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
    gb b;
    gb_init(&b, 17);
    int sc = gb_input(&b, "scores", SMELT_F32, 4, I64(2, 3, S[i], S[i]));
    int mask = gb_input(&b, "mask", SMELT_F32, 4, I64(2, 1, 1, S[i]));
    int dv = gb_node(&b, "Div", 2, IDS(sc, gb_scalar(&b, 8.f)), NULL, 0);
    int ad = gb_node(&b, "Add", 2, IDS(dv, mask), NULL, 0);
    ir_attr ax = attr_i("axis", -1);
    int sm = gb_node(&b, "Softmax", 1, IDS(ad), &ax, 1);
    int lsm = gb_node(&b, "LogSoftmax", 1, IDS(ad), &ax, 1);
    gb_output(&b, sm);
    gb_output(&b, lsm);
    CHECK_OK(gb_finish(&b));
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    double w = run_case(&b, SMELT_MODE_DEFAULT, false, &rep);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "softmax S=%lld: error %g\n", (long long)S[i], w);
    CHECK(rep.kernels == 1);
    compile_report_free(&rep);
    gb_free(&b);
  }
}

/* InstanceNormalization as a row kernel over the trailing dims (lower.c's
 * RK_IN), its scale and B read per channel, with the activation after it in
 * the same kernel; ranks 3 to 5, channels and planes that are not whole
 * vectors, a plane of one value (variance 0). */
static void test_instancenorm(void) {
  const int64_t shapes[][5] = {{3, 2, 5, 1, 1}, {3, 1, 17, 1, 1}, {4, 2, 7, 9, 11}, {4, 1, 3, 33, 1},
                               {5, 1, 19, 2, 3}, {4, 1, 40, 1, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    int rank = (int)shapes[i][0];
    int64_t d[5] = {shapes[i][1], shapes[i][2], shapes[i][3], shapes[i][4], 1};
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, rank, d);
    int sc = gb_input(&b, "scale", SMELT_F32, 1, I64(d[1]));
    int bi = gb_input(&b, "B", SMELT_F32, 1, I64(d[1]));
    ir_attr ea = attr_f("epsilon", 1e-3f);
    int in = gb_node(&b, "InstanceNormalization", 3, IDS(x, sc, bi), &ea, 1);
    int act = gb_node(&b, "Relu", 1, IDS(in), NULL, 0);
    gb_output(&b, act);
    CHECK_OK(gb_finish(&b));
    /* max-autotune compiles every variant of the kernel (its unrolled ones
     * too): all must compile, or every group falls back to its reference */
    for (int mode = 0; mode < 2; mode++) {
      compile_report rep;
      memset(&rep, 0, sizeof rep);
      double w = run_case(&b, mode ? SMELT_MODE_MAX_AUTOTUNE : SMELT_MODE_DEFAULT, false, &rep);
      CHECK(w <= 1);
      if (w > 1) fprintf(stderr, "instancenorm case %zu mode %d: error %g\n", i, mode, w);
      /* the normalization and the Relu in one row kernel (max-autotune: its variants) */
      CHECK(!rep.no_codegen && (mode ? rep.kernels >= 1 : rep.kernels == 1));
      if (rep.no_codegen) fprintf(stderr, "instancenorm case %zu: %s\n", i, rep.warning);
      compile_report_free(&rep);
    }
    gb_free(&b);
  }
}

/* LayerNorm after a residual add; and the same computed from ReduceMean
 * (variance form), which must become one row kernel too. */
static void test_layernorm(void) {
  const int64_t H[] = {1, 5, 64, 257};
  for (size_t i = 0; i < sizeof H / sizeof *H; i++) {
    gb b;
    gb_init(&b, 17);
    int64_t d[] = {2, 3, H[i]};
    int x = gb_input(&b, "x", SMELT_F32, 3, d);
    int r = gb_input(&b, "r", SMELT_F32, 3, d);
    int g = gb_input(&b, "gamma", SMELT_F32, 1, I64(H[i]));
    int be = gb_input(&b, "beta", SMELT_F32, 1, I64(H[i]));
    int s = gb_node(&b, "Add", 2, IDS(x, r), NULL, 0);
    ir_attr la[] = {attr_i("axis", -1), attr_f("epsilon", 1e-5f)};
    int ln = gb_node(&b, "LayerNormalization", 3, IDS(s, g, be), la, 2);
    gb_output(&b, ln);
    /* decomposed: mean, x - mean, (x - mean)^2, mean, + eps, sqrt, divide, scale, shift */
    ir_attr axes = {.name = "axes", .type = IR_ATTR_INTS, .n = 1, .ints = (int64_t[]){-1}};
    int m = gb_node(&b, "ReduceMean", 1, IDS(s), &axes, 1);
    int dm = gb_node(&b, "Sub", 2, IDS(s, m), NULL, 0);
    int sq = gb_node(&b, "Pow", 2, IDS(dm, gb_scalar(&b, 2.f)), NULL, 0);
    int v = gb_node(&b, "ReduceMean", 1, IDS(sq), &axes, 1);
    int ve = gb_node(&b, "Add", 2, IDS(v, gb_scalar(&b, 1e-5f)), NULL, 0);
    int sd = gb_node(&b, "Sqrt", 1, IDS(ve), NULL, 0);
    int nrm = gb_node(&b, "Div", 2, IDS(dm, sd), NULL, 0);
    int sc = gb_node(&b, "Mul", 2, IDS(nrm, g), NULL, 0);
    int out = gb_node(&b, "Add", 2, IDS(sc, be), NULL, 0);
    gb_output(&b, out);
    CHECK_OK(gb_finish(&b));
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    double w = run_case(&b, SMELT_MODE_DEFAULT, false, &rep);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "layernorm H=%lld: error %g\n", (long long)H[i], w);
    CHECK(rep.kernels == 1); /* both normalizations and the shared Add in one kernel */
    compile_report_free(&rep);
    gb_free(&b);
  }
}

/* tanh-GELU as GPT-2 exports it (x^3 by Pow) and whole powers 1..3, 0.5:
 * the compiled kernel writes x^2 and x^3 as products, the rest as powf; all
 * against eager (powf) on awkward sizes. */
static void test_pow_small(void) {
  const int64_t n[] = {1, 7, 37, 300};
  for (size_t i = 0; i < sizeof n / sizeof *n; i++) {
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, 2, I64(3, n[i]));
    int p3 = gb_node(&b, "Pow", 2, IDS(x, gb_scalar(&b, 3.f)), NULL, 0);
    int k = gb_node(&b, "Mul", 2, IDS(p3, gb_scalar(&b, 0.044715f)), NULL, 0);
    int in = gb_node(&b, "Add", 2, IDS(x, k), NULL, 0);
    int sc = gb_node(&b, "Mul", 2, IDS(in, gb_scalar(&b, 0.7978845608f)), NULL, 0);
    int th = gb_node(&b, "Tanh", 1, IDS(sc), NULL, 0);
    int one = gb_node(&b, "Add", 2, IDS(th, gb_scalar(&b, 1.f)), NULL, 0);
    int hx = gb_node(&b, "Mul", 2, IDS(x, gb_scalar(&b, 0.5f)), NULL, 0);
    int gelu = gb_node(&b, "Mul", 2, IDS(hx, one), NULL, 0);
    gb_output(&b, gelu);
    int sq = gb_node(&b, "Pow", 2, IDS(x, gb_scalar(&b, 2.f)), NULL, 0);
    int ab = gb_node(&b, "Abs", 1, IDS(x), NULL, 0);
    int rt = gb_node(&b, "Pow", 2, IDS(ab, gb_scalar(&b, 0.5f)), NULL, 0);
    int p1 = gb_node(&b, "Pow", 2, IDS(x, gb_scalar(&b, 1.f)), NULL, 0);
    int c3 = gb_node(&b, "Pow", 2, IDS(x, gb_scalar(&b, 3.f)), NULL, 0);
    int sum = gb_node(&b, "Sum", 4, IDS(sq, rt, p1, c3), NULL, 0);
    gb_output(&b, sum);
    CHECK_OK(gb_finish(&b));
    double w = run_case(&b, SMELT_MODE_DEFAULT, false, NULL);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "pow n=%lld: error %g\n", (long long)n[i], w);
    gb_free(&b);
  }
}

/* MatMul + bias + the tanh-GELU pattern: passes make it one smelt.Gemm with
 * a gelu_tanh epilogue, which the compiler splits back out as a Gelu
 * (approximate = "tanh") kernel; against eager on the unfused graph. */
static void test_gemm_gelu_tanh(void) {
  const int64_t M[] = {1, 5, 33};
  for (size_t i = 0; i < sizeof M / sizeof *M; i++) {
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, 2, I64(M[i], 24));
    float w[24 * 40], bias[40];
    for (int k = 0; k < 24 * 40; k++) w[k] = (float)((k * 37) % 23 - 11) / 16.f;
    for (int k = 0; k < 40; k++) bias[k] = (float)(k % 7 - 3) / 4.f;
    int mm = gb_node(&b, "MatMul", 2, IDS(x, gb_const(&b, SMELT_F32, 2, I64(24, 40), w)), NULL, 0);
    int y = gb_node(&b, "Add", 2, IDS(mm, gb_const(&b, SMELT_F32, 1, I64(40), bias)), NULL, 0);
    int p3 = gb_node(&b, "Pow", 2, IDS(y, gb_scalar(&b, 3.f)), NULL, 0);
    int k = gb_node(&b, "Mul", 2, IDS(p3, gb_scalar(&b, 0.044715f)), NULL, 0);
    int in = gb_node(&b, "Add", 2, IDS(y, k), NULL, 0);
    int sc = gb_node(&b, "Mul", 2, IDS(in, gb_scalar(&b, 0.7978845608f)), NULL, 0);
    int th = gb_node(&b, "Tanh", 1, IDS(sc), NULL, 0);
    int one = gb_node(&b, "Add", 2, IDS(th, gb_scalar(&b, 1.f)), NULL, 0);
    int hx = gb_node(&b, "Mul", 2, IDS(y, gb_scalar(&b, 0.5f)), NULL, 0);
    gb_output(&b, gb_node(&b, "Mul", 2, IDS(hx, one), NULL, 0));
    CHECK_OK(gb_finish(&b));
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    double e = run_case(&b, SMELT_MODE_DEFAULT, false, &rep);
    CHECK(e <= 1);
    if (e > 1) fprintf(stderr, "gemm + tanh GELU M=%lld: error %g\n", (long long)M[i], e);
    const char *ex = rep.explain.s ? rep.explain.s : "";
    CHECK(strstr(ex, "tanh GELU") && strstr(ex, "activations left to generated kernels"));
    compile_report_free(&rep);
    gb_free(&b);
  }
}

/* Reductions over trailing dims, and a pool. */
static void test_reductions(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 4, I64(2, 5, 7, 3));
  int rl = gb_node(&b, "Relu", 1, IDS(x), NULL, 0);
  int gap = gb_node(&b, "GlobalAveragePool", 1, IDS(rl), NULL, 0);
  int gmp = gb_node(&b, "GlobalMaxPool", 1, IDS(x), NULL, 0);
  ir_attr ax2[] = {{.name = "axes", .type = IR_ATTR_INTS, .n = 2, .ints = (int64_t[]){2, 3}},
                   attr_i("keepdims", 0)};
  int rs = gb_node(&b, "ReduceSum", 2, IDS(x, gb_const(&b, SMELT_I64, 1, I64(2), I64(-2, -1))), &ax2[1], 1);
  int rmax = gb_node(&b, "ReduceMax", 1, IDS(x), ax2, 2);
  int rsq = gb_node(&b, "ReduceSumSquare", 1, IDS(x), ax2, 1);
  int rl2 = gb_node(&b, "ReduceL2", 1, IDS(x), ax2, 1);
  gb_output(&b, gap);
  gb_output(&b, gmp);
  gb_output(&b, rs);
  gb_output(&b, rmax);
  gb_output(&b, rsq);
  gb_output(&b, rl2);
  CHECK_OK(gb_finish(&b));
  CHECK(run_case(&b, SMELT_MODE_DEFAULT, false, NULL) <= 1);
  gb_free(&b);
}

/* The same graph in every compiled mode, and in dynamic form. */
static void test_modes(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 3, I64(3, 4, 40));
  int y = gb_input(&b, "y", SMELT_F32, 3, I64(3, 4, 40));
  int a = gb_node(&b, "Add", 2, IDS(x, y), NULL, 0);
  ir_attr ax = attr_i("axis", -1);
  int sm = gb_node(&b, "Softmax", 1, IDS(a), &ax, 1);
  int mm = gb_node(&b, "MatMul", 2, IDS(sm, gb_node(&b, "Transpose", 1, IDS(y), (ir_attr[]){{.name = "perm",
                                         .type = IR_ATTR_INTS, .n = 3, .ints = (int64_t[]){0, 2, 1}}}, 1)), NULL, 0);
  int out = gb_node(&b, "Relu", 1, IDS(mm), NULL, 0);
  gb_output(&b, out);
  CHECK_OK(gb_finish(&b));
  const smelt_mode modes[] = {SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD, SMELT_MODE_MAX_AUTOTUNE};
  for (int i = 0; i < 3; i++) {
    double w = run_case(&b, modes[i], false, NULL);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "mode %s: error %g\n", smelt_mode_name(modes[i]), w);
  }
  CHECK(run_case(&b, SMELT_MODE_DEFAULT, true, NULL) <= 1);
  gb_free(&b);
}

/* Dynamic kernels: a second shape reuses the first shape's library. */
static void test_dynamic_reuse(void) {
  kernel_memo memo;
  kernel_memo_init(&memo);
  const int64_t L[] = {24, 40};
  for (int i = 0; i < 2; i++) {
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, 2, I64(6, L[i]));
    int g = gb_node(&b, "Gelu", 1, IDS(gb_node(&b, "Add", 2, IDS(x, x), NULL, 0)), NULL, 0);
    gb_output(&b, g);
    CHECK_OK(gb_finish(&b));
    tensor in = {0}, *pin = &in;
    gb_rand(&in, SMELT_F32, 2, I64(6, L[i]), 3);
    compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
    o.dynamic = true;
    o.memo = &memo;
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(gb_compare(&env, b.g, &pin, &o, &rep, NULL) <= 1);
    CHECK(rep.cache_hit == (i == 1)); /* sizes are parameters: same code */
    compile_report_free(&rep);
    tensor_release(&in);
    gb_free(&b);
  }
  kernel_memo_free(&memo);
}

/* An elementwise step overwrites an input that dies there. */
static void test_inplace(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(64, 64));
  int w = gb_input(&b, "w", SMELT_F32, 2, I64(64, 64));
  int m = gb_node(&b, "MatMul", 2, IDS(x, w), NULL, 0);
  int r = gb_node(&b, "Relu", 1, IDS(m), NULL, 0); /* m dies here: r can take its bytes */
  int m2 = gb_node(&b, "MatMul", 2, IDS(r, w), NULL, 0);
  gb_output(&b, m2);
  CHECK_OK(gb_finish(&b));
  tensor in[2] = {0}, *pin[2];
  make_inputs(b.g, in, pin, 11);
  compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
  compiled_plan *p = NULL;
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK(gb_compare(&env, b.g, pin, &o, &rep, &p) <= 1);
  /* m/r share one 16 KiB buffer in the arena; m2, the graph output, is a
   * buffer of its own, handed to the caller (VL_OUTPUT) */
  CHECK(p && p->arena_bytes == 64 * 64 * 4);
  CHECK(p && p->out_bytes && p->out_bytes[0] == 64 * 64 * 4 && p->loc[p->g->outputs[0]].kind == VL_OUTPUT);
  compiled_plan_free(p);
  compile_report_free(&rep);
  for (int k = 0; k < 2; k++) tensor_release(&in[k]);
  gb_free(&b);
}

/* A Reshape to a shape computed at run time: a graph break; fullgraph refuses it. */
static void test_graph_break(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(4, 6));
  int shp = gb_input(&b, "shape", SMELT_I64, 1, I64(2));
  int e = gb_node(&b, "Exp", 1, IDS(x), NULL, 0);
  int rs = gb_node(&b, "Reshape", 2, IDS(e, shp), NULL, 0);
  int out = gb_node(&b, "Neg", 1, IDS(rs), NULL, 0);
  gb_output(&b, out);
  CHECK_OK(gb_finish(&b));
  tensor in[2] = {0}, *pin[2] = {&in[0], &in[1]};
  gb_rand(&in[0], SMELT_F32, 2, I64(4, 6), 5);
  tensor_alloc(&in[1], SMELT_I64, 1, I64(2));
  ((int64_t *)in[1].data)[0] = 3;
  ((int64_t *)in[1].data)[1] = 8;
  compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK(gb_compare(&env, b.g, pin, &o, &rep, NULL) <= 1);
  CHECK(rep.graph_breaks == 2); /* the Reshape and the Neg after it */
  compile_report_free(&rep);
  o.fullgraph = true;
  compiled_plan *p = NULL;
  CHECK(compile_model(b.g, pin, &o, &p, NULL) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "fullgraph") && strstr(smelt_last_error(), "Reshape"));
  CHECK(!p);
  for (int k = 0; k < 2; k++) tensor_release(&in[k]);
  gb_free(&b);
}

/* Without a C compiler: a warning and the reference kernels; an error under fullgraph. */
static void test_no_compiler(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(5, 8));
  int out = gb_node(&b, "Tanh", 1, IDS(gb_node(&b, "Mul", 2, IDS(x, x), NULL, 0)), NULL, 0);
  gb_output(&b, out);
  CHECK_OK(gb_finish(&b));
  const char *old = getenv("CC");
  char *saved = old ? strdup(old) : NULL;
  setenv("CC", "/nonexistent/cc", 1);
  cc_toolchain tc;
  CHECK(cc_probe(&tc) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "/nonexistent/cc") != NULL);
  char why[512];
  snprintf(why, sizeof why, "%s", smelt_last_error());
  compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
  o.tc = NULL;
  o.tc_error = why;
  tensor in = {0}, *pin = &in;
  gb_rand(&in, SMELT_F32, 2, I64(5, 8), 9);
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK(gb_compare(&env, b.g, &pin, &o, &rep, NULL) <= 1);
  CHECK(rep.no_codegen && strstr(rep.warning, "no C compiler") != NULL);
  CHECK(rep.kernels == 0 && rep.library_steps == 2);
  compile_report_free(&rep);
  o.fullgraph = true;
  compiled_plan *p = NULL;
  CHECK(compile_model(b.g, &pin, &o, &p, NULL) == SMELT_ERR_UNSUPPORTED);
  CHECK(strstr(smelt_last_error(), "fullgraph") && strstr(smelt_last_error(), "no C compiler"));
  if (saved) setenv("CC", saved, 1);
  else unsetenv("CC");
  free(saved);
  tensor_release(&in);
  gb_free(&b);
}

/* Pools and depthwise convolution as window kernels: pads, strides,
 * dilations, ceil_mode, count_include_pad, and a fused activation. */
static void test_windows(void) {
  typedef struct wcase {
    const char *op;
    int64_t k, s, d, p0, p1, ceil, cip;
  } wcase;
  const wcase cases[] = {
      {"MaxPool", 3, 2, 1, 1, 1, 0, 0}, {"MaxPool", 2, 2, 1, 0, 0, 1, 0}, {"MaxPool", 3, 1, 2, 2, 1, 0, 0},
      {"AveragePool", 3, 2, 1, 1, 1, 0, 0}, {"AveragePool", 3, 2, 1, 1, 1, 1, 1},
      {"AveragePool", 5, 1, 1, 2, 2, 0, 1}, {"Conv", 3, 1, 1, 1, 1, 0, 0}, {"Conv", 3, 2, 1, 1, 1, 0, 0},
      {"Conv", 5, 1, 2, 4, 0, 0, 0},
  };
  for (size_t i = 0; i < 2 * sizeof cases / sizeof *cases; i++) {
    const wcase *w = &cases[i % (sizeof cases / sizeof *cases)];
    gb b;
    gb_init(&b, 17);
    int64_t C = 6, H = 11, W = i < sizeof cases / sizeof *cases ? 13 : 75; /* narrow rows, and full vectors */
    int x = gb_input(&b, "x", SMELT_F32, 4, I64(2, C, H, W));
    int64_t ks[2] = {w->k, w->k}, st[2] = {w->s, w->s}, dl[2] = {w->d, w->d}, pd[4] = {w->p0, w->p0, w->p1, w->p1};
    ir_attr at[] = {{.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = ks},
                    {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = st},
                    {.name = "dilations", .type = IR_ATTR_INTS, .n = 2, .ints = dl},
                    {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = pd},
                    attr_i("ceil_mode", w->ceil), attr_i("count_include_pad", w->cip), attr_i("group", C)};
    int y;
    if (!strcmp(w->op, "Conv")) {
      int wt = gb_input(&b, "w", SMELT_F32, 4, I64(C, 1, w->k, w->k));
      int bias = gb_input(&b, "bias", SMELT_F32, 1, I64(C));
      ir_attr cat[] = {at[0], at[1], at[2], at[3], at[6]};
      y = gb_node(&b, "Conv", 3, IDS(x, wt, bias), cat, 5);
      y = gb_node(&b, "Clip", 3, IDS(y, gb_scalar(&b, 0.f), gb_scalar(&b, 6.f)), NULL, 0);
    } else {
      y = gb_node(&b, w->op, 1, IDS(x), at, !strcmp(w->op, "MaxPool") ? 5 : 6);
    }
    gb_output(&b, y);
    CHECK_OK(gb_finish(&b));
    if (strcmp(w->op, "Conv")) { /* default mode: the library's pooling kernel */
      compile_report rep;
      memset(&rep, 0, sizeof rep);
      double e = run_case(&b, SMELT_MODE_DEFAULT, false, &rep);
      CHECK(e <= 1);
      CHECK(rep.kernels == 0 && rep.library_steps == 1);
      if (e > 1 || rep.kernels != 0) fprintf(stderr, "window case %zu (%s): error %g, %d kernels\n", i, w->op, e, rep.kernels);
      compile_report_free(&rep);
    }
    {
      /* window kernels are max-autotune candidates: run every variant */
      tensor in[3] = {0}, *pin[3];
      make_inputs(b.g, in, pin, 31);
      compile_options o = gb_opts(&env, SMELT_MODE_MAX_AUTOTUNE);
      compiled_plan *p = NULL;
      CHECK(gb_compare(&env, b.g, pin, &o, NULL, &p) <= 1);
      eager_plan ep;
      tensor ref = {0};
      CHECK_OK(eager_plan_build(b.g, &ep));
      CHECK_OK(eager_run(&ep, env.pool, NULL, pin, &ref, NULL));
      int kernels = 0;
      for (int s = 0; p && s < p->n_steps; s++) {
        pstep *st = &p->steps[s];
        if (st->kind != PS_KERNEL) continue;
        kernels++;
        for (int v = 0; v < st->n_fn_vars; v++) {
          st->use_lib = false;
          st->fn = st->fn_vars[v];
          tensor got = {0};
          CHECK_OK(plan_run(p, pin, &got));
          double e = gb_err(&got, &ref, 1e-4, 1e-5);
          CHECK(e <= 1);
          if (e > 1) fprintf(stderr, "window case %zu variant %d: error %g\n", i, v, e);
          tensor_release(&got);
        }
      }
      CHECK(kernels == 1);
      tensor_release(&ref);
      eager_plan_free(&ep);
      compiled_plan_free(p);
      for (int k = 0; k < 3; k++) tensor_release(&in[k]);
    }
    gb_free(&b);
  }
}

/* GEMM steps: every algorithm/threading variant max-autotune may pick
 * computes what eager does (bias, residual, relu; MatMul with a 2-D B). */
static void test_gemm_variants(void) {
  const int64_t M[] = {1, 5, 37};
  for (size_t i = 0; i < sizeof M / sizeof *M; i++) {
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, 3, I64(2, M[i], 33));
    int w = gb_input(&b, "w", SMELT_F32, 2, I64(33, 19));
    int bias = gb_input(&b, "bias", SMELT_F32, 1, I64(19));
    int r = gb_input(&b, "r", SMELT_F32, 3, I64(2, M[i], 19));
    int mm = gb_node(&b, "MatMul", 2, IDS(x, w), NULL, 0);
    int y = gb_node(&b, "Relu", 1, IDS(gb_node(&b, "Add", 2, IDS(gb_node(&b, "Add", 2, IDS(mm, bias), NULL, 0), r), NULL, 0)), NULL, 0);
    int w2 = gb_input(&b, "w2", SMELT_F32, 2, I64(19, 7));
    gb_output(&b, gb_node(&b, "MatMul", 2, IDS(y, w2), NULL, 0));
    CHECK_OK(gb_finish(&b));
    tensor in[5] = {0}, *pin[5];
    make_inputs(b.g, in, pin, 23);
    compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
    compiled_plan *p = NULL;
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(gb_compare(&env, b.g, pin, &o, &rep, &p) <= 1);
    int n_gemm = 0;
    for (int s = 0; p && s < p->n_steps; s++) n_gemm += p->steps[s].gemm != NULL;
    CHECK(n_gemm == 2);
    eager_plan ep;
    tensor ref = {0};
    CHECK_OK(eager_plan_build(b.g, &ep));
    CHECK_OK(eager_run(&ep, env.pool, NULL, pin, &ref, NULL));
    for (int v = 0; p && v < GEMM_STEP_VARIANTS; v++) {
      for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].gemm) p->steps[s].variant = v;
      tensor got = {0};
      CHECK_OK(plan_run(p, pin, &got));
      double e = gb_err(&got, &ref, 1e-4, 1e-5);
      CHECK(e <= 1);
      if (e > 1) fprintf(stderr, "gemm variant %s, M=%lld: error %g\n", gemm_step_variant_name(v), (long long)M[i], e);
      tensor_release(&got);
    }
    tensor_release(&ref);
    eager_plan_free(&ep);
    compiled_plan_free(p);
    compile_report_free(&rep);
    for (int k = 0; k < 5; k++) tensor_release(&in[k]);
    gb_free(&b);
  }
}

/* A GEMM step with a residual writes over the residual's buffer when the
 * residual dies there (no copy of it into Y), and never when the residual
 * is also the product's A (Y = v w + bias + v): A would be overwritten while
 * the GEMM reads it. */
static void test_gemm_residual_inplace(void) {
  for (int self = 0; self < 2; self++) {
    gb b;
    gb_init(&b, 17);
    int x = gb_input(&b, "x", SMELT_F32, 2, I64(40, 24));
    int w = gb_input(&b, "w", SMELT_F32, 2, I64(24, 24));
    int bias = gb_input(&b, "bias", SMELT_F32, 1, I64(24));
    int u = gb_node(&b, "Sigmoid", 1, IDS(x), NULL, 0);
    int v = gb_node(&b, "Tanh", 1, IDS(x), NULL, 0);
    int mm = gb_node(&b, "MatMul", 2, IDS(self ? v : u, w), NULL, 0);
    int y = gb_node(&b, "Add", 2, IDS(gb_node(&b, "Add", 2, IDS(mm, bias), NULL, 0), v), NULL, 0);
    int w2 = gb_input(&b, "w2", SMELT_F32, 2, I64(24, 8));
    gb_output(&b, gb_node(&b, "MatMul", 2, IDS(y, w2), NULL, 0));
    CHECK_OK(gb_finish(&b));
    tensor in[4] = {0}, *pin[4];
    make_inputs(b.g, in, pin, 29);
    compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
    compiled_plan *p = NULL;
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    CHECK(gb_compare(&env, b.g, pin, &o, &rep, &p) <= 1);
    int n_res = 0, shared = 0;
    for (int s = 0; p && s < p->n_steps; s++) {
      const pstep *st = &p->steps[s];
      if (!st->gemm || !st->gemm->has_res) continue;
      const ir_node *nd = &p->g->nodes[st->node];
      n_res++;
      shared += p->loc[nd->inputs[3]].kind == VL_ARENA && p->loc[nd->outputs[0]].kind == VL_ARENA &&
                p->loc[nd->inputs[3]].off == p->loc[nd->outputs[0]].off;
    }
    CHECK(n_res == 1);
    CHECK(shared == (self ? 0 : 1));
    CHECK(gb_rerun(&env, b.g, pin, p, 2) <= 1); /* the arena is reused: a second run gives the same */
    compiled_plan_free(p);
    compile_report_free(&rep);
    for (int k = 0; k < 4; k++) tensor_release(&in[k]);
    gb_free(&b);
  }
}

/* Empty tensors and scalars go through without kernels misbehaving. */
static void test_degenerate(void) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(0, 5));
  int s = gb_input(&b, "s", SMELT_F32, 0, NULL);
  int a = gb_node(&b, "Add", 2, IDS(x, s), NULL, 0);
  int e = gb_node(&b, "Exp", 1, IDS(s), NULL, 0);
  gb_output(&b, gb_node(&b, "Relu", 1, IDS(a), NULL, 0));
  gb_output(&b, gb_node(&b, "Neg", 1, IDS(e), NULL, 0));
  CHECK_OK(gb_finish(&b));
  CHECK(run_case(&b, SMELT_MODE_DEFAULT, false, NULL) <= 1);
  CHECK(run_case(&b, SMELT_MODE_REDUCE_OVERHEAD, false, NULL) <= 1);
  gb_free(&b);
}

/* Attention as GPT-style blocks export it: Q, K, V [1, S, 4, 64] viewed
 * through Transposes, fused into one smelt.Attention that reads K with
 * k_perm.  The default plan hands it the pool from 0.5 MFLOP of work
 * (4 x Q's elements x keys), counting the keys on K's sequence axis (S), not
 * its own axis rank-2 (the 4 heads): S = 32 (1 MFLOP) gets the pool, S = 8
 * (65 KFLOP) runs on the calling thread. */
static void test_attention_threads(void) {
  const int64_t S[] = {32, 8};
  for (size_t i = 0; i < sizeof S / sizeof *S; i++) {
    gb b;
    gb_init(&b, 17);
    const int64_t *dims = I64(1, S[i], 4, 64);
    int q = gb_input(&b, "q", SMELT_F32, 4, dims), k = gb_input(&b, "k", SMELT_F32, 4, dims),
        v = gb_input(&b, "v", SMELT_F32, 4, dims);
    ir_attr p0213 = {.name = "perm", .type = IR_ATTR_INTS, .n = 4, .ints = (int64_t[]){0, 2, 1, 3}};
    ir_attr p0231 = {.name = "perm", .type = IR_ATTR_INTS, .n = 4, .ints = (int64_t[]){0, 2, 3, 1}};
    int qt = gb_node(&b, "Transpose", 1, IDS(q), &p0213, 1), kt = gb_node(&b, "Transpose", 1, IDS(k), &p0231, 1),
        vt = gb_node(&b, "Transpose", 1, IDS(v), &p0213, 1);
    int sc = gb_node(&b, "Div", 2, IDS(gb_node(&b, "MatMul", 2, IDS(qt, kt), NULL, 0), gb_scalar(&b, 8.f)), NULL, 0);
    ir_attr ax = attr_i("axis", -1);
    int pr = gb_node(&b, "Softmax", 1, IDS(sc), &ax, 1);
    gb_output(&b, gb_node(&b, "Transpose", 1, IDS(gb_node(&b, "MatMul", 2, IDS(pr, vt), NULL, 0)), &p0213, 1));
    CHECK_OK(gb_finish(&b));
    tensor in[3] = {0}, *pin[3];
    make_inputs(b.g, in, pin, 41);
    compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
    compiled_plan *p = NULL;
    CHECK(gb_compare(&env, b.g, pin, &o, NULL, &p) <= 1);
    int n_attn = 0, variant = -1;
    for (int s = 0; p && s < p->n_steps; s++) {
      const ir_node *nd = &p->g->nodes[p->steps[s].node];
      if (p->steps[s].kind != PS_LIBRARY || strcmp(nd->domain, "smelt") || strcmp(nd->op_type, "Attention")) continue;
      n_attn++;
      variant = p->steps[s].variant;
    }
    CHECK(n_attn == 1);
    CHECK(variant == (S[i] == 32 ? LV_POOL : LV_SERIAL));
    if (variant != (S[i] == 32 ? LV_POOL : LV_SERIAL))
      fprintf(stderr, "attention S=%lld: variant %d\n", (long long)S[i], variant);
    compiled_plan_free(p);
    for (int k2 = 0; k2 < 3; k2++) tensor_release(&in[k2]);
    gb_free(&b);
  }
}

int main(void) {
  gb_env_init(&env);
  if (!env.have_cc) {
    test_skip("test_compile", "no C compiler: only the fallback is tested");
    test_no_compiler();
    return test_report("test_compile");
  }
  test_elementwise_broadcast();
  test_select_cast();
  test_softmax_prologue();
  test_layernorm();
  test_instancenorm();
  test_pow_small();
  test_gemm_gelu_tanh();
  test_reductions();
  test_modes();
  test_dynamic_reuse();
  test_inplace();
  test_graph_break();
  test_no_compiler();
  test_degenerate();
  test_windows();
  test_gemm_variants();
  test_gemm_residual_inplace();
  test_attention_threads();
  pool_free(env.pool);
  return test_report("test_compile");
}
