/* If, Loop, Scan and SequenceMap on hand-built graphs: trip counts of zero,
 * while-loops ended by the body's condition, captured outer values, scan
 * directions and axes, Scan-8's batch axis, branch selection. */
#include "subgraph_builder.h"
#include "shape_test_util.h"

static tensor scalar_i64(int64_t v) { return mk(SMELT_I64, 0, NULL, VALS((double)v)); }
static tensor scalar_bool(bool v) { return mk(SMELT_BOOL, 0, NULL, VALS(v ? 1 : 0)); }

/* body(i, c, v) -> (c_out, 2v, v); c_out = Identity(c) or Less(i, two). */
static ir_graph *doubling_body(ir_graph *parent, bool while_less) {
  ir_graph *b = gb_new(parent);
  gb_input(b, "i");
  gb_input(b, "c");
  gb_input(b, "v");
  gb_node(b, "Add", GB_IN("v", "v"), GB_OUT("v2"), GB_NONE);
  if (while_less) gb_node(b, "Less", GB_IN("i", "two"), GB_OUT("c_out"), GB_NONE);
  else gb_node(b, "Identity", GB_IN("c"), GB_OUT("c_out"), GB_NONE);
  gb_node(b, "Identity", GB_IN("v"), GB_OUT("scan"), GB_NONE);
  gb_output(b, "c_out");
  gb_output(b, "v2");
  gb_output(b, "scan");
  return b;
}

/* Loop(M, cond, v) with inputs named by m_name/c_name ("" = absent). */
static ir_graph *loop_graph(const char *m_name, const char *c_name, bool while_less) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "M");
  gb_input(g, "cond");
  gb_input(g, "v0");
  gb_input(g, "two");
  ir_attr a[] = {gb_graph_attr("body", doubling_body(g, while_less))};
  gb_node(g, "Loop", GB_IN(m_name, c_name, "v0"), GB_OUT("v_final", "scans"), a, 1);
  gb_output(g, "v_final");
  gb_output(g, "scans");
  return g;
}

static void run_loop(const char *m_name, const char *c_name, bool while_less, int64_t M, bool cond,
                     smelt_status want, int64_t n_iter) {
  ir_graph *g = loop_graph(m_name, c_name, while_less);
  tensor m = scalar_i64(M), c = scalar_bool(cond), v = mk(SMELT_F32, 1, DIMS(2), VALS(1, -3)),
         two = scalar_i64(2), out[2];
  tensor *ins[] = {&m, &c, &v, &two};
  smelt_status s = gb_run(g, ins, out);
  CHECK(s == want);
  if (s != want) fprintf(stderr, "  loop(%s,%s): %s\n", m_name, c_name, smelt_last_error());
  if (!s) {
    double f = (double)(1 << n_iter);
    CHECK(same(&out[0], 1, DIMS(2), VALS(f, -3 * f)));
    if (n_iter) {
      CHECK(out[1].rank == 2 && out[1].dims[0] == n_iter && out[1].dims[1] == 2);
      for (int64_t i = 0; i < n_iter && out[1].rank == 2; i++) {
        CHECK(tensor_get_f64(&out[1], 2 * i) == (double)(1 << i));
        CHECK(tensor_get_f64(&out[1], 2 * i + 1) == -3.0 * (double)(1 << i));
      }
    } else {
      CHECK(out[1].rank == 1 && out[1].dims[0] == 0); /* no iteration: an empty scan output */
    }
    tensor_release(&out[0]);
    tensor_release(&out[1]);
  }
  tensor_release(&m), tensor_release(&c), tensor_release(&v), tensor_release(&two);
  ir_graph_free(g);
}

static void test_loop(void) {
  run_loop("M", "cond", false, 3, true, SMELT_OK, 3);
  run_loop("M", "cond", false, 0, true, SMELT_OK, 0);      /* zero trip count */
  run_loop("M", "cond", false, 5, false, SMELT_OK, 0);     /* condition false on entry */
  run_loop("M", "", false, 4, false, SMELT_OK, 4);         /* for loop: cond absent */
  run_loop("", "cond", true, 0, true, SMELT_OK, 3);        /* while i < 2, reading outer 'two' */
  run_loop("M", "cond", true, 1, true, SMELT_OK, 1);       /* M stops it first */
  run_loop("", "", false, 0, false, SMELT_ERR_UNSUPPORTED, 0); /* would never end */
}

