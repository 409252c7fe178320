/* emit_grain: the task size of generated kernels follows the cost of an
 * element (an Add keeps the base grain, a GELU earns threads sooner). */
#include <stdlib.h>

#include "check.h"
#include "codegen/emit.h"

static kir_group *group(int n_in, int n_out) {
  kir_group *g = calloc(1, sizeof *g);
  g->n_in = n_in;
  g->n_out = n_out;
  for (int i = 0; i < n_in; i++) g->ex[g->n_ex++] = (kir_expr){.op = KX_LOAD, .a = i, .dt = SMELT_F32};
  return g;
}

static void add_expr(kir_group *g, kir_op op, kir_fn fn) {
  g->ex[g->n_ex] = (kir_expr){.op = op, .fn = fn, .dt = SMELT_F32, .a = g->n_ex - 1, .b = 0};
  g->n_ex++;
}

int main(void) {
  const int64_t G = 65536;
  kir_group *add = group(2, 1);
  add_expr(add, KX_BINARY, KF_ADD);
  CHECK(emit_grain(add, G) == G);

  kir_group *copy = group(1, 1); /* cheaper than an Add: never a larger grain */
  add_expr(copy, KX_UNARY, KF_NEG);
  CHECK(emit_grain(copy, G) == G);

  kir_group *gelu = group(1, 1);
  add_expr(gelu, KX_UNARY, KF_GELU);
  int64_t gg = emit_grain(gelu, G);
  /* a 32 x 1024 GELU (a tiny transformer's MLP) must split in two or more */
  CHECK(gg > 0 && 2 * gg <= 32 * 1024);

  kir_group *two = group(1, 1); /* more math per element: a smaller grain still */
  add_expr(two, KX_UNARY, KF_EXP);
  add_expr(two, KX_UNARY, KF_TANH);
  CHECK(emit_grain(two, G) < gg && emit_grain(two, G) > 0);

  kir_group *div = group(2, 1);
  add_expr(div, KX_BINARY, KF_DIV);
  CHECK(emit_grain(div, G) < G && emit_grain(div, G) > gg);

  CHECK(emit_grain(gelu, 1) == 1); /* never 0: the kernel divides by it */
  free(add), free(copy), free(gelu), free(two), free(div);
  return test_report("test_emit_grain");
}
