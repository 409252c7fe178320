/* Optimizer steps of the ai.onnx.preview.training domain: Adagrad, Adam and
 * Momentum (standard and Nesterov).  Inputs are R (learning rate), T (step
 * count), then n tensors to optimize, their n gradients and their n (or 2n
 * for Adam) accumulators; outputs are the updated tensors and accumulators.
 * Element-wise, computed in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_util.h"
#include "util/err.h"
#include "util/quote.h"

typedef enum opt_kind { OPT_ADAGRAD, OPT_ADAM, OPT_MOMENTUM } opt_kind;

typedef struct opt_cfg {
  opt_kind kind;
  int n, per;       /* tensors optimized; inputs per tensor (X, G, states...) */
  double r;         /* learning rate */
  int64_t t;        /* step count */
  double decay, eps, norm, norm_post, alpha, beta;
  bool nesterov;
} opt_cfg;

static smelt_status opt_attrs(op_ctx *c, opt_kind kind, opt_cfg *g) {
  memset(g, 0, sizeof *g);
  g->kind = kind;
  g->per = kind == OPT_ADAM ? 4 : 3;
  g->n = (c->n_in - 2) / g->per;
  if (g->n < 1 || (c->n_in - 2) % g->per || c->n_out != g->n * (g->per - 1))
    return err_set(SMELT_ERR_INVALID_MODEL, "%d inputs and %d outputs do not form groups of %d inputs",
                   c->n_in, c->n_out, g->per);
  g->norm = op_attr_float(c, "norm_coefficient", 0.0f);
  g->eps = op_attr_float(c, "epsilon", 1e-6f);
  g->decay = op_attr_float(c, "decay_factor", 0.0f);
  g->alpha = op_attr_float(c, "alpha", 0.9f);
  g->beta = op_attr_float(c, "beta", 0.999f);
  g->norm_post = op_attr_float(c, "norm_coefficient_post", 0.0f);
  if (kind == OPT_MOMENTUM) {
    const char *mode = ir_attr_string(c->node, "mode", "standard");
    if (!ir_attr_find(c->node, "alpha") || !ir_attr_find(c->node, "beta") ||
        !ir_attr_find(c->node, "norm_coefficient"))
      return err_set(SMELT_ERR_INVALID_MODEL, "Momentum needs the attributes alpha, beta and norm_coefficient");
    if (strcmp(mode, "standard") && strcmp(mode, "nesterov"))
      return err_set(SMELT_ERR_INVALID_MODEL, "attribute mode %s is unknown", q(mode));
    g->nesterov = !strcmp(mode, "nesterov");
  }
  return SMELT_OK;
}

static smelt_status opt_infer(op_ctx *c, opt_kind kind) {
  opt_cfg g = {0};
  TRY(opt_attrs(c, kind, &g));
  for (int i = 0; i < g.n; i++) {
    TRY(nn_check_float(c, 2 + i, "X"));
    for (int k = 0; k < g.per - 1; k++) op_out_like(c, k * g.n + i, 2 + i);
  }
  return SMELT_OK;
}

/* One element: x, g and the states s[] in; new x and states out. */
static void opt_step(const opt_cfg *g, double x, double gr, double *s, double *x_out) {
  double greg = g->norm * x + gr;
  switch (g->kind) {
    case OPT_ADAGRAD: {
      double r = g->r / (1 + (double)g->t * g->decay);
      s[0] += greg * greg;
      *x_out = x - r * greg / (sqrt(s[0]) + g->eps);
      break;
    }
    case OPT_ADAM: {
      s[0] = g->alpha * s[0] + (1 - g->alpha) * greg;
      s[1] = g->beta * s[1] + (1 - g->beta) * greg * greg;
      double r = g->t > 0 ? g->r * sqrt(1 - pow(g->beta, (double)g->t)) / (1 - pow(g->alpha, (double)g->t))
                          : g->r;
      *x_out = (1 - g->norm_post) * (x - r * (s[0] / (sqrt(s[1]) + g->eps)));
      break;
    }
    case OPT_MOMENTUM: {
      double b = g->t > 0 ? g->beta : 1;
      s[0] = g->alpha * s[0] + b * greg;
      *x_out = g->nesterov ? x - g->r * (greg + g->alpha * s[0]) : x - g->r * s[0];
      break;
    }
  }
}

static smelt_status opt_group(op_ctx *c, const opt_cfg *g, int i) {
  const tensor *x = c->in[2 + i];
  int64_t n = tensor_numel(x);
  for (int k = 1; k < g->per; k++) {
    const tensor *t = c->in[2 + k * g->n + i];
    if (!t || t->dtype != x->dtype || tensor_numel(t) != n)
      return err_set(SMELT_ERR_INVALID_ARGUMENT, "input %d must have the type and size of input %d",
                     2 + k * g->n + i, 2 + i);
  }
  for (int64_t e = 0; e < n; e++) {
    double xv, gv, s[2] = {0, 0}, xo;
    nn_load_f64(x->dtype, x->data, e, 1, 1, &xv);
    nn_load_f64(x->dtype, c->in[2 + g->n + i]->data, e, 1, 1, &gv);
    for (int k = 0; k < g->per - 2; k++) nn_load_f64(x->dtype, c->in[2 + (2 + k) * g->n + i]->data, e, 1, 1, &s[k]);
    opt_step(g, xv, gv, s, &xo);
    nn_store_f64(x->dtype, c->out[i]->data, e, 1, 1, &xo);
    for (int k = 0; k < g->per - 2; k++) nn_store_f64(x->dtype, c->out[(1 + k) * g->n + i]->data, e, 1, 1, &s[k]);
  }
  return SMELT_OK;
}

static smelt_status opt_run(op_ctx *c, opt_kind kind) {
  opt_cfg g = {0};
  TRY(opt_attrs(c, kind, &g));
  const tensor *r = c->in[0], *t = c->in[1];
  if (!nn_is_float(r->dtype) || tensor_numel(r) != 1 || !dtype_is_int(t->dtype) || tensor_numel(t) != 1)
    return err_set(SMELT_ERR_INVALID_ARGUMENT, "R must be a float scalar and T an integer scalar");
  g.r = tensor_get_f64(r, 0);
  g.t = tensor_get_i64(t, 0);
  for (int i = 0; i < g.n; i++) TRY(opt_group(c, &g, i));
  return SMELT_OK;
}

static smelt_status adagrad_infer(op_ctx *c) { return opt_infer(c, OPT_ADAGRAD); }
static smelt_status adam_infer(op_ctx *c) { return opt_infer(c, OPT_ADAM); }
static smelt_status momentum_infer(op_ctx *c) { return opt_infer(c, OPT_MOMENTUM); }
static smelt_status adagrad_run(op_ctx *c) { return opt_run(c, OPT_ADAGRAD); }
static smelt_status adam_run(op_ctx *c) { return opt_run(c, OPT_ADAM); }
static smelt_status momentum_run(op_ctx *c) { return opt_run(c, OPT_MOMENTUM); }

#define TRAINING "ai.onnx.preview.training"
const op_def op_family_training[] = {
    {"Adagrad", TRAINING, 5, -1, 2, -1, adagrad_infer, adagrad_run, false},
    {"Adam", TRAINING, 6, -1, 3, -1, adam_infer, adam_run, false},
    {"Momentum", TRAINING, 5, -1, 2, -1, momentum_infer, momentum_run, false},
    {0}};
