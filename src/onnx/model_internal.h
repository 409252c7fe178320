/* What a smelt_model handle holds (shared by the loader and the session). */
#ifndef SMELT_ONNX_MODEL_INTERNAL_H
#define SMELT_ONNX_MODEL_INTERNAL_H

#include "onnx/onnx.h"

struct smelt_model {
  onnx_model *onnx;
};

#endif