/* Scan-9: state s, one scan input; s_out = s + x_t, y_t = s_out. */
static void run_scan(int64_t in_axis, int64_t in_dir, int64_t out_axis, int64_t out_dir,
                     bool transposed, const double *want_y, int y0, int y1) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "s0");
  gb_input(g, "X");
  ir_graph *b = gb_new(g);
  gb_input(b, "s");
  gb_input(b, "x");
  gb_node(b, "Add", GB_IN("s", "x"), GB_OUT("s_out"), GB_NONE);
  gb_node(b, "Identity", GB_IN("s_out"), GB_OUT("y"), GB_NONE);
  gb_output(b, "s_out");
  gb_output(b, "y");
  int64_t ia[] = {in_axis}, id[] = {in_dir}, oa[] = {out_axis}, od[] = {out_dir};
  ir_attr a[] = {gb_graph_attr("body", b), attr_i("num_scan_inputs", 1), attr_ints("scan_input_axes", 1, ia),
                 attr_ints("scan_input_directions", 1, id), attr_ints("scan_output_axes", 1, oa),
                 attr_ints("scan_output_directions", 1, od)};
  gb_node(g, "Scan", GB_IN("s0", "X"), GB_OUT("s_final", "Y"), a, 6);
  gb_output(g, "s_final");
  gb_output(g, "Y");
  tensor s0 = mk(SMELT_F32, 1, DIMS(2), VALS(0, 0)), out[2];
  tensor X = transposed ? mk(SMELT_F32, 2, DIMS(2, 3), VALS(1, 3, 5, 2, 4, 6))
                        : mk(SMELT_F32, 2, DIMS(3, 2), VALS(1, 2, 3, 4, 5, 6));
  tensor *ins[] = {&s0, &X};
  CHECK_OK(gb_run(g, ins, out));
  if (out[0].data) {
    CHECK(same(&out[0], 1, DIMS(2), VALS(9, 12)));
    CHECK(same(&out[1], 2, DIMS(y0, y1), want_y));
  }
  tensor_release(&out[0]), tensor_release(&out[1]), tensor_release(&s0), tensor_release(&X);
  ir_graph_free(g);
}

static void test_scan(void) {
  /* forward: running sums (1,2) (4,6) (9,12) */
  run_scan(0, 0, 0, 0, false, VALS(1, 2, 4, 6, 9, 12), 3, 2);
  /* reverse input: (5,6) (8,10) (9,12); stacked on axis 1 */
  run_scan(0, 1, 1, 0, false, VALS(5, 8, 9, 6, 10, 12), 2, 3);
  /* the same scanning the last axis of X transposed, output prepended */
  run_scan(-1, 1, -1, 1, true, VALS(9, 8, 5, 12, 10, 6), 2, 3);
}

/* Scan-8: batch axis first; sequence_lens stops entry 1 after one step. */
static void test_scan8(void) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "lens");
  gb_input(g, "s0");
  gb_input(g, "X");
  ir_graph *b = gb_new(g);
  gb_input(b, "s");
  gb_input(b, "x");
  gb_node(b, "Add", GB_IN("s", "x"), GB_OUT("s_out"), GB_NONE);
  gb_node(b, "Identity", GB_IN("s_out"), GB_OUT("y"), GB_NONE);
  gb_output(b, "s_out");
  gb_output(b, "y");
  ir_attr a[] = {gb_graph_attr("body", b), attr_i("num_scan_inputs", 1)};
  int id = gb_node(g, "Scan", GB_IN("lens", "s0", "X"), GB_OUT("s_final", "Y"), a, 2);
  g->nodes[id].opset = 8;
  gb_output(g, "s_final");
  gb_output(g, "Y");
  tensor lens = mk(SMELT_I64, 1, DIMS(2), VALS(3, 1)), s0 = mk(SMELT_F32, 2, DIMS(2, 1), VALS(0, 100));
  tensor X = mk(SMELT_F32, 3, DIMS(2, 3, 1), VALS(1, 2, 3, 4, 5, 6)), out[2];
  tensor *ins[] = {&lens, &s0, &X};
  CHECK_OK(gb_run(g, ins, out));
  if (out[0].data) {
    CHECK(same(&out[0], 2, DIMS(2, 1), VALS(6, 104)));
    CHECK(same(&out[1], 3, DIMS(2, 3, 1), VALS(1, 3, 6, 104, 0, 0)));
  }
  tensor_release(&out[0]), tensor_release(&out[1]);
  tensor_release(&lens), tensor_release(&s0), tensor_release(&X);
  ir_graph_free(g);
}

