/* The activation functions RNN, GRU and LSTM accept by name, with the alpha
 * and beta their `activation_alpha` / `activation_beta` lists supply. */
#ifndef SMELT_OPS_RNN_ACT_H
#define SMELT_OPS_RNN_ACT_H

#include <math.h>

#include "ops/op.h"

typedef enum rnn_act_kind {
  RNN_RELU, RNN_TANH, RNN_SIGMOID, RNN_AFFINE, RNN_LEAKY_RELU, RNN_THRESHOLDED_RELU,
  RNN_SCALED_TANH, RNN_HARD_SIGMOID, RNN_ELU, RNN_SOFTSIGN, RNN_SOFTPLUS
} rnn_act_kind;

typedef struct rnn_act {
  rnn_act_kind kind;
  float alpha, beta;
} rnn_act;

/* Reads the activations attribute into acts[0..n_dir * per_dir): defaults
 * when absent, one set repeated for both directions when only one is given.
 * Alphas and betas are consumed in order by the functions that take them;
 * missing ones take the defaults of the ONNX operator of the same name. */
smelt_status rnn_acts_parse(op_ctx *c, int n_dir, int per_dir, const rnn_act_kind *defaults,
                            rnn_act *acts);

static inline float rnn_act_apply(const rnn_act *a, float x) {
  switch (a->kind) {
    case RNN_RELU: return x > 0 ? x : 0;
    case RNN_TANH: return tanhf(x);
    case RNN_SIGMOID: return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    case RNN_AFFINE: return a->alpha * x + a->beta;
    case RNN_LEAKY_RELU: return x >= 0 ? x : a->alpha * x;
    case RNN_THRESHOLDED_RELU: return x > a->alpha ? x : 0;
    case RNN_SCALED_TANH: return a->alpha * tanhf(a->beta * x);
    case RNN_HARD_SIGMOID: {
      float v = a->alpha * x + a->beta;
      return v < 0 ? 0 : v > 1 ? 1 : v;
    }
    case RNN_ELU: return x >= 0 ? x : a->alpha * (expf(x) - 1);
    case RNN_SOFTSIGN: return x / (1 + fabsf(x));
    case RNN_SOFTPLUS: return x > 20 ? x : log1pf(expf(x));
  }
  return x;
}

#endif
