/* Detects a decoder's inputs and outputs: names as torch.onnx.export, Optimum
 * (past_key_values.N.key/value -> present.N.key/value) and the zoo's
 * gpt_tiny_kv (past.N.key -> present.N.key) write them. */
#include "generate/gen_signature.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "util/err.h"
#include "util/quote.h"

/* Layer number (the last run of digits) and kind (0 key, 1 value) of a cache
 * tensor's name; false when the name has no number or no key/value. */
static bool cache_slot(const char *name, int *layer, int *kind) {
  const char *digits = NULL;
  for (const char *p = name; *p; p++)
    if (isdigit((unsigned char)*p) && (p == name || !isdigit((unsigned char)p[-1]))) digits = p;
  if (!digits) return false;
  long v = 0;
  for (const char *p = digits; isdigit((unsigned char)*p) && v < 1000000; p++) v = v * 10 + (*p - '0');
  if (v >= GEN_MAX_LAYERS) return false;
  *layer = (int)v;
  /* The kind follows the number ("past_key_values.3.value"); else it comes
   * before it ("past_value_3"), past the words "key_values" of the prefix. */
  const char *tail = digits;
  while (isdigit((unsigned char)*tail)) tail++;
  if (strstr(tail, "key") || !strcmp(tail, ".k") || !strcmp(tail, "_k")) *kind = 0;
  else if (strstr(tail, "value") || !strcmp(tail, ".v") || !strcmp(tail, "_v")) *kind = 1;
  else if (!*tail && strstr(name, "key") && !strstr(name, "key_values")) *kind = 0;
  else if (!*tail && strstr(name, "value") && !strstr(name, "key_values")) *kind = 1;
  else return false;
  return true;
}

static bool is_int64_2d(const smelt_value_info *v) { return v->dtype == SMELT_I64 && v->rank == 2; }

smelt_status gen_signature_detect(const smelt_model *m, gen_signature *sig) {
  memset(sig, 0, sizeof *sig);
  sig->input_ids = sig->attention_mask = sig->position_ids = sig->logits = -1;
  sig->fixed_batch = -1;
  sig->n_inputs = smelt_model_num_inputs(m);
  sig->n_outputs = smelt_model_num_outputs(m);
  int past_of[GEN_MAX_LAYERS][2];
  int max_layer = -1;
  memset(past_of, 0xff, sizeof past_of);
  for (int i = 0; i < sig->n_inputs; i++) {
    smelt_value_info v;
    TRY(smelt_model_input(m, i, &v));
    int layer, kind;
    if (!strcmp(v.name, "input_ids") && is_int64_2d(&v)) {
      sig->input_ids = i;
      if (v.dims[0] > 0) sig->fixed_batch = v.dims[0];
    } else if (!strcmp(v.name, "attention_mask") && is_int64_2d(&v)) {
      sig->attention_mask = i;
    } else if (!strcmp(v.name, "position_ids") && is_int64_2d(&v)) {
      sig->position_ids = i;
    } else if (strstr(v.name, "past") && cache_slot(v.name, &layer, &kind)) {
      if (v.dtype != SMELT_F32 || v.rank != 4 || v.dims[1] <= 0 || v.dims[3] <= 0)
        return err_set(SMELT_ERR_UNSUPPORTED,
                       "generate: cache input %s must be float32 [batch, heads, past_seq, head_dim] with "
                       "heads and head_dim fixed", q(v.name));
      if (past_of[layer][kind] >= 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "generate: two cache inputs for layer %d %s (%s)", layer,
                       kind ? "value" : "key", q(v.name));
      past_of[layer][kind] = i;
      if (layer > max_layer) max_layer = layer;
    } else {
      return err_set(SMELT_ERR_UNSUPPORTED,
                     "generate: input %s is not one a decoder step feeds (input_ids, attention_mask, "
                     "position_ids, past.N.key/value or past_key_values.N.key/value)", q(v.name));
    }
  }
  if (sig->input_ids < 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "generate: the model has no int64 [batch, seq] input named 'input_ids'");
  for (int o = 0; o < sig->n_outputs; o++) {
    smelt_value_info v;
    TRY(smelt_model_output(m, o, &v));
    int layer, kind;
    if (strstr(v.name, "present") && cache_slot(v.name, &layer, &kind)) {
      int in = past_of[layer][kind];
      if (in < 0)
        return err_set(SMELT_ERR_INVALID_MODEL, "generate: output %s has no matching past input", q(v.name));
      smelt_value_info p;
      TRY(smelt_model_input(m, in, &p));
      gen_kv_pair *kv = &sig->kv[sig->n_kv++];
      kv->past_input = in;
      kv->present_output = o;
      kv->heads = p.dims[1];
      kv->head_dim = p.dims[3];
    } else if (sig->logits < 0 && (!strcmp(v.name, "logits") || v.rank == 3) && v.dtype == SMELT_F32) {
      sig->logits = o;
      sig->vocab = v.rank == 3 && v.dims[2] > 0 ? v.dims[2] : 0;
    }
  }
  if (sig->logits < 0)
    return err_set(SMELT_ERR_UNSUPPORTED, "generate: the model has no float32 output named 'logits' (or of rank 3)");
  for (int l = 0; l <= max_layer; l++)
    for (int k = 0; k < 2; k++) {
      int in = past_of[l][k];
      if (in < 0) continue;
      bool found = false;
      for (int j = 0; j < sig->n_kv; j++) found |= sig->kv[j].past_input == in;
      if (!found) {
        smelt_value_info p;
        TRY(smelt_model_input(m, in, &p));
        return err_set(SMELT_ERR_INVALID_MODEL, "generate: cache input %s has no present output (present.%d.%s)",
                       q(p.name), l, k ? "value" : "key");
      }
    }
  return SMELT_OK;
}
