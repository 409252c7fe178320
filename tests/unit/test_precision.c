/* Session precision (smelt_session_options.precision) on the repo's
 * models/mlp (three Gemm layers with constant weights):
 *   - names: smelt_precision_parse / smelt_precision_name round trip, an
 *     unknown name is an error naming it;
 *   - a value outside the enum is refused with INVALID_ARGUMENT: never a
 *     silent fp32;
 *   - int8 in eager and default mode: the autocast pass marks the three
 *     Gemms (log lines "-> int8", the keep-list summary) and declares their
 *     weights int8 (bf16, fp16, int4 likewise: ir/quant.h), and the outputs
 *     differ from fp32 (the int8 kernels ran) by quantization noise only:
 *     each int8 GEMM is off by about 2^-8 of its operands' magnitudes
 *     (kernels/qgemm.h), three in a row stay within 2% of the output's
 *     largest magnitude, cosine similarity >= 0.999;
 *   - bf16 (weight-only) in eager and default mode: the three Gemms marked
 *     "bf16"; each product is off by at most 2^-8 of sum |a b| (the weights'
 *     rounding, kernels/wbf16.h), three in a row within 1% of the output's
 *     largest magnitude, cosine >= 0.9999, and not bitwise fp32;
 *   - fp16 (weight-only) likewise, marked "fp16": each weight off by at most
 *     2^-11 of itself (11 significant bits), so three in a row within 0.2%
 *     of the output's largest magnitude (8x tighter than bf16's bound),
 *     cosine >= 0.99999, and not bitwise fp32; a MatMul whose weight has a
 *     value past fp16's range (70000) stays fp32, with the reason logged,
 *     and its output is exactly fp32's (no infinity);
 *   - int4 in eager and default mode: the three Gemms marked "int4"; each
 *     weight is off by up to its group's step (max |w| / 8, kernels/q4gemm.h),
 *     about 4% rms of a group's largest weight, and the activations by 2^-8
 *     of theirs, so three layers in a row stay within 15% of the output's
 *     largest magnitude (measured 11%: K is 64, two groups), cosine >= 0.99
 *     (measured 0.995), and not bitwise fp32;
 *   - fp32 leaves the graph alone (no autocast clone, bitwise the default). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "passes_util.h"
#include "onnx/model_internal.h"
#include "passes/pass.h"
#include "runtime/precision.h"
#include "smelt.h"

#define B 5
#define IN 64
#define OUT 10

static float x[B * IN];

static smelt_status run(const smelt_model *m, smelt_mode mode, smelt_precision p, float *y) {
  smelt_session_options o = smelt_session_options_default();
  o.mode = mode, o.precision = p, o.threads = 2, o.dims = "batch=5";
  smelt_session *s = NULL;
  smelt_status st = smelt_session_create(m, &o, &s);
  if (st) return st;
  smelt_tensor in = {.name = "x", .dtype = SMELT_F32, .rank = 2, .dims = {B, IN}, .data = x, .nbytes = sizeof x};
  smelt_tensor out = {.name = "y", .dtype = SMELT_F32, .rank = 2, .dims = {B, OUT}, .data = y,
                      .nbytes = sizeof(float) * B * OUT};
  st = smelt_session_run(s, &in, 1, &out, 1);
  smelt_session_free(s);
  return st;
}

static void names(void) {
  for (int p = SMELT_PRECISION_FP32; p <= SMELT_PRECISION_INT4; p++) {
    smelt_precision got = (smelt_precision)-1;
    CHECK_OK(smelt_precision_parse(smelt_precision_name((smelt_precision)p), &got));
    CHECK(got == (smelt_precision)p);
  }
  smelt_precision got;
  CHECK(smelt_precision_parse("float8", &got) == SMELT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(smelt_last_error(), "float8") != NULL);
}

static void refused(const smelt_model *m) {
  float y[B * OUT];
  CHECK(run(m, SMELT_MODE_EAGER, (smelt_precision)77, y) == SMELT_ERR_INVALID_ARGUMENT);
}

/* fp16: a weight past fp16's range stays fp32 (reason logged); one within
 * it is marked. */
