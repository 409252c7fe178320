/* The public smelt_model handle: an imported ONNX model.  Shared by the model
 * API (src/onnx/model_api.c) and the session code. */
#ifndef SMELT_ONNX_MODEL_INTERNAL_H
#define SMELT_ONNX_MODEL_INTERNAL_H

#include "onnx/onnx.h"

struct smelt_model {
  onnx_model *onnx; /* owned */
  void *bytes;       /* owned: the buffer onnx views (smelt_model_load_bytes), else NULL */
  size_t bytes_len;  /* its size: mapped (anonymous, registered as util/ro_map.h scratch), not malloc'd */
};

#endif
