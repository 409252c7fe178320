/* The GEMM kernel registry of the compiled path (runtime/gemm_registry.h):
 * lookups by (element types, weight form, ISA, shape class), and a compiled
 * plan at precision int8 / bf16 / int4 / fp16 whose GEMMs run as plan GEMM steps
 * through the registry's reduced-precision entries (not as library ops),
 * against the fp32 result within each form's error; bf16 / fp16 weights as
 * declared element types the registry keys on (the mark where there is no
 * declaration); f16/bf16 products through the half-precision entries
 * against eager. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"
#include "passes/pass.h"
#include "runtime/gemm_step.h"
#include "runtime/precision.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

static void test_select(void) {
  for (int s = 0; s < GEMM_SHAPE_COUNT; s++)
    for (int w = 0; w < GEMM_W_COUNT; w++) {
      /* B's element type: int8 / int4 / bf16 / fp16 are f32 weights declared so (ir/quant.h) */
      static const ir_quant_scheme bqs[GEMM_W_COUNT] = {IR_QUANT_NONE, IR_QUANT_INT8_CHANNEL, IR_QUANT_BF16,
                                                        IR_QUANT_INT4_GROUP, IR_QUANT_F16};
      ir_quant_scheme bq = bqs[w];
      const gemm_kernel *k = gemm_kernel_select(SMELT_F32, SMELT_F32, bq, SMELT_F32, (gemm_wform)w, ISA_SCALAR,
                                                (gemm_shape_class)s);
      CHECK(k && k->w == (gemm_wform)w && k->bq == bq && k->name && k->run && k->prepare);
      /* the form without B's quantization (or with another) takes no entry */
      if (bq) CHECK(!gemm_kernel_select(SMELT_F32, SMELT_F32, IR_QUANT_NONE, SMELT_F32, (gemm_wform)w, ISA_SCALAR,
                                        (gemm_shape_class)s));
    }
  CHECK(!gemm_kernel_select(SMELT_F32, SMELT_F32, IR_QUANT_INT4_GROUP, SMELT_F32, GEMM_W_INT8, ISA_SCALAR,
                            GEMM_SHAPE_LARGE));
  CHECK(gemm_kernel_select(SMELT_F16, SMELT_F16, IR_QUANT_NONE, SMELT_F16, GEMM_W_F32, ISA_AVX2, GEMM_SHAPE_LARGE) != NULL);
  CHECK(gemm_kernel_select(SMELT_BF16, SMELT_BF16, IR_QUANT_NONE, SMELT_BF16, GEMM_W_F32, ISA_AVX2, GEMM_SHAPE_GEMV) != NULL);
  /* no entry for mixed types, integer products or reduced weights on f16: library steps */
  CHECK(!gemm_kernel_select(SMELT_F16, SMELT_F32, IR_QUANT_NONE, SMELT_F16, GEMM_W_F32, ISA_AVX2, GEMM_SHAPE_LARGE));
  CHECK(!gemm_kernel_select(SMELT_F16, SMELT_F16, IR_QUANT_NONE, SMELT_F16, GEMM_W_INT8, ISA_AVX2, GEMM_SHAPE_LARGE));
  CHECK(!gemm_kernel_select(SMELT_I32, SMELT_I32, IR_QUANT_NONE, SMELT_I32, GEMM_W_F32, ISA_AVX2, GEMM_SHAPE_LARGE));
  CHECK(gemm_shape_of(1, 64, 64) == GEMM_SHAPE_GEMV && gemm_shape_of(8, 64, 64) == GEMM_SHAPE_SMALL_M &&
        gemm_shape_of(100, 64, 64) == GEMM_SHAPE_LARGE);
  CHECK(!strcmp(gemm_wform_name(GEMM_W_INT4), "int4"));
}

/* y = relu(x W1 + b1) W2 + b2 with constant weights (K = 64: one int4 group
 * of 32 twice), M rows. */
static void build_mlp(gb *b, int64_t M, float *w1, float *b1, float *w2, float *b2) {
  gb_init(b, 17);
  int x = gb_input(b, "x", SMELT_F32, 2, I64(M, 64));
  int W1 = gb_const(b, SMELT_F32, 2, I64(64, 48), w1), B1 = gb_const(b, SMELT_F32, 1, I64(48), b1);
  int W2 = gb_const(b, SMELT_F32, 2, I64(48, 32), w2), B2 = gb_const(b, SMELT_F32, 1, I64(32), b2);
  int mm1 = gb_node(b, "MatMul", 2, IDS(x, W1), NULL, 0);
  int h = gb_node(b, "Relu", 1, IDS(gb_node(b, "Add", 2, IDS(mm1, B1), NULL, 0)), NULL, 0);
  gb_output(b, gb_node(b, "Add", 2, IDS(gb_node(b, "MatMul", 2, IDS(h, W2), NULL, 0), B2), NULL, 0));
}