static void f16_range(void) {
  for (int big = 0; big < 2; big++) {
    ir_graph *g = gb_new();
    gb_input(g, "x", SMELT_F32, 2, (int64_t[]){2, 4});
    float w[4 * 3];
    for (int i = 0; i < 12; i++) w[i] = 0.25f * (float)(i - 6);
    if (big) w[7] = 70000.f;
    gb_const_t(g, "w", SMELT_F32, 2, (int64_t[]){4, 3}, w, 0);
    gb_node(g, "MatMul", "x,w", "y", 0);
    gb_output(g, "y");
    CHECK_OK(ir_graph_infer(g));
    pass_report r;
    memset(&r, 0, sizeof r);
    ir_graph *c = NULL;
    CHECK_OK(precision_graph(g, SMELT_PRECISION_FP16, &r, &c));
    int marked = 0, why = 0;
    for (int i = 0; c && i < c->n_nodes; i++) marked += !strcmp(ir_attr_string(&c->nodes[i], "precision", ""), "fp16");
    for (int i = 0; i < r.n_log; i++) why += strstr(r.log[i], "past fp16's range") != NULL;
    CHECK(marked == !big);
    CHECK(why == big);
    ir_graph_free(c);
    pass_report_free(&r);
    ir_graph_free(g);
  }
}

/* Precision p over the mlp: the autocast log's "-> NAME" lines and the nodes
 * marked NAME (three Gemms each); returns the log's keep-list lines naming
 * Relu. */
static int autocast_marks(const smelt_model *m, smelt_precision p) {
  const char *name = smelt_precision_name(p);
  char arrow[16];
  snprintf(arrow, sizeof arrow, "-> %s", name);
  pass_report r;
  memset(&r, 0, sizeof r);
  ir_graph *g = NULL;
  CHECK_OK(precision_graph(m->onnx->graph, p, &r, &g));
  int logged = 0, keep = 0, marked = 0;
  for (int i = 0; i < r.n_log; i++) {
    logged += strstr(r.log[i], arrow) != NULL;
    keep += strstr(r.log[i], "keep-list") != NULL && strstr(r.log[i], "Relu") != NULL;
  }
  /* each marked node's weight declared in the precision's element type (ir/quant.h) */
  static const ir_quant_scheme declared[] = {
      [SMELT_PRECISION_BF16] = IR_QUANT_BF16, [SMELT_PRECISION_FP16] = IR_QUANT_F16,
      [SMELT_PRECISION_INT8] = IR_QUANT_INT8_CHANNEL, [SMELT_PRECISION_INT4] = IR_QUANT_INT4_GROUP};
  int n_declared = 0;
  for (int i = 0; g && i < g->n_nodes; i++) {
    const ir_node *nd = &g->nodes[i];
    if (strcmp(ir_attr_string(nd, "precision", ""), name)) continue;
    marked++;
    n_declared += g->values[nd->inputs[1]].quant.scheme == declared[p];
  }
  CHECK(logged == 3);
  CHECK(marked == 3);
  CHECK(n_declared == 3);
  ir_graph_free(g);
  pass_report_free(&r);
  return keep;
}

static void autocast_log(const smelt_model *m) {
  pass_report r;
  memset(&r, 0, sizeof r);
  ir_graph *g = NULL;
  CHECK_OK(precision_graph(m->onnx->graph, SMELT_PRECISION_FP32, &r, &g));
  CHECK(g == NULL && r.n_log == 0);
  pass_report_free(&r);
  CHECK(autocast_marks(m, SMELT_PRECISION_INT8) == 1);
  autocast_marks(m, SMELT_PRECISION_BF16);
  autocast_marks(m, SMELT_PRECISION_FP16);
  autocast_marks(m, SMELT_PRECISION_INT4);
}

/* precision p (bf16, fp16, int4: weight-only) against eager fp32: max error at
 * most err_frac of max |y|, cosine at least cos_min. */
