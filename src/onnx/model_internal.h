/* The public smelt_model handle: an imported ONNX model.  Shared by the model
 * API (src/onnx/model_api.c) and the session code. */
#ifndef SMELT_ONNX_MODEL_INTERNAL_H
#define SMELT_ONNX_MODEL_INTERNAL_H

#include "onnx/onnx.h"

struct smelt_model {
  onnx_model *onnx; /* owned */
  void *bytes;       /* owned: the buffer onnx views (smelt_model_load_bytes), else NULL */
  size_t bytes_len;  /* its size: mapped (anonymous, registered as util/ro_map.h scratch), not malloc'd */
  /* owned, NULL without memory: the main graph's constants (initializers and
   * what inference folded), immutable while the model lives, listed so that
   * their hashes (the prepared-weight store's source keys) are computed once
   * per model, not once per session (util/hash_memo.h) */
  struct hash_memo *weight_hashes;
};

#endif