static void fill(float *p, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
}

static void test_reduced_steps(void) {
  static float w1[64 * 48], b1[48], w2[48 * 32], b2[32];
  fill(w1, 64 * 48, 1), fill(b1, 48, 2), fill(w2, 48 * 32, 3), fill(b2, 32, 4);
  const smelt_precision precs[] = {SMELT_PRECISION_INT8, SMELT_PRECISION_BF16, SMELT_PRECISION_INT4,
                                   SMELT_PRECISION_FP16};
  const gemm_wform forms[] = {GEMM_W_INT8, GEMM_W_BF16, GEMM_W_INT4, GEMM_W_F16};
  /* B's element type as autocast declared it (ir/quant.h) */
  const ir_quant_scheme wants[] = {IR_QUANT_INT8_CHANNEL, IR_QUANT_BF16, IR_QUANT_INT4_GROUP, IR_QUANT_F16};
  /* error bars relative to the output's largest magnitude: int8 ~ 1/254 of
   * the ranges per product, bf16 2^-8, int4 max|w|/8 per group, fp16 2^-11,
   * through two layers (see python/tests/test_precision.py) */
  const double tol[] = {3e-2, 1e-2, 2.5e-1, 2e-3};
  const int64_t Ms[] = {1, 5, 40};
  for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++)
    for (int f = 0; f < 4; f++) {
      gb b;
      build_mlp(&b, Ms[m], w1, b1, w2, b2);
      CHECK_OK(gb_finish(&b));
      tensor in = {0}, *pin = &in;
      gb_rand(&in, SMELT_F32, 2, I64(Ms[m], 64), 11);
      compile_options o32 = gb_opts(&env, SMELT_MODE_DEFAULT), o = o32;
      o.precision = precs[f];
      compiled_plan *p32 = NULL, *p = NULL;
      compile_report r32, r;
      memset(&r32, 0, sizeof r32);
      memset(&r, 0, sizeof r);
      CHECK_OK(compile_model(b.g, &pin, &o32, &p32, &r32));
      CHECK_OK(compile_model(b.g, &pin, &o, &p, &r));
      int n_red = 0;
      bool f32_route = false; /* many rows of 16-bit weights with no 16-bit arithmetic: fp32 (ops/gemm_bf16.h) */
      for (int s = 0; p && s < p->n_steps; s++) {
        const gemm_step *gs = p->steps[s].gemm;
        if (!gs) continue;
        CHECK(gs->kern && gs->w == forms[f] && gs->kern->w == forms[f]);
        /* scales (int8 / int4) made, the float data rounded (bf16 / fp16), at prepare */
        ir_quant_scheme want = wants[f];
        CHECK(gs->bq.scheme == want && gs->kern->bq == want && gs->bq.scale == -1);
        n_red += gs->w == forms[f];
        f32_route |= strstr(gs->kern->name, "fp32 weight packed once") != NULL;
      }
      CHECK(n_red == 2); /* both GEMMs are plan steps in the reduced form */
      for (int run = 0; p && p32 && run < 2; run++) { /* the second run reads the prepared weights again */
        tensor y32 = {0}, y = {0};
        CHECK_OK(plan_run(p32, &pin, &y32));
        CHECK_OK(plan_run(p, &pin, &y));
        double big = 0;
        for (int64_t i = 0; i < tensor_numel(&y32); i++) {
          double v = fabs((double)((const float *)y32.data)[i]);
          big = v > big ? v : big;
        }
        double lo = gb_err(&y, &y32, 0, 1e-7), hi = gb_err(&y, &y32, 0, tol[f] * big);
        CHECK(lo > 1 || f32_route); /* the reduced kernel ran: not the fp32 result */
        CHECK(hi <= 1); /* within the form's error */
        if ((lo <= 1 && !f32_route) || hi > 1 || getenv("SMELT_TEST_VERBOSE"))
          fprintf(stderr, "form %s M=%lld: error %g / %g (max |y| %g)\n", gemm_wform_name(forms[f]), (long long)Ms[m],
                  lo, hi, big);
        tensor_release(&y32);
        tensor_release(&y);
      }
      compiled_plan_free(p32);
      compiled_plan_free(p);
      compile_report_free(&r32);
      compile_report_free(&r);
      tensor_release(&in);
      gb_free(&b);
    }
}