static void lowp_close(const smelt_model *m, smelt_mode mode, smelt_precision p, double err_frac, double cos_min) {
  float ref[B * OUT], y[B * OUT];
  CHECK_OK(run(m, SMELT_MODE_EAGER, SMELT_PRECISION_FP32, ref));
  CHECK_OK(run(m, mode, p, y));
  double ymax = 0, err = 0, ab = 0, aa = 0, bb = 0;
  int same = 0;
  for (int i = 0; i < B * OUT; i++) {
    ymax = fmax(ymax, fabs(ref[i]));
    err = fmax(err, fabs(y[i] - ref[i]));
    ab += (double)y[i] * ref[i], aa += (double)y[i] * y[i], bb += (double)ref[i] * ref[i];
    same += y[i] == ref[i];
  }
  double cos = ab / sqrt(aa * bb);
  printf("mode %s: %s max abs error %.3g of max |y| %.3g, cosine %.7f\n", smelt_mode_name(mode),
         smelt_precision_name(p), err, ymax, cos);
  CHECK(err <= err_frac * ymax);
  CHECK(cos >= cos_min);
  CHECK(same < B * OUT / 2); /* the reduced-precision kernels ran */
}

static void int8_close(const smelt_model *m, smelt_mode mode) {
  float ref[B * OUT], y[B * OUT], y32[B * OUT];
  CHECK_OK(run(m, SMELT_MODE_EAGER, SMELT_PRECISION_FP32, ref));
  CHECK_OK(run(m, mode, SMELT_PRECISION_FP32, y32));
  CHECK_OK(run(m, mode, SMELT_PRECISION_INT8, y));
  double ymax = 0, err = 0, ab = 0, aa = 0, bb = 0;
  int same = 0;
  for (int i = 0; i < B * OUT; i++) {
    ymax = fmax(ymax, fabs(ref[i]));
    err = fmax(err, fabs(y[i] - ref[i]));
    ab += (double)y[i] * ref[i], aa += (double)y[i] * y[i], bb += (double)ref[i] * ref[i];
    same += y[i] == ref[i];
  }
  double cos = ab / sqrt(aa * bb);
  printf("mode %s: int8 max abs error %.3g of max |y| %.3g, cosine %.6f\n", smelt_mode_name(mode), err, ymax, cos);
  CHECK(err <= 0.02 * ymax);
  CHECK(cos >= 0.999);
  CHECK(same < B * OUT / 2); /* the int8 kernels ran */
  if (mode == SMELT_MODE_EAGER) CHECK(!memcmp(y32, ref, sizeof ref)); /* fp32 is exact as before */
}

int main(void) {
  const char *path = SMELT_SOURCE_DIR "/models/mlp/model.onnx"; /* in the repo: missing is a failure */
  setenv("SMELT_CACHE", "off", 1);
  for (int i = 0; i < B * IN; i++) x[i] = sinf(0.37f * (float)i) * 2.f;
  names();
  smelt_model *m = NULL;
  CHECK_OK(smelt_model_load(path, &m));
  if (!m) return test_report("test_precision");
  refused(m);
  autocast_log(m);
  int8_close(m, SMELT_MODE_EAGER);
  int8_close(m, SMELT_MODE_DEFAULT);
  lowp_close(m, SMELT_MODE_EAGER, SMELT_PRECISION_BF16, 0.01, 0.9999);
  lowp_close(m, SMELT_MODE_DEFAULT, SMELT_PRECISION_BF16, 0.01, 0.9999);
  lowp_close(m, SMELT_MODE_EAGER, SMELT_PRECISION_FP16, 0.002, 0.99999);
  lowp_close(m, SMELT_MODE_DEFAULT, SMELT_PRECISION_FP16, 0.002, 0.99999);
  f16_range();
  lowp_close(m, SMELT_MODE_EAGER, SMELT_PRECISION_INT4, 0.15, 0.99);
  lowp_close(m, SMELT_MODE_DEFAULT, SMELT_PRECISION_INT4, 0.15, 0.99);
  smelt_model_free(m);
  return test_report("test_precision");
}
