#include "ops/rnn_act.h"

#include <string.h>
#include <strings.h>

#include "util/err.h"
#include "util/quote.h"

typedef struct act_name {
  const char *name;
  rnn_act_kind kind;
  int n_params;         /* alpha only (1) or alpha and beta (2) */
  float alpha, beta;    /* defaults */
} act_name;

static const act_name act_names[] = {
    {"Relu", RNN_RELU, 0, 0, 0},
    {"Tanh", RNN_TANH, 0, 0, 0},
    {"Sigmoid", RNN_SIGMOID, 0, 0, 0},
    {"Affine", RNN_AFFINE, 2, 1.0f, 0.0f},
    {"LeakyRelu", RNN_LEAKY_RELU, 1, 0.01f, 0},
    {"ThresholdedRelu", RNN_THRESHOLDED_RELU, 1, 1.0f, 0},
    {"ScaledTanh", RNN_SCALED_TANH, 2, 1.0f, 1.0f},
    {"HardSigmoid", RNN_HARD_SIGMOID, 2, 0.2f, 0.5f},
    {"Elu", RNN_ELU, 1, 1.0f, 0},
    {"Softsign", RNN_SOFTSIGN, 0, 0, 0},
    {"Softplus", RNN_SOFTPLUS, 0, 0, 0},
};

static const act_name *find_act(const char *s) {
  for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
    if (!strcasecmp(s, act_names[i].name)) return &act_names[i];
  return NULL;
}

static const act_name *find_kind(rnn_act_kind k) {
  for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
    if (act_names[i].kind == k) return &act_names[i];
  return &act_names[1];
}

smelt_status rnn_acts_parse(op_ctx *c, int n_dir, int per_dir, const rnn_act_kind *defaults,
                            rnn_act *acts) {
  const ir_attr *a = ir_attr_find(c->node, "activations");
  int n = a && a->type == IR_ATTR_STRINGS ? a->n : 0, na, nb;
  const float *alphas = ir_attr_floats(c->node, "activation_alpha", &na);
  const float *betas = ir_attr_floats(c->node, "activation_beta", &nb);
  if (n && n != per_dir && n != per_dir * n_dir)
    return err_set(SMELT_ERR_INVALID_MODEL, "attribute activations has %d names, expected %d", n,
                   per_dir * n_dir);
  int ia = 0, ib = 0;
  for (int i = 0; i < per_dir * n_dir; i++) {
    const act_name *e = n ? find_act(a->strings[i % n]) : find_kind(defaults[i % per_dir]);
    if (!e)
      return err_set(SMELT_ERR_UNSUPPORTED, "activation %s is not supported", q(a->strings[i % n]));
    acts[i].kind = e->kind;
    acts[i].alpha = e->alpha;
    acts[i].beta = e->beta;
    if (!n || i < n) { /* a repeated set reuses the parameters it already consumed */
      if (e->n_params >= 1 && ia < na) acts[i].alpha = alphas[ia++];
      if (e->n_params >= 2 && ib < nb) acts[i].beta = betas[ib++];
    } else {
      acts[i] = acts[i % n];
    }
  }
  return SMELT_OK;
}