/* The node's precision mark renamed away (the node keeps its other attributes). */
static void unmark(ir_node *nd) {
  for (int k = 0; k < nd->n_attrs; k++)
    if (!strcmp(nd->attrs[k].name, "precision")) nd->attrs[k].name = "was_precision";
}

/* The form gemm_step_make gives node i of g, and B's element type (*bq). */
static gemm_wform step_form(const ir_graph *g, int i, ir_quant_scheme *bq) {
  gemm_step gs;
  CHECK(gemm_step_make(g, i, &gs));
  *bq = (ir_quant_scheme)gs.bq.scheme;
  CHECK(gs.kern && gs.kern->w == gs.w && gs.kern->bq == *bq);
  return gs.w;
}

/* bf16 / fp16 weights are declared element types (ir/quant.h) and the
 * registry keys on them: autocast declares each lowered GEMM's weight; a
 * weight declared bf16 (fp16) on a node without the mark still takes the
 * bf16 (fp16) entry, the declaration wins over another float mark, a node
 * whose weight has no declaration falls back to its mark, and neither
 * gives f32.  A weight shared with a GEMM that stays fp32 loses its
 * declaration (logged): keying on it would have changed that node. */
static void test_declared(void) {
  static float w1[64 * 48], b1[48], w2[48 * 32], b2[32];
  fill(w1, 64 * 48, 1), fill(b1, 48, 2), fill(w2, 48 * 32, 3), fill(b2, 32, 4);
  const smelt_precision precs[] = {SMELT_PRECISION_BF16, SMELT_PRECISION_FP16};
  const ir_quant_scheme schemes[] = {IR_QUANT_BF16, IR_QUANT_F16};
  const gemm_wform forms[] = {GEMM_W_BF16, GEMM_W_F16};
  char qb[96];
  CHECK(!strcmp(ir_quant_describe(&(ir_quant){IR_QUANT_BF16, 0, 0, -1, -1}, SMELT_F32, qb, sizeof qb),
                "bf16 (rounded at prepare)"));
  CHECK(!strcmp(ir_quant_describe(&(ir_quant){IR_QUANT_F16, 0, 0, -1, -1}, SMELT_F32, qb, sizeof qb),
                "fp16 (rounded at prepare)"));
  CHECK(!strcmp(ir_quant_type_name(IR_QUANT_F16), "fp16") && ir_quant_is_float(IR_QUANT_BF16) &&
        !ir_quant_is_float(IR_QUANT_INT8_CHANNEL));
  for (int f = 0; f < 2; f++) {
    gb b;
    build_mlp(&b, 40, w1, b1, w2, b2);
    CHECK_OK(gb_finish(&b));
    pass_report r;
    memset(&r, 0, sizeof r);
    ir_graph *g = NULL;
    CHECK_OK(precision_graph(b.g, precs[f], &r, &g));
    int n = 0, logged = 0;
    for (int i = 0; i < r.n_log; i++) logged += strstr(r.log[i], "(rounded at prepare)") != NULL;
    CHECK(logged == 2);
    for (int i = 0; g && i < g->n_nodes; i++) {
      ir_node *nd = &g->nodes[i];
      if (strcmp(nd->op_type, "Gemm")) continue;
      ir_value *w = &g->values[nd->inputs[1]];
      ir_quant_scheme bq;
      CHECK(w->quant.scheme == schemes[f] && w->quant.scale == -1);        /* declared */
      CHECK(step_form(g, i, &bq) == forms[f] && bq == schemes[f]);         /* declaration and mark */
      unmark(nd);
      CHECK(step_form(g, i, &bq) == forms[f] && bq == schemes[f]);         /* the declaration alone */
      w->quant = ir_quant_float(schemes[1 - f]);
      CHECK(step_form(g, i, &bq) == forms[1 - f] && bq == schemes[1 - f]); /* it keys on the type */
      memset(&w->quant, 0, sizeof w->quant);
      CHECK(step_form(g, i, &bq) == GEMM_W_F32 && bq == IR_QUANT_NONE);   /* neither: f32 */
      nd->attrs[nd->n_attrs - 1].name = "precision";
      CHECK(step_form(g, i, &bq) == forms[f] && bq == schemes[f]);         /* the mark alone */
      n++;
    }
    CHECK(n == 2);
    ir_graph_free(g);
    pass_report_free(&r);
    gb_free(&b);
  }
  /* W read by a MatMul autocast lowers and by one it keeps in fp32 (A 1-D) */
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(40, 64)), v = gb_input(&b, "v", SMELT_F32, 1, I64(64));
  int W = gb_const(&b, SMELT_F32, 2, I64(64, 48), w1);
  gb_output(&b, gb_node(&b, "MatMul", 2, IDS(x, W), NULL, 0));
  gb_output(&b, gb_node(&b, "MatMul", 2, IDS(v, W), NULL, 0));
  CHECK_OK(gb_finish(&b));
  pass_report r;
  memset(&r, 0, sizeof r);
  ir_graph *g = NULL;
  CHECK_OK(precision_graph(b.g, SMELT_PRECISION_BF16, &r, &g));
  int dropped = 0, marked = 0;
  for (int i = 0; i < r.n_log; i++) dropped += strstr(r.log[i], "the declaration is dropped") != NULL;
  for (int i = 0; g && i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (strcmp(nd->op_type, "Gemm") && strcmp(nd->op_type, "MatMul")) continue;
    CHECK(g->values[nd->inputs[1]].quant.scheme == IR_QUANT_NONE);
    marked += !strcmp(ir_attr_string(nd, "precision", ""), "bf16");
    ir_quant_scheme bq;
    if (!strcmp(nd->op_type, "Gemm")) CHECK(step_form(g, i, &bq) == GEMM_W_BF16); /* by its mark */
  }
  CHECK(dropped == 1 && marked == 1);
  ir_graph_free(g);
  pass_report_free(&r);
  gb_free(&b);
}

