/* bf16 activations between convolutions (passes/bf16_acts.c) at precision
 * bf16 with the bf16 kernels forced (SMELT_CONV_BF16=1):
 *
 *   a = Relu(Conv1x1(x))           read by conv2 (X) and conv3 (residual)
 *   b = Relu(Conv3x3(a))           read by conv3 (X)
 *   c = Relu(Conv1x1(b) + a)       read by conv4 as X and as its residual
 *   y = Relu(Conv1x1(c) + c)       a graph output
 *
 *   - where the kernels read and write bf16 themselves (conv_bf16_io_native:
 *     AVX512_BF16 without AMX), a, b and c are bf16 in the plan, y stays
 *     fp32; elsewhere nothing changes;
 *   - the results match the eager fp32 run within bf16's rounding (inputs,
 *     weights and three activations rounded to 8 bits of mantissa: 3% and
 *     0.03 on outputs of magnitude 1; without the pass the same), run
 *     after run over the reused arena, in default and reduce-overhead;
 *   - the same plan run where the bf16 kernel is turned off after the
 *     compile (SMELT_CONV_BF16=0: the fp32 kernels, the bf16 activations
 *     and residual through f32 copies) gives results as close;
 *   - SMELT_BF16_ACTS=0 keeps every activation fp32; fp32 precision and
 *     eager mode are never touched;
 *   - channels-last (the second half of the pass): with the channel-vector
 *     form forced, b and c lie channels-last (SMELT_BF16_CL=all: a too,
 *     and =0: none), with the same results and the same fallback through
 *     fp32 planes when the kernel is turned off after the compile;
 *   - an inverted-residual shape (1x1, MaxPool, depthwise 3x3 with ReLU6,
 *     1x1): its three activations channels-last (the pool and the
 *     depthwise kernel between them), results as close. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"
#include "kernels/conv_bf16.h"
#include "kernels/isa.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

/* pads for each kernel size (the node keeps a pointer to them) */
static const int64_t pads1[4] = {0, 0, 0, 0}, pads3[4] = {1, 1, 1, 1};

static int conv(gb *b, int x, int64_t C, int64_t M, int64_t K, unsigned seed) {
  int64_t nw = M * C * K * K;
  float *wd = malloc(sizeof(float) * (size_t)nw);
  /* scaled by the fan-in so every layer's outputs stay of magnitude 1 */
  for (int64_t i = 0; i < nw; i++) wd[i] = ((float)((i * 37 + seed) % 23) / 23.f - 0.5f) * 3.f / sqrtf((float)(C * K * K));
  int w = gb_const(b, SMELT_F32, 4, I64(M, C, K, K), wd);
  free(wd);
  ir_attr pads = {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = (int64_t *)(K == 3 ? pads3 : pads1)};
  return gb_node(b, "Conv", 2, IDS(x, w), &pads, 1);
}

/* a depthwise 3x3 (pad 1) over M channels, its bias 0.1 */
static int dwconv(gb *b, int x, int64_t M, unsigned seed) {
  float wd[64 * 9], bd[64];
  for (int64_t i = 0; i < M * 9; i++) wd[i] = ((float)((i * 29 + seed) % 19) / 19.f - 0.5f) * 0.8f;
  for (int64_t i = 0; i < M; i++) bd[i] = 0.1f;
  int w = gb_const(b, SMELT_F32, 4, I64(M, 1, 3, 3), wd), bias = gb_const(b, SMELT_F32, 1, I64(M), bd);
  ir_attr at[2] = {{.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = (int64_t *)pads3},
                   {.name = "group", .type = IR_ATTR_INT, .i = M}};
  return gb_node(b, "Conv", 3, IDS(x, w, bias), at, 2);
}

/* The inverted-residual shape: a = Relu(Conv1x1(x)); p = MaxPool3x3/2(a);
 * d = Clip(DepthwiseConv3x3(p), 0, 6); y = Conv1x1(d): a, p and d lie
 * channels-last where the kernels run (the 1x1's store, the pool, the
 * depthwise kernel, the 1x1 reading d as it lies) */
static void build_dw(gb *b, int64_t N, int64_t C, int64_t H) {
  gb_init(b, 17);
  int x = gb_input(b, "x", SMELT_F32, 4, I64(N, C, H, H));
  int a = gb_node(b, "Relu", 1, IDS(conv(b, x, C, 48, 1, 1)), NULL, 0);
  static const int64_t k3[2] = {3, 3}, s2[2] = {2, 2};
  ir_attr pa[3] = {{.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = (int64_t *)k3},
                   {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = (int64_t *)s2},
                   {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = (int64_t *)pads3}};
  int p = gb_node(b, "MaxPool", 1, IDS(a), pa, 3);
  int d = gb_node(b, "Clip", 3, IDS(dwconv(b, p, 48, 5), gb_scalar(b, 0.f), gb_scalar(b, 6.f)), NULL, 0);
  gb_output(b, conv(b, d, 48, 32, 1, 6));
}

