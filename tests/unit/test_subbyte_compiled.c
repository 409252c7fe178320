/* Packed sub-byte values through the compiled modes: graph inputs, outputs
 * and intermediates of int4/uint2 live in the planned arena (reduce-overhead
 * puts the inputs there too) and must be sized by their packed byte count.
 * Each mode is checked against the eager executor on the same inputs. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "graph_builder.h"

static gb_env env;

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define IDS(...) ((const int[]){__VA_ARGS__})

static ir_attr to(smelt_dtype t) { return (ir_attr){.name = "to", .type = IR_ATTR_INT, .i = t}; }

static void test_packed_values(void) {
  gb b;
  gb_init(&b, 21);
  int x = gb_input(&b, "x", SMELT_F32, 2, I64(5, 7));
  int q = gb_input(&b, "q", SMELT_I4, 2, I64(3, 5));
  int s = gb_node(&b, "Mul", 2, IDS(x, gb_scalar(&b, 5.0f)), NULL, 0);
  ir_attr ti4 = to(SMELT_I4), tf32 = to(SMELT_F32), tu2 = to(SMELT_U2);
  int c4 = gb_node(&b, "Cast", 1, IDS(s), &ti4, 1);
  int64_t shape[2] = {7, 5};
  int r4 = gb_node(&b, "Reshape", 2, IDS(c4, gb_const(&b, SMELT_I64, 1, I64(2), shape)), NULL, 0);
  int back = gb_node(&b, "Cast", 1, IDS(r4), &tf32, 1);
  gb_output(&b, gb_node(&b, "Relu", 1, IDS(back), NULL, 0));
  gb_output(&b, r4); /* a packed graph output */
  int qf = gb_node(&b, "Cast", 1, IDS(q), &tf32, 1);
  gb_output(&b, gb_node(&b, "Add", 2, IDS(qf, gb_scalar(&b, 1.0f)), NULL, 0));
  gb_output(&b, gb_node(&b, "Cast", 1, IDS(s), &tu2, 1));
  CHECK_OK(gb_finish(&b));
  tensor in[2], *pin[2] = {&in[0], &in[1]};
  gb_rand(&in[0], SMELT_F32, 2, I64(5, 7), 3);
  gb_rand(&in[1], SMELT_I4, 2, I64(3, 5), 5);
  CHECK(in[1].nbytes == 8);
  const smelt_mode modes[] = {SMELT_MODE_DEFAULT, SMELT_MODE_REDUCE_OVERHEAD, SMELT_MODE_MAX_AUTOTUNE};
  for (int i = 0; i < 3; i++) {
    compile_options o = gb_opts(&env, modes[i]);
    compile_report rep;
    memset(&rep, 0, sizeof rep);
    double w = gb_compare(&env, b.g, pin, &o, &rep, NULL);
    compile_report_free(&rep);
    CHECK(w <= 1);
    if (w > 1) fprintf(stderr, "mode %s: error %g\n", smelt_mode_name(modes[i]), w);
  }
  tensor_release(&in[0]);
  tensor_release(&in[1]);
  gb_free(&b);
}

int main(void) {
  gb_env_init(&env);
  test_packed_values();
  pool_free(env.pool);
  return test_report("subbyte_compiled");
}
