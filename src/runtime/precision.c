/* smelt_precision: names, parsing, and which precisions this build runs. */
#include <string.h>

#include "runtime/precision.h"
#include "ops/infer.h"
#include "passes/passes_list.h"
#include "util/err.h"
#include "util/names.h"
#include "util/quote.h"

static const char *const precision_names[] = {"fp32", "bf16", "fp16", "int8", "int4"};

const char *smelt_precision_name(smelt_precision p) {
  return names_name(precision_names, (int)(sizeof precision_names / sizeof *precision_names), (int)p);
}

smelt_status smelt_precision_parse(const char *name, smelt_precision *out) {
  int v = 0;
  TRY(names_parse(precision_names, (int)(sizeof precision_names / sizeof *precision_names), "precision", name, &v));
  *out = (smelt_precision)v;
  return SMELT_OK;
}

smelt_status precision_check(smelt_precision p) {
  switch (p) {
  case SMELT_PRECISION_FP32:
  case SMELT_PRECISION_BF16:
  case SMELT_PRECISION_FP16:
  case SMELT_PRECISION_INT8:
  case SMELT_PRECISION_INT4: return SMELT_OK;
  }
  return err_set(SMELT_ERR_INVALID_ARGUMENT, "unknown precision %d", (int)p);
}

smelt_status precision_graph(const ir_graph *g, smelt_precision p, pass_report *r, ir_graph **out) {
  *out = NULL;
  if (p == SMELT_PRECISION_FP32) return SMELT_OK;
  ir_graph *c = NULL;
  TRY(ir_graph_clone(g, &c));
  pass_options o = {.mode = SMELT_MODE_EAGER, .precision = p};
  int changes = 0;
  smelt_status s = pass_autocast(c, &o, r, &changes);
  if (!s) s = ir_graph_infer(c);
  if (s) {
    ir_graph_free(c);
    return s;
  }
  *out = c;
  return SMELT_OK;
}
