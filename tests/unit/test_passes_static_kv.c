/* passes/static_kv.c: past -> Concat(axis 2) -> present becomes
 * smelt.KVAppend over a time-major past, Shape readers get the old dims back
 * through a Gather, and a cache that does not match (the past read by
 * something else, another axis) leaves the graph as it was, saying why. */
#include <string.h>

#include "check.h"
#include "passes/static_kv.h"
#include "passes_util.h"

/* past [1, 2, 3, 4] + new [1, 2, 1, 4] -> present; shp = Shape(past).
 * variant 1: Neg(past) read too; 2: the Concat joins axis 1. */
static ir_graph *build(int variant) {
  ir_graph *g = gb_new();
  gb_input(g, "past", SMELT_F32, 4, (int64_t[]){1, 2, 3, 4});
  gb_input(g, "new", SMELT_F32, 4, (int64_t[]){1, 2, variant == 2 ? 3 : 1, 4});
  int c = gb_node(g, "Concat", "past,new", "present", 1);
  gb_attr_int(g, c, 0, "axis", variant == 2 ? 1 : -2);
  gb_node(g, "Shape", "past", "shp", 0);
  gb_output(g, "present");
  gb_output(g, "shp");
  if (variant == 1) {
    gb_node(g, "Neg", "past", "neg", 0);
    gb_output(g, "neg");
  }
  return g;
}

static void run(int variant, bool want_done, const char *want_why) {
  ir_graph *g = build(variant);
  CHECK_OK(gb_finish(g));
  pass_report r;
  memset(&r, 0, sizeof r);
  pass_options o = {.static_kv = true};
  int past = gb_value(g, "past"), present = gb_value(g, "present");
  bool done = true;
  char why[256] = "";
  int64_t total;
  CHECK_OK(ir_graph_sym(g, "total", &total));
  CHECK_OK(pass_static_kv(g, &o, &r, &past, &present, 1, total, &done, why, sizeof why));
  CHECK(done == want_done);
  if (want_why) CHECK(strstr(why, want_why) != NULL);
  const ir_value *pv = &g->values[gb_value(g, "past")];
  if (want_done) {
    CHECK(count_op(g, "smelt.KVAppend") == 1 && count_op(g, "Concat") == 0);
    /* time-major past [T, B, H, D]; the Shape reader still sees [1, 2, 3, 4] */
    CHECK(pv->dims[0] == 3 && pv->dims[1] == 1 && pv->dims[2] == 2 && pv->dims[3] == 4);
    CHECK(count_op(g, "Gather") == 1);
    CHECK_OK(ir_graph_infer(g));
    float buf[5 * 8] = {0}, nv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    tensor tp = {.dtype = SMELT_F32, .rank = 4, .dims = {3, 1, 2, 4}, .data = buf, .nbytes = sizeof buf};
    tensor tn = {.dtype = SMELT_F32, .rank = 4, .dims = {1, 2, 1, 4}, .data = nv, .nbytes = sizeof nv};
    tensor *in[2] = {&tp, &tn}, out[2];
    memset(out, 0, sizeof out);
    CHECK_OK(run_eager(g, NULL, in, out, 1, NULL));
    const int64_t *sh = out[1].data;
    CHECK(out[1].rank == 1 && sh && sh[0] == 1 && sh[1] == 2 && sh[2] == 3 && sh[3] == 4);
    CHECK(out[0].dims[0] == 4 && out[0].data == buf); /* the present: a view of the cache */
    CHECK(buf[3 * 8] == 1 && buf[3 * 8 + 7] == 8);    /* written at position 3 */
    tensor_release(&out[0]);
    tensor_release(&out[1]);
  } else {
    CHECK(count_op(g, "smelt.KVAppend") == 0 && count_op(g, "Concat") == 1);
    CHECK(pv->dims[0] == 1 && pv->dims[2] == 3); /* untouched */
  }
  pass_report_free(&r);
  ir_graph_free(g);
}

int main(void) {
  run(0, true, NULL);
  run(1, false, "reads the past");
  run(2, false, "axis 1");
  return test_report("test_passes_static_kv");
}
