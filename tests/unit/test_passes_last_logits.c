/* passes/last_logits.c: logits = Mul(Add(MatMul(x, W), bias), scale) over
 * x [2, 5, 4] becomes the last position's row only ([2, 1, 6]) and equals the
 * last row of the graph as written; a chain the rewrite cannot prove
 * position-wise (an Add of something that varies along seq, a Softmax over
 * the positions' axis... here: an operand of rank 3), a logits output not
 * written by a MatMul or one read inside the graph leaves the graph as it
 * was, saying why. */
#include <string.h>

#include "check.h"
#include "passes/last_logits.h"
#include "passes_util.h"

/* variant 0: MatMul -> Add(bias [6]) -> Mul(scalar) -> logits;
 * 1: the Add's operand is rank 3 [1, 5, 6] (varies along seq);
 * 2: logits = Relu(x) (no MatMul); 3: variant 0 with the logits read
 * inside the graph too (Neg -> a second output: its shape must not change). */
static ir_graph *build(int variant) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 3, (int64_t[]){2, 5, 4});
  gb_const(g, "w", 2, (int64_t[]){4, 6}, 1);
  if (variant == 1) gb_const(g, "bias", 3, (int64_t[]){1, 5, 6}, 2);
  else gb_const(g, "bias", 1, (int64_t[]){6}, 2);
  gb_scalar(g, "scale", 0.5f);
  if (variant == 2) {
    gb_node(g, "Relu", "x", "logits", 0);
  } else {
    gb_node(g, "MatMul", "x,w", "mm", 0);
    gb_node(g, "Add", "mm,bias", "biased", 0);
    gb_node(g, "Mul", "biased,scale", "logits", 0);
  }
  gb_output(g, "logits");
  if (variant == 3) {
    gb_node(g, "Neg", "logits", "neg", 0);
    gb_output(g, "neg");
  }
  return g;
}

static void run(int variant, bool want_done, const char *want_why) {
  ir_graph *g = build(variant), *ref = NULL;
  CHECK_OK(gb_finish(g));
  CHECK_OK(ir_graph_clone(g, &ref));
  pass_report r;
  memset(&r, 0, sizeof r);
  pass_options o = {.static_kv = true};
  bool done = !want_done;
  char why[256] = "";
  CHECK_OK(pass_last_logits(g, &o, &r, gb_value(g, "logits"), &done, why, sizeof why));
  CHECK(done == want_done);
  if (want_why) CHECK(strstr(why, want_why) != NULL);
  const ir_value *lv = &g->values[gb_value(g, "logits")];
  if (want_done) {
    CHECK(count_op(g, "Slice") == 1);
    CHECK(lv->rank == 3 && lv->dims[0] == 2 && lv->dims[1] == 1 && lv->dims[2] == 6);
    CHECK_OK(ir_graph_validate(g));
    CHECK_OK(ir_graph_infer(g));
    float xs[2 * 5 * 4];
    for (int i = 0; i < 40; i++) xs[i] = (float)((i * 7) % 11) - 5.f;
    tensor tx = {.dtype = SMELT_F32, .rank = 3, .dims = {2, 5, 4}, .data = xs, .nbytes = sizeof xs};
    tensor *in[1] = {&tx}, out = {0}, full = {0};
    CHECK_OK(run_eager(g, NULL, in, &out, 1, NULL));
    CHECK_OK(run_eager(ref, NULL, in, &full, 1, NULL));
    CHECK(out.rank == 3 && out.dims[1] == 1 && full.dims[1] == 5);
    const float *a = out.data, *b = full.data;
    for (int s = 0; a && b && s < 2; s++)
      for (int j = 0; j < 6; j++) CHECK(a[s * 6 + j] == b[(s * 5 + 4) * 6 + j]); /* the same numbers exactly */
    tensor_release(&out);
    tensor_release(&full);
  } else {
    CHECK(count_op(g, "Slice") == 0);
    CHECK(lv->dims[1] == 5); /* untouched */
  }
  pass_report_free(&r);
  ir_graph_free(g);
  ir_graph_free(ref);
}

int main(void) {
  run(0, true, NULL);
  run(1, false, "position-wise");
  run(2, false, "not a MatMul");
  run(3, false, "read inside the graph");
  return test_report("test_passes_last_logits");
}
