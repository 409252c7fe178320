#include <string.h>

#include "ops/conv_core.h"
#include "ops/gemm_weights.h"
#include "ops/op.h"

#define OP_FAMILY(name) extern const op_def op_family_##name[];
#include "ops/families.def"
#undef OP_FAMILY

static const op_def *const families[] = {
#define OP_FAMILY(name) op_family_##name,
#include "ops/families.def"
#undef OP_FAMILY
    NULL};

static bool domain_eq(const char *a, const char *b) {
  if (!a || !*a || !strcmp(a, "ai.onnx")) a = "";
  if (!b || !*b || !strcmp(b, "ai.onnx")) b = "";
  return !strcmp(a, b);
}

const op_def *ops_find(const char *domain, const char *op_type) {
  for (int f = 0; families[f]; f++)
    for (const op_def *d = families[f]; d->name; d++)
      if (!strcmp(d->name, op_type) && domain_eq(d->domain, domain)) return d;
  return NULL;
}

/* Ops with a prepare step (few: a table here rather than a field every
 * family's table would have to spell out). */
static const struct {
  const char *domain, *name;
  op_prepare_fn fn;
} prepares[] = {{"", "Conv", conv_op_prepare},     {"smelt", "Conv", conv_op_prepare},
               {"", "MatMul", matmul_op_prepare}, {"", "Gemm", gemm_op_prepare},
               {"smelt", "Gemm", fused_gemm_op_prepare}};

op_describe_fn ops_describe_fn(const op_def *op) {
  if (op && !strcmp(op->name, "Conv") && (domain_eq(op->domain, "") || domain_eq(op->domain, "smelt")))
    return conv_op_describe;
  return NULL;
}

op_prepare_fn ops_prepare_fn(const op_def *op) {
  for (size_t i = 0; op && i < sizeof prepares / sizeof *prepares; i++)
    if (!strcmp(op->name, prepares[i].name) && domain_eq(op->domain, prepares[i].domain)) return prepares[i].fn;
  return NULL;
}

void ops_foreach(void (*fn)(const op_def *op, void *user), void *user) {
  for (int f = 0; families[f]; f++)
    for (const op_def *d = families[f]; d->name; d++) fn(d, user);
}
