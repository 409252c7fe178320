/* The signature of a decoder-only LLM exported with a KV cache, found from the
 * model's input and output names and shapes (gen_signature.c). */
#ifndef SMELT_GENERATE_GEN_SIGNATURE_H
#define SMELT_GENERATE_GEN_SIGNATURE_H

#include "smelt.h"

#define GEN_MAX_LAYERS 512

typedef struct gen_kv_pair {
  int past_input;     /* graph input index of past.N.key / past_key_values.N.value ... */
  int present_output; /* graph output index of present.N.key ... */
  int64_t heads, head_dim; /* dims 1 and 3 of the [batch, heads, seq, head_dim] cache */
} gen_kv_pair;

typedef struct gen_signature {
  int n_inputs, n_outputs;
  int input_ids;      /* int64 [batch, seq] */
  int attention_mask; /* int64 [batch, past + seq], -1 if the model has none */
  int position_ids;   /* int64 [batch, seq], -1 if none */
  int logits;         /* output: float32 [batch, seq, vocab] */
  int64_t vocab;      /* from the logits' declared last dim; 0 = symbolic (taken at the first run) */
  int64_t fixed_batch; /* the declared batch dim when fixed, else -1 */
  int n_kv;           /* pairs, two per layer (key and value) */
  gen_kv_pair kv[2 * GEN_MAX_LAYERS];
} gen_signature;

/* Finds input_ids, attention_mask, position_ids, the past -> present pairs
 * (matched by layer number and key/value in their names) and the logits.
 * An input it cannot feed, or a cache that is not [batch, heads, seq, dim]
 * float32 with fixed heads and dim, is an error naming it. */
smelt_status gen_signature_detect(const smelt_model *m, gen_signature *sig);

#endif
