/* libFuzzer target: the ONNX model reader on arbitrary bytes.  Every input must
 * either import or fail with a message; no crash, leak or runaway allocation. */
#include <stddef.h>
#include <stdint.h>

#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  onnx_model *m = NULL;
  if (onnx_model_load_buffer(data, size, NULL, &m) == SMELT_OK) onnx_model_free(m);
  return 0;
}