static void build(gb *b, int64_t N, int64_t C, int64_t H) {
  gb_init(b, 17);
  int x = gb_input(b, "x", SMELT_F32, 4, I64(N, C, H, H));
  int a = gb_node(b, "Relu", 1, IDS(conv(b, x, C, 48, 1, 1)), NULL, 0);
  int bb = gb_node(b, "Relu", 1, IDS(conv(b, a, 48, 48, 3, 2)), NULL, 0);
  int c = gb_node(b, "Relu", 1, IDS(gb_node(b, "Add", 2, IDS(conv(b, bb, 48, 48, 1, 3), a), NULL, 0)), NULL, 0);
  int y = gb_node(b, "Relu", 1, IDS(gb_node(b, "Add", 2, IDS(conv(b, c, 48, 48, 1, 4), c), NULL, 0)), NULL, 0);
  gb_output(b, y);
}

/* The element types of the plan's four convolution outputs: conv1 reads
 * the graph input, conv2 is the 3x3, conv4 writes the graph output */
static int conv_outputs(const compiled_plan *p, smelt_dtype *dt) {
  const ir_graph *g = p->g;
  int n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (strcmp(nd->op_type, "Conv")) continue;
    int out = nd->outputs[0], k = 2;
    if (nd->inputs[0] == g->inputs[0]) k = 0;
    else if (g->values[nd->inputs[1]].dims[2] == 3) k = 1;
    else
      for (int j = 0; j < g->n_outputs; j++)
        if (g->outputs[j] == out) k = 3;
    dt[k] = g->values[out].dtype, n++;
  }
  return n;
}

/* Activations the plan keeps channels-last (producers marked cl_out) */
static int cl_outputs(const compiled_plan *p) {
  int n = 0;
  for (int i = 0; i < p->g->n_nodes; i++) n += !strcmp(p->g->nodes[i].op_type, "Conv") && ir_attr_int(&p->g->nodes[i], "cl_out", 0);
  return n;
}

/* cl: NULL, or the channel-vector form forced (SMELT_CONV_BF16_MV=1: every
 * 1x1 reads a channels-last X as it lies, the 3x3 through a padded
 * channels-last copy) with SMELT_BF16_CL=cl; then a, b and c are
 * channels-last (conv3 adds a as its residual and writes c over it in
 * place), and with "0" none */
static void run_cl(int64_t N, int64_t H, smelt_mode mode, smelt_precision prec, bool acts_on, const char *cl) {
  gb b;
  build(&b, N, 40, H);
  CHECK_OK(gb_finish(&b));
  tensor in = {0}, *pin[1] = {&in};
  const ir_value *v = &b.g->values[b.g->inputs[0]];
  gb_rand(&in, v->dtype, v->rank, v->dims, 7u);
  compile_options o = gb_opts(&env, mode);
  o.precision = prec;
  setenv("SMELT_CONV_BF16", "1", 1);
  if (!acts_on) setenv("SMELT_BF16_ACTS", "0", 1);
  if (cl) setenv("SMELT_CONV_BF16_MV", "1", 1), setenv("SMELT_BF16_CL", cl, 1);
  compiled_plan *p = NULL;
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK_OK(compile_model(b.g, pin, &o, &p, &rep));
  unsetenv("SMELT_BF16_ACTS");
  bool want = acts_on && prec == SMELT_PRECISION_BF16 && mode != SMELT_MODE_EAGER && conv_bf16_io_native(isa_active());
  smelt_dtype dt[4] = {0};
  int n = p ? conv_outputs(p, dt) : 0;
  CHECK(n == 4);
  if (cl && p) {
    int want_cl = !want || !strcmp(cl, "0") ? 0 : 3;
    CHECK(cl_outputs(p) == want_cl);
    if (cl_outputs(p) != want_cl) fprintf(stderr, "SMELT_BF16_CL=%s: %d channels-last, want %d\n", cl, cl_outputs(p), want_cl);
  }
  smelt_dtype act = want ? SMELT_BF16 : SMELT_F32;
  CHECK(dt[0] == act && dt[1] == act && dt[2] == act && dt[3] == SMELT_F32);
  if (n == 4 && !(dt[0] == act && dt[1] == act && dt[2] == act && dt[3] == SMELT_F32))
    fprintf(stderr, "mode %d precision %d acts %d: conv outputs %s %s %s %s\n", mode, prec, acts_on,
            dtype_name(dt[0]), dtype_name(dt[1]), dtype_name(dt[2]), dtype_name(dt[3]));
  /* bf16: x, W and three activations rounded, sums of up to 432 products */
  bool lowp = prec == SMELT_PRECISION_BF16;
  double rtol = lowp ? 3e-2 : 1e-4, atol = lowp ? 3e-2 : 1e-5;
  double worst = p ? gb_rerun_tol(&env, b.g, pin, p, 3, rtol, atol) : 1e30;
  CHECK(worst <= 1);
  /* the bf16 kernel off after the compile: fp32 kernels through f32 copies */
  setenv("SMELT_CONV_BF16", "0", 1);
  double worst_off = p ? gb_rerun_tol(&env, b.g, pin, p, 2, rtol, atol) : 1e30;
  CHECK(worst_off <= 1);
  unsetenv("SMELT_CONV_BF16"), unsetenv("SMELT_CONV_BF16_MV"), unsetenv("SMELT_BF16_CL");
  if (worst > 1 || worst_off > 1)
    fprintf(stderr, "N=%lld H=%lld mode %d precision %d acts %d: error %g / %g (kernel off) of the tolerance\n",
            (long long)N, (long long)H, mode, prec, acts_on, worst, worst_off);
  compiled_plan_free(p);
  compile_report_free(&rep);
  tensor_release(&in);
  gb_free(&b);
}

