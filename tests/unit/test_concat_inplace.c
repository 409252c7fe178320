/* Concat in place (compile/schedule.c, find_concat_slices): at batch 1 the
 * producers of a channel Concat's inputs that die there write straight
 * into its output's slices, and the results stay those of the eager
 * executor -- also when an input is read after the Concat (then copied, and
 * the elementwise step reading it last may take its bytes in place), when
 * one value is concatenated
 * twice, with a graph input among the inputs (never a slice), in
 * reduce-overhead mode (inputs in the arena), and at batch 2
 * (slices not contiguous: copied as before). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

/* How many of a plan's Concat inputs lie at their own slice of their Concat's output. */
static int slices_in_place(const compiled_plan *p, int *n_concat) {
  int in_place = 0;
  *n_concat = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const pstep *st = &p->steps[s];
    if (st->kind != PS_LIBRARY) continue;
    const ir_node *nd = &p->g->nodes[st->node];
    if (strcmp(nd->op_type, "Concat")) continue;
    (*n_concat)++;
    const vloc *y = &p->loc[nd->outputs[0]];
    size_t off = 0;
    for (int i = 0; i < nd->n_inputs; i++) {
      const vloc *x = &p->loc[nd->inputs[i]];
      const ir_value *xv = &p->g->values[nd->inputs[i]];
      in_place += y->kind == VL_ARENA && x->kind == VL_ARENA && x->off == y->off + off;
      off += (size_t)shape_numel(xv->rank, xv->dims) * 4;
    }
  }
  return in_place;
}

static void run(int64_t N, smelt_mode mode) {
  gb b;
  gb_init(&b, 17);
  int x = gb_input(&b, "x", SMELT_F32, 4, I64(N, 3, 4, 4));
  int w = gb_input(&b, "w", SMELT_F32, 4, I64(4, 3, 3, 3));
  int64_t pd[4] = {1, 1, 1, 1};
  ir_attr pads = {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = pd};
  ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = 1};
  int a = gb_node(&b, "Conv", 2, IDS(x, w), &pads, 1);   /* a library step: [N,4,4,4] */
  int s = gb_node(&b, "Sigmoid", 1, IDS(x), NULL, 0);    /* a kernel: [N,3,4,4] */
  int c = gb_node(&b, "Concat", 2, IDS(a, s), &ax, 1);   /* s in place at N = 1; a is read later */
  int64_t axes[3] = {1, 2, 3};
  ir_attr ra = {.name = "axes", .type = IR_ATTR_INTS, .n = 3, .ints = axes};
  int m = gb_node(&b, "ReduceMean", 1, IDS(c), &ra, 1);  /* [N,1,1,1] */
  int e = gb_node(&b, "Add", 2, IDS(a, m), NULL, 0);     /* a's last reader, after c */
  int w2 = gb_input(&b, "w2", SMELT_F32, 4, I64(2, 4, 3, 3));
  int h = gb_node(&b, "Conv", 2, IDS(e, w2), &pads, 1);       /* e may not take a's bytes */
  int hm = gb_node(&b, "ReduceMean", 1, IDS(h), &ra, 1);
  gb_output(&b, gb_node(&b, "Mul", 2, IDS(c, hm), NULL, 0));  /* reads c after e: a's slice intact */
  int t = gb_node(&b, "Exp", 1, IDS(x), NULL, 0);
  int f = gb_node(&b, "Concat", 3, IDS(t, t, x), &ax, 1); /* t once in place, once copied; x
                                                          * (a graph input) copied */
  gb_output(&b, gb_node(&b, "Neg", 1, IDS(f), NULL, 0));
  CHECK_OK(gb_finish(&b));
  tensor in[3] = {0}, *pin[3];
  for (int k = 0; k < 3; k++) {
    const ir_value *v = &b.g->values[b.g->inputs[k]];
    gb_rand(&in[k], v->dtype, v->rank, v->dims, 5u + 13u * (unsigned)k);
    pin[k] = &in[k];
  }
  compile_options o = gb_opts(&env, mode);
  compiled_plan *p = NULL;
  compile_report rep;
  memset(&rep, 0, sizeof rep);
  CHECK(gb_compare(&env, b.g, pin, &o, &rep, &p) <= 1);
  int n_concat = 0, in_place = p ? slices_in_place(p, &n_concat) : -1;
  CHECK(n_concat == 2);
  CHECK(in_place == (N == 1 ? 2 : 0));
  if (in_place != (N == 1 ? 2 : 0)) fprintf(stderr, "N=%lld mode %d: %d slices in place\n", (long long)N, mode, in_place);
  CHECK(gb_rerun(&env, b.g, pin, p, 2) <= 1); /* the arena is reused: a second run gives the same */
  compiled_plan_free(p);
  compile_report_free(&rep);
  for (int k = 0; k < 3; k++) tensor_release(&in[k]);
  gb_free(&b);
}

int main(void) {
  gb_env_init(&env);
  if (!env.have_cc) {
    pool_free(env.pool);
    test_skip("test_concat_inplace", "no C compiler");
    return test_report("test_concat_inplace");
  }
  for (int64_t N = 1; N <= 2; N++) {
    run(N, SMELT_MODE_DEFAULT);
    run(N, SMELT_MODE_REDUCE_OVERHEAD);
  }
  pool_free(env.pool);
  return test_report("test_concat_inplace");
}
