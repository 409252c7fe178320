/* A fused conv's output over its residual (compile/schedule.c,
 * find_residual_inplace; ops/conv_core.h, conv_residual_in_place): a
 * smelt.Conv with a residual that dies there writes its output over the
 * residual's buffer when it takes the 1x1 route, whose kernels read each
 * residual value just before writing its output; a 3x3 conv keeps its own
 * buffer.  And a plan made to write in place (SMELT_CONV=pointwise when
 * compiled) whose conv takes another route when it runs (the variable
 * unset) copies the residual aside first: the results stay the eager
 * executor's in every case, run after run (the arena is reused).  (The
 * routes such a 1x1 conv can take today would also give the right result
 * over the residual -- they read it before writing -- so that case checks
 * that the copy runs and stays right, not that it is needed.)  A conv on
 * the bf16 kernel (--precision bf16; SMELT_CONV_BF16=1 forces it on any
 * CPU, the scalar kernel where there is no AVX512_BF16) writes in place
 * too, 1x1 or 3x3: its store reads each residual value just before writing
 * over it; its results against eager's fp32 within bf16's rounding. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

/* The smelt.Conv step with a residual: whether its output lies over the
 * residual (-1: no such step). */
static int conv_in_place(const compiled_plan *p) {
  for (int s = 0; s < p->n_steps; s++) {
    const pstep *st = &p->steps[s];
    if (st->kind != PS_LIBRARY) continue;
    const ir_node *nd = &p->g->nodes[st->node];
    if (strcmp(nd->op_type, "Conv") || strcmp(nd->domain, "smelt") || nd->n_inputs < 4 || nd->inputs[3] < 0)
      continue;
    const vloc *y = &p->loc[nd->outputs[0]], *r = &p->loc[nd->inputs[3]];
    /* the same bytes of the arena, or of a graph output's buffer (a chain
     * in place ending at an output uses that buffer) */
    return (y->kind == VL_ARENA || y->kind == VL_OUTPUT) && y->kind == r->kind && y->off == r->off &&
           (y->kind == VL_ARENA || y->input == r->input);
  }
  return -1;
}

/* y = (Conv(x, W) + Sigmoid(x))^2, x [N, C, H, H], W [C, C, K, K] (pads K/2):
 * the Add fuses into the conv, the sigmoid's output is its residual. */
static void run(int64_t N, int64_t C, int64_t H, int64_t K, smelt_mode mode, bool force_pw, bool bf16, int want) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 4, I64(N, C, H, H));
  int64_t nw = C * C * K * K;
  float *wd = malloc(sizeof(float) * (size_t)nw);
  for (int64_t i = 0; i < nw; i++) wd[i] = (float)((i * 37) % 23) / 23.f - 0.5f;
  int w = gb_const(&b, SMELT_F32, 4, I64(C, C, K, K), wd);
  free(wd);
  int64_t pd[4] = {K / 2, K / 2, K / 2, K / 2};
  ir_attr pads = {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = pd};
  int c = gb_node(&b, "Conv", 2, IDS(x, w), &pads, 1);
  int s = gb_node(&b, "Sigmoid", 1, IDS(x), NULL, 0);
  int a = gb_node(&b, "Add", 2, IDS(c, s), NULL, 0);
  gb_output(&b, gb_node(&b, "Mul", 2, IDS(a, a), NULL, 0));
  CHECK_OK(gb_finish(&b));
  tensor in = {0}, *pin[1] = {&in};
  const ir_value *v = &b.g->values[b.g->inputs[0]];
  gb_rand(&in, v->dtype, v->rank, v->dims, 11u);
  compile_options o = gb_opts(&env, mode);
  if (bf16) o.precision = SMELT_PRECISION_BF16, setenv("SMELT_CONV_BF16", "1", 1);
  compiled_plan *p = NULL;
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  if (force_pw) setenv("SMELT_CONV", "pointwise", 1);
  smelt_status st = compile_model(b.g, pin, &o, &p, &rep);
  if (force_pw) unsetenv("SMELT_CONV");
  CHECK_OK(st);
  int got_in_place = p ? conv_in_place(p) : -2;
  CHECK(got_in_place == want);
  if (got_in_place != want)
    fprintf(stderr, "N=%lld C=%lld H=%lld K=%lld mode %d: in place %d, expected %d\n", (long long)N, (long long)C,
            (long long)H, (long long)K, mode, got_in_place, want);
  /* bf16: inputs and weights rounded to 8 bits of mantissa, sums of up to
   * 9 C products (about 0.01 off at these sizes), squared */
  double worst = gb_rerun_tol(&env, b.g, pin, p, 3, bf16 ? 3e-2 : 1e-4, bf16 ? 1e-1 : 1e-5);
  CHECK(worst <= 1);
  if (worst > 1) fprintf(stderr, "N=%lld C=%lld K=%lld bf16 %d: error %g of the tolerance\n", (long long)N, (long long)C, (long long)K, bf16, worst);
  if (bf16) unsetenv("SMELT_CONV_BF16");
  compiled_plan_free(p);
  compile_report_free(&rep);
  tensor_release(&in);
  gb_free(&b);
}

int main(void) {
  gb_env_init(&env);
  if (!env.have_cc) {
    pool_free(env.pool);
    test_skip("test_conv_residual_inplace", "no C compiler");
    return test_report("test_conv_residual_inplace");
  }
  smelt_mode modes[2] = {SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD};
  for (int m = 0; m < 2; m++)
    for (int64_t N = 1; N <= 2; N++) {
      run(N, 16, 9, 1, modes[m], false, false, 1); /* 1x1, few channels: the pointwise route on every ISA */
      run(N, 16, 9, 3, modes[m], false, false, 0); /* 3x3: its own buffer */
      run(N, 96, 2, 1, modes[m], true, false, 1);  /* planned in place, run on another route: a copy first */
      run(N, 40, 9, 1, modes[m], false, true, 1);  /* bf16 kernel, 1x1 and 3x3: in place */
      run(N, 40, 7, 3, modes[m], false, true, 1);
    }
  pool_free(env.pool);
  return test_report("test_conv_residual_inplace");
}