static void run(int64_t N, int64_t H, smelt_mode mode, smelt_precision prec, bool acts_on) {
  run_cl(N, H, mode, prec, acts_on, NULL);
}

/* Nodes marked cl_out (convolutions and pools) */
static int cl_nodes(const compiled_plan *p) {
  int n = 0;
  for (int i = 0; i < p->g->n_nodes; i++) n += ir_attr_int(&p->g->nodes[i], "cl_out", 0) != 0;
  return n;
}

/* build_dw at precision bf16: 3 nodes write channels-last where the bf16
 * kernels read and write bf16 (none elsewhere, none with SMELT_BF16_CL=0);
 * the results against eager fp32 within bf16's rounding, run after run */
static void run_dw(int64_t N, smelt_mode mode, const char *cl) {
  gb b;
  build_dw(&b, N, 40, 12);
  CHECK_OK(gb_finish(&b));
  tensor in = {0}, *pin[1] = {&in};
  const ir_value *v = &b.g->values[b.g->inputs[0]];
  gb_rand(&in, v->dtype, v->rank, v->dims, 9u);
  compile_options o = gb_opts(&env, mode);
  o.precision = SMELT_PRECISION_BF16;
  if (cl) setenv("SMELT_BF16_CL", cl, 1);
  compiled_plan *p = NULL;
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK_OK(compile_model(b.g, pin, &o, &p, &rep));
  unsetenv("SMELT_BF16_CL");
  int want = conv_bf16_io_native(isa_active()) && !cl ? 3 : 0, got = p ? cl_nodes(p) : -1;
  CHECK(got == want);
  if (got != want) fprintf(stderr, "depthwise graph: %d nodes channels-last, want %d\n", got, want);
  double worst = p ? gb_rerun_tol(&env, b.g, pin, p, 3, 3e-2, 3e-2) : 1e30;
  CHECK(worst <= 1);
  if (worst > 1) fprintf(stderr, "depthwise graph N=%lld mode %d: error %g of the tolerance\n", (long long)N, mode, worst);
  compiled_plan_free(p);
  compile_report_free(&rep);
  tensor_release(&in);
  gb_free(&b);
}

int main(void) {
  gb_env_init(&env);
  if (!env.have_cc) {
    pool_free(env.pool);
    test_skip("test_bf16_acts", "no C compiler");
    return test_report("test_bf16_acts");
  }
  if (!conv_bf16_io_native(isa_active()))
    printf("this CPU's bf16 kernels do not read or write bf16 (no AVX512_BF16, or AMX): the pass keeps fp32\n");
  smelt_mode modes[2] = {SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD};
  for (int m = 0; m < 2; m++)
    for (int64_t N = 1; N <= 2; N++) {
      run(N, 9, modes[m], SMELT_PRECISION_BF16, true);
      run(N, 14, modes[m], SMELT_PRECISION_BF16, false);
    }
  run(1, 9, SMELT_MODE_DEFAULT, SMELT_PRECISION_FP32, true);
  const char *cls[3] = {"1", "all", "0"};
  for (int k = 0; k < 3; k++)
    for (int64_t N = 1; N <= 2; N++) run_cl(N, 9, modes[k % 2], SMELT_PRECISION_BF16, true, cls[k]);
  for (int64_t N = 1; N <= 2; N++) run_dw(N, modes[N - 1], NULL);
  run_dw(1, SMELT_MODE_DEFAULT, "0");
  pool_free(env.pool);
  return test_report("test_bf16_acts");
}
