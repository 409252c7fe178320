/* The eager executor's view ops (Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity) take over their input's buffer when it dies there
 * (runtime/eager.c's donates, ops/node_run.c's node_run_alias), and copy
 * when it does not: a graph input, a constant, a value read later, a value
 * read twice by the node.  Each case checks the outputs against values
 * computed here, that the graph input is left as it was, and the run's peak
 * of intermediate bytes (a taken-over buffer is not a second allocation). */
#include "check.h"
#include "passes_util.h"

#define N 24 /* elements of x: [4, 6] */

static float xin[N];

static void run_graph(ir_graph *g, int n_out, tensor *outs, eager_stats *st) {
  CHECK_OK(gb_finish(g));
  tensor x = {0};
  x.dtype = SMELT_F32;
  x.rank = 2;
  x.dims[0] = 4, x.dims[1] = 6;
  x.data = xin;
  x.nbytes = sizeof xin;
  tensor *ins[1] = {&x};
  eager_plan p;
  CHECK_OK(eager_plan_build(g, &p));
  memset(outs, 0, sizeof(tensor) * (size_t)n_out);
  memset(st, 0, sizeof *st);
  CHECK_OK(eager_run(&p, NULL, NULL, ins, outs, st));
  eager_plan_free(&p);
  for (int i = 0; i < N; i++) CHECK(xin[i] == (float)(i - 11)); /* the input is never taken */
}

static float relu(float v) { return v < 0 ? 0 : v; }

/* y = ReduceSum(Flatten(Identity(Unsqueeze(Reshape(Relu(x), [6, 4]))))):
 * each view's input dies there, so each takes it over: the run's peak is
 * one buffer of x's size (and the sum's scalar), where copies would hold
 * two at a time. */
static void test_taken_over(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4, 6});
  gb_ints(g, "shape", 2, (int64_t[]){6, 4});
  gb_ints(g, "axes", 1, (int64_t[]){0});
  gb_node(g, "Relu", "x", "a", 0);
  gb_node(g, "Reshape", "a,shape", "b", 0);
  gb_node(g, "Unsqueeze", "b,axes", "c", 0);
  gb_node(g, "Identity", "c", "d", 0);
  gb_node(g, "Flatten", "d", "e", 0);
  int r = gb_node(g, "ReduceSum", "e", "y", 1);
  gb_attr_int(g, r, 0, "keepdims", 0);
  gb_output(g, "y");
  tensor y;
  eager_stats st;
  run_graph(g, 1, &y, &st);
  CHECK(y.rank == 0 && y.data && *(float *)y.data == 78.f); /* 1 + ... + 12 */
  CHECK(st.peak_bytes == sizeof xin + sizeof(float));
  if (st.peak_bytes != sizeof xin + sizeof(float)) fprintf(stderr, "peak %zu bytes\n", st.peak_bytes);
  CHECK(st.nodes_run == 6);
  tensor_release(&y);
  ir_graph_free(g);
}

/* The Reshape's input is read again after it (z = a + Reshape back): copied,
 * and a keeps its values. */
static void test_read_later(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4, 6});
  gb_ints(g, "shape", 2, (int64_t[]){6, 4});
  gb_ints(g, "back", 2, (int64_t[]){4, 6});
  gb_node(g, "Relu", "x", "a", 0);
  gb_node(g, "Reshape", "a,shape", "b", 0);
  gb_node(g, "Neg", "b", "n", 0);
  gb_node(g, "Reshape", "n,back", "m", 0);
  gb_node(g, "Add", "a,m", "z", 0);
  gb_node(g, "Mul", "a,a", "w", 0);
  gb_output(g, "z");
  gb_output(g, "w");
  tensor out[2];
  eager_stats st;
  run_graph(g, 2, out, &st);
  for (int i = 0; out[0].data && i < N; i++) CHECK(((float *)out[0].data)[i] == 0.f);
  for (int i = 0; out[1].data && i < N; i++) CHECK(((float *)out[1].data)[i] == relu((float)(i - 11)) * relu((float)(i - 11)));
  tensor_release(&out[0]);
  tensor_release(&out[1]);
  ir_graph_free(g);
}

/* Views of the graph input and of a constant: copied (neither belongs to
 * the run); an output that is a view of a dying value is still the
 * output's own buffer after the run. */
static void test_not_owned(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4, 6});
  gb_ints(g, "shape", 2, (int64_t[]){6, 4});
  gb_const(g, "k", 2, (int64_t[]){4, 6}, 3);
  gb_node(g, "Reshape", "x,shape", "y", 0);
  gb_node(g, "Identity", "k", "kc", 0);
  gb_node(g, "Squeeze", "kc", "y2", 0);
  gb_output(g, "y");
  gb_output(g, "y2");
  const float *k = g->values[ir_graph_find_value(g, "k")].constant->data;
  float kcopy[N];
  memcpy(kcopy, k, sizeof kcopy);
  tensor out[2];
  eager_stats st;
  run_graph(g, 2, out, &st);
  CHECK(out[0].data != (void *)xin && out[0].owns_data);
  for (int i = 0; out[0].data && i < N; i++) CHECK(((float *)out[0].data)[i] == (float)(i - 11));
  CHECK(out[1].data != (const void *)k && !memcmp(out[1].data, kcopy, sizeof kcopy));
  CHECK(!memcmp(k, kcopy, sizeof kcopy));
  tensor_release(&out[0]);
  tensor_release(&out[1]);
  ir_graph_free(g);
}

/* Reshape(s, s), s an int64 value of the run ([1, 2]) both data and shape:
 * never taken over (the node reads it through its shape input too). */
static void test_read_twice(void) {
  ir_graph *g = gb_new();
  gb_input(g, "x", SMELT_F32, 2, (int64_t[]){4, 6});
  gb_ints(g, "k", 2, (int64_t[]){1, 2});
  gb_node(g, "Identity", "k", "s", 0);
  gb_node(g, "Reshape", "s,s", "r", 0);
  gb_node(g, "Relu", "x", "y", 0);
  gb_output(g, "r");
  gb_output(g, "y");
  tensor r[2];
  eager_stats st;
  run_graph(g, 2, r, &st);
  CHECK(r[0].rank == 2 && r[0].dims[0] == 1 && r[0].dims[1] == 2);
  CHECK(r[0].data && ((int64_t *)r[0].data)[0] == 1 && ((int64_t *)r[0].data)[1] == 2);
  tensor_release(&r[1]);
  tensor *rp = &r[0];
  tensor_release(rp);
  ir_graph_free(g);
}

int main(void) {
  for (int i = 0; i < N; i++) xin[i] = (float)(i - 11);
  test_taken_over();
  test_read_later();
  test_not_owned();
  test_read_twice();
  return test_report("test_eager_views");
}