static void test_if(void) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "c");
  gb_input(g, "a");
  ir_graph *t = gb_new(g), *e = gb_new(g);
  gb_node(t, "Identity", GB_IN("a"), GB_OUT("r"), GB_NONE);
  gb_output(t, "r");
  gb_node(e, "Neg", GB_IN("a"), GB_OUT("r"), GB_NONE);
  gb_output(e, "r");
  ir_attr at[] = {gb_graph_attr("then_branch", t), gb_graph_attr("else_branch", e)};
  gb_node(g, "If", GB_IN("c"), GB_OUT("y"), at, 2);
  gb_output(g, "y");
  for (int v = 0; v < 2; v++) {
    tensor c = scalar_bool(v), a = mk(SMELT_F32, 1, DIMS(2), VALS(1, -2)), out[1];
    tensor *ins[] = {&c, &a};
    CHECK_OK(gb_run(g, ins, out));
    if (out[0].data) CHECK(same(&out[0], 1, DIMS(2), v ? VALS(1, -2) : VALS(-1, 2)));
    tensor_release(&out[0]), tensor_release(&c), tensor_release(&a);
  }
  /* a condition that is not one bool is an error */
  tensor c2 = mk(SMELT_BOOL, 1, DIMS(2), VALS(1, 1)), a = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2)), out[1];
  tensor *ins[] = {&c2, &a};
  CHECK(gb_run(g, ins, out) == SMELT_ERR_INVALID_ARGUMENT);
  tensor_release(&c2), tensor_release(&a);
  ir_graph_free(g);
}

/* SequenceMap over a sequence and a whole tensor: y_i = x_i + t. */
static void test_sequence_map(void) {
  ir_graph *g = gb_new(NULL);
  gb_input(g, "a");
  gb_input(g, "b");
  gb_input(g, "t");
  gb_node(g, "SequenceConstruct", GB_IN("a", "b"), GB_OUT("seq"), GB_NONE);
  ir_graph *body = gb_new(g);
  gb_input(body, "x");
  gb_input(body, "u");
  gb_node(body, "Add", GB_IN("x", "u"), GB_OUT("z"), GB_NONE);
  gb_output(body, "z");
  ir_attr a[] = {gb_graph_attr("body", body)};
  gb_node(g, "SequenceMap", GB_IN("seq", "t"), GB_OUT("out"), a, 1);
  gb_output(g, "out");
  tensor x = mk(SMELT_F32, 1, DIMS(2), VALS(1, 2)), y = mk(SMELT_F32, 1, DIMS(3), VALS(3, 4, 5));
  tensor t = mk(SMELT_F32, 0, NULL, VALS(10)), out[1];
  tensor *ins[] = {&x, &y, &t};
  CHECK_OK(gb_run(g, ins, out));
  CHECK(out[0].kind == TENSOR_KIND_SEQUENCE && out[0].seq_len == 2);
  if (out[0].seq_len == 2) {
    CHECK(same(out[0].seq[0], 1, DIMS(2), VALS(11, 12)));
    CHECK(same(out[0].seq[1], 1, DIMS(3), VALS(13, 14, 15)));
  }
  tensor_release(&out[0]), tensor_release(&x), tensor_release(&y), tensor_release(&t);
  ir_graph_free(g);
}

int main(void) {
  test_loop();
  test_scan();
  test_scan8();
  test_if();
  test_sequence_map();
  return test_report("ops_control_flow");
}