/* f16 / bf16 throughout: MatMul with a constant B (and a residual Add
 * after it) is a GEMM step of the half-precision entry; its result is the
 * eager one's (both compute in f32 and round once per node) within one unit
 * in the last place of the type. */
static void test_half_steps(void) {
  const smelt_dtype dts[] = {SMELT_F16, SMELT_BF16};
  const double ulp[] = {1.0 / 1024, 1.0 / 128};
  const int64_t Ms[] = {1, 5, 40};
  for (int d = 0; d < 2; d++)
    for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
      gb b;
      gb_init(&b, 17);
      tensor w = {0};
      gb_rand(&w, dts[d], 2, I64(48, 24), 5);
      int x = gb_input(&b, "x", dts[d], 3, I64(2, Ms[m], 48));
      int W = gb_const(&b, dts[d], 2, I64(48, 24), w.data);
      int mm = gb_node(&b, "MatMul", 2, IDS(x, W), NULL, 0);
      gb_output(&b, gb_node(&b, "Tanh", 1, IDS(mm), NULL, 0));
      CHECK_OK(gb_finish(&b));
      tensor in = {0}, *pin = &in;
      gb_rand(&in, dts[d], 3, I64(2, Ms[m], 48), 9);
      compile_options o = gb_opts(&env, SMELT_MODE_DEFAULT);
      compiled_plan *p = NULL;
      compile_report r;
      memset(&r, 0, sizeof r);
      CHECK_OK(compile_model(b.g, &pin, &o, &p, &r));
      int n_half = 0;
      for (int s = 0; p && s < p->n_steps; s++)
        n_half += p->steps[s].gemm && p->steps[s].gemm->kern->a == dts[d] && p->steps[s].gemm->dt_y == dts[d];
      CHECK(n_half == 1);
      eager_plan ep;
      tensor ref = {0}, got = {0};
      CHECK_OK(eager_plan_build(b.g, &ep));
      CHECK_OK(eager_run(&ep, env.pool, NULL, &pin, &ref, NULL));
      if (p) CHECK_OK(plan_run(p, &pin, &got));
      double e = gb_err(&got, &ref, 2 * ulp[d], 2 * ulp[d]);
      CHECK(e <= 1);
      if (e > 1) fprintf(stderr, "%s M=%lld: error %g\n", dts[d] == SMELT_F16 ? "f16" : "bf16", (long long)Ms[m], e);
      tensor_release(&got);
      tensor_release(&ref);
      eager_plan_free(&ep);
      compiled_plan_free(p);
      compile_report_free(&r);
      tensor_release(&in);
      tensor_release(&w);
      gb_free(&b);
    }
}

int main(void) {
  gb_env_init(&env);
  test_select();
  test_reduced_steps();
  test_declared();
  test_half_steps();
  pool_free(env.pool);
  return test_report("test_gemm_registry");
}
